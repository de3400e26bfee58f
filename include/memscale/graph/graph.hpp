// memscale/graph/graph.hpp: a network as a constexpr sequence of ops.
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
#include <new>
#include <type_traits>

#include "memscale/bytes.hpp"

namespace memscale {

// elementwise is first: a value-initialised op is all zero bytes (see release_point).
enum class op_kind : std::uint8_t {
  elementwise, // adds, multiplies, casts, copies
  stream,      // the residual stream entering a section (produced by the previous section)
  embedding,
  linear,
  norm,
  activation,
  attention,   // the attention core: scores, softmax, context
  dropout,
  loss,
};

// A parameter tensor: `count` tensors of rows x cols elements (count > 1 for experts). All
// zero by default (no tensor), so that a value-initialised op is zero bytes (see release_point):
// give every dimension, or use vector() and matrix().
struct param_tensor {
  std::uint64_t rows = 0;
  std::uint64_t cols = 0;
  std::uint64_t count = 0;

  static constexpr param_tensor vector(std::uint64_t n) { return {n, 1, 1}; }
  static constexpr param_tensor matrix(std::uint64_t rows, std::uint64_t cols) { return {rows, cols, 1}; }

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

// The earliest op (in forward order) whose backward still needs an op's output, or none.
// Stored as index + 1 so that "none" is zero: an op with every field zero is a valid empty op,
// which is how op_slots::start begins each one (docs/performance.md).
struct release_point {
  std::uint32_t index_plus_one = 0;

  static constexpr release_point at(std::size_t index) { return {static_cast<std::uint32_t>(index + 1)}; }
  [[nodiscard]] constexpr std::size_t index() const { return index_plus_one - 1; }
  // Whether this is earlier than `other`, "none" being later than every op.
  [[nodiscard]] constexpr bool before(release_point other) const {
    return index_plus_one != 0 && (other.index_plus_one == 0 || index_plus_one < other.index_plus_one);
  }
  friend constexpr bool operator==(release_point, release_point) = default;
};

inline constexpr release_point not_kept{};

// How an op's forward temporaries come and go under no_grad, where the generate() allocator walk
// (allocator/generate_events.hpp) needs more than their bytes: which tensors, of what size, in
// what order. `pieces`: fwd_temp as separate tensors of out's size when it is a whole number of
// them, else one block. The others name the code whose allocations the walk replays; the training
// walk (allocator/step_events.hpp) replays rotary_half too, whose products training graphs leave
// out of fwd_temp.
enum class forward_temporaries : std::uint8_t {
  pieces,
  rms_norm_upcast,  // RMSNorm upcast to fp32 (LlamaRMSNorm, gpt-fast's) on a 16-bit input: fp32 copy, x^2, product, cast
  rms_norm_fp32,    // the same on an fp32 input: x^2, product
  rotary_stacked,   // gpt-fast apply_rotary_emb: fp32 copy, four products, two sums, stack, cast
  rotary_half,      // Hugging Face apply_rotary_pos_emb: x * cos, -x2, cat, rotate_half(x) * sin, sum
  mask_before_output,  // SDPA's additive copy of a bool mask (fwd_temp) made before the kernel's output
};

// Members are ordered to pack into 120 bytes (a graph holds graph_capacity of them; kv_cached and
// last_reader fill the padding before `weight`); designated initialisers follow this order.
struct op {
  op_kind kind = op_kind::elementwise;  // zero (op_kind's first)
  bool recomputed_by_selective = false;  // attention-core tensors selective checkpointing drops
  bool transient = false;          // output not kept is freed once the next op used it (a reassigned variable)
  bool kv_cached = false;          // `out` is a key or value tensor a KV cache holds (generate(): not freed;
                                   // training with use_cache: alive until the loss, estimate/activations.hpp)
  release_point last_reader{};     // no_grad forward: the last op that reads `out` (none: the next op only)
  param_tensor weight{};           // rows == 0: the op owns no weight
  param_tensor bias{};             // rows == 0: no bias
  param_role role = param_role::none;
  bool frozen = false;             // no gradient, no optimizer state (LoRA base)
  bool borrows_weight = false;     // uses a weight owned by another op (tied LM head): gradient, no storage
  bool weight_grad_exists = false; // its weight's gradient was already created by a borrower (tied embedding)
  release_point released_by{};     // smallest op index whose backward still needs `out` (not_kept: none)
  bytes out{};                     // the output tensor
  bytes extra_saved{};             // other tensors its backward needs: statistics, masks, log-sum-exp
  bytes fwd_temp{};                // temporaries inside its forward, beyond `out`
  bytes bwd_temp{};                // temporaries inside its backward, beyond the gradients
  bytes grad_in{};                 // gradient it produces for its input
  bytes grad_out{};                // gradient it receives for its output when smaller than `out` (one loss chunk's); zero: `out`
  forward_temporaries temporaries = forward_temporaries::pieces;
  std::uint8_t bwd_temp_pieces = 0;  // > 1: bwd_temp is that many equal tensors made one after the other
                                     // and alive together (a broadcast product's two input gradients)
  bool unquantized_base = false;     // a frozen matmul a QLoRA load leaves in 16 bits (torchtune's output projection)
  // The part of fwd_temp that is the running Python frame's locals (ops.hpp hold_in_frame), in
  // 512-byte units rounded down: the allocator's granule (CUDACachingAllocator.cpp @ 001074d2: kMinBlockSize).
  std::uint32_t frame_locals_blocks = 0;
};
static_assert(sizeof(op) <= 120, "op grew: a graph is graph_capacity ops");

// The part of an op's fwd_temp that is the running frame's locals (op::frame_locals_blocks), in bytes.
constexpr std::uint64_t frame_locals_bytes(const op& o) { return std::uint64_t{o.frame_locals_blocks} * 512; }

// A gradient that waits in an autograd node's input buffer while the backward of other ops runs:
// the engine runs the ready node made last first (torch/csrc/autograd/engine.cpp @ v2.6.0,
// ReadyQueue's CompareNodeTaskTime: sequence_nr), so a gradient handed to a node made earlier
// waits until the later ones ran and the node's other inputs arrived. It is a tensor of its own,
// not a temporary of any op: made as the backward of op `made_by` ends (a second input gradient,
// which a broadcast product reduces after its first full-size one is gone: engine.cpp
// validate_outputs), freed after the backward of op `used_by`, the last to run before the node
// takes it (used_by < made_by, in one section).
struct waiting_gradient {
  std::uint32_t made_by = 0;
  std::uint32_t used_by = 0;
  bytes size{};
};

// Waiting gradients a graph may hold (a block's count once, whatever its repeats): a Jamba period
// of seven Mamba layers and one attention layer has 15.
inline constexpr std::size_t waiting_gradient_capacity = 64;

// A graph's waiting gradients, stored as op_slots stores ops: only the first waiting_count are
// ever written at run time (zeroing the 1 KB array was 3% of an estimate, twice: a model_graph
// holds two stacks); in constant evaluation an unused slot holds an empty marker.
class waiting_slots {
 public:
  constexpr waiting_slots() {}  // NOLINT: user-provided, so a value-initialised graph does not zero the slots
  constexpr void set(std::size_t i, const waiting_gradient& w) {
    if (std::is_constant_evaluated())
      slots_[i] = slot{w};
    else
      ::new (static_cast<void*>(&slots_[i].value)) waiting_gradient(w);
  }
  constexpr const waiting_gradient& operator[](std::size_t i) const { return slots_[i].value; }

