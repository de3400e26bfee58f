// memscale/graph/recipes/altup_stack.hpp: one training step of Gemma 3n's text stack
// (modeling_gemma3n.py@b87ecf8c Gemma3nTextModel, Gemma3nTextDecoderLayer, Gemma3nForCausalLM):
// the embeddings (merged with the multimodal embedders' in Gemma3nModel), the per-layer inputs
// and the AltUp stack of copies, what the sparse-gate layers save beyond a dense one, the repeated
// layer, the copies folded back, the final norm and the head.
#pragma once

#include <cstdint>

#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/activation_sparsity.hpp"
#include "memscale/graph/layers/altup.hpp"
#include "memscale/graph/layers/attention.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/embeddings.hpp"
#include "memscale/graph/layers/heads.hpp"
#include "memscale/graph/layers/idle_tower.hpp"
#include "memscale/graph/layers/input_require_grads.hpp"
#include "memscale/graph/layers/laurel.hpp"
#include "memscale/graph/layers/mlp.hpp"
#include "memscale/graph/layers/multimodal_embedders.hpp"
#include "memscale/graph/layers/norms.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/layers/per_layer_inputs.hpp"
#include "memscale/graph/tensor.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale::recipes {

// Gemma3nTextDecoderLayer.forward on the stack of copies `stack`: predict, the input norm of the
// active prediction, Laurel and the attention on it, (active + attention + laurel) / sqrt(2)
// (each sum and the 0-dim division keep nothing), the MLP between its two norms, its residual,
// correct, and the per-layer gate added onto the other copies. Returns the corrected stack.
constexpr graph_layers::tensor altup_decoder_layer(const graph_layers::layer_context& ctx, graph_layers::tensor stack,
                                                   graph_layers::tensor per_layer) {
  using namespace graph_layers;
  op_writer& ops = ctx.ops;
  const tensor predictions = altup_predict(ctx, stack);
  const tensor active = one_copy(ctx, predictions);
  const tensor normed = norm(ctx, active);
  const tensor laurel_out = laurel(ctx, normed);
  const tensor attended = norm(ctx, self_attention(ctx, normed));
  const tensor gated = ops.add(active, attended);
  ops.at(gated).transient = true;
  const tensor summed = ops.add(gated, laurel_out);
  ops.at(summed).transient = true;
  const tensor attn_laurel = ops.elementwise(summed, summed.elements, summed.type);
  ops.close_frame();
  const tensor mlp_in = norm(ctx, attn_laurel);
  const tensor fed = norm(ctx, mlp(ctx, mlp_in));
  const tensor activated = ops.add(attn_laurel, fed);
  const tensor corrected = altup_correct(ctx, predictions, activated);
  per_layer_gate(ctx, corrected, per_layer);
  return corrected;
}

// What Gemma3nTextModel.forward makes once and hands every layer (modeling_gemma3n.py@b87ecf8c):
// the rotary pairs of rope_theta and rope_local_base_freq, each (1, seq, head_dim) in the stream's
// dtype (position_ids is cache_position.unsqueeze(0)), and the causal_mask_mapping of
// create_causal_mask and create_sliding_window_causal_mask, made whatever the layer types. Eager
// attention gets two (batch, 1, seq, seq) additive masks in that dtype (masking_utils.py@2ccc6cae
// eager_mask: torch.where over sdpa_mask's batch-expanded bool mask); SDPA skips the causal one
// and the sliding one while the keys stay below the window (_ignore_causal_mask_sdpa), else a
// bool (batch, 1, seq, seq); flash attention takes none.
constexpr bytes altup_attention_inputs(const graph_layers::layer_context& ctx) {
  const model_spec& m = ctx.model;
  const dtype stream = ctx.ops.stream_dtype();
  const bytes rotary = storage(stream, detail::checked_mul(4, ctx.run.seq_len, head_dim_of(m)));
  const std::uint64_t mask = detail::checked_mul(ctx.run.micro_batch, ctx.run.seq_len, ctx.run.seq_len);
  switch (ctx.run.attention) {
    case attention_impl::eager:
    case attention_impl::sdpa_math:
      return rotary + storage(stream, detail::checked_mul(2, mask));
    case attention_impl::sdpa:
      return ctx.run.seq_len >= m.sliding_window ? rotary + storage(dtype::boolean, mask) : rotary;
    case attention_impl::flash:
      break;
  }
  return rotary;
}

// The step of a model with AltUp (model_spec::altup_inputs > 0), written into the context's
// graph from its first op. `tokens`: micro_batch x seq_len.
constexpr void build_altup_stack(const graph_layers::layer_context& ctx, const training_spec& requested) {
  using namespace graph_layers;
  op_writer& ops = ctx.ops;
  const model_spec& model = ctx.model;
  const precision_policy& precision = ops.precision();
  const std::uint64_t copies = detail::checked_mul(model.altup_inputs, ctx.tokens, model.hidden);
  idle_tower(ctx);
  const embedded lookups = embed(ctx);
  ops.sections().set_kept_input_embeddings(kept_input_embeddings(ctx.run, lookups));
  const tensor embedded = multimodal_embedders(ctx, lookups.stream);
  // Gemma3nModel.forward runs get_image_features after the embedders, before the language model
  // (modeling_gemma3n.py@00aa0f5d): what they save is alive beside the tower; its soft tokens follow.
  ops.sections().mark_tower();
  image_soft_tokens(ctx);
  const tensor per_layer = per_layer_inputs(ctx, embedded);
  altup_expand(ctx, embedded);
  sparse_gate_layers(ctx);
  graph_builder& sections = ops.sections();
  sections.begin_block();
  altup_decoder_layer(ctx, ops.emit(op_kind::stream, copies, ops.stream_dtype()), per_layer);
  sections.end_block(model.layers);
  const tensor last = ops.emit(op_kind::stream, copies, ops.stream_dtype());
  const tensor folded = altup_collapse(ctx, last);
  head(ctx, norm(ctx, folded, {.width = model.hidden, .rows = ctx.tokens, .site = norm_site::final}));
  const std::uint64_t index_tensors = requested.packing == batch_packing::padding_free ? 3 : 2;
  sections.set_inputs(storage(dtype::int64, detail::checked_mul(ctx.tokens, index_tensors)));
  sections.set_stream_grad(storage(ops.stream_dtype(), copies));
  // temp_hidden_states, the list the copies were stacked from, stays bound through the layers.
  sections.set_held(storage(precision.param, detail::checked_mul(model.altup_inputs - 1, ctx.tokens, model.hidden)) +
                    altup_attention_inputs(ctx) + hooked_lookup_held(ctx.run, lookups));
}

}  // namespace memscale::recipes
