// memscale/allocator/step_events.hpp: the tensors of training steps, in the order they are
// created and freed, from the op graph (memscale/graph/graph.hpp).
//
// The walk is the one estimate/activations.hpp and estimate.hpp describe moment by moment,
// made literal:
// - setup: parameters op by op (weight copies, then bias copies), buffers, the inputs; a tied
//   head's own weight is created and dropped first (Hugging Face builds lm_head, then
//   PreTrainedModel.tie_weights replaces it); persistent gradients (accumulation, zero_grad in
//   place) exist from the start.
// - forward, section by section: an op's output, extra saved tensors and temporaries are
//   created, the temporaries die, the previous op's output dies unless a backward keeps it;
//   the epilogue keeps the outputs nobody saves until it ends (the loss code's locals), and a
//   previous step's carried tensors die at the first loss op. The base model's held tensors
//   live through the blocks; a KV cache built in training (use_cache) until the epilogue ends.
//   A rotation as apply_rotary_pos_emb writes it makes its products one by one (graph.hpp
//   forward_temporaries::rotary_half), as generate()'s walk does.
// - backward, sections in reverse: the gradient of an op's output, the gradient of its input,
//   its temporaries and the parameter gradients it creates (a Linear without bias: its weight's
//   gradient first, as autograd computes mm's); then the saved tensors it was the last to need.
//   The residual stream's gradient lives through each block's backward.
// - a checkpointed block keeps its input through forward; its backward reruns its forward
//   (saving) with that input and the stream gradient alive (torch/utils/checkpoint.py). The
//   input stays until the block's backward ends (the checkpoint's saved tensors).
// - optimizer step (allocator/optimizer_events.hpp); zero_grad(set_to_none=True) frees the
//   gradients.
// - experts: one tensor per expert matrix (parameter, gradient, state), or with
//   graph::stacked_experts one per layer and matrix, a gated MLP's gate and up one tensor.
// - the BLAS workspace is created at the first matmul, once per thread that runs matmuls: the
//   forward's and the autograd engine's device thread (CublasHandlePool.cpp: a workspace per
//   handle and stream, handles per thread); the backward's after that matmul's output.
// A tensor that continues under another name (a section's output that is the next section's
// input, the gradient of an op's input that is the gradient of the previous op's output) keeps
// its id: the allocator sees no free and alloc in between.
//
// Not walked (an error names them): sharded or offloaded runs and data parallelism.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "memscale/allocator/events.hpp"
#include "memscale/allocator/optimizer_events.hpp"
#include "memscale/estimate/activations.hpp"
#include "memscale/estimate/gradients.hpp"
#include "memscale/estimate/optimizer.hpp"
#include "memscale/estimate/parameters.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/precision_policy.hpp"
#include "memscale/training.hpp"