 private:
  union slot {
    unsigned char none;
    waiting_gradient value;
    constexpr slot() {  // NOLINT: deliberately no member initialiser (op_slots' slot says why)
      if (__builtin_is_constant_evaluated()) none = 0;
    }
    constexpr explicit slot(const waiting_gradient& w) : value(w) {}
  };
  std::array<slot, waiting_gradient_capacity> slots_;
};

// A block may hold a period of layers that differ by position (graph/layers/layer_pattern.hpp):
// Llama 4 Scout's four layers under LoRA on every Linear are 391 ops.
inline constexpr std::size_t graph_capacity = 512;

// A graph's op storage. Only the first `size` slots ever hold an op; the others stay unwritten
// at run time (value-initialising 160 ops was 7% of an estimate). In constant evaluation an
// unused slot holds an empty marker instead, so a graph kept as a constant
// (`constexpr model_graph g = build(...)`) is complete without writing graph_capacity zero ops. Reading
// a slot before `start` is a compile error in constant evaluation, and no walk reads past `size`.
class op_slots {
 public:
  constexpr op_slots() {}  // NOLINT: user-provided, so a value-initialised graph does not zero the slots
  // Makes slot `i` hold an op of `kind` with every other member zero, and returns it.
  constexpr op& start(std::size_t i, op_kind kind) {
    // Makes `value` the union's active member with every member at its default (all of op's
    // members have one, zero). At run time by default-initialisation, which g++ writes as a few
    // vector stores: value-initialising (`op{}`) becomes `rep stos`, whose start-up cost made
    // each append slower. In constant evaluation the whole slot is assigned (clang 14 rejects
    // assigning an inactive member; std::construct_at would cost every includer <memory>).
    if (std::is_constant_evaluated())
      slots_[i] = slot{op{}};
    else
      ::new (static_cast<void*>(&slots_[i].value)) op;
    slots_[i].value.kind = kind;
    return slots_[i].value;
  }
  constexpr op& operator[](std::size_t i) { return slots_[i].value; }
  constexpr const op& operator[](std::size_t i) const { return slots_[i].value; }

