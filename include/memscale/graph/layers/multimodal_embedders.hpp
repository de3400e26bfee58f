// memscale/graph/layers/multimodal_embedders.hpp: Gemma 3n's embed_vision and embed_audio, which
// Gemma3nModel.forward runs over every token before the text stack, text-only or not, and merges
// with torch.where (modeling_gemma3n.py@00aa0f5d Gemma3nModel.forward, Gemma3nMultimodalEmbedder).
#pragma once

#include <cstdint>
#include <initializer_list>

#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/altup.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/norms.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/layers/vision_tower_mobilenetv5.hpp"
#include "memscale/graph/tensor.hpp"
#include "memscale/model.hpp"

namespace memscale::graph_layers {

constexpr bool has_multimodal_embedders(const model_spec& m) {
  return m.vision_embedder.vocab > 0 || m.audio_embedder.vocab > 0;
}

constexpr std::uint64_t embedder_parameters(const token_embedder& e, std::uint64_t hidden) {
  if (e.vocab == 0) return 0;
  // embedding, hard and soft embedding norms, embedding_projection (post-projection norm: a buffer).
  return detail::checked_add(detail::checked_mul(detail::checked_add(e.vocab, 2), e.width),
                             detail::checked_mul(e.width, hidden));
}

// One embedder on the hard ids, merged: the lookup of (ids - vocab_offset).clamp_(0), a new int64
// tensor it keeps (derivatives.yaml embedding: indices; torch.where's dummy-id copy before it goes
// once read), hard_embedding_norm over the tower's width, embedding_projection to the text width
// (keeps its input), embedding_post_projection_norm (with_scale=False: nothing kept for a weight),
// then torch.where(mask, embedded, embeds): a new tensor keeping only its condition, the (B, S)
// bool mask (unsqueeze and expand_as are views); its backward makes a gradient for each branch.
constexpr tensor multimodal_embedder(const layer_context& ctx, const token_embedder& e, tensor embeds) {
  op_writer& ops = ctx.ops;
  const std::uint64_t hidden = ctx.model.hidden;
  const op table{.kind = op_kind::embedding,
                 .weight = {e.vocab, e.width, 1},
                 .role = param_role::embedding,
                 .extra_saved = storage(dtype::int64, ctx.tokens),
                 .fwd_temp = storage(dtype::int64, ctx.tokens)};
  const tensor looked_up = ops.emit(table, detail::checked_mul(ctx.tokens, e.width), ops.precision().param);
  const tensor normed = norm(ctx, looked_up, {.width = e.width, .rows = ctx.tokens});
  // The soft norm runs on tower features only: its scale is stored and takes no gradient here.
  const op soft_norm{.kind = op_kind::elementwise, .weight = param_tensor::vector(e.width), .role = param_role::vector,
                     .frozen = true};
  ops.emit(soft_norm, 0, ops.precision().param);
  const tensor projected = altup_linear(ctx, normed, e.width, hidden);
  const tensor embedded = unscaled_rms_norm(ctx, projected, {.width = hidden, .rows = ctx.tokens});
  const tensor merged = ops.add(embeds, embedded);
  op& where = ops.at(merged);
  where.extra_saved = storage(dtype::boolean, ctx.tokens);
  where.bwd_temp = storage(embedded.type, embedded.elements);  // the embedder branch's gradient
  return merged;
}

// Gemma3nModel.forward before its language model: per_layer_inputs_tokens, torch.where(mask,
// input_ids, zeros) (a new int64 (B, S) the per-layer lookup keeps), then embed_vision and
// embed_audio over every token. With a frozen base (LoRA) no gradient reaches them: their weights
// are stored and their forward is a transient of the token embeddings' size per token, below the
// step's peak, so one frozen op holds the weights and the embeddings pass unchanged.
constexpr tensor multimodal_embedders(const layer_context& ctx, tensor embeds) {
  const model_spec& m = ctx.model;
  if (!has_multimodal_embedders(m)) return embeds;
  op_writer& ops = ctx.ops;
  if (ctx.adapters.enabled) {
    const op frozen{.kind = op_kind::elementwise,
                    .weight = param_tensor::vector(detail::checked_add(embedder_parameters(m.vision_embedder, m.hidden),
                                                                       embedder_parameters(m.audio_embedder, m.hidden))),
                    .role = param_role::vector,
                    .frozen = true};
    ops.emit(frozen, 0, ops.precision().param);
    return embeds;
  }
  const op per_layer_ids{.kind = op_kind::elementwise, .extra_saved = storage(dtype::int64, ctx.tokens)};
  ops.emit(per_layer_ids, 0, dtype::int64);
  tensor merged = embeds;
  for (const token_embedder* e : {&m.vision_embedder, &m.audio_embedder})
    if (e->vocab > 0) merged = multimodal_embedder(ctx, *e, merged);
  return merged;
}

// The step's images after the frozen tower (vision_tower_mobilenetv5.hpp): embed_vision's soft
// path and masked_scatter, run before the language model, save what soft_tokens_saved counts.
constexpr void image_soft_tokens(const layer_context& ctx) {
  const bytes saved = soft_tokens_saved(ctx.model, ctx.run);
  if (saved.value == 0) return;
  const op soft{.kind = op_kind::elementwise, .extra_saved = saved};
  ctx.ops.emit(soft, 0, ctx.ops.precision().param);
}

}  // namespace memscale::graph_layers
