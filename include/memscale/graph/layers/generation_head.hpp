// memscale/graph/layers/generation_head.hpp: the LM head of a forward without labels, as
// generate() calls it: logits of the positions the model is asked to keep, and the fp32 copy
// the LLaMA-family heads made before transformers 4.45.
#pragma once

#include <cstdint>

#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/heads.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/tensor.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale::graph_layers {

// From transformers 4.45 generate() passes num_logits_to_keep=1 to the models PR #31292 gave it
// (the LLaMA-family heads, which also upcast logits); GPT-2 computes every position.
constexpr bool keeps_last_logits_only(const model_spec& m, const training_spec& run) {
  return run.transformers_version >= 445 && m.upcast_logits;
}

// The positions (every sequence's) whose logits the forward computes.
constexpr std::uint64_t generation_logit_rows(const layer_context& ctx) {
  return keeps_last_logits_only(ctx.model, ctx.run) ? ctx.run.micro_batch : ctx.tokens;
}

// The output layer on `x` (the final norm's output): the logits, then before 4.45 their fp32
// copy (modeling_llama.py v4.44.0 LlamaForCausalLM.forward: logits = logits.float()), made
// while the 16-bit logits are still bound. Returns the logits forward() hands back: the graph's
// last op.
constexpr tensor generation_head(const layer_context& ctx, tensor x) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const lm_head_spec spec = lm_head_spec_of(ctx);
  const base_weight weight = spec.tied ? tied_head_weight(ctx.adapters.base) : ctx.adapters.base;
  const auto elements = detail::checked_mul(generation_logit_rows(ctx), m.vocab, spec.logits_quantity);
  const tensor logits = ops.emit(head_op(ctx, spec, weight, op_kind::linear), elements, ops.precision().matmul);
  ops.reads(x, logits);
  const bool upcast = m.upcast_logits && ctx.run.transformers_version < 445 && logits.type != dtype::fp32;
  const tensor returned = upcast ? ops.elementwise(logits, elements, dtype::fp32) : logits;
  // The causal-LM forward binds the base model's output (hidden_states, and `outputs` holding
  // it) until it returns.
  ops.reads(x, returned);
  return returned;
}

}  // namespace memscale::graph_layers
