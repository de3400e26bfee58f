// memscale/graph/layers/input_require_grads.hpp: Hugging Face's enable_input_require_grads() under
// frozen embeddings. Its forward hook on the input embeddings calls output.requires_grad_(True)
// (modeling_utils.py PreTrainedModel.enable_input_require_grads): the token lookup's output becomes
// a leaf that requires grad, so the bottom block's backward computes its input gradient and
// AccumulateGrad stores it as the leaf's .grad. The AccumulateGrad node holds the leaf, so both
// live as long as the graph: until the loss is dropped after backward (Trainer.training_step
// returns loss.detach(), before clipping and the optimizer step).
#pragma once

#include <cstdint>

#include "memscale/bytes.hpp"
#include "memscale/dtype.hpp"
#include "memscale/graph/layers/embeddings.hpp"
#include "memscale/training.hpp"

namespace memscale::graph_layers {

// Whether the hook runs. A LoRA or QLoRA run freezes the embeddings; under the reentrant
// checkpoint nothing would then require grad (CheckpointFunction's output requires grad only
// through an input), so every caller adds the hook there: TRL's SFTTrainer when use_reentrant is
// unset or true (sft_trainer.py _enable_gradient_checkpointing @ 23a635ed, lines 358-375; the
// same test @ e90e8d91, lines 214-226) and peft's prepare_model_for_kbit_training
// (utils/other.py @ b34d8a2c, lines 151-155). Under the non-reentrant checkpoint TRL and peft's
// kbit preparation leave it out; PeftModel.__init__ adds it to an unquantized model whose
// checkpointing was enabled before wrapping (peft_model.py @ b34d8a2c, lines 141-142 and
// 640-656), and gradient_checkpointing_enable to a model with adapters loaded through transformers'
// own PEFT integration (modeling_utils.py: _hf_peft_config_loaded). There it changes the bottom
// block's backward, below the top block's, and the end of backward: taken as absent.
constexpr bool embedding_output_requires_grad(const training_spec& run) {
  return is_lora(run) && reentrant_checkpoint(run);
}

// The leaf and its .grad, each the token lookup's size and dtype, after the bottom block's
// backward (graph::kept_input_embeddings).
constexpr bytes kept_input_embeddings(const training_spec& run, const embedded& lookups) {
  if (!embedding_output_requires_grad(run)) return {};
  return storage(lookups.token_lookup.type, lookups.token_lookup.elements) * std::uint64_t{2};
}

// The leaf before it: where the first block reads the lookup itself, the checkpoint keeps it as
// its input until then anyway; a stream made from it (scaled, summed with positions, normed,
// dropped out) leaves it to the graph, through the forward and the blocks' backward (graph::held).
constexpr bytes hooked_lookup_held(const training_spec& run, const embedded& lookups) {
  const bool stream_is_lookup = lookups.stream.op_index == lookups.token_lookup.op_index;
  return embedding_output_requires_grad(run) && !stream_is_lookup
             ? storage(lookups.token_lookup.type, lookups.token_lookup.elements)
             : bytes{};
}

}  // namespace memscale::graph_layers
