// memscale/parallel/deepspeed_zero.hpp: DeepSpeed ZeRO's device buffers beyond the partitions.
#pragma once

#include <cstdint>

#include "memscale/bytes.hpp"
#include "memscale/parallel/strategy.hpp"

namespace memscale::engines {

// The contiguous-gradient ("ipg") reduce bucket: reduce_bucket_size elements of the model
// dtype, allocated in full whatever the model size. Stages 1-2 allocate a second one with
// overlap_comm (deepspeed/runtime/zero/stage_1_and_2.py v0.16.5 backward(): buf_0, buf_1);
// stage 3 allocates one (stage3.py v0.16.5: __ipg_bucket_flat_buffer).
constexpr bytes zero_reduce_bucket_bytes(const parallel_spec& p, std::uint64_t element_size) {
  if (!is_deepspeed(p.engine) || !p.deepspeed.contiguous_gradients) return {};
  const std::uint64_t buffers = (p.engine != strategy::zero3 && overlap_comm(p)) ? 2 : 1;
  return bytes{detail::checked_mul(p.deepspeed.reduce_bucket_size, element_size, buffers)};
}

// ZeRO-3's gathered working set in elements: the module running now and the prefetch
// bucket ahead of it, never more than stage3_max_live_parameters available at once
// (deepspeed/runtime/zero/partitioned_param_coordinator.py v0.16.5 fetch_sub_module:
// max_params_to_prefetch = min(max_available - n_available, prefetch_bucket_sz)).
// Parameters below stage3_param_persistence_threshold stay gathered (persistent_parameters).
// Only the model's own partitioned parameters can be gathered: a prefetch bucket larger than
// the rest of the model holds the rest of the model.
constexpr std::uint64_t zero3_gathered_elements(const parallel_spec& p, std::uint64_t largest_module_elements,
                                                std::uint64_t persistent_elements, std::uint64_t total_elements) {
  const std::uint64_t live = detail::checked_add(largest_module_elements, p.deepspeed.prefetch_bucket_size);
  const std::uint64_t cap = detail::max(p.deepspeed.max_live_parameters, largest_module_elements);
  const std::uint64_t partitioned = total_elements > persistent_elements ? total_elements - persistent_elements : 0;
  return detail::checked_add(detail::min(detail::min(live, cap), partitioned), persistent_elements);
}

}  // namespace memscale::engines