namespace memscale::allocator {

struct step_stream_options {
  std::uint64_t layers = 0;       // block repeats to walk; 0: the graph's block_repeats
  std::uint32_t steps = 2;        // 1: the first step only; 2: the first and a steady step
  // Threads that run matmuls, each with its own cuBLAS workspace: 2 for training (the forward
  // and autograd's device thread). Measured: allocated at the start of step 2 exceeds
  // parameters and state by 2 x 32 MiB on the H100 runs (docs/data/gpu_measured_h100.json
  // marks.start, mistral-small: 66.0 MiB). 1 reproduces estimate()'s single workspace.
  std::uint32_t blas_handles = 2;
  bool tie_weights_copy = true;   // a tied head's own weight exists until tie_weights (Hugging Face)
  // Under autocast a linear's weight gradient is made in 16 bits, then the fp32 one from it
  // (step_walker::gradients_of); estimate() counts the fp32 one only.
  bool cast_weight_grads = true;
};

namespace detail {

// ---- expert parameters --------------------------------------------------------------
enum class stack_role : std::uint8_t { none, alone, gate_up, in_gate_up };

// An expert matrix (a projection weight over several experts) that the framework stacks.
constexpr bool stacked_expert(const graph& g, const op& o) {
  return g.stacked_experts && o.role == param_role::matmul && o.weight.count > 1 && !o.borrows_weight;
}

// A gated expert MLP's gate and up projections are adjacent ops over the same input with the
// same shape (graph/layers/mlp.hpp dense_mlp); stacked, they are one parameter, gate_up_proj
// [E, 2F, H] (graph/layers/mlp.hpp stacked_expert_parameters). The first op of such a pair
// owns the whole tensor; the second none.
constexpr void find_stacked_experts(const graph& g, std::array<stack_role, graph_capacity>& roles) {
  for (std::size_t i = 0; i < g.size; ++i) roles[i] = stack_role::none;
  if (!g.stacked_experts) return;
  for (std::size_t i = 0; i < g.size; ++i) {
    const op& o = g.ops[i];
    if (!stacked_expert(g, o) || roles[i] != stack_role::none) continue;
    roles[i] = stack_role::alone;
    if (i + 1 >= g.size) continue;
    const op& next = g.ops[i + 1];
    const bool pair = stacked_expert(g, next) && next.weight.rows == o.weight.rows && next.weight.cols == o.weight.cols &&
                      next.weight.count == o.weight.count && next.frozen == o.frozen &&
                      next.bias.rows == o.bias.rows && next.bias.count == o.bias.count;
    if (!pair) continue;
    roles[i] = stack_role::gate_up;
    roles[i + 1] = stack_role::in_gate_up;
  }
}

// Op i's parameters as tensors: `weight_tensors` tensors sharing `weight` elements (all of
// them), the bias likewise; rows: the stacked tensor's rows per expert (for the optimizer).
struct stored_layout {
  std::uint64_t weight = 0;
  std::uint64_t weight_tensors = 0;
  std::uint64_t bias = 0;
  std::uint64_t bias_tensors = 0;
  std::uint64_t weight_rows = 0;
  std::uint64_t bias_rows = 0;
};

constexpr stored_layout layout_of(const graph& g, const std::array<stack_role, graph_capacity>& roles, std::size_t i) {
  const op& o = g.ops[i];
  const op_elements n = elements_of(o);
  switch (roles[i]) {
    case stack_role::none:
      return {.weight = n.weight, .weight_tensors = o.weight.count, .bias = n.bias, .bias_tensors = o.bias.count,
              .weight_rows = o.weight.rows, .bias_rows = o.bias.rows};
    case stack_role::alone:
      return {.weight = n.weight, .weight_tensors = 1, .bias = n.bias, .bias_tensors = 1,
              .weight_rows = o.weight.rows, .bias_rows = o.bias.rows};
    case stack_role::gate_up: {
      const op_elements up = elements_of(g.ops[i + 1]);
      return {.weight = n.weight + up.weight, .weight_tensors = 1, .bias = n.bias + up.bias, .bias_tensors = 1,
              .weight_rows = 2 * o.weight.rows, .bias_rows = 2 * o.bias.rows};
    }
    case stack_role::in_gate_up: return {};
  }
  return {};
}

// A tensor the walk holds: its id and size (no_tensor: none).
struct held_tensor {
  std::uint32_t id = no_tensor;
  std::uint64_t size = 0;
};

template <class Sink, std::size_t IdCapacity, std::size_t SavedCapacity>
class step_walker {
 public:
  constexpr step_walker(const graph& g, const training_spec& spec, const step_stream_options& o, Sink& sink)
      : g_(g), run_(spec), p_(precision_policy_of(spec)), o_(o), events_(sink),
        layers_(o.layers != 0 ? o.layers : g.block_repeats) {
    using memscale::detail::require;
    require(spec.shard == sharding::none && spec.data_parallel == 1, error_code::unsupported, "run.data_parallel",
            "the allocator's event stream covers one GPU without sharding", spec.data_parallel);
    require(!spec.offload_optimizer && !spec.offload_parameters && !spec.offload_activations, error_code::unsupported,
            "run.offload_*", "the allocator's event stream does not model offloading", 1);
    require(!spec.optimizer_in_backward, error_code::unsupported, "run.optimizer_in_backward",
            "the allocator's step stream walks an optimizer step after backward", 1);
    require(layers_ > 0 && g.block_end > g.block_begin, error_code::unsupported, "graph", "needs a repeated block",
            layers_);
    block_ops_ = g.block_end - g.block_begin;
    require(memscale::detail::checked_mul(layers_, block_ops_) + g.size <= SavedCapacity, error_code::unsupported,
            "event stream", "has more ops x layers than its table capacity",
            memscale::detail::checked_mul(layers_, block_ops_));
    persist_ = spec.grad_accum > 1 || !spec.zero_grad_to_none;
    find_stacked_experts(g, stack_role_);
    // Who frees what in backward: the ops each op is the last (in backward order) to need.
    for (std::size_t i = 0; i < g.size; ++i) release_head_[i] = no_op;
    for (std::size_t j = g.size; j-- > 0;) {
      const auto by = g.ops[j].released_by;
      if (by == not_kept) continue;
      release_next_[j] = release_head_[by.index()];
      release_head_[by.index()] = static_cast<std::uint16_t>(j);
    }
  }

