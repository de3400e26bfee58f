// memscale/allocator/replay.hpp: a training run's events replayed through the caching
// allocator: reserved memory on an unconstrained device, and the capped replay that decides
// whether the run fits a given amount of memory.
//
// Layers repeat, so the unconstrained replay walks only a few of them: once the allocator's
// state repeats layer by layer, every figure of a moment (the peak allocated during the first
// block's forward, reserved at the end, ...) grows by the same amount per layer, and a walk
// over n and n + 1 layers gives it for L layers by a straight line. The walk over n + 2
// layers checks that the differences repeat (`periodic`); when they do not, the extrapolation
// is an estimate, and replay_training(..., full_walk) walks every layer instead.
// The capped replay always walks every layer: what the cap releases depends on the whole run.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "memscale/allocator/caching_allocator.hpp"
#include "memscale/allocator/events.hpp"
#include "memscale/allocator/options.hpp"
#include "memscale/allocator/step_events.hpp"
#include "memscale/bytes.hpp"
#include "memscale/graph.hpp"
#include "memscale/training.hpp"

namespace memscale::allocator {

// What a replay reports; byte figures are those torch.cuda.memory_stats() would.
struct replay_result {
  bytes allocated_peak{};             // max_memory_allocated over a steady step (blocks, unsplit tails included)
  bytes first_step_allocated_peak{};  // the same over step 1 (setup included)
  bytes requested_peak{};             // the steady step's live tensor bytes as requested (the estimators' tensor peak)
  bytes reserved_peak{};              // max_memory_reserved over the run
  bytes inactive_split_peak{};        // inactive_split_bytes.all.peak (walked layers only when extrapolated)
  std::uint64_t alloc_retries = 0;    // num_alloc_retries: cudaMalloc failed and the cache was released
  bool out_of_memory = false;         // the capped replay hit OutOfMemoryError
  oom_event first_oom{};
  std::uint64_t layers_walked = 0;    // layers of the largest walk
  bool extrapolated = false;
  bool periodic = true;               // extrapolated: the per-layer differences repeated
};

namespace detail {

// Figures per step and moment, gathered while a stream plays into the allocator.
struct moment_figures {
  static constexpr std::size_t steps = 3;  // setup (0), step 1, step 2
  std::array<std::uint64_t, steps * moment_count> allocated{};
  std::array<std::uint64_t, steps * moment_count> requested{};
  std::uint64_t reserved = 0;
  std::uint64_t inactive_split = 0;
};

template <std::size_t BlockCapacity, std::size_t IdCapacity>
class allocator_sink {
 public:
  constexpr allocator_sink(const options& settings, bytes capacity) : a_(settings, capacity) {}

  constexpr void alloc(std::uint32_t id, std::uint64_t size) {
    if (oom_) return;
    if (!a_.allocate(id, size)) {
      oom_ = true;
      return;
    }
    auto& al = f_.allocated[slot_];
    al = al < a_.stats().allocated.value ? a_.stats().allocated.value : al;
    auto& rq = f_.requested[slot_];
    rq = rq < a_.stats().requested.value ? a_.stats().requested.value : rq;
  }
  constexpr void free(std::uint32_t id) {
    if (!oom_) a_.release(id);
  }
  constexpr void enter(std::uint32_t step, moment m) {
    slot_ = (step < moment_figures::steps ? step : moment_figures::steps - 1) * moment_count + static_cast<std::size_t>(m);
  }

  [[nodiscard]] constexpr moment_figures figures() const {
    moment_figures f = f_;
    f.reserved = a_.stats().reserved_peak.value;
    f.inactive_split = a_.stats().inactive_split_peak.value;
    return f;
  }
  [[nodiscard]] constexpr const caching_allocator<BlockCapacity, IdCapacity>& state() const { return a_; }
  [[nodiscard]] constexpr bool out_of_memory() const { return oom_; }

