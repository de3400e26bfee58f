// memscale/graph_builder.hpp: appends ops to a graph and records who keeps what.
#pragma once

#include <cstddef>

#include "memscale/error.hpp"
#include "memscale/graph.hpp"

namespace memscale {

class graph_builder {
 public:
  // Appends an op and returns its index.
  constexpr std::size_t push(const op& o) {
    if (g_.size >= graph_capacity) detail::fail(error_code::unsupported, "graph", "has more ops than graph_capacity",
                                                g_.size);
    g_.ops[g_.size] = o;
    return g_.size++;
  }

  // Records that the backward of op `user` needs the output of op `producer`. The
  // tensor is freed after the backward of the earliest such op (backward runs in reverse).
  constexpr void keep(std::size_t producer, std::size_t user) {
    auto& released = g_.ops[producer].released_by;
    const auto u = static_cast<std::int32_t>(user);
    if (released == not_kept || u < released) released = u;
  }

  // Op `index` saves its own output (softmax, ReLU, tanh).
  constexpr void keep_own_output(std::size_t index) { keep(index, index); }

  [[nodiscard]] constexpr std::size_t last() const { return g_.size - 1; }
  [[nodiscard]] constexpr op& at(std::size_t index) { return g_.ops[index]; }

  constexpr void begin_block() { g_.block_begin = g_.size; }
  constexpr void end_block(std::uint64_t repeats) {
    g_.block_end = g_.size;
    g_.block_repeats = repeats;
  }

  constexpr void set_inputs(bytes b) { g_.inputs = b; }
  constexpr void add_buffers(bytes b) { g_.buffers += b; }
  constexpr void set_stream_grad(bytes b) { g_.stream_grad = b; }
  constexpr void set_carried(bytes b) { g_.carried = b; }
  constexpr void set_held(bytes b) { g_.held = b; }

  [[nodiscard]] constexpr const graph& result() const { return g_; }

 private:
  graph g_{};
};

}  // namespace memscale
