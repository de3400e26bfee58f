// memscale/graph/forward_liveness.hpp: the live bytes of a forward pass run without grad
// (torch.no_grad, as generate() runs it): nothing is saved for a backward, so each output is
// freed after the last op that reads it (op::last_reader, recorded by the op writer).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "memscale/bytes.hpp"
#include "memscale/graph/graph.hpp"

namespace memscale {

// The op after which op `i`'s output is freed without grad: its last reader, or the next op
// (every op reads the output just before it).
constexpr std::size_t freed_after(const graph& g, std::size_t i) {
  const release_point last = g.ops[i].last_reader;
  return (last == not_kept || last.index() <= i) ? i + 1 : last.index();
}

struct no_grad_moment {
  bytes live{};       // the highest live bytes
  std::size_t at = 0; // the op running at that moment
};

// The highest live bytes while ops [begin, end) run without grad, counted from the section
// start: the running op's output, its forward temporaries and what its kernel writes beside
// the output (extra_saved: statistics, a log-sum-exp), and every earlier output of the section
// that the running op or a later one still reads. An output read after `end` (the section's
// output, the next section's input) stays to the end. Keys and values a KV cache takes
// (op::kv_cached) are counted with the cache, not here.
constexpr no_grad_moment no_grad_forward_peak(const graph& g, std::size_t begin, std::size_t end) {
  // Bytes freed after each op of the section. Only the section's entries are written before
  // they are read (left uninitialised otherwise: graph_capacity entries cost more than the walk).
  std::array<std::uint64_t, graph_capacity> freed_at;
  for (std::size_t k = begin; k < end; ++k) freed_at[k - begin] = 0;
  bytes live{};
  no_grad_moment peak{.live = {}, .at = begin};
  for (std::size_t i = begin; i < end; ++i) {
    const op& o = g.ops[i];
    const bytes out = o.kv_cached ? bytes{} : o.out;
    live += out;
    const bytes running = live + o.fwd_temp + o.extra_saved;
    if (peak.live < running) peak = {.live = running, .at = i};
    const std::size_t freed = freed_after(g, i);
    if (freed < end) freed_at[freed - begin] += out.value;
    live -= bytes{freed_at[i - begin]};
  }
  return peak;
}

// One repeated block (a decoder layer) run without grad, its input stream included.
constexpr no_grad_moment no_grad_block_peak(const graph& g) {
  return no_grad_forward_peak(g, g.block_begin, g.block_end);
}

// What follows the blocks (final norm, head) run without grad, its input stream included.
constexpr no_grad_moment no_grad_epilogue_peak(const graph& g) { return no_grad_forward_peak(g, g.block_end, g.size); }

// What the prologue leaves bound while the blocks run: its outputs read after the last block
// (the base model's frame locals: the embeddings' lookups, rotary tables, a mask). The stream
// it hands the first block is the block's own input, which the block walk counts.
constexpr bytes no_grad_held_through_blocks(const graph& g) {
  bytes held{};
  for (std::size_t i = 0; i < g.block_begin; ++i)
    if (freed_after(g, i) >= g.block_end && !g.ops[i].kv_cached) held += g.ops[i].out;
  return held;
}

// The outputs of ops [from, at] still bound while op `at` runs without grad.
constexpr bytes no_grad_live_at(const graph& g, std::size_t from, std::size_t at) {
  bytes live{};
  for (std::size_t i = from; i <= at; ++i)
    if (freed_after(g, i) >= at && !g.ops[i].kv_cached) live += g.ops[i].out;
  return live;
}

}  // namespace memscale
