// memscale/estimate/parameters.hpp: parameter counts and their storage.
#pragma once

#include <cstdint>

#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/torchao_nf4.hpp"
#include "memscale/precision_policy.hpp"
#include "memscale/training.hpp"

namespace memscale {

// bitsandbytes NF4 (Dettmers et al. 2023, QLoRA, arXiv 2305.14314 sec. 3): 4-bit codes,
// one absmax constant per block of 64 weights.
inline constexpr std::uint64_t nf4_block = 64;
// Double quantization (same paper, sec. 3): absmax stored as 8-bit, with one fp32
// second-level constant per 256 first-level blocks.
inline constexpr std::uint64_t nf4_second_level_block = 256;

inline constexpr detail::quantity parameter_quantity{"parameter count"};

constexpr std::uint64_t parameter_count(const graph& g) {
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < g.size; ++i) n = detail::checked_add(n, detail::checked_mul(stored_elements(g.ops[i]), repeats_of(g, i), parameter_quantity), parameter_quantity);
  return n;
}

// Parameters that receive gradients and optimizer state.
constexpr std::uint64_t trainable_parameter_count(const graph& g) {
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < g.size; ++i)
    if (!g.ops[i].frozen) n = detail::checked_add(n, detail::checked_mul(stored_elements(g.ops[i]), repeats_of(g, i), parameter_quantity), parameter_quantity);
  return n;
}

// Storage of `elements` frozen matmul weights quantised to NF4.
constexpr bytes nf4_weight_bytes(std::uint64_t elements, base_quant quant) {
  const auto blocks = detail::ceil_div(elements, nf4_block);
  const bytes codes = storage(dtype::nf4, elements);
  if (quant == base_quant::nf4) return codes + storage(dtype::fp32, blocks);
  return codes + storage(dtype::int8, blocks) + storage(dtype::fp32, detail::ceil_div(blocks, nf4_second_level_block));
}

// A frozen matmul weight a QLoRA run stores in 4 bits: torchtune's NF4Tensor (torchao, in the
// weight's dtype `d`) or bitsandbytes' Params4bit.
constexpr bool quantized_base(const op& o, const training_spec& run) {
  return run.target == training_target::qlora && o.frozen && o.role == param_role::matmul && !o.unquantized_base;
}

constexpr bytes quantized_base_bytes(std::uint64_t elements, const training_spec& run, dtype d) {
  return run.framework == framework_kind::torchtune ? torchao_nf4_weight_bytes(elements, d)
                                                    : nf4_weight_bytes(elements, run.quant);
}

// Bytes one op's parameters (`n` elements) occupy on the device, under the run's precision policy `p`.
constexpr bytes op_parameter_bytes(const op& o, const op_elements& n, const training_spec& run,
                                   const precision_policy& p) {
  const std::uint64_t weight = o.borrows_weight ? 0 : n.weight;
  const dtype d = o.frozen ? p.param : p.trainable;
  const bytes w = quantized_base(o, run) ? quantized_base_bytes(weight, run, d) : storage(d, weight);
  return w + storage(d, n.bias);
}

constexpr bytes op_parameter_bytes(const op& o, const training_spec& run, const precision_policy& p) {
  return op_parameter_bytes(o, elements_of(o), run, p);
}

constexpr bytes op_parameter_bytes(const op& o, const training_spec& run) {
  return op_parameter_bytes(o, run, precision_policy_of(run));
}

constexpr bytes parameter_bytes(const graph& g, const training_spec& run) {
  bytes total{};
  for (std::size_t i = 0; i < g.size; ++i) total += op_parameter_bytes(g.ops[i], run) * repeats_of(g, i);
  return total;
}

}  // namespace memscale