 private:
  union slot {
    unsigned char none;
    op value;
    // At run time leaves the slot unwritten; in constant evaluation makes the empty marker
    // active (a constant may not hold a union with no active member).
    // The builtin std::is_constant_evaluated() wraps: a graph has graph_capacity slots, and the
    // wrapper's call would cost each of them two more constant-evaluation steps (clang's limit).
    constexpr slot() {  // NOLINT: deliberately no member initialiser
      if (__builtin_is_constant_evaluated()) none = 0;
    }
    constexpr explicit slot(const op& o) : value(o) {}
  };
  std::array<slot, graph_capacity> slots_;
};

struct graph {
  op_slots ops;
  std::size_t size = 0;
  std::size_t block_begin = 0;  // [block_begin, block_end) repeats block_repeats times
  std::size_t block_end = 0;
  std::uint64_t block_repeats = 0;
  bytes inputs{};               // the input batch (token ids, labels)
  bytes buffers{};              // registered buffers (causal masks, rotary caches)
  bytes stream_grad{};          // gradient of the residual stream, alive through a block's backward
  bytes carried{};              // what the training loop still references from the previous step: live through the forward
  // litgpt 0.4's validate() (graph/layers/litgpt_validation.hpp): its loss code's peak under
  // no_grad, and what the loop still binds from the step before it; zero when the loop does not validate.
  bytes validation{};
  bytes validation_after_step{};
  bytes held{};                 // the base model's masks and biases: live through the blocks' forward (and, when
                                // checkpointed blocks keep them as inputs, until the bottom block's backward)
  bytes kept_input_embeddings{};  // enable_input_require_grads' leaf and its .grad: from the bottom block's
                                  // backward to the end of backward (graph/layers/input_require_grads.hpp)
  waiting_slots waiting;  // the first waiting_count are written
  std::size_t waiting_count = 0;
  bytes tower_forward{};        // a frozen vision tower's forward on the step's images at its largest moment, with
                                // the text embeddings beside it (graph/layers/vision_tower.hpp); before the blocks
  std::size_t tower_after = 0;  // the ops that run before the tower: what they save is alive beside its forward
  // The framework stores each expert matrix of a layer as one 3-D parameter over the experts
  // (and a gated MLP's gate and up projections as one), not one tensor per expert: its
  // gradient and optimizer state are one tensor each too (allocator/step_events.hpp).
  bool stacked_experts = false;
  // The experts are bare nn.Parameters (stacked ones, Llama 4's in every release), which no
  // nn.Linear-replacing quantiser converts (graph/layers/mlp.hpp expert_parameters).
  bool parameter_experts = false;
  // A pre-quantised checkpoint's quantizer swaps the experts for per-expert nn.Linear MLPs before
  // loading (Llama 4's: graph/layers/mlp.hpp experts_swapped_for_prequantized).
  bool experts_swapped_for_prequantized = false;
  // The prologue ends with the stack's first layer, written apart from the repeated block
  // (recipes/decoder_stack.hpp first_layer_apart): one block's parameters, and under FSDP2 a unit
  // of its own, not the root's. block_repeats then counts the layers after it.
  bool first_layer_apart = false;
};

}  // namespace memscale

namespace memscale {

// How many times op `index` runs per step: block ops repeat, the others run once.
constexpr std::uint64_t repeats_of(const graph& g, std::size_t index) {
  return (index >= g.block_begin && index < g.block_end) ? g.block_repeats : 1;
}

// An op's weight and bias elements, every copy (counted once per op by walks that need both).
struct op_elements {
  std::uint64_t weight = 0;
  std::uint64_t bias = 0;
};

constexpr op_elements elements_of(const op& o) { return {o.weight.elements(), o.bias.elements()}; }

// Parameter elements an op stores (a borrowed, tied weight is stored by its owner).
constexpr std::uint64_t stored_elements(const op& o, const op_elements& n) {
  return detail::checked_add(o.borrows_weight ? 0 : n.weight, n.bias);
}
constexpr std::uint64_t stored_elements(const op& o) { return stored_elements(o, elements_of(o)); }

}  // namespace memscale
