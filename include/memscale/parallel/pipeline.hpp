// memscale/parallel/pipeline.hpp: how many micro-batches' activations a pipeline stage holds.
#pragma once

#include <cstdint>

#include "memscale/bytes.hpp"
#include "memscale/parallel/strategy.hpp"

namespace memscale::engines {

// 1F1B (PipeDream-Flush; Narayanan et al. 2021, arXiv 2104.04473 sec. 2.2): stage s (0-based)
// runs p - s forward passes before its first backward, so the first stage holds p micro-batches
// in flight (never more than the micro-batches of the step).
constexpr std::uint64_t micro_batches_in_flight(std::uint64_t stage, std::uint64_t pp, std::uint64_t micro_batches) {
  return detail::min(pp - stage, micro_batches);
}

// Saved activation bytes on a stage holding `layers_on_stage` layers of `per_layer` bytes per
// micro-batch. With the interleaved schedule the first stage keeps
// L/p * p * (1 + (p - 1) / (p * v)) layers' worth (Korthikanti et al. 2022 sec. 4.2.3, v model chunks).
constexpr bytes stage_saved_activations(bytes per_layer, std::uint64_t layers_on_stage, std::uint64_t stage,
                                        const parallel_spec& p, std::uint64_t micro_batches) {
  const std::uint64_t in_flight = micro_batches_in_flight(stage, p.pp, micro_batches);
  const bytes one_pass = per_layer * layers_on_stage;
  if (p.schedule != pipeline_schedule::interleaved || p.pp == 1 || stage != 0) return one_pass * in_flight;
  const std::uint64_t pv = detail::checked_mul(p.pp, p.virtual_stages);
  return bytes{detail::ceil_div(detail::checked_mul((one_pass * in_flight).value, pv + p.pp - 1), pv)};
}

}  // namespace memscale::engines