 private:
  caching_allocator<BlockCapacity, IdCapacity> a_;
  moment_figures f_{};
  std::size_t slot_ = 0;
  bool oom_ = false;
};

constexpr std::size_t index_of(std::uint32_t step, moment m) {
  return step * moment_count + static_cast<std::size_t>(m);
}

// The largest figure of a step over its moments (the middle-layer moments are bounded by the
// first and last layer's, which grow with the layer index in a straight line).
constexpr std::uint64_t step_peak(const std::array<std::uint64_t, moment_figures::steps * moment_count>& v,
                                  std::uint32_t step) {
  std::uint64_t best = 0;
  for (std::size_t m = 0; m < moment_count; ++m) best = best < v[step * moment_count + m] ? v[step * moment_count + m] : best;
  return best;
}

// v(L) from v(n) and v(n + 1) on a straight line (never below v(n + 1)).
constexpr std::uint64_t extend(std::uint64_t at_n, std::uint64_t at_n1, std::uint64_t n1, std::uint64_t layers) {
  if (at_n1 < at_n) return at_n1;
  return memscale::detail::checked_add(at_n1, memscale::detail::checked_mul(at_n1 - at_n, layers - n1));
}

template <std::size_t BlockCapacity, std::size_t IdCapacity, std::size_t SavedCapacity>
constexpr moment_figures walk_figures(const graph& g, const training_spec& run, const options& settings, bytes capacity,
                                      std::uint64_t layers, const step_stream_options& stream, bool& oom,
                                      replay_result* details = nullptr) {
  allocator_sink<BlockCapacity, IdCapacity> sink(settings, capacity);
  step_stream_options o = stream;
  o.layers = layers;
  emit_training_steps<IdCapacity, SavedCapacity>(g, run, o, sink);
  oom = sink.out_of_memory();
  if (details != nullptr) {
    details->alloc_retries = sink.state().stats().alloc_retries;
    details->first_oom = sink.state().stats().first_oom;
  }
  return sink.figures();
}

constexpr replay_result result_of(const moment_figures& f) {
  replay_result r{};
  r.allocated_peak = bytes{step_peak(f.allocated, 2)};
  r.first_step_allocated_peak = bytes{memscale::detail::max(step_peak(f.allocated, 0), step_peak(f.allocated, 1))};
  r.requested_peak = bytes{step_peak(f.requested, 2)};
  r.reserved_peak = bytes{f.reserved};
  r.inactive_split_peak = bytes{f.inactive_split};
  return r;
}

}  // namespace detail

struct replay_options {
  options settings{};                // PYTORCH_CUDA_ALLOC_CONF
  step_stream_options stream{};      // .layers is ignored: the replay chooses
  std::uint64_t walked_layers = 2;   // the extrapolation walks this many layers and one more (and one more to check)
  bool full_walk = false;            // walk every layer even when the model is deeper
};

// The unconstrained replay: what an 80 GB device reports for the run (nothing is ever
// released, so reserved is the high-water mark of segments). Capacities: BlockCapacity
// blocks and IdCapacity tensors alive at once, SavedCapacity ops x layers walked.
template <std::size_t BlockCapacity = 4096, std::size_t IdCapacity = 4096, std::size_t SavedCapacity = 4096>
constexpr replay_result replay_training(const graph& g, const training_spec& run, const replay_options& o = {}) {
  const std::uint64_t layers = g.block_repeats;
  const std::uint64_t n = o.walked_layers < 2 ? 2 : o.walked_layers;
  bool oom = false;
  if (o.full_walk || layers <= n + 2) {
    const detail::moment_figures f =
        detail::walk_figures<BlockCapacity, IdCapacity, SavedCapacity>(g, run, o.settings, {}, layers, o.stream, oom);
    replay_result r = detail::result_of(f);
    r.layers_walked = layers;
    return r;
  }
  const auto a = detail::walk_figures<BlockCapacity, IdCapacity, SavedCapacity>(g, run, o.settings, {}, n, o.stream, oom);
  const auto b = detail::walk_figures<BlockCapacity, IdCapacity, SavedCapacity>(g, run, o.settings, {}, n + 1, o.stream, oom);
  const auto c = detail::walk_figures<BlockCapacity, IdCapacity, SavedCapacity>(g, run, o.settings, {}, n + 2, o.stream, oom);
  detail::moment_figures out{};
  bool periodic = true;
  auto extend = [&](std::uint64_t x, std::uint64_t y, std::uint64_t z) {
    if (z - y != y - x) periodic = false;
    return detail::extend(y, z, n + 2, layers);
  };
  for (std::size_t i = 0; i < out.allocated.size(); ++i) {
    out.allocated[i] = extend(a.allocated[i], b.allocated[i], c.allocated[i]);
    out.requested[i] = extend(a.requested[i], b.requested[i], c.requested[i]);
  }
  out.reserved = extend(a.reserved, b.reserved, c.reserved);
  out.inactive_split = c.inactive_split;
  replay_result r = detail::result_of(out);
  r.layers_walked = n + 2;
  r.extrapolated = true;
  r.periodic = periodic;
  return r;
}

// The capped replay: the run on a device where the allocator may reserve at most `capacity`
// bytes (the device's memory less the CUDA context and non-PyTorch memory). cudaMalloc fails
// past it; the allocator then frees its cached whole segments and retries
// (alloc_retries); when that fails too the run stops at its first OutOfMemoryError.
template <std::size_t BlockCapacity = 16384, std::size_t IdCapacity = 16384, std::size_t SavedCapacity = 16384>
constexpr replay_result replay_training_capped(const graph& g, const training_spec& run, bytes capacity,
                                               const replay_options& o = {}) {
  replay_result r{};
  bool oom = false;
  const detail::moment_figures f = detail::walk_figures<BlockCapacity, IdCapacity, SavedCapacity>(
      g, run, o.settings, capacity, g.block_repeats, o.stream, oom, &r);
  const replay_result figures = detail::result_of(f);
  r.allocated_peak = figures.allocated_peak;
  r.first_step_allocated_peak = figures.first_step_allocated_peak;
  r.requested_peak = figures.requested_peak;
  r.reserved_peak = figures.reserved_peak;
  r.inactive_split_peak = figures.inactive_split_peak;
  r.out_of_memory = oom;
  r.layers_walked = g.block_repeats;
  return r;
}

}  // namespace memscale::allocator
