// memscale/graph/layers/activation_sparsity.hpp: Gemma 3n's MLP on a layer whose
// activation_sparsity_pattern entry is above 0 (modeling_gemma3n.py@b87ecf8c Gemma3nTextMLP,
// _gaussian_topk): the gate's output cut at mean + std * Normal(0, 1).icdf(sparsity) before the
// activation.
#pragma once

#include <cstdint>

#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/training.hpp"

namespace memscale::graph_layers {

// What one such layer saves beyond the dense one: the icdf multiplier is a 0-dim constant
// without grad (Normal(0, 1).icdf of a new tensor); torch.std(unbiased=False) keeps the gate,
// which the dense layer's activation keeps anyway, and its per-row result (derivatives.yaml
// std_backward: self, result); the mean keeps the same gate before torch 2.2; the cutoff sum and
// the subtraction keep nothing; relu keeps its output, which the activation then keeps as its input
// in place of the gate. So: one (tokens, ffn) tensor and one value per row, in the gate's dtype.
constexpr bytes gaussian_topk_saved(const layer_context& ctx) {
  const dtype gate = ctx.ops.precision().matmul;
  return storage(gate, detail::checked_mul(ctx.tokens, ctx.model.ffn)) + storage(gate, ctx.tokens);
}

// The first sparse_leading_layers layers as the repeated dense layer plus, in one op before the
// block, what their gaussian top-k saves: a graph repeats one block of at most graph_capacity ops,
// and E2B's ten sparse layers written out would not fit. Their bytes are kept from the forward's
// start until the backward's end instead of from and until those layers: the same amount at the
// end of forward and at every backward peak before the first layers' backward. Full checkpointing
// recomputes the layers, keeping none of it.
constexpr void sparse_gate_layers(const layer_context& ctx) {
  if (ctx.model.sparse_leading_layers == 0 || ctx.run.ckpt == checkpointing::full) return;
  const op kept{.kind = op_kind::elementwise,
                .extra_saved = gaussian_topk_saved(ctx) * ctx.model.sparse_leading_layers};
  ctx.ops.emit(kept, 0, ctx.ops.precision().matmul);
}

}  // namespace memscale::graph_layers
