// memscale/graph/graph_builder.hpp: appends ops to a graph and records who keeps what.
#pragma once

#include <cstddef>

#include "memscale/error.hpp"
#include "memscale/graph/graph.hpp"

namespace memscale {

// Writes into a graph the caller owns, so a finished graph (18 KB) is never copied out.
class graph_builder {
 public:
  // `target` must be empty: ops are appended from slot 0.
  constexpr explicit graph_builder(graph& target) : g_(&target) {
    if (target.size != 0) detail::fail(error_code::unsupported, "graph", "a builder needs an empty graph; size",
                                       target.size);
  }

  // Appends an op and returns its index.
  constexpr std::size_t push(const op& o) {
    if (g_->size >= graph_capacity) detail::fail(error_code::unsupported, "graph", "has more ops than graph_capacity",
                                                g_->size);
    // Member by member: the builders have just written `o` with narrow stores, and a block copy
    // reads it back in 16-byte words, which stalls store forwarding (half of a graph build's time,
    // docs/performance.md). The bindings stop compiling when op gains or loses a member.
    const auto& [kind, selective, transient, kv_cached, last_reader, weight, bias, role, frozen, borrows, grad_exists,
                 released, out, extra, fwd, bwd, grad_in, grad_out, temporaries, bwd_pieces, unquantized, frame_blocks] = o;
    auto& [to_kind, to_selective, to_transient, to_kv_cached, to_last_reader, to_weight, to_bias, to_role, to_frozen,
           to_borrows, to_grad_exists, to_released, to_out, to_extra, to_fwd, to_bwd, to_grad_in, to_grad_out,
           to_temporaries, to_bwd_pieces, to_unquantized, to_frame_blocks] =
        g_->ops.start(g_->size, kind);
    to_kind = kind;
    to_selective = selective;
    to_transient = transient;
    to_kv_cached = kv_cached;
    to_last_reader = last_reader;
    to_weight = weight;
    to_bias = bias;
    to_role = role;
    to_frozen = frozen;
    to_borrows = borrows;
    to_grad_exists = grad_exists;
    to_released = released;
    to_out = out;
    to_extra = extra;
    to_fwd = fwd;
    to_bwd = bwd;
    to_grad_in = grad_in;
    to_grad_out = grad_out;
    to_temporaries = temporaries;
    to_bwd_pieces = bwd_pieces;
    to_unquantized = unquantized;
    to_frame_blocks = frame_blocks;
    return g_->size++;
  }

  // Appends an op of `kind` with every other field zero, written in place (no temporary op).
  constexpr std::size_t append(op_kind kind) {
    if (g_->size >= graph_capacity) detail::fail(error_code::unsupported, "graph", "has more ops than graph_capacity",
                                                g_->size);
    g_->ops.start(g_->size, kind);
    return g_->size++;
  }

  // Records that the backward of op `user` needs the output of op `producer`. The
  // tensor is freed after the backward of the earliest such op (backward runs in reverse).
  constexpr void keep(std::size_t producer, std::size_t user) {
    auto& released = g_->ops[producer].released_by;
    const auto u = release_point::at(user);
    if (u.before(released)) released = u;
  }

  // Records that op `user` reads the output of op `producer` in the forward: without grad
  // the output is freed after its last reader (graph/forward_liveness.hpp).
  // The latest reader wins (none is index_plus_one 0).
  constexpr void reads(std::size_t producer, std::size_t user) {
    auto& last = g_->ops[producer].last_reader.index_plus_one;
    const auto reader = release_point::at(user).index_plus_one;
    last = last < reader ? reader : last;
  }

  // Op `index` saves its own output (softmax, ReLU, tanh).
  constexpr void keep_own_output(std::size_t index) { keep(index, index); }

  // Records a gradient made as the backward of op `made_by` ends that waits until the backward of
  // op `used_by` ran (graph.hpp waiting_gradient). Both ops are in the section being written.
  constexpr void wait(std::size_t made_by, std::size_t used_by, bytes size) {
    if (used_by >= made_by)
      detail::fail(error_code::unsupported, "waiting gradient", "must be used by an op made before the one that makes it;"
                   " used_by", used_by);
    if (g_->waiting_count >= waiting_gradient_capacity)
      detail::fail(error_code::unsupported, "graph", "has more waiting gradients than waiting_gradient_capacity",
                   g_->waiting_count);
    // The section being written begins at the block's end once it closed, else at its start.
    const std::size_t section_begin = g_->block_end != 0 ? g_->block_end : g_->block_begin;
    if (used_by < section_begin && made_by >= section_begin)
      detail::fail(error_code::unsupported, "waiting gradient", "must be made and used in one section; used_by", used_by);
    g_->waiting.set(g_->waiting_count++, {.made_by = static_cast<std::uint32_t>(made_by),
                                          .used_by = static_cast<std::uint32_t>(used_by),
                                          .size = size});
  }

  [[nodiscard]] constexpr std::size_t last() const { return g_->size - 1; }
  [[nodiscard]] constexpr op& at(std::size_t index) { return g_->ops[index]; }

  constexpr void begin_block() { g_->block_begin = g_->size; }
  constexpr void end_block(std::uint64_t repeats) {
    g_->block_end = g_->size;
    g_->block_repeats = repeats;
  }

  constexpr void set_inputs(bytes b) { g_->inputs = b; }
  constexpr void add_buffers(bytes b) { g_->buffers += b; }
  constexpr void set_stream_grad(bytes b) { g_->stream_grad = b; }
  constexpr void set_carried(bytes b) { g_->carried = b; }
  constexpr void set_validation(bytes peak, bytes after_step) {
    g_->validation = peak;
    g_->validation_after_step = after_step;
  }
  constexpr void set_held(bytes b) { g_->held = b; }
  constexpr void set_kept_input_embeddings(bytes b) { g_->kept_input_embeddings = b; }
  // The frozen vision tower runs here, after the ops written so far (tower_bytes adds its own moment).
  constexpr void mark_tower() { g_->tower_after = g_->size; }
  constexpr void set_first_layer_apart(bool apart) { g_->first_layer_apart = apart; }

  [[nodiscard]] constexpr const graph& result() const { return *g_; }

 private:
  graph* g_;
};

}  // namespace memscale
