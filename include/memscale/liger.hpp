// memscale/liger.hpp: what transformers' use_liger_kernel=True patches into a model: the
// apply_liger_kernel_to_<model_type> of its family with that function's defaults
// (TrainingArguments.use_liger_kernel -> _apply_liger_kernel_to_instance, Liger-Kernel v0.5.10
// @ 44a8f2fb, src/liger_kernel/transformers/monkey_patch.py MODEL_TYPE_TO_APPLY_LIGER_FN).
#pragma once

#include <string_view>

#include "memscale/error.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale {

// The family's entry of MODEL_TYPE_TO_APPLY_LIGER_FN (monkey_patch.py @ 44a8f2fb) for the model
// types memscale reads; none: the table has no entry, and use_liger_kernel patches nothing.
// Gemma 3's "gemma3" entry patches the SigLIP tower's LayerNorms too (layer_norm=True); the tower
// is held, never run, in a text-only step (graph/layers/idle_tower.hpp), so its kernel has no
// memory of its own here. Qwen2-VL's layer_norm (its vision blocks' norm1, norm2) likewise.
constexpr liger_patch liger_patch_of_model_type(std::string_view type) {
  for (const std::string_view t : {"llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "olmo2", "phi3",
                                   "qwen2_vl", "qwen2_5_vl"})
    if (type == t) return liger_patch::llama;
  for (const std::string_view t : {"gemma", "gemma2", "gemma3_text", "gemma3"})
    if (type == t) return liger_patch::gemma;
  if (type == "glm4") return liger_patch::glm4;
  if (type == "granite") return liger_patch::granite;
  return liger_patch::none;
}

// The run with use_liger_kernel=True's kernels for `model`. Each default the family's function
// turns on is set when memscale models it for the model, and refused by name when it does not;
// a family with no entry is refused (nothing would change, and `liger` would be ignored).
//   llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, olmo2, phi3, qwen2_vl, qwen2_5_vl:
//     rope=True, rms_norm=True, swiglu=True, fused_linear_cross_entropy=True
//   gemma, gemma2, gemma3_text, gemma3: rope=True, rms_norm=True, geglu=True, fused_linear_cross_entropy=True
//   glm4: rope=False, rms_norm=True, swiglu=True, fused_linear_cross_entropy=True
//   granite: cross_entropy=True (LigerCrossEntropyLoss), fused_linear_cross_entropy=False
constexpr training_spec& apply_liger(training_spec& run, const model_spec& model) {
  switch (model.liger) {
    case liger_patch::none:
      detail::fail(error_code::unsupported, "run.liger",
                   "this model's family has no apply_liger_kernel_to_<model_type> (Liger-Kernel 0.5.10 "
                   "MODEL_TYPE_TO_APPLY_LIGER_FN): use_liger_kernel patches nothing; state the kernels one by one "
                   "(run.loss fused_linear_ce, run.fused_rmsnorm, ...) where they replace a module");
    case liger_patch::granite:
      detail::fail(error_code::unsupported, "run.liger",
                   "granite's patch (apply_liger_kernel_to_granite) swaps in Liger's cross-entropy, which is not "
                   "modelled (its fused linear cross-entropy raises NotImplementedError in 0.5.10)");
    case liger_patch::llama:
    case liger_patch::gemma:
    case liger_patch::glm4: break;
  }
  run.loss = loss_impl::fused_linear;
  run.loss_chunks = 0;
  run.liger_rms_norm = true;
  run.liger_swiglu = model.liger != liger_patch::gemma;
  run.liger_geglu = model.liger == liger_patch::gemma;
  run.liger_rope = model.liger != liger_patch::glm4;
  return run;
}

}  // namespace memscale
