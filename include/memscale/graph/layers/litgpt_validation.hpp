// memscale/graph/layers/litgpt_validation.hpp: litgpt 0.4's validate() as a moment of the run.
// fit() validates before the first step (the sanity check, validate(..., max_iters=2)) and every
// eval.interval steps after an optimizer step (litgpt/finetune/lora.py lines 282, 349 @ b0ea1772),
// and the printed "Memory used" is torch.cuda.max_memory_allocated() over all of fit() (line 234).
#pragma once

#include <cstdint>

#include "memscale/bytes.hpp"
#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/graph/layers/adapters.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/heads.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale::graph_layers {

// Which runs validate with the whole logits: litgpt 0.4's LoRA loop. The 2023 scripts validate
// too, but their rows' training step stays the larger (docs/research/frameworks.md sec. 1.4).
constexpr bool litgpt_validates_whole_logits(const model_spec& m, const training_spec& run) {
  return m.impl == implementation::litgpt && m.head == head_kind::causal_lm &&
         run.framework == framework_kind::litgpt && run.framework_version >= litgpt_v0_4;
}

// The dtype of the logits validate() reads: Fabric's 16-bit "-true" precisions (HalfPrecision,
// BitsandbytesPrecision, FSDPPrecision) cast the output to the default dtype, fp32, sharded or
// not (logits_output_dtype leaves sharded training steps uncast, for the placement of their peak).
constexpr dtype fabric_logits_dtype(const model_spec& m, const training_spec& run, dtype computed) {
  if (run.output_cast != output_cast_kind::framework_default) return logits_output_dtype(m, run, computed);
  return run.prec == precision::pure_bf16 || run.prec == precision::pure_fp16 ? dtype::fp32 : computed;
}

// validate()'s peak beside the model (lines 368-383 @ b0ea1772), under no_grad: `logits =
// model(input_ids)` is the whole head output in the compute dtype (no lm_head chunking), and the
// previous batch's logits stay bound until model() returns (every validation runs at least two
// batches: max_iters=2 for the sanity check). Its moments:
// - the head's matmul: its input, a 4-bit weight's dequantized copies and the output;
// - Fabric's convert_output, copying the output to the output dtype (lightning 2.4.0
//   plugins/precision/half.py line 61) before the 16-bit one is dropped;
// - chunked_cross_entropy(logits[..., :-1, :], ..., chunk_size=0) (litgpt/utils.py lines 311-314):
//   reshape(-1, V) of the shifted view copies it unless one sequence makes it contiguous, and
//   cross_entropy's log_softmax writes the log-probabilities beside it.
// The blocks' moments are not counted: they hold the previous logits and one block's temporaries,
// less than the head's.
constexpr bytes litgpt_validation_peak(const layer_context& ctx, dtype computed) {
  const model_spec& m = ctx.model;
  const training_spec& run = ctx.run;
  const dtype out = fabric_logits_dtype(m, run, computed);
  const std::uint64_t logits = detail::checked_mul(ctx.tokens, m.vocab, detail::quantity{"tokens x vocab"});
  const std::uint64_t shifted = detail::checked_mul(ctx.tokens - run.micro_batch, m.vocab);
  const bytes previous = storage(out, logits);
  const base_weight weight = m.tied_embeddings ? tied_head_weight(ctx.adapters.base) : ctx.adapters.head;
  const bytes head = storage(computed, detail::checked_mul(ctx.tokens, m.hidden)) +
                     head_dequantized_bytes(weight, ctx.ops.precision(), m.vocab, m.hidden) + storage(computed, logits);
  const bytes cast = storage(computed, logits) + (out == computed ? bytes{} : storage(out, logits));
  const bytes reshaped = run.micro_batch > 1 ? storage(out, shifted) : bytes{};
  const bytes loss = storage(out, logits) + reshaped + storage(out, shifted);
  return max(previous + max(head, cast), loss);
}

// What the loop still binds from the last training step while validate() runs after it: the
// `logits` list of the chunked head, in the output dtype (lora.py line 304 rebinds it only at the
// next step's forward).
constexpr bytes litgpt_step_logits_bound(const layer_context& ctx, dtype computed) {
  return storage(fabric_logits_dtype(ctx.model, ctx.run, computed), detail::checked_mul(ctx.tokens, ctx.model.vocab));
}

}  // namespace memscale::graph_layers