  constexpr void walk() {
    setup();
    for (std::uint32_t s = 1; s <= o_.steps; ++s) training_step(s);
  }

 private:
  constexpr std::uint32_t alloc(std::uint64_t size) { return events_.alloc(size); }
  constexpr void free(std::uint32_t& id) { events_.free(id); }
  constexpr void enter(std::uint32_t step, moment m) { events_.enter(step, m); }

  // Saved tensors of op i in pass `layer` (prologue and epilogue: layer 0).
  constexpr std::size_t slot(std::size_t i, std::uint64_t layer) const {
    if (i < g_.block_begin) return i;
    if (i < g_.block_end) return g_.block_begin + static_cast<std::size_t>(layer) * block_ops_ + (i - g_.block_begin);
    return g_.block_begin + static_cast<std::size_t>(layers_) * block_ops_ + (i - g_.block_end);
  }

  // ---- setup ---------------------------------------------------------------------
  constexpr void setup() {
    enter(0, moment::setup);
    // Only the slots of this walk (slot() stays below ops + layers x block ops, checked against
    // SavedCapacity in the constructor) are ever read.
    const std::size_t slots = g_.size + static_cast<std::size_t>(layers_) * block_ops_;
    for (std::size_t i = 0; i < slots; ++i) saved_out_[i] = saved_extra_[i] = no_tensor;
    for_each_op([&](std::size_t i) { parameters_of(i); });
    if (tied_copy_ != 0) {
      std::uint32_t copy = alloc(tied_copy_);
      free(copy);
    }
    if (g_.buffers.value != 0) {
      const std::uint64_t per_layer = g_.buffers.value / g_.block_repeats;
      for (std::uint64_t l = 0; l < layers_; ++l) alloc(per_layer);
      alloc(g_.buffers.value - per_layer * g_.block_repeats);
    }
    if (persist_) for_each_op([&](std::size_t i) { gradients_of(i); });
    // input_ids and labels (graph::inputs: two int64 tensors of the tokens).
    inputs_[0] = alloc(g_.inputs.value / 2);
    inputs_[1] = alloc(g_.inputs.value - g_.inputs.value / 2);
  }

  // Calls fn(op index) for every op in forward order, block ops once per layer.
  template <class Fn>
  constexpr void for_each_op(Fn&& fn) {
    for (std::size_t i = 0; i < g_.block_begin; ++i) fn(i);
    for (std::uint64_t l = 0; l < layers_; ++l)
      for (std::size_t i = g_.block_begin; i < g_.block_end; ++i) fn(i);
    for (std::size_t i = g_.block_end; i < g_.size; ++i) fn(i);
  }



  constexpr void parameters_of(std::size_t i) {
    const op& o = g_.ops[i];
    const stored_layout n = layout_of(g_, stack_role_, i);
    const dtype d = o.frozen ? p_.param : p_.trainable;
    const std::uint64_t copies = n.weight_tensors;
    if (o.weight.rows != 0 && o.borrows_weight && o_.tie_weights_copy) tied_copy_ = storage(d, n.weight).value;
    if (o.weight.rows != 0 && !o.borrows_weight && n.weight != 0) {
      if (quantized_base(o, run_)) {
        // Packed codes, then the quantisation constants (bitsandbytes' QuantState, torchao's scalers).
        const std::uint64_t total = quantized_base_bytes(n.weight, run_, d).value;
        const std::uint64_t codes = storage(dtype::nf4, n.weight).value;
        split_evenly(codes, copies);
        split_evenly(total - codes, copies);
      } else {
        split_evenly(storage(d, n.weight).value, copies);
      }
    }
    if (o.bias.rows != 0 && n.bias != 0) split_evenly(storage(d, n.bias).value, n.bias_tensors);
  }

  // `total` bytes as `copies` tensors (expert copies), the remainder on the last.
  constexpr void split_evenly(std::uint64_t total, std::uint64_t copies) {
    if (copies <= 1) {
      alloc(total);
      return;
    }
    const std::uint64_t each = total / copies;
    for (std::uint64_t c = 0; c + 1 < copies; ++c) alloc(each);
    alloc(total - each * (copies - 1));
  }

