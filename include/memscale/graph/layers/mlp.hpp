// memscale/graph/layers/mlp.hpp: the feed-forward layers: dense (two matrices), gated
// (three), mixture of experts with an optional shared expert, and T5's DenseActDense.
#pragma once

#include <cstdint>

#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/activations.hpp"
#include "memscale/graph/layers/adapters.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/tensor.hpp"
#include "memscale/lora.hpp"
#include "memscale/model.hpp"

namespace memscale::graph_layers {

// The rows an MLP processes and how many copies of its weights exist: every token and one
// copy, or (inside a mixture of experts) tokens x top-k rows over `experts` copies.
struct mlp_rows {
  std::uint64_t rows = 0;
  std::uint64_t copies = 1;
};

// up, activation, down; gated: act(gate(x)) * up(x), then down. Each matrix is a
// projection the run may adapt.
constexpr tensor dense_mlp(const layer_context& ctx, tensor in, std::uint64_t ffn, const mlp_rows& shape) {
  op_writer& ops = ctx.ops;
  const auto hidden = ctx.model.hidden;
  const bool bias = ctx.model.mlp_bias;
  const linear_shape widen{.rows = shape.rows, .in_features = hidden, .out_features = ffn, .copies = shape.copies, .bias = bias};
  const linear_shape narrow{.rows = shape.rows, .in_features = ffn, .out_features = hidden, .copies = shape.copies, .bias = bias};
  const bool adapt_up = ctx.adapters.adapts(lora_target::up);
  const bool adapt_down = ctx.adapters.adapts(lora_target::down);
  if (gated_mlp(ctx.model)) {
    const tensor gate = projection(ops, ctx.adapters, in, widen, ctx.adapters.adapts(lora_target::gate));
    const tensor up = projection(ops, ctx.adapters, in, widen, adapt_up);
    const tensor act = activation(ctx, gate);
    const tensor product = ops.elementwise(up.elements, up.type);
    ops.keep(act, product);  // mul saves both factors
    ops.keep(up, product);
    return projection(ops, ctx.adapters, product, narrow, adapt_down);
  }
  const tensor up = projection(ops, ctx.adapters, in, widen, adapt_up);
  const tensor act = activation(ctx, up);
  return projection(ops, ctx.adapters, act, narrow, adapt_down);
}

// Mixture of experts (HF modeling_mixtral.py MixtralSparseMoeBlock): a router, then
// each token's hidden state is gathered for its top-k experts; the experts' weights all
// stay resident, their activations cover tokens * top-k rows.
constexpr tensor mixture_of_experts(const layer_context& ctx, tensor in) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const auto hidden = m.hidden;
  const auto experts = m.experts;
  if (m.moe_input_jitter) {
    // PhimoeSparseMoeBlock.forward (modeling_phimoe.py@008f5c8c) in training with
    // input_jitter_noise > 0: hidden_states *= empty_like(hidden_states).uniform_(...); the
    // in-place mul saves the noise for its backward. Written as a new tensor, which counts
    // the in-place result once more as a transient (the upper side).
    in = ops.emit(op{.kind = op_kind::elementwise, .extra_saved = storage(in.type, in.elements)}, in.elements, in.type);
  }
  projection(ops, ctx.adapters, in, {.rows = ctx.tokens, .in_features = hidden, .out_features = experts},
             ctx.adapters.adapts(lora_target::router));  // router
  // Softmax in fp32 keeps its output; topk keeps its int64 indices, and each expert's
  // torch.where gives int64 row and slot indices that the gather, the routing-weight
  // slice and index_add_ keep (T*k each).
  const auto routed_rows = detail::checked_mul(ctx.tokens, m.experts_per_token);
  const tensor routing = ops.emit(op{.kind = op_kind::activation,
                                     .extra_saved = storage(dtype::int64, detail::checked_mul(routed_rows, 3)) +
                                                    storage(ops.precision().matmul, routed_rows)},
                                  detail::checked_mul(ctx.tokens, experts), dtype::fp32);
  ops.keep_own_output(routing);
  const mlp_rows expert_rows{.rows = detail::checked_mul(ctx.tokens, m.experts_per_token), .copies = experts};
  const tensor gathered = ops.elementwise(detail::checked_mul(expert_rows.rows, hidden), in.type);
  const tensor expert_out = dense_mlp(ctx, gathered, m.ffn, expert_rows);
  // * routing weight: saves both factors
  const tensor weighted = ops.elementwise(detail::checked_mul(expert_rows.rows, hidden), expert_out.type);
  ops.keep(expert_out, weighted);
  // index_add_ back into the token order. Its source gradient is written
  // grad.index_select(dim, index).expand_as(source) (torch 1.13 derivatives.yaml
  // index_add), so autograd saves the weighted expert outputs.
  const tensor routed = ops.elementwise(detail::checked_mul(ctx.tokens, hidden), weighted.type);
  ops.keep(weighted, routed);
  if (m.shared_expert_ffn == 0) return routed;
  // modeling_qwen2_moe.py Qwen2MoeSparseMoeBlock (v4.51): every token also runs the shared
  // expert, scaled by sigmoid(shared_expert_gate(x)).
  tensor shared = dense_mlp(ctx, in, m.shared_expert_ffn, {.rows = ctx.tokens});
  if (m.shared_expert_gate) {
    const tensor logit = ops.linear(in, {.rows = ctx.tokens, .in_features = hidden, .out_features = 1},
                                    ctx.adapters.base);
    output_keeping_activation(ops, logit);  // sigmoid gate
    const tensor scaled = ops.elementwise(shared.elements, shared.type);
    ops.keep(shared, scaled);  // mul saves both factors
    shared = scaled;
  }
  return ops.add(routed, shared);
}

