// memscale/graph/layers/per_layer_inputs.hpp: Gemma 3n's per-layer inputs (modeling_gemma3n.py@b87ecf8c
// Gemma3nTextModel.get_per_layer_inputs, project_per_layer_inputs; Gemma3nTextDecoderLayer.forward):
// a second embedding table of layers x hidden_size_per_layer_input per token, summed with a
// projection of the embeddings, and in every layer a gate on the corrected active copy that
// multiplies the layer's slice and is projected back onto the other copies.
#pragma once

#include <cstdint>

#include "memscale/detail/math.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/activations.hpp"
#include "memscale/graph/layers/altup.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/norms.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/tensor.hpp"

namespace memscale::graph_layers {

// (embed_tokens_per_layer(ids) * sqrt(p) + per_layer_projection_norm(per_layer_model_projection(x)
// * hidden^-0.5)) * 2^-0.5: the lookup keeps only the ids; the projection keeps the embeddings,
// its in-place scale adds nothing, the norm (over p, per token and layer) keeps the projection;
// the sum and its scale keep nothing (0-dim factors). Returns the (tokens, layers x p) inputs.
constexpr tensor per_layer_inputs(const layer_context& ctx, tensor embeddings) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const std::uint64_t width = detail::checked_mul(m.layers, m.per_layer_input_width);
  const std::uint64_t elements = detail::checked_mul(ctx.tokens, width);
  const dtype param = ops.precision().param;
  const op table{.kind = op_kind::embedding,
                 .weight = {m.per_layer_vocab, width, 1},
                 .role = param_role::embedding,
                 .frozen = ctx.adapters.enabled};
  const tensor looked_up = ops.emit(table, elements, param);
  const tensor scaled = ops.elementwise(looked_up, elements, param);  // Gemma3nTextScaledWordEmbedding
  const tensor projected = altup_linear(ctx, embeddings, m.hidden, width);
  const tensor normed = norm(ctx, projected, {.width = m.per_layer_input_width, .rows = detail::checked_mul(ctx.tokens, m.layers)});
  const tensor sum = ops.add(normed, scaled);
  ops.at(sum).transient = true;
  return ops.elementwise(sum, elements, sum.type);
}

// Gemma3nTextDecoderLayer.forward after altup.correct: the active corrected copy cloned, scaled
// by correct_output_scale (altup_correct_scale; the mul keeps the clone), per_layer_input_gate
// (hidden -> p, keeps its input), the activation (keeps its input), times the layer's slice of
// the per-layer inputs (the mul keeps both: the slice is a view, so the whole inputs tensor),
// per_layer_projection (p -> hidden, keeps the product) and post_per_layer_input_norm; added in
// place to the other copies.
constexpr void per_layer_gate(const layer_context& ctx, tensor corrected, tensor inputs) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const tensor active = one_copy(ctx, corrected);
  tensor first = ops.elementwise(active, active.elements, active.type);  // clone
  if (m.altup_correct_scale) {
    const op scale{.kind = op_kind::elementwise, .weight = param_tensor::vector(m.hidden), .role = param_role::vector,
                   .frozen = ctx.adapters.enabled};
    const tensor scaled = ops.emit(scale, active.elements, active.type);
    ops.keep(first, scaled);
    first = scaled;
  }
  const tensor gate = altup_linear(ctx, first, m.hidden, m.per_layer_input_width);
  const tensor activated = input_keeping_activation(ops, gate);
  const tensor product = ops.elementwise(activated.elements, activated.type);
  ops.keep(activated, product);
  ops.keep(inputs, product);
  const tensor projected = altup_linear(ctx, product, m.per_layer_input_width, m.hidden);
  norm(ctx, projected);
}

}  // namespace memscale::graph_layers