  // Gradients op i creates (op_gradient_bytes): kept in grads_ until zero_grad. A stacked
  // gate_up's gradient comes with the gate's backward, the later of the pair.
  constexpr void gradients_of(std::size_t i) {
    const op& o = g_.ops[i];
    if (o.frozen || (o.weight.rows == 0 && o.bias.rows == 0)) return;
    const stored_layout n = layout_of(g_, stack_role_, i);
    if (!o.weight_grad_exists && o.weight.rows != 0 && n.weight != 0) {
      // Under autocast a matmul's weight is a 16-bit cast copy (autocast_mode.cpp cached_cast), so
      // its gradient comes out in 16 bits and the cast's backward (ToCopyBackward0) makes the fp32
      // one while it lives (falcon_h1 H100 history: the head's 64.03 MiB bf16 gradient, then its
      // 128.06 MiB fp32 one, then the bf16 one freed).
      const bool cast_weight =
          o_.cast_weight_grads && p_.autocast && o.kind == op_kind::linear && p_.matmul != p_.trainable;
      std::uint32_t cast_grad = cast_weight ? alloc(storage(p_.matmul, n.weight).value) : no_tensor;
      keep_grads(storage(p_.trainable, n.weight).value, n.weight_tensors);
      free(cast_grad);
    }
    if (o.bias.rows != 0 && n.bias != 0) keep_grads(storage(p_.trainable, n.bias).value, n.bias_tensors);
  }
  constexpr void keep_grads(std::uint64_t total, std::uint64_t copies) {
    const std::uint64_t n = copies <= 1 ? 1 : copies;
    const std::uint64_t each = total / n;
    for (std::uint64_t c = 0; c < n; ++c) push_grad(alloc(c + 1 < n ? each : total - each * (n - 1)));
  }
  constexpr void push_grad(std::uint32_t id) {
    if (id == no_tensor) return;
    if (grad_count_ >= IdCapacity)
      memscale::detail::fail(error_code::unsupported, "event stream", "has more gradients than its capacity", grad_count_);
    grads_[grad_count_++] = id;
  }

  // ---- one training step -------------------------------------------------------------
  constexpr void training_step(std::uint32_t s) {
    step_ = s;
    // The previous step's logits (step 1: a stand-in of their size, as before any step).
    if (g_.carried.value != 0 && carried_ == no_tensor) carried_ = alloc(g_.carried.value);
    const bool ckpt = run_.ckpt == checkpointing::full;
    enter(s, moment::prologue_forward);
    held_tensor carry{};
    forward_section(prologue_of(g_), 0, false, true, carry);
    std::uint32_t held = no_tensor;
    for (std::uint64_t l = 0; l < layers_; ++l) {
      enter(s, block_moment(l, true));
      if (l == 0) held = alloc(g_.held.value);
      forward_section(block_of(g_), l, false, !ckpt, carry);
      if (ckpt) {
        // The checkpoint keeps its input (the stream op's output) until the block's backward.
        checkpoint_input_[static_cast<std::size_t>(l)] = pending_input_;
        pending_input_ = no_tensor;
      }
    }
    if (!ckpt) free(held);
    enter(s, moment::epilogue_forward);
    forward_section(epilogue_of(g_), 0, true, true, carry);
    free(carry.id);
    free_cache();

    enter(s, moment::epilogue_backward);
    backward_section(epilogue_of(g_), 0, 0);
    for (std::uint64_t l = layers_; l-- > 0;) {
      enter(s, block_moment(l, false));
      if (ckpt) {
        std::uint32_t stream_grad = alloc(g_.stream_grad.value);
        held_tensor input{checkpoint_input_[static_cast<std::size_t>(l)], g_.ops[g_.block_begin].out.value};
        recompute_ = true;
        forward_section(block_of(g_), l, false, true, input);
        recompute_ = false;
        // The rerun's output: the non-reentrant checkpoint keeps none of it; the reentrant one holds
        // it through the block's backward (torch/utils/checkpoint.py CheckpointFunction.backward).
        const bool reentrant = reentrant_checkpoint(run_);
        if (!reentrant) free(input.id);
        backward_section(block_of(g_), l, 0);
        if (reentrant) free(input.id);
        free(pending_input_);  // the checkpoint's input, when no op of the block kept it
        free(stream_grad);
      } else {
        backward_section(block_of(g_), l, g_.stream_grad.value);
      }
    }
    if (ckpt) free(held);
    enter(s, moment::prologue_backward);
    // enable_input_require_grads' leaf and its .grad, until the graph is dropped after backward.
    std::uint32_t hooked = alloc(g_.kept_input_embeddings.value);
    backward_section(prologue_of(g_), 0, 0);
    free(hooked);

    // litgpt's loop keeps this step's logits bound through optimizer.step() until the next step's
    // forward rebinds them (estimate/single_graph.hpp, the optimizer-step candidate).
    if (g_.carried.value != 0) {
      free(carried_);
      carried_ = alloc(g_.carried.value);
    }
    enter(s, moment::optimizer_step);
    optimizer_step(s == 1);
    if (!persist_) {
      for (std::size_t i = 0; i < grad_count_; ++i) free(grads_[i]);
      grad_count_ = 0;
    }
  }

