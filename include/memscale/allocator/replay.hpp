// memscale/allocator/replay.hpp: a training run's events replayed through the caching
// allocator: reserved memory on an unconstrained device, and the capped replay that decides
// whether the run fits a given amount of memory.
//
// Both walk every layer by default. Reserved memory is not a straight line in the number of
// layers: best fit packs blocks of neighbouring layers together, so one more layer can move
// reserved by a few hundred MiB either way (GPT-2 amp, b4 s512: +156 ... +580 MiB a layer, and
// once -60 MiB; docs/allocator.md). A walk over n and 2n layers extended to L layers
// (replay_options::walked_layers) is therefore an estimate: over 168 preset runs it was within
// 2.4% of the full walk at n = 8, 7.7% at n = 6 and 15% at n = 4. Allocated memory does follow
// the line (within 0.01% at n = 8).
#pragma once

#include <cstddef>
#include <cstdint>

#include "memscale/allocator/caching_allocator.hpp"
#include "memscale/allocator/events.hpp"
#include "memscale/allocator/options.hpp"
#include "memscale/allocator/step_events.hpp"
#include "memscale/bytes.hpp"
#include "memscale/graph/graph.hpp"
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
  std::uint32_t oom_step = 0;         // where the first OutOfMemoryError came: 0 setup, 1, 2 (steps)
  moment oom_moment = moment::setup;
  std::uint64_t layers_walked = 0;    // layers of the largest walk
  bool extrapolated = false;          // from walks over fewer layers (see replay_training)
};

namespace detail {

// Figures per step and moment, gathered while a stream plays into the allocator.
struct moment_figures {
  static constexpr std::size_t steps = 3;  // setup (0), step 1, step 2
  static constexpr std::size_t slots = steps * moment_count;
  std::uint64_t allocated[slots]{};
  std::uint64_t requested[slots]{};
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
      oom_step_ = step_;
      oom_moment_ = moment_;
      return;
    }
    const allocator_stats& now = a_.stats();
    std::uint64_t& al = f_.allocated[slot_];
    if (al < now.allocated.value) al = now.allocated.value;
    std::uint64_t& rq = f_.requested[slot_];
    if (rq < now.requested.value) rq = now.requested.value;
  }
  constexpr void free(std::uint32_t id) {
    if (!oom_) a_.release(id);
  }
  constexpr void enter(std::uint32_t step, moment m) {
    step_ = step;
    moment_ = m;
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
  // Records the first OutOfMemoryError and its place in `r`.
  constexpr void report_oom(replay_result& r) const {
    r.out_of_memory = oom_;
    r.alloc_retries = a_.stats().alloc_retries;
    r.first_oom = a_.stats().first_oom;
    r.oom_step = oom_step_;
    r.oom_moment = oom_moment_;
  }

 private:
  caching_allocator<BlockCapacity, IdCapacity> a_;
  moment_figures f_{};
  std::size_t slot_ = 0;
  std::uint32_t step_ = 0;
  moment moment_ = moment::setup;
  std::uint32_t oom_step_ = 0;
  moment oom_moment_ = moment::setup;
  bool oom_ = false;
};

// A heap object freed when the walk ends, also when it throws (constexpr new and delete).
template <class T>
struct owned {
  template <class... Args>
  constexpr explicit owned(const Args&... args) : p(new T(args...)) {}
  owned(const owned&) = delete;
  owned& operator=(const owned&) = delete;
  constexpr ~owned() { delete p; }
  T* p;
};

// The largest figure of a step over its moments (the middle-layer moments are bounded by the
// first and last layer's, which grow with the layer index in a straight line).
constexpr std::uint64_t step_peak(const std::uint64_t (&v)[moment_figures::slots], std::uint32_t step) {
  std::uint64_t best = 0;
  for (std::size_t m = 0; m < moment_count; ++m) best = best < v[step * moment_count + m] ? v[step * moment_count + m] : best;
  return best;
}

// v(L) on the straight line through v(a) and v(b), a < b <= L; rounded up, never below v(b).
constexpr std::uint64_t extend(std::uint64_t at_a, std::uint64_t at_b, std::uint64_t a, std::uint64_t b,
                               std::uint64_t layers) {
  if (at_b <= at_a) return at_b;
  const std::uint64_t grown = memscale::detail::checked_mul(at_b - at_a, layers - b);
  return memscale::detail::checked_add(at_b, memscale::detail::ceil_div(grown, b - a));
}

template <std::size_t BlockCapacity, std::size_t IdCapacity, std::size_t SavedCapacity>
constexpr moment_figures walk_figures(const graph& g, const training_spec& run, const options& settings, bytes capacity,
                                      std::uint64_t layers, const step_stream_options& stream, bool& oom,
                                      replay_result* details = nullptr) {
  // On the heap (a transient allocation, allowed in constant evaluation): the allocator's
  // fixed storage is megabytes at the capacities a deep model needs.
  owned<allocator_sink<BlockCapacity, IdCapacity>> sink(settings, capacity);
  step_stream_options o = stream;
  o.layers = layers;
  emit_training_steps<IdCapacity, SavedCapacity>(g, run, o, *sink.p);
  oom = sink.p->out_of_memory();
  if (details != nullptr) sink.p->report_oom(*details);
  return sink.p->figures();
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
  // 0: walk every layer. n > 0: walk n and 2n layers and extend to the model's depth when it
  // has more than 3n layers (an estimate: see the header comment).
  std::uint64_t walked_layers = 0;
};

// The unconstrained replay: what an 80 GB device reports for the run (nothing is ever
// released, so reserved is the high-water mark of segments). Capacities: BlockCapacity
// blocks and IdCapacity tensors alive at once, SavedCapacity ops x layers walked.
template <std::size_t BlockCapacity = 4096, std::size_t IdCapacity = 4096, std::size_t SavedCapacity = 4096>
constexpr replay_result replay_training(const graph& g, const training_spec& run, const replay_options& o = {}) {
  const std::uint64_t layers = g.block_repeats;
  const std::uint64_t n = o.walked_layers;
  bool oom = false;
  if (n == 0 || layers <= 3 * n) {
    const detail::moment_figures f =
        detail::walk_figures<BlockCapacity, IdCapacity, SavedCapacity>(g, run, o.settings, {}, layers, o.stream, oom);
    replay_result r = detail::result_of(f);
    r.layers_walked = layers;
    return r;
  }
  const std::uint64_t n2 = 2 * n;
  const auto a = detail::walk_figures<BlockCapacity, IdCapacity, SavedCapacity>(g, run, o.settings, {}, n, o.stream, oom);
  const auto b = detail::walk_figures<BlockCapacity, IdCapacity, SavedCapacity>(g, run, o.settings, {}, n2, o.stream, oom);
  detail::moment_figures out{};
  for (std::size_t i = 0; i < detail::moment_figures::slots; ++i) {
    out.allocated[i] = detail::extend(a.allocated[i], b.allocated[i], n, n2, layers);
    out.requested[i] = detail::extend(a.requested[i], b.requested[i], n, n2, layers);
  }
  out.reserved = detail::extend(a.reserved, b.reserved, n, n2, layers);
  out.inactive_split = b.inactive_split;
  replay_result r = detail::result_of(out);
  r.layers_walked = n2;
  r.extrapolated = true;
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
