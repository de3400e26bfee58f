// memscale/allocator/events.hpp: the allocation events of a step as an ordered stream.
//
// A walk over a graph (allocator/step_events.hpp, allocator/generate_events.hpp) calls a sink
// for every tensor it creates and frees, and marks where each moment of the step begins. A
// sink is any object with
//   alloc(std::uint32_t id, std::uint64_t size)   a tensor of `size` bytes comes to life
//   free(std::uint32_t id)                        it dies
//   enter(std::uint32_t step, moment m)           what follows belongs to moment m of step `step`
// so the same walk feeds the allocator simulation directly (allocator/replay.hpp), a list that
// keeps the events (event_list), or a running sum of live bytes (live_bytes).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "memscale/detail/math.hpp"
#include "memscale/error.hpp"

namespace memscale::allocator {

// Where in a step an event happens. The block moments are split by layer so that a walk
// over a few layers can be extrapolated (replay.hpp): the first and the last layer, and the
// layers between them.
enum class moment : std::uint8_t {
  setup,                 // parameters, buffers, inputs, persistent gradients
  prologue_forward,
  first_block_forward,
  middle_block_forward,
  last_block_forward,
  epilogue_forward,
  epilogue_backward,
  last_block_backward,   // the first block whose backward runs
  middle_block_backward,
  first_block_backward,
  prologue_backward,
  optimizer_step,
  prefill,               // generate(): the prompt's forward pass
  decode,                // generate(): one new token per sequence per pass
};

inline constexpr std::size_t moment_count = 14;

constexpr std::string_view to_string(moment m) noexcept {
  constexpr std::array<std::string_view, moment_count> names{
      "setup",          "prologue_forward",      "first_block_forward",   "middle_block_forward",
      "last_block_forward", "epilogue_forward",  "epilogue_backward",     "last_block_backward",
      "middle_block_backward", "first_block_backward", "prologue_backward", "optimizer_step",
      "prefill",        "decode"};
  return names[static_cast<std::size_t>(m)];
}

enum class event_kind : std::uint8_t { alloc, free, enter };

struct event {
  event_kind kind = event_kind::alloc;
  moment at = moment::setup;   // enter: the moment that begins
  std::uint32_t step = 0;      // enter: the step (0: setup)
  std::uint32_t id = 0;        // alloc, free: the tensor
  std::uint64_t size = 0;      // alloc: bytes as requested
};

// Keeps the events in order (fixed capacity; exceeding it is a memscale::error).
template <std::size_t Capacity>
struct event_list {
  std::array<event, Capacity> items{};
  std::size_t size = 0;

  constexpr void push(const event& e) {
    if (size >= Capacity)
      memscale::detail::fail(error_code::unsupported, "event_list", "has more events than its capacity", size);
    items[size++] = e;
  }
  constexpr void alloc(std::uint32_t id, std::uint64_t bytes) { push({event_kind::alloc, moment::setup, 0, id, bytes}); }
  constexpr void free(std::uint32_t id) { push({event_kind::free, moment::setup, 0, id, 0}); }
  constexpr void enter(std::uint32_t step, moment m) { push({event_kind::enter, m, step, 0, 0}); }
};

// Plays a recorded stream into another sink.
template <std::size_t Capacity, class Sink>
constexpr void play(const event_list<Capacity>& events, Sink& sink) {
  for (std::size_t i = 0; i < events.size; ++i) {
    const event& e = events.items[i];
    switch (e.kind) {
      case event_kind::alloc: sink.alloc(e.id, e.size); break;
      case event_kind::free: sink.free(e.id); break;
      case event_kind::enter: sink.enter(e.step, e.at); break;
    }
  }
}

// The sum of live tensor sizes as requested (no rounding): its peak per step is what the
// estimators call the tensor peak. Ids must stay below IdCapacity.
template <std::size_t IdCapacity>
class live_bytes {
 public:
  static constexpr std::size_t max_steps = 4;

  constexpr void alloc(std::uint32_t id, std::uint64_t size) {
    if (id >= IdCapacity) memscale::detail::fail(error_code::unsupported, "live_bytes", "tensor id beyond capacity", id);
    size_of_[id] = size;
    live_ = memscale::detail::checked_add(live_, size);
    if (live_ > peak_[step_]) peak_[step_] = live_;
  }
  constexpr void free(std::uint32_t id) { live_ -= size_of_[id]; }
  constexpr void enter(std::uint32_t step, moment) { step_ = step < max_steps ? step : max_steps - 1; }

