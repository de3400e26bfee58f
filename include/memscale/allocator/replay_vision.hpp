// memscale/allocator/replay_vision.hpp: a vision training run (vision::layer_graph) replayed
// through the caching allocator; every layer walked (convnets change shape stage by stage).
#pragma once

#include <cstddef>

#include "memscale/allocator/replay.hpp"
#include "memscale/allocator/vision_events.hpp"

namespace memscale::allocator {

template <std::size_t BlockCapacity = 8192, std::size_t IdCapacity = 8192>
constexpr replay_result replay_vision_training(const vision::layer_graph& g, const training_spec& run,
                                               const options& settings = {}, bytes capacity = {},
                                               const step_stream_options& stream = {}) {
  detail::owned<detail::allocator_sink<BlockCapacity, IdCapacity>> sink(settings, capacity);
  emit_vision_training_steps<IdCapacity>(g, run, stream, *sink.p);
  replay_result r = detail::result_of(sink.p->figures());
  sink.p->report_oom(r);
  r.layers_walked = g.size;
  return r;
}

}  // namespace memscale::allocator
