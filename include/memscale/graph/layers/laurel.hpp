// memscale/graph/layers/laurel.hpp: Gemma 3n's Laurel branch (modeling_gemma3n.py@b87ecf8c
// Gemma3nTextLaurelBlock): x + post_laurel_norm(linear_right(linear_left(x))), a rank-r detour
// beside the attention on the same normed input.
#pragma once

#include <cstdint>

#include "memscale/graph/layers/altup.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/norms.hpp"
#include "memscale/graph/tensor.hpp"

namespace memscale::graph_layers {

// Each projection keeps its input (the normed x, the rank-r left output); the norm keeps the right
// output (as every RMSNorm keeps an fp32 input); the residual sum keeps nothing.
constexpr tensor laurel(const layer_context& ctx, tensor normed) {
  const std::uint64_t h = ctx.model.hidden;
  const tensor left = altup_linear(ctx, normed, h, ctx.model.laurel_rank);
  const tensor right = altup_linear(ctx, left, ctx.model.laurel_rank, h);
  return ctx.ops.add(normed, norm(ctx, right));
}

}  // namespace memscale::graph_layers