// The model's MLP over every token.
constexpr tensor mlp(const layer_context& ctx, tensor in) {
  return ctx.model.experts > 0 ? mixture_of_experts(ctx, in) : dense_mlp(ctx, in, ctx.model.ffn, {.rows = ctx.tokens});
}

// T5LayerFF's DenseReluDense over `rows` rows: T5DenseActDense (wi, ReLU, dropout, wo) or
// T5DenseGatedActDense (act(wi_0(x)) * wi_1(x), dropout, wo; the activation runs before
// wi_1, as the module writes it).
constexpr tensor t5_dense_act_dense(const layer_context& ctx, tensor in, std::uint64_t rows) {
  op_writer& ops = ctx.ops;
  const auto hidden = ctx.model.hidden;
  const auto ffn = ctx.model.ffn;
  const linear_shape widen{.rows = rows, .in_features = hidden, .out_features = ffn};
  tensor x{};
  if (gated_mlp(ctx.model)) {
    // T5DenseGatedActDense: act(wi_0(x)) * wi_1(x); v1.1 / flan-t5 / mT5 use gelu_new,
    // written as Python ops whose intermediates autograd keeps (activations.py NewGELUActivation).
    // Its CUDA autocast fp32 pow is not applied to T5 (as this graph has always been built).
    const tensor gate = ops.linear(in, widen, ctx.adapters.base);
    const tensor act = gelu_tanh_as_python_ops(ops, gate, false);
    const tensor up = ops.linear(in, widen, ctx.adapters.base);
    x = ops.elementwise(up.elements, up.type);
    ops.keep(act, x);
    ops.keep(up, x);
  } else {
    const tensor up = ops.linear(in, widen, ctx.adapters.base);
    x = output_keeping_activation(ops, up);  // relu
  }
  x = ops.dropout(x, ctx.dropout.mlp_hidden);
  // `hidden_states.to(self.wo.weight.dtype)` when they differ: under autocast a 16-bit
  // activation is cast to fp32, which the autocast wo then casts back (and saves).
  if (x.type != ops.precision().param) x = ops.elementwise(x.elements, ops.precision().param);
  return ops.linear(x, {.rows = rows, .in_features = ffn, .out_features = hidden}, ctx.adapters.base);
}

}  // namespace memscale::graph_layers
