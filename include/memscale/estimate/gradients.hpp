// memscale/estimate/gradients.hpp: parameter gradients.
//
// A gradient has its parameter's dtype and is created during backward by the op that
// uses the parameter (torch/csrc/autograd/functions/accumulate_grad.h); frozen
// parameters get none.
#pragma once

#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/precision_policy.hpp"
#include "memscale/training.hpp"

namespace memscale {

// Gradient bytes op `o` creates in its backward (zero when a tied owner's gradient
// already exists: the new part is accumulated in place).
// `n`: the op's elements; `trainable`: precision_policy::trainable.
constexpr bytes op_gradient_bytes(const op& o, const op_elements& n, dtype trainable) {
  if (o.frozen) return {};
  return storage(trainable, detail::checked_add(o.weight_grad_exists ? 0 : n.weight, n.bias));
}

constexpr bytes op_gradient_bytes(const op& o, dtype trainable) {
  if (o.frozen || (o.weight.rows == 0 && o.bias.rows == 0)) return {};
  return op_gradient_bytes(o, elements_of(o), trainable);
}

constexpr bytes op_gradient_bytes(const op& o, const training_spec& run) {
  return op_gradient_bytes(o, precision_policy_of(run).trainable);
}

constexpr bytes gradient_bytes(const graph& g, const training_spec& run) {
  bytes total{};
  for (std::size_t i = 0; i < g.size; ++i) total += op_gradient_bytes(g.ops[i], run) * repeats_of(g, i);
  return total;
}

}  // namespace memscale