  [[nodiscard]] constexpr moment block_moment(std::uint64_t l, bool forward) const {
    if (l == 0) return forward ? moment::first_block_forward : moment::first_block_backward;
    if (l + 1 == layers_) return forward ? moment::last_block_forward : moment::last_block_backward;
    return forward ? moment::middle_block_forward : moment::middle_block_backward;
  }

  // The first matmul of a thread creates its BLAS workspace (torch >= 2.0: through the caching
  // allocator, pytorch PR #86167; before, cuBLAS allocated it itself), inside that matmul's
  // cuBLAS call, so after the matmul's output (CublasHandlePool.cpp @ 26a39059:
  // getCurrentCUDABlasHandle -> setWorkspaceForHandle -> getNewWorkspace). It lives to the end.
  // Forward: made before the first linear op, standing for the rotary embedding's small matmul
  // (inv_freq @ positions), which Llama-style models run before any projection and the graph
  // does not carry (H100 histories, docs/data/gpu_allocator_history: 32 MiB right after a
  // 128 KiB fp32 output, before the first block's 14 MiB projections). Backward: made right
  // after the first backward matmul's output, which behind a tied LM head is its weight
  // gradient; there it lands in a freed fp32-logits segment and keeps it split for good.
  constexpr void blas_workspace_for(const op& o, std::uint32_t handle) {
    if (o.kind != op_kind::linear || run_.device != device_kind::cuda || run_.torch_version < 200) return;
    if (handle >= o_.blas_handles || workspace_[handle] != no_tensor) return;
    workspace_[handle] = alloc(run_.blas_workspace.value);
  }

  // One forward pass through section s. `held_mode`: the epilogue's locals live to its end.
  // `carry`: the previous section's output, which the first op (the section's input) continues.
  constexpr void forward_section(section s, std::uint64_t layer, bool held_mode, bool saving, held_tensor& carry) {
    std::uint32_t previous = no_tensor;   // the previous op's output while the next op runs
    std::size_t previous_op = 0;
    std::uint32_t transient = no_tensor;  // held mode: a reassigned variable's old value
    std::size_t loose_count = 0;
    const bool ckpt_block = run_.ckpt == checkpointing::full && s.begin == g_.block_begin;
    for (std::size_t i = s.begin; i < s.end; ++i) {
      const op& o = g_.ops[i];
      blas_workspace_for(o, 0);
      if (carried_ != no_tensor && o.kind == op_kind::loss) free(carried_);
      const std::uint64_t frame_bytes = frame_locals_bytes(o);
      frame_.follow(frame_bytes, events_);
      std::uint32_t out = no_tensor;
      std::array<std::uint32_t, 2> after_output{no_tensor, no_tensor};
      if (i == s.begin && carry.id != no_tensor && o.kind == op_kind::stream && carry.size == o.out.value) {
        out = carry.id;
        carry.id = no_tensor;
      } else {
        if (i == s.begin) free(carry.id);
        if (o.temporaries == forward_temporaries::rotary_half) rotary_half_products(o, after_output);
        out = alloc(o.out.value);
      }
      std::uint32_t extra = alloc(o.extra_saved.value);
      std::uint32_t temp = alloc(o.fwd_temp.value - frame_bytes);
      free(temp);
      for (std::uint32_t& t : after_output) free(t);
      if (held_mode)
        free(transient);
      else
        free_after_readers(previous, previous_op, i);
      free_bound_until(i);
      const bool dropped = dropped_by_selective(o, run_);
      const bool kept = o.released_by != not_kept;
      const std::size_t k = slot(i, layer);
      // A checkpointed block's input: kept by the checkpoint through forward (and its backward).
      const bool checkpoint_input = ckpt_block && i == s.begin;
      if (saving && !dropped) {
        saved_extra_[k] = extra;
        if (kept) {
          saved_out_[k] = out;
          if (checkpoint_input && recompute_) pending_input_ = no_tensor;
        } else if (kept_until_loss(o)) {
          saved_out_[k] = out;  // a training forward's KV cache: free_cache() after the loss
        } else if (checkpoint_input) {
          pending_input_ = out;
          previous = no_tensor;
        } else if (held_mode) {
          if (o.transient) transient = out;
          else loose_[loose_count++] = out;
        } else {
          previous = out;
          previous_op = i;
        }
      } else {
        free(extra);
        if (checkpoint_input) {
          pending_input_ = out;
        } else if (!saving) {
          previous = out;
          previous_op = i;
        } else if (kept) {
          free(out);
        } else if (held_mode) {
          if (o.transient) transient = out;
          else loose_[loose_count++] = out;
        } else {
          previous = out;
          previous_op = i;
        }
      }
    }
    frame_.follow(0, events_);
    free_bound_until(s.end);
    free(transient);
    for (std::size_t j = 0; j < loose_count; ++j) free(loose_[j]);
    // The last output continues as the next section's input.
    carry = {previous, previous == no_tensor ? 0 : last_output_size(s)};
  }

