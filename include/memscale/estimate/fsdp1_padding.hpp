// memscale/estimate/fsdp1_padding.hpp: the padding inside FSDP1's flat parameters
// (torch/distributed/fsdp/_flat_param.py@01caf79e). Under use_orig_params every tensor of a
// wrapped unit starts at a multiple of 16 bytes of the compute dtype (_get_aligned_numel,
// _init_flat_param_and_metadata: align_addresses = use_orig_params) and the flat parameter is
// padded to a multiple of the ranks; without it _get_shard pads the last rank's chunk to the
// first's. Either way each rank holds round_up(numel, N) / N elements, the sharded gradient is
// that size, and the all-gather fills _full_param_padded, the shard's numel x N. The optimizer
// steps the original parameters' views (_use_sharded_views), which exclude the padding.
#pragma once

#include <cstdint>

#include "memscale/estimate/activations.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/precision_policy.hpp"
#include "memscale/training.hpp"

namespace memscale::detail {

struct flat_unit_elements {
  std::uint64_t tensors = 0;  // the unit's own tensors, alignment padding included
  std::uint64_t padding = 0;  // alignment and world-size padding
};

// Adds `numel` elements of one tensor, first padding the flat parameter to `align`.
constexpr flat_unit_elements with_tensor(flat_unit_elements u, std::uint64_t numel, std::uint64_t align) {
  const std::uint64_t gap = align > 1 && u.tensors % align != 0 ? align - u.tensors % align : 0;
  return {checked_add(checked_add(u.tensors, gap), numel), checked_add(u.padding, gap)};
}

constexpr flat_unit_elements with_section(flat_unit_elements u, const graph& g, section s, std::uint64_t align) {
  for (std::size_t i = s.begin; i < s.end; ++i) {
    const op& o = g.ops[i];
    if (!o.borrows_weight)  // a tied head is the embedding's tensor (a shared parameter, flattened once)
      for (std::uint64_t k = 0; k < o.weight.count; ++k) u = with_tensor(u, o.weight.largest(), align);
    for (std::uint64_t k = 0; k < o.bias.count; ++k) u = with_tensor(u, o.bias.rows, align);
  }
  return u;
}

// The padding elements of the FSDP1 unit made of `a` and `b` (the root: prologue and epilogue;
// a block: its section and an empty one) over run.data_parallel ranks.
constexpr std::uint64_t fsdp1_unit_padding(const graph& g, section a, section b, const training_spec& run) {
  const std::uint64_t element = storage(precision_policy_of(run).param, 1).value;
  const std::uint64_t align = run.fsdp_use_orig_params && element != 0 ? 16 / element : 0;
  const flat_unit_elements u = with_section(with_section({}, g, a, align), g, b, align);
  if (u.tensors == 0) return 0;
  const std::uint64_t n = run.data_parallel;
  return checked_add(u.padding, round_up(u.tensors, n) - u.tensors);
}

}  // namespace memscale::detail
