// memscale/allocator/replay_generate.hpp: generate() replayed through the caching allocator.
//
// Every decoding step is walked (the cache grows by one position a step, so no two steps are
// alike). An unconstrained replay gives what an 80 GB device reports; with a capacity the
// replay releases cached segments when cudaMalloc would fail and reports the first
// OutOfMemoryError.
#pragma once

#include <cstddef>

#include "memscale/allocator/generate_events.hpp"
#include "memscale/allocator/replay.hpp"

namespace memscale::allocator {

template <std::size_t BlockCapacity = 8192, std::size_t IdCapacity = 8192>
constexpr replay_result replay_generate(const model_spec& model, const inference_spec& run,
                                        const options& settings = {}, bytes capacity = {}) {
  detail::owned<detail::allocator_sink<BlockCapacity, IdCapacity>> sink(settings, capacity);
  emit_generate<IdCapacity>(model, run, *sink.p);
  const detail::moment_figures f = sink.p->figures();
  replay_result r{};
  // generate() is measured as a whole (one reset before it): its peak over every moment.
  r.allocated_peak = bytes{memscale::detail::max(detail::step_peak(f.allocated, 0), detail::step_peak(f.allocated, 1))};
  r.first_step_allocated_peak = r.allocated_peak;
  r.requested_peak = bytes{memscale::detail::max(detail::step_peak(f.requested, 0), detail::step_peak(f.requested, 1))};
  r.reserved_peak = bytes{f.reserved};
  r.inactive_split_peak = bytes{f.inactive_split};
  sink.p->report_oom(r);
  r.layers_walked = model.layers;
  return r;
}

}  // namespace memscale::allocator
