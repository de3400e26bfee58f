// memscale/estimate/checkpoint_state.hpp: parameter, gradient and optimizer bytes of a full
// fine-tune, from a checkpoint's tensors (weights_inventory) instead of a model_spec.
//
// Every floating parameter is trained (in the run's parameter dtype, as from_pretrained
// with torch_dtype and the precision policy load it); quantised storage is frozen and kept
// as stored; buffers saved with the weights are kept as stored (memory_breakdown::parameters
// holds "parameter storage and registered buffers"); serialisation metadata is not loaded.
// Exact for any architecture: the shapes are the checkpoint's.
#pragma once

#include <cstdint>

#include "memscale/bytes.hpp"
#include "memscale/estimate/optimizer.hpp"
#include "memscale/precision_policy.hpp"
#include "memscale/training.hpp"
#include "memscale/weights_inventory.hpp"

namespace memscale {

struct checkpoint_state {
  std::uint64_t parameters = 0;  // floating parameter elements (all trained)
  bytes parameter_bytes{};       // parameters in the run's dtype + quantised storage + buffers
  bytes gradient_bytes{};
  bytes optimizer_bytes{};
  bytes step_temporaries{};      // inside optimizer.step() (step_temporaries_of)
};

// Optimizer state of one parameter shape (one tensor of it).
constexpr bytes shape_state_bytes(const parameter_shape& s, const training_spec& run, dtype trainable) {
  const auto n = s.elements();
  // transformers optimization.py Adafactor: a tensor of two dimensions or more keeps
  // exp_avg_sq_row (shape[:-1]) and exp_avg_sq_col (shape[:-2] + shape[-1:]).
  if (run.optimizer == optimizer_kind::adafactor && s.matrix)
    return storage(trainable, detail::checked_add(detail::checked_mul(s.leading, s.rows), detail::checked_mul(s.leading, s.cols)));
  return tensor_state_bytes(detail::checked_mul(s.leading, s.rows), s.cols, n, run, trainable);
}

constexpr checkpoint_state checkpoint_state_of(const weights_inventory& w, const training_spec& run) {
  const precision_policy p = precision_policy_of(run);
  checkpoint_state s{};
  s.parameters = parameter_elements(w);
  s.parameter_bytes = storage(p.trainable, s.parameters) + total(w, tensor_role::quantized).stored +
                      total(w, tensor_role::buffer).stored;
  s.gradient_bytes = storage(p.trainable, s.parameters);
  std::uint64_t largest = 0;
  for (const parameter_shape& shape : w.parameter_shapes) {
    s.optimizer_bytes += shape_state_bytes(shape, run, p.trainable) * shape.tensors;
    largest = detail::max(largest, shape.elements());
  }
  s.step_temporaries = step_temporaries_of(largest, s.parameters, run);
  return s;
}

}  // namespace memscale
