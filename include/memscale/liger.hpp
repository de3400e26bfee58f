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
  for (const std::string_view t : {"llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "phi3", "qwen2_vl",
                                   "qwen2_5_vl"})
    if (type == t) return liger_patch::llama;
  if (type == "olmo2") return liger_patch::olmo2;
  if (type == "gemma") return liger_patch::gemma;
  for (const std::string_view t : {"gemma2", "gemma3_text", "gemma3"})
    if (type == t) return liger_patch::gemma2;
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
// use_liger_kernel patches the built model (liger_patching::instance).
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
    case liger_patch::olmo2:
    case liger_patch::gemma:
    case liger_patch::gemma2:
    case liger_patch::glm4: break;
  }
  const bool gemma = model.liger == liger_patch::gemma || model.liger == liger_patch::gemma2;
  run.loss = loss_impl::fused_linear;
  run.loss_chunks = 0;
  run.liger_rms_norm = true;
  run.liger_norm_patching = liger_patching::instance;
  run.liger_swiglu = !gemma;
  run.liger_geglu = gemma;
  run.liger_rope = model.liger != liger_patch::glm4;
  return run;
}

// Which RMSNorm a norm is, for the modules an instance patch names.
enum class norm_site : std::uint8_t {
  block,  // a decoder block's own norms (input, post-attention, pre/post-feedforward, ...)
  final,  // the base model's last norm
  qk,     // the attention's q_norm and k_norm
};

// What Liger made of one RMSNorm module: left as the modeling file wrote it, or LigerRMSNorm with
// in_place=True (backward writes dX into dY) or in_place=False (backward makes a new dX:
// ops/rms_norm.py rms_norm_backward, torch.zeros_like(dY)).
enum class liger_norm_use : std::uint8_t { kept, in_place, out_of_place };

// The RMSNorm at `site` of a `family` model whose RMSNorms Liger patched `how`
// (transformers/monkey_patch.py @ 44a8f2fb).
//   classes: the class each function swaps in: LigerRMSNorm (in_place=True) for the LLaMA-type
//     families, Gemma and Granite; partial(LigerRMSNorm, in_place=False) for OLMo2 and GLM-4;
//     LigerRMSNormForGemma2 / LigerRMSNormForGemma3 (in_place=False) for Gemma 2 and Gemma 3.
//   instance: base_model.norm, input_layernorm and post_attention_layernorm with in_place=True
//     for the LLaMA-type families, Gemma and Granite (Qwen3's q_norm and k_norm are not named:
//     they stay Qwen3RMSNorm); OLMo2 names its final norm with in_place=True, its
//     post_attention_layernorm and post_feedforward_layernorm with in_place=False, and not its
//     q_norm and k_norm; Gemma 2 and Gemma 3 name every norm (Gemma 3's q_norm and k_norm too),
//     GLM-4 every block norm and the final one, all with in_place=False.
constexpr liger_norm_use liger_rms_norm_use(liger_patch family, liger_patching how, norm_site site) {
  const bool out_of_place_class =
      family == liger_patch::olmo2 || family == liger_patch::gemma2 || family == liger_patch::glm4;
  if (how == liger_patching::classes) return out_of_place_class ? liger_norm_use::out_of_place : liger_norm_use::in_place;
  switch (family) {
    case liger_patch::gemma2:
    case liger_patch::glm4: return liger_norm_use::out_of_place;
    case liger_patch::olmo2:
      return site == norm_site::qk      ? liger_norm_use::kept
             : site == norm_site::final ? liger_norm_use::in_place
                                        : liger_norm_use::out_of_place;
    case liger_patch::none:  // refused by validate (no function names its modules)
    case liger_patch::llama:
    case liger_patch::gemma:
    case liger_patch::granite: break;
  }
  return site == norm_site::qk ? liger_norm_use::kept : liger_norm_use::in_place;
}

}  // namespace memscale
