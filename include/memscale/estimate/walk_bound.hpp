// memscale/estimate/walk_bound.hpp: when the walks over a graph may add without overflow checks.
//
// A walk's sums of live bytes (estimate/activations.hpp forward_walk, section_backward_peak) add
// the byte fields of a section's ops, its waiting gradients and the gradient carried into it: at
// most 4 terms an op (the forward walk's saved, cached and loose outputs beside the running op),
// the waiting gradients and a few more. With every term below 2^51 no such sum reaches 2^63, so
// the walks may use detail::unchecked_bytes, one check a graph instead of one an addition; a graph
// that fails the bound is walked checked, where an overflow names its quantity.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "memscale/graph/graph.hpp"
#include "memscale/training.hpp"

namespace memscale::detail {

inline constexpr std::uint64_t unchecked_term_limit = std::uint64_t{1} << 51;
static_assert(4 * graph_capacity + waiting_gradient_capacity + 8 <= (std::uint64_t{1} << 12),
              "a walk's sum may exceed 2^12 terms below unchecked_term_limit: lower the limit");

// Whether the walks over `g` may sum unchecked. Not in constant evaluation, where a checked
// sum costs no time and this walk would cost steps; not with FSDP1's flat views, whose gradient
// sums the walks make from parameter counts this does not bound.
constexpr bool walk_sums_fit(const graph& g, const training_spec& run) {
  if (std::is_constant_evaluated() || run.fsdp_flat_views) return false;
  // The bitwise or of every term is below the limit exactly when each of them is.
  std::uint64_t any = g.stream_grad.value;
  for (std::size_t i = 0; i < g.size; ++i) {
    const op& o = g.ops[i];
    any |= o.out.value | o.extra_saved.value | o.fwd_temp.value | o.bwd_temp.value | o.grad_in.value |
           o.grad_out.value;
  }
  for (std::size_t w = 0; w < g.waiting_count; ++w) any |= g.waiting[w].size.value;
  return any < unchecked_term_limit;
}

}  // namespace memscale::detail
