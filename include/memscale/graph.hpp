// memscale/graph.hpp: a network as a constexpr sequence of ops.
//
// Every op knows the parameters it owns and what autograd keeps for its backward, so
// the estimators only walk the sequence. The graph has three sections: a prologue
// (embeddings), one transformer block that repeats `block_repeats` times, and an
// epilogue (final norm, head, loss). Implementation differences (a GELU written as five
// ops versus one fused op) are different sequences, not special cases in the estimators.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "memscale/bytes.hpp"

namespace memscale {

enum class op_kind : std::uint8_t {
  stream,      // the residual stream entering a section (produced by the previous section)
  embedding,
  linear,
  norm,
  activation,
  attention,   // the attention core: scores, softmax, context
  dropout,
  elementwise, // adds, multiplies, casts, copies
  loss,
};

// A parameter tensor: `count` tensors of rows x cols elements (count > 1 for experts).
struct param_tensor {
  std::uint64_t rows = 0;
  std::uint64_t cols = 1;
  std::uint64_t count = 1;
  [[nodiscard]] constexpr std::uint64_t elements() const { return detail::checked_mul(rows, cols, count); }
  [[nodiscard]] constexpr std::uint64_t largest() const { return detail::checked_mul(rows, cols); }
};

enum class param_role : std::uint8_t {
  none,
  matmul,     // a projection weight: autocast casts it, QLoRA stores it in 4 bits
  embedding,  // a lookup table
  vector,     // norm scales and biases
  adapter,    // LoRA A/B matrices: always trainable, kept in the compute dtype
};

inline constexpr std::int32_t not_kept = -1;

struct op {
  op_kind kind = op_kind::elementwise;
  param_tensor weight{};           // rows == 0: the op owns no weight
  param_tensor bias{};             // rows == 0: no bias
  param_role role = param_role::none;
  bool frozen = false;             // no gradient, no optimizer state (LoRA base)
  bool borrows_weight = false;     // uses a weight owned by another op (tied LM head): gradient, no storage
  bool weight_grad_exists = false; // its weight's gradient was already created by a borrower (tied embedding)
  bytes out{};                     // the output tensor
  bytes extra_saved{};             // other tensors its backward needs: statistics, masks, log-sum-exp
  std::int32_t released_by = not_kept;  // smallest op index whose backward still needs `out`
  bytes fwd_temp{};                // temporaries inside its forward, beyond `out`
  bytes bwd_temp{};                // temporaries inside its backward, beyond the gradients
  bytes grad_in{};                 // gradient it produces for its input
  bytes grad_out{};                // gradient it receives for its output when smaller than `out` (one loss chunk's); zero: `out`
  bool recomputed_by_selective = false;  // attention-core tensors selective checkpointing drops
  bool transient = false;          // output not kept is freed once the next op used it (a reassigned variable)
};

inline constexpr std::size_t graph_capacity = 160;

struct graph {
  std::array<op, graph_capacity> ops{};
  std::size_t size = 0;
  std::size_t block_begin = 0;  // [block_begin, block_end) repeats block_repeats times
  std::size_t block_end = 0;
  std::uint64_t block_repeats = 0;
  bytes inputs{};               // the input batch (token ids, labels)
  bytes buffers{};              // registered buffers (causal masks, rotary caches)
  bytes stream_grad{};          // gradient of the residual stream, alive through a block's backward
  bytes carried{};              // what the training loop still references from the previous step: live through the forward
  bytes held{};                 // the base model's masks and biases: live through the blocks' forward (and, when
                                // checkpointed blocks keep them as inputs, until the bottom block's backward)
};

}  // namespace memscale

namespace memscale {

// How many times op `index` runs per step: block ops repeat, the others run once.
constexpr std::uint64_t repeats_of(const graph& g, std::size_t index) {
  return (index >= g.block_begin && index < g.block_end) ? g.block_repeats : 1;
}

// Parameter elements an op stores (a borrowed, tied weight is stored by its owner).
constexpr std::uint64_t stored_elements(const op& o) {
  return detail::checked_add(o.borrows_weight ? 0 : o.weight.elements(), o.bias.elements());
}

}  // namespace memscale
