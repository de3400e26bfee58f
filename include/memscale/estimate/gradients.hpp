// memscale/estimate/gradients.hpp: parameter gradients.
//
// A gradient has its parameter's dtype and is created during backward by the op that
// uses the parameter (torch/csrc/autograd/functions/accumulate_grad.h); frozen
// parameters get none.
#pragma once

#include "memscale/dtype.hpp"
#include "memscale/graph.hpp"
#include "memscale/precision_policy.hpp"
#include "memscale/training.hpp"

namespace memscale {

// Gradient bytes op `o` creates in its backward (zero when a tied owner's gradient
// already exists: the new part is accumulated in place).
constexpr bytes op_gradient_bytes(const op& o, const training_spec& run) {
  if (o.frozen) return {};
  const auto p = precision_policy_of(run);
  const std::uint64_t weight = o.weight_grad_exists ? 0 : o.weight.elements();
  return storage(p.trainable, detail::checked_add(weight, o.bias.elements()));
}

constexpr bytes gradient_bytes(const graph& g, const training_spec& run) {
  bytes total{};
  for (std::size_t i = 0; i < g.size; ++i) total += op_gradient_bytes(g.ops[i], run) * repeats_of(g, i);
  return total;
}

}  // namespace memscale