  // An output a later op still reads (op::last_reader, recorded in training only where Python
  // binds it: graph/layers/ops.hpp bound_until) waits for that op; any other dies now.
  constexpr void free_after_readers(std::uint32_t& id, std::size_t op_index, std::size_t now) {
    const release_point reader = g_.ops[op_index].last_reader;
    if (id == no_tensor || reader == not_kept || reader.index() <= now) {
      free(id);
      return;
    }
    if (bound_count_ >= bound_capacity)
      memscale::detail::fail(error_code::unsupported, "op.last_reader", "at most 4 outputs waiting at once; got",
                             bound_count_ + 1);
    bound_[bound_count_++] = {id, reader.index()};
    id = no_tensor;
  }
  // Frees the waiting outputs whose last reader is op `now` or earlier, in the order they waited.
  constexpr void free_bound_until(std::size_t now) {
    std::size_t kept = 0;
    for (std::size_t j = 0; j < bound_count_; ++j) {
      if (bound_[j].reader <= now)
        free(bound_[j].id);
      else
        bound_[kept++] = bound_[j];
    }
    bound_count_ = kept;
  }

  // apply_rotary_pos_emb (modeling_llama.py@v5.17.0, copied into modeling_qwen2_moe.py): x * cos;
  // rotate_half's -x2 (half the size) and its cat, the negation freed after the cat;
  // rotate_half(x) * sin, the cat freed after it; then the sum (the output), after which both
  // products die (`after_output`); autograd keeps none of them (cos and sin are saved).
  constexpr void rotary_half_products(const op& o, std::array<std::uint32_t, 2>& after_output) {
    after_output[0] = alloc(o.out.value);
    std::uint32_t negated = alloc(o.out.value / 2);
    std::uint32_t rotated = alloc(o.out.value);
    free(negated);
    after_output[1] = alloc(o.out.value);
    free(rotated);
  }

  [[nodiscard]] constexpr std::uint64_t last_output_size(section s) const { return g_.ops[s.end - 1].out.value; }

  // A training forward's KV cache (use_cache; estimate/activations.hpp kept_until_loss) dies when
  // the model's outputs do, after the loss and before backward: layer by layer, as it was built.
  constexpr void free_cache() {
    const auto free_section = [&](section s, std::uint64_t layer) {
      for (std::size_t i = s.begin; i < s.end; ++i)
        if (kept_until_loss(g_.ops[i])) free(saved_out_[slot(i, layer)]);
    };
    free_section(prologue_of(g_), 0);
    for (std::uint64_t l = 0; l < layers_; ++l) free_section(block_of(g_), l);
    free_section(epilogue_of(g_), 0);
  }

