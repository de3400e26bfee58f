// memscale/graph/layers/altup.hpp: Gemma 3n's AltUp (modeling_gemma3n.py@b87ecf8c
// Gemma3nTextAltUp, Gemma3nTextModel.forward): the stream is altup_inputs copies of the hidden
// state; each layer predicts all of them from the active copy's router, runs the layer on the
// active prediction and corrects all of them with the result.
#pragma once

#include <cstdint>

#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/adapters.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/norms.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/tensor.hpp"
#include "memscale/training.hpp"

namespace memscale::graph_layers {

// One copy of the stream, read through a view of the whole stack: a kept view keeps the stack.
constexpr tensor one_copy(const layer_context& ctx, tensor stack) {
  return {.op_index = stack.op_index, .type = stack.type, .elements = detail::checked_mul(ctx.tokens, ctx.model.hidden)};
}

// A projection AltUp and the per-layer inputs own: trained with the model, frozen under LoRA
// (PEFT's target modules name no AltUp, Laurel or per-layer module).
constexpr tensor altup_linear(const layer_context& ctx, tensor in, std::uint64_t in_features, std::uint64_t out_features) {
  return projection(ctx.ops, ctx.adapters, in, {.rows = ctx.tokens, .in_features = in_features, .out_features = out_features},
                    false);
}

// An op that runs a weight an earlier op of the layer owns (the router's second use): no
// storage and no second gradient tensor are written for it, and autocast reuses its cached copy.
constexpr void reuses_weight(op_writer& ops, tensor t) {
  op& o = ops.at(t);
  o.weight = {};
  o.role = param_role::none;
  if (o.kind == op_kind::linear) o.extra_saved = {};
}

// Gemma3nTextAltUp.compute_router_modalities: router_norm(x) * router_input_scale, the
// modality_router (hidden -> altup_inputs), tanh of its fp32 copy, cast back. tanh keeps its output.
// `second_use`: correct() runs the router predict() already ran.
constexpr tensor router_modalities(const layer_context& ctx, tensor x, bool second_use) {
  op_writer& ops = ctx.ops;
  const std::uint64_t n = ctx.model.altup_inputs;
  const tensor normed = norm(ctx, x);
  if (second_use) reuses_weight(ops, normed);
  const tensor scaled = ops.elementwise(normed, normed.elements, normed.type);
  const tensor routed = altup_linear(ctx, scaled, ctx.model.hidden, n);
  if (second_use) reuses_weight(ops, routed);
  const tensor upcast = routed.type == dtype::fp32 ? routed : ops.elementwise(routed, routed.elements, dtype::fp32);
  const tensor modalities = ops.emit(op_kind::activation, upcast.elements, dtype::fp32);
  ops.keep_own_output(modalities);
  ops.reads(upcast, modalities);
  return x.type == dtype::fp32 ? modalities : ops.elementwise(modalities, modalities.elements, x.type);
}

// Gemma3nTextAltUp.predict: prediction_coefs (n -> n^2) of the modalities, reshaped and permuted;
// torch.matmul(hidden_states.permute(1, 2, 3, 0), coefs) saves the stack (a view) and a contiguous
// copy of the permuted coefficients; the product is permuted back, the stack added in place, and
// .contiguous() copies it: the predictions, a new stack.
constexpr tensor altup_predict(const layer_context& ctx, tensor stack) {
  op_writer& ops = ctx.ops;
  const std::uint64_t n = ctx.model.altup_inputs;
  const tensor modalities = router_modalities(ctx, one_copy(ctx, stack), false);
  const tensor coefs = altup_linear(ctx, modalities, n, detail::checked_mul(n, n));
  const tensor coef_copy = ops.elementwise(coefs, coefs.elements, coefs.type);
  const dtype product_type = ops.precision().matmul;
  const tensor product = ops.elementwise(stack.elements, product_type);
  ops.keep(stack, product);
  ops.keep(coef_copy, product);
  ops.at(product).transient = true;
  return ops.elementwise(product, stack.elements, stack.type);
}

// Gemma3nTextAltUp.correct: modalities of the layer's output, innovation = activated -
// predictions[active], repeated altup_inputs times; correction_coefs (n -> n) + 1.0; their
// product, which saves the repeated innovation and the coefficients, gets the predictions added in
// place: the corrected stack.
constexpr tensor altup_correct(const layer_context& ctx, tensor predictions, tensor activated) {
  op_writer& ops = ctx.ops;
  const std::uint64_t n = ctx.model.altup_inputs;
  const tensor modalities = router_modalities(ctx, activated, true);
  const tensor innovation = ops.add(activated, one_copy(ctx, predictions));
  ops.at(innovation).transient = true;
  const tensor repeated = ops.elementwise(innovation, predictions.elements, activated.type);
  const tensor coefs = altup_linear(ctx, modalities, n, n);
  const tensor shifted = ops.elementwise(coefs, coefs.elements, coefs.type);  // + 1.0
  const tensor corrected = ops.elementwise(predictions.elements, activated.type);
  ops.keep(repeated, corrected);
  ops.keep(shifted, corrected);
  ops.reads(predictions, corrected);
  return corrected;
}

// The squared-magnitude rescale Gemma3nTextModel.forward applies to each projected copy:
// torch.mean(x ** 2, dim=-1, keepdim=True) ** 0.5 (pow keeps x; the mean keeps x^2 before torch
// 2.2), torch.maximum and the division keep per-row factors, and x * (target / magnitude) keeps x
// and the ratio; the product is new.
constexpr tensor magnitude_matched(const layer_context& ctx, tensor x) {
  op_writer& ops = ctx.ops;
  const tensor squared = ops.elementwise(x, x.elements, x.type);
  ops.keep(x, squared);
  op rows{.kind = op_kind::elementwise};
  // mag (kept by ** 0.5 and maximum), the maximum (kept by the division), the ratio (kept by the product).
  rows.extra_saved = storage(x.type, detail::checked_mul(ctx.tokens, 3));
  const tensor magnitude = ops.emit(rows, ctx.tokens, x.type);
  if (mean_keeps_input(ctx.run.torch_version)) ops.keep(squared, magnitude);
  ops.reads(squared, magnitude);
  const tensor scaled = ops.elementwise(x, x.elements, x.type);
  ops.keep(x, scaled);
  ops.reads(magnitude, scaled);
  return scaled;
}

// The target magnitude of the first copy (mean(x ** 2) ** 0.5): x kept by pow, x^2 by the mean
// before torch 2.2, the mean by ** 0.5.
constexpr void target_magnitude(const layer_context& ctx, tensor x) {
  op_writer& ops = ctx.ops;
  const tensor squared = ops.elementwise(x, x.elements, x.type);
  ops.keep(x, squared);
  const op rows{.kind = op_kind::elementwise, .extra_saved = storage(x.type, ctx.tokens)};
  const tensor target = ops.emit(rows, ctx.tokens, x.type);
  if (mean_keeps_input(ctx.run.torch_version)) ops.keep(squared, target);
  ops.reads(squared, target);
}

// Gemma3nTextModel.forward before the layers: the embeddings and altup_inputs - 1
// altup_projections of them, each magnitude-matched, stacked into the stream. The list of copies
// stays bound (temp_hidden_states) while the layers run: held.
constexpr tensor altup_expand(const layer_context& ctx, tensor embeddings) {
  op_writer& ops = ctx.ops;
  const std::uint64_t n = ctx.model.altup_inputs;
  target_magnitude(ctx, embeddings);
  for (std::uint64_t i = 1; i < n; ++i)
    magnitude_matched(ctx, altup_linear(ctx, embeddings, ctx.model.hidden, ctx.model.hidden));
  return ops.elementwise(detail::checked_mul(n, embeddings.elements), embeddings.type);  // torch.stack
}

// Gemma3nTextModel.forward after the layers: the first copy's target magnitude, the
// altup_unembed_projections of the others (each reads its copy through a view: the stack is
// kept), magnitude-matched, stacked and averaged (torch.mean over the copies keeps the stack
// before torch 2.2).
constexpr tensor altup_collapse(const layer_context& ctx, tensor stack) {
  op_writer& ops = ctx.ops;
  const std::uint64_t n = ctx.model.altup_inputs;
  const tensor first = one_copy(ctx, stack);
  target_magnitude(ctx, first);
  for (std::uint64_t i = 1; i < n; ++i) magnitude_matched(ctx, altup_linear(ctx, first, ctx.model.hidden, ctx.model.hidden));
  const tensor stacked = ops.elementwise(stack.elements, stack.type);
  const tensor mean = ops.elementwise(stacked, first.elements, stack.type);
  if (mean_keeps_input(ctx.run.torch_version)) ops.keep(stacked, mean);
  return mean;
}

}  // namespace memscale::graph_layers