  // The peak of step `s` (0: setup).
  [[nodiscard]] constexpr std::uint64_t peak(std::uint32_t s) const { return peak_[s < max_steps ? s : max_steps - 1]; }
  [[nodiscard]] constexpr std::uint64_t live() const { return live_; }

 private:
  std::array<std::uint64_t, IdCapacity> size_of_{};
  std::array<std::uint64_t, max_steps> peak_{};
  std::uint64_t live_ = 0;
  std::uint32_t step_ = 0;
};

// Hands out tensor ids and takes freed ones back, so ids stay below the number of tensors
// alive at once (what sinks size their tables by).
template <std::size_t IdCapacity>
class id_pool {
 public:
  constexpr std::uint32_t take() {
    if (free_count_ > 0) return free_[--free_count_];
    if (next_ >= IdCapacity)
      memscale::detail::fail(error_code::unsupported, "event stream", "has more live tensors than its id capacity",
                             next_);
    return next_++;
  }
  constexpr void give_back(std::uint32_t id) { free_[free_count_++] = id; }
  [[nodiscard]] constexpr std::uint32_t high_water() const { return next_; }

 private:
  std::uint32_t free_[IdCapacity];  // written before read (P1331)
  std::uint32_t free_count_ = 0;
  std::uint32_t next_ = 0;
};

// The id of no tensor: a size-0 allocation, or a tensor already freed.
inline constexpr std::uint32_t no_tensor = 0xffffffffU;

// What a walk writes into its sink: each allocation under an id that id_pool hands out
// (size 0: no tensor, no event), each free under that id, which then reads no_tensor so
// freeing it again writes nothing; and the moments of the step.
template <class Sink, std::size_t IdCapacity>
class tensor_events {
 public:
  constexpr explicit tensor_events(Sink& sink) : sink_(sink) {}

  constexpr std::uint32_t alloc(std::uint64_t size) {
    if (size == 0) return no_tensor;
    const std::uint32_t id = ids_.take();
    sink_.alloc(id, size);
    return id;
  }
  constexpr void free(std::uint32_t& id) {
    if (id == no_tensor) return;
    sink_.free(id);
    ids_.give_back(id);
    id = no_tensor;
  }
  constexpr void enter(std::uint32_t step, moment m) { sink_.enter(step, m); }

 private:
  Sink& sink_;
  id_pool<IdCapacity> ids_{};
};

// The running Python frame's locals (graph.hpp op::frame_locals_blocks) as tensors of their own: a
// local is a block from the op after the one that made it until the frame closes (the mamba2 and
// falcon_h1 H100 histories keep C_times_states' 1,536 MiB product as one block through Y_off and y,
// next to the 3,072 MiB segments of G_intermediate; gpt-oss's decoder layer binds the sink
// attention's probabilities until its MLP returns). A frame only grows until it closes, so an op
// carrying fewer locals than are held closes it.
class frame_locals {
 public:
  template <class Events>
  constexpr void follow(std::uint64_t locals, Events& events) {
    if (locals < held_) {
      for (std::size_t j = count_; j-- > 0;) events.free(ids_[j]);
      count_ = 0;
      held_ = 0;
    }
    if (locals == held_) return;
    take(events.alloc(locals - held_), locals - held_);
  }

  // An output that becomes a local as it is: the frame binds the tensor itself, which stays.
  constexpr void adopt(std::uint32_t& id, std::uint64_t size) {
    take(id, size);
    id = no_tensor;
  }

  [[nodiscard]] constexpr std::uint64_t held() const { return held_; }

 private:
  constexpr void take(std::uint32_t id, std::uint64_t size) {
    if (count_ >= ids_.size())
      memscale::detail::fail(error_code::unsupported, "op.frame_locals", "at most 8 frame locals at once; got",
                             count_ + 1);
    ids_[count_++] = id;
    held_ += size;
  }

  std::array<std::uint32_t, 8> ids_{};  // the locals' blocks, in the order made
  std::size_t count_ = 0;
  std::uint64_t held_ = 0;
};

}  // namespace memscale::allocator