  // One backward pass through section s; `carried_grad`: the residual stream's gradient alive
  // through it.
  constexpr void backward_section(section s, std::uint64_t layer, std::uint64_t carried_grad) {
    const std::size_t n = s.end - s.begin;
    // Selective checkpointing recomputes the dropped ops' extra tensors for this backward
    // (estimate/activations.hpp counts them alive from its start).
    for (std::size_t i = s.begin; i < s.end; ++i)
      if (dropped_by_selective(g_.ops[i], run_)) saved_extra_[slot(i, layer)] = alloc(g_.ops[i].extra_saved.value);
    // Outputs a later section's backward needed were freed there: it ran first.
    for (std::size_t i = s.begin; i < s.end; ++i) {
      const auto by = g_.ops[i].released_by;
      if (by != not_kept && by.index() >= s.end) free(saved_out_[slot(i, layer)]);
    }
    std::uint32_t stream_grad = alloc(carried_grad);
    held_tensor incoming{};
    std::array<std::uint32_t, waiting_gradient_capacity> waiting{};
    for (std::uint32_t& id : waiting) id = no_tensor;
    for (std::size_t k = n; k-- > 0;) {
      const std::size_t i = s.begin + k;
      const op& o = g_.ops[i];
      const std::uint64_t g_out = o.grad_out.value != 0 ? o.grad_out.value : o.out.value;
      std::uint32_t grad_out = no_tensor;
      if (incoming.id != no_tensor && incoming.size == g_out) {
        grad_out = incoming.id;
      } else {
        free(incoming.id);
        grad_out = alloc(g_out);
      }
      incoming = {};
      // A linear's gradients come in the order autograd's generated backward computes them:
      // formulas sorted by argument name (tools/autograd/load_derivatives.py @ 05756d51,
      // set_up_derivatives: `for raw_names in sorted(defn.keys())`). mm(self=input, mat2=W^T),
      // a Linear without bias: the weight's gradient (mat2), then the input's (self); addmm
      // (bias=self, mat1=input, mat2=W^T): the input's, the weight's, the bias's. The H100
      // histories show both orders (qwen2 o_proj: 1.5 MiB weight gradient, then 14 MiB; k_proj:
      // 14 MiB, then 224 KiB and the 256 B bias).
      // Step 1's first backward matmul makes autograd's thread its workspace after its output.
      const bool weight_grad_first = o.kind == op_kind::linear && o.bias.rows == 0 && !o.frozen && !persist_;
      if (weight_grad_first) {
        gradients_of(i);
        if (step_ == 1) blas_workspace_for(o, 1);
      }
      const std::uint32_t grad_in = alloc(o.grad_in.value);
      if (step_ == 1) blas_workspace_for(o, 1);
      // Temporaries made one by one (graph.hpp bwd_temp_pieces: a broadcast product's two input
      // gradients at its shape, the selective scan's accumulators), freed last made first.
      std::array<std::uint32_t, max_bwd_pieces> temps{};
      const std::size_t pieces = o.bwd_temp_pieces > 1 ? std::size_t{o.bwd_temp_pieces} : std::size_t{1};
      if (pieces > max_bwd_pieces)
        memscale::detail::fail(error_code::unsupported, "op.bwd_temp_pieces", "at most 4 pieces; got", pieces);
      const std::uint64_t piece = o.bwd_temp.value / pieces;
      for (std::size_t p = 0; p < pieces; ++p)
        temps[p] = alloc(p + 1 < pieces ? piece : o.bwd_temp.value - piece * (pieces - 1));
      if (!persist_ && !weight_grad_first) gradients_of(i);
      for (std::size_t p = pieces; p-- > 0;) free(temps[p]);
      // A gradient this backward hands to a node that waits for later ones (graph.hpp
      // waiting_gradient): made as it ends, freed after the backward of the node that takes it.
      for (std::size_t w = 0; w < g_.waiting_count; ++w)
        if (g_.waiting[w].made_by == i) waiting[w] = alloc(g_.waiting[w].size.value);
      free(grad_out);
      for (std::uint16_t j = release_head_[i]; j != no_op; j = release_next_[j])
        if (j >= s.begin) free(saved_out_[slot(j, layer)]);
      free(saved_extra_[slot(i, layer)]);
      for (std::size_t w = 0; w < g_.waiting_count; ++w)
        if (g_.waiting[w].used_by == i) free(waiting[w]);
      incoming = {grad_in, o.grad_in.value};
    }
    free(incoming.id);
    free(stream_grad);
  }

  // ---- optimizer ------------------------------------------------------------------------
  constexpr void optimizer_step(bool first) {
    optimizer_step_events(
        run_, p_.trainable, first, [&](auto&& fn) { each_trainable_tensor(fn); },
        [&](auto&& fn) {
          for_each_op_in_parameter_order(g_, run_, layers_, [&](std::size_t i) { tensors_of(i, 1, fn); });
        },
        events_, temps_);
  }

  // Op i's trainable tensors, `repeats` times each: fn(rows, cols, stack), stack > 1 for stacked experts.
  template <class Fn>
  constexpr void tensors_of(std::size_t i, std::uint64_t repeats, Fn&& fn) const {
    const op& o = g_.ops[i];
    if (o.frozen) return;
    const stored_layout n = layout_of(g_, stack_role_, i);
    const bool stacked = stack_role_[i] != stack_role::none;
    const std::uint64_t weight_stack = stacked ? o.weight.count : 1;
    const std::uint64_t bias_stack = stacked ? o.bias.count : 1;
    if (!o.borrows_weight && o.weight.rows != 0 && n.weight != 0)
      for (std::uint64_t c = 0; c < repeats * n.weight_tensors; ++c) fn(n.weight_rows, o.weight.cols, weight_stack);
    if (o.bias.rows != 0 && n.bias != 0)
      for (std::uint64_t c = 0; c < repeats * n.bias_tensors; ++c) fn(n.bias_rows, std::uint64_t{1}, bias_stack);
  }

  // for_each_trainable_tensor (estimate/optimizer.hpp) with the walk's layer count, tensor by
  // tensor as the parameters are stored: fn(rows, cols, stack), stack > 1 for stacked experts.
  // Per-expert tensors go op by op (each op's copies in every layer). Stacked experts go in
  // model.parameters() order, layer by layer, as the optimizer's param group holds them
  // (torch/optim/adam.py@dc80ccde Adam._init_group walks group["params"], AdamW is Adam with
  // decoupled decay; the olmoe and qwen2moe histories make each layer's gate_up and down state
  // before the next layer's).
  template <class Fn>
  constexpr void each_trainable_tensor(Fn&& fn) const {
    if (g_.stacked_experts) {
      for (std::size_t i = 0; i < g_.block_begin; ++i) tensors_of(i, 1, fn);
      for (std::uint64_t l = 0; l < layers_; ++l)
        for (std::size_t i = g_.block_begin; i < g_.block_end; ++i) tensors_of(i, 1, fn);
      for (std::size_t i = g_.block_end; i < g_.size; ++i) tensors_of(i, 1, fn);
      return;
    }
    for (std::size_t i = 0; i < g_.size; ++i) tensors_of(i, (i >= g_.block_begin && i < g_.block_end) ? layers_ : 1, fn);
  }

  const graph& g_;
  const training_spec& run_;
  precision_policy p_;
  step_stream_options o_;
  tensor_events<Sink, IdCapacity> events_;
  std::uint64_t layers_;
  std::size_t block_ops_ = 0;
  bool persist_ = false;
  bool recompute_ = false;
  std::uint32_t step_ = 0;
  std::uint64_t tied_copy_ = 0;
  std::uint32_t saved_out_[SavedCapacity];  // written in setup()
  std::uint32_t saved_extra_[SavedCapacity];
  std::uint32_t grads_[IdCapacity];
  std::size_t grad_count_ = 0;
  std::array<std::uint32_t, IdCapacity> temps_;
  std::uint32_t loose_[graph_capacity];
  struct bound_output {
    std::uint32_t id = no_tensor;
    std::size_t reader = 0;
  };
  static constexpr std::size_t bound_capacity = 4;
  bound_output bound_[bound_capacity]{};  // outputs waiting for a later reader (free_after_readers)
  std::size_t bound_count_ = 0;
  frame_locals frame_{};
  std::uint32_t checkpoint_input_[SavedCapacity];
  std::uint32_t pending_input_ = no_tensor;
  std::uint32_t workspace_[4]{no_tensor, no_tensor, no_tensor, no_tensor};
  std::uint32_t inputs_[2]{no_tensor, no_tensor};
  static constexpr std::uint16_t no_op = 0xffff;
  static constexpr std::size_t max_bwd_pieces = 4;
  std::uint16_t release_head_[graph_capacity];  // first op whose output op i releases
  std::uint16_t release_next_[graph_capacity];  // the next one released by the same op
  std::uint32_t carried_ = no_tensor;
  std::array<stack_role, graph_capacity> stack_role_;  // written in the constructor
};

}  // namespace detail

// Emits the events of setup and `options.steps` training steps of `run` over graph `g` into
// `sink`. IdCapacity bounds the tensors alive at once; SavedCapacity the ops x layers walked.
template <std::size_t IdCapacity, std::size_t SavedCapacity, class Sink>
constexpr void emit_training_steps(const graph& g, const training_spec& run, const step_stream_options& options,
                                   Sink& sink) {
  detail::step_walker<Sink, IdCapacity, SavedCapacity> walker(g, run, options, sink);
  walker.walk();
}

}  // namespace memscale::allocator
