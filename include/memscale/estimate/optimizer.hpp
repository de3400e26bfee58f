// memscale/estimate/optimizer.hpp: optimizer state and the temporaries of one step.
#pragma once

#include <cstdint>

#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/precision_policy.hpp"
#include "memscale/training.hpp"

namespace memscale {

// bitsandbytes keeps 32-bit state for tensors smaller than this (optim/optimizer.py min_8bit_size).
inline constexpr std::uint64_t bnb_min_8bit_size = 4096;
// bitsandbytes blockwise 8-bit state: one fp32 absmax per block of values, 2048 before 0.44 and
// 256 from it (optim/optimizer.py Optimizer2State.init_state `blocks = n // 2048` @06029dd6,
// `n // 256` @51294d90; bitsandbytes PR #1365 "Change 8bit optimizer blocksize 2048->256").
constexpr std::uint64_t bnb_state_block_of(const training_spec& run) {
  return run.bitsandbytes_version < 4400 ? 2048 : 256;
}
// A paged optimizer's state1 and state2 of a tensor of at least this many elements come from
// F.get_paged (cudaMallocManaged), smaller ones from torch.zeros_like (optim/optimizer.py
// Optimizer8bit.get_state_buffer @51294d90). Unified memory is outside PyTorch's allocator and
// max_memory_allocated; the driver moves its pages to the host when the device is short.
inline constexpr std::uint64_t bnb_paged_min_elements = 100000;

constexpr bool state_is_paged(const training_spec& run, std::uint64_t n) {
  return run.paged_optimizer && n >= bnb_paged_min_elements;
}

// state1 and state2 of one tensor of n elements under a bitsandbytes optimizer: fp32 in a
// 32-bit one (get_state_buffer(p, dtype=torch.float32)), uint8 in an 8-bit one from
// min_8bit_size elements. Lion keeps state1 only.
constexpr bytes bnb_moment_bytes(std::uint64_t n, const training_spec& run) {
  const std::uint64_t moments = run.optimizer == optimizer_kind::lion ? 1 : 2;
  const bool eight_bit = run.optimizer == optimizer_kind::adamw_8bit && n >= bnb_min_8bit_size;
  return storage(eight_bit ? dtype::int8 : dtype::fp32, detail::checked_mul(n, moments));
}

// The part of one tensor's state that a paged optimizer keeps in unified memory.
constexpr bytes paged_state_bytes(std::uint64_t n, const training_spec& run) {
  return state_is_paged(run, n) ? bnb_moment_bytes(n, run) : bytes{};
}

// State bytes for one parameter tensor of rows x cols elements trained in `trainable`
// (precision_policy::trainable).
// `n`: rows x cols, when the caller has it.
constexpr bytes optimizer_own_state_bytes(std::uint64_t rows, std::uint64_t cols, std::uint64_t n,
                                          const training_spec& run, dtype trainable) {
  // Adam keeps its step counter as a 4-byte tensor; on CUDA it stays on the host unless
  // the fused/capturable path is used (torch/optim/adam.py _init_group).
  const bytes step_counter = (run.device == device_kind::cpu || run.optimizer_impl == optimizer_implementation::fused)
                                 ? storage(dtype::fp32, 1)
                                 : bytes{};
  // A paged optimizer is bitsandbytes' (its step count a Python int): the moments on the device
  // unless paged, and the 8-bit state's absmax blocks.
  if (run.paged_optimizer) {
    const bytes moments = state_is_paged(run, n) ? bytes{} : bnb_moment_bytes(n, run);
    if (run.optimizer != optimizer_kind::adamw_8bit || n < bnb_min_8bit_size) return moments;
    return moments + storage(dtype::fp32, detail::checked_mul(detail::ceil_div(n, bnb_state_block_of(run)), 2));
  }
  switch (run.optimizer) {
    case optimizer_kind::sgd: return {};
    // momentum_buffer = clone of the gradient (torch/optim/sgd.py).
    case optimizer_kind::sgd_momentum: return storage(trainable, n);
    // exp_avg and exp_avg_sq = zeros_like(param) (torch/optim/adam.py, adamw.py).
    case optimizer_kind::adam:
    case optimizer_kind::adamw: return storage(trainable, detail::checked_mul(n, 2)) + step_counter;
    // Lion keeps only exp_avg (Chen et al. 2023, arXiv 2302.06675, Algorithm 2).
    case optimizer_kind::lion: return storage(trainable, n);
    case optimizer_kind::adamw_8bit:
      if (n < bnb_min_8bit_size) return storage(dtype::fp32, detail::checked_mul(n, 2));
      return storage(dtype::int8, detail::checked_mul(n, 2)) +
             storage(dtype::fp32, detail::checked_mul(detail::ceil_div(n, bnb_state_block_of(run)), 2));
    // Adafactor (Shazeer & Stern 2018, arXiv 1804.04235; transformers optimization.py):
    // factored second moment (row + column vectors) for matrices, full for vectors, no
    // first moment with the default beta1=None.
    case optimizer_kind::adafactor:
      return cols > 1 ? storage(trainable, detail::checked_add(rows, cols)) : storage(trainable, n);
  }
  return {};
}

constexpr bytes tensor_state_bytes(std::uint64_t rows, std::uint64_t cols, std::uint64_t n, const training_spec& run,
                                   dtype trainable) {
  // DeepSpeed's fp16/bf16 engine steps an fp32 copy of the 16-bit parameters: the master
  // partition and the optimizer's state on it are fp32 (deepspeed/runtime/zero/stage_1_and_2.py
  // @38327e07 single_partition_of_fp32_groups = bit16 partition .clone().float()).
  if (run.fp32_master) return storage(dtype::fp32, n) + optimizer_own_state_bytes(rows, cols, n, run, dtype::fp32);
  return optimizer_own_state_bytes(rows, cols, n, run, trainable);
}

constexpr bytes tensor_state_bytes(std::uint64_t rows, std::uint64_t cols, const training_spec& run) {
  return tensor_state_bytes(rows, cols, detail::checked_mul(rows, cols), run, precision_policy_of(run).trainable);
}

// Calls fn(rows, cols) for every trainable parameter tensor, once per repeat. Any op
// sequence with `ops`, `size` and a repeats_of overload (graph, vision::layer_graph).
template <class Graph, class Fn>
constexpr void for_each_trainable_tensor(const Graph& g, Fn&& fn) {
  for (std::size_t i = 0; i < g.size; ++i) {
    const op& o = g.ops[i];
    if (o.frozen) continue;
    const auto copies = detail::checked_mul(repeats_of(g, i), o.weight.count);
    if (!o.borrows_weight && o.weight.rows != 0) fn(o.weight.rows, o.weight.cols, copies);
    if (o.bias.rows != 0) fn(o.bias.rows, std::uint64_t{1}, detail::checked_mul(repeats_of(g, i), o.bias.count));
  }
}

template <class Graph>
constexpr bytes optimizer_state_bytes(const Graph& g, const training_spec& run) {
  bytes total{};
  for_each_trainable_tensor(g, [&](std::uint64_t rows, std::uint64_t cols, std::uint64_t copies) {
    total += tensor_state_bytes(rows, cols, run) * copies;
  });
  return total;
}

template <class Graph>
constexpr bytes paged_optimizer_bytes(const Graph& g, const training_spec& run) {
  bytes total{};
  if (!run.paged_optimizer) return total;
  for_each_trainable_tensor(g, [&](std::uint64_t rows, std::uint64_t cols, std::uint64_t copies) {
    total += paged_state_bytes(detail::checked_mul(rows, cols), run) * copies;
  });
  return total;
}

// The for-loop Adam steps the group's tensors in order and binds each one's
// `denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)`, so the previous tensor's denom
// is still referenced while the next one's sqrt and quotient are made (torch/optim/adamw.py
// _single_tensor_adamw lines 251-318 @ v1.13.0; adam.py _single_tensor_adam @ dc80ccde): at most
// previous + 2 x current elements at once, over consecutive tensors of one group.
struct adam_loop_live {
  std::uint64_t previous = 0;  // elements of the denom still bound
  std::uint64_t peak = 0;      // the most elements alive at once so far
  constexpr void next(std::uint64_t n) {
    peak = detail::max(peak, detail::checked_add(previous, detail::checked_mul(n, 2)));
    previous = n;
  }
};

// Temporaries alive inside optimizer.step() beyond parameters, gradients and state, given
// the elements of the largest trainable tensor, of all of them, and the for-loop Adam's most
// elements alive at once (adam_loop_live over the group in its order).
constexpr bytes step_temporaries_of(std::uint64_t largest, std::uint64_t all, std::uint64_t adam_loop,
                                    const training_spec& run) {
  // bitsandbytes steps each tensor in one kernel (F.optimizer_update_32bit / _8bit_blockwise).
  if (run.offload_optimizer || run.paged_optimizer) return {};
  const auto p = precision_policy_of(run);
  // The fp32 master partition is what an engine with one (DeepSpeed fp16/bf16) steps.
  const dtype stepped = run.fp32_master ? dtype::fp32 : p.trainable;
  const bool adam_like = run.optimizer == optimizer_kind::adam || run.optimizer == optimizer_kind::adamw;
  switch (run.optimizer_impl) {
    case optimizer_implementation::fused: return {};
    case optimizer_implementation::for_loop:
      if (adam_like) return storage(stepped, adam_loop);
      // Adafactor's update (grad**2 + eps, then the factored update) and Lion's sign(update)
      // hold two temporaries of the tensor being stepped.
      if (run.optimizer == optimizer_kind::adafactor || run.optimizer == optimizer_kind::lion)
        return storage(stepped, detail::checked_mul(largest, 2));
      return {};
    case optimizer_implementation::foreach:
      // _multi_tensor_adam: torch < 2.1 builds exp_avg_sq_sqrt and denom as two lists the
      // size of the whole group; from 2.1 the eps add is in place, leaving one
      // (torch/optim/adam.py, pytorch PR #104898 era).
      if (adam_like) return storage(stepped, detail::checked_mul(all, run.torch_version < 201 ? 2 : 1));
      if (run.optimizer == optimizer_kind::lion || run.optimizer == optimizer_kind::adafactor)
        return storage(stepped, detail::checked_mul(largest, 2));
      return {};
  }
  return {};
}

// A group whose largest tensor is stepped with no tensor before it: one tensor (an optimizer per
// parameter, a flat partition) or the largest stepped first.
constexpr bytes step_temporaries_of(std::uint64_t largest, std::uint64_t all, const training_spec& run) {
  return step_temporaries_of(largest, all, detail::checked_mul(largest, 2), run);
}

// Calls fn(elements) for every trainable tensor of op i, in the order its module registers them
// (the weight's copies, then the bias's).
template <class Graph, class Fn>
constexpr void each_trainable_tensor_of(const Graph& g, std::size_t i, Fn&& fn) {
  const op& o = g.ops[i];
  if (o.frozen) return;
  if (!o.borrows_weight && o.weight.rows != 0)
    for (std::uint64_t c = 0; c < o.weight.count; ++c) fn(detail::checked_mul(o.weight.rows, o.weight.cols));
  for (std::uint64_t c = 0; o.bias.rows != 0 && c < o.bias.count; ++c) fn(o.bias.rows);
}

// Calls fn(i) for the ops of `g` in the order model.parameters() yields their tensors, the block
// `layers` times: the one group the loops modelled step (litgpt finetune/*.py
// instantiate_torch_optimizer(optimizer, model.parameters()) @ b0ea1772; torch.optim.AdamW over
// model.parameters() in the traced loops). Modules register in forward order except litgpt's GPT,
// which registers lm_head before transformer (wte, h, ln_f) (litgpt/model.py GPT.__init__ lines
// 25-26 @ b0ea1772, lit_gpt/model.py @ 8641822): its head comes first. The HF Trainer's second group
// (biases and norm weights) only takes small tensors from between the matrices; not modelled.
template <class Fn>
constexpr void for_each_op_in_parameter_order(const graph& g, const training_spec& run, std::uint64_t layers,
                                              Fn&& fn) {
  const bool head_first = run.framework == framework_kind::litgpt;
  const auto registered_first = [&](std::size_t i) {
    return head_first && i >= g.block_end && g.ops[i].kind == op_kind::linear;
  };
  for (std::size_t i = g.block_end; i < g.size; ++i)
    if (registered_first(i)) fn(i);
  for (std::size_t i = 0; i < g.block_begin; ++i) fn(i);
  for (std::uint64_t l = 0; l < layers; ++l)
    for (std::size_t i = g.block_begin; i < g.block_end; ++i) fn(i);
  for (std::size_t i = g.block_end; i < g.size; ++i)
    if (!registered_first(i)) fn(i);
}

// adam_loop_live over the parameter order. Two layers meet every pair of neighbours: within a
// layer and across two.
constexpr std::uint64_t adam_loop_elements(const graph& g, const training_spec& run) {
  adam_loop_live live{};
  for_each_op_in_parameter_order(g, run, detail::min(g.block_repeats, std::uint64_t{2}), [&](std::size_t i) {
    each_trainable_tensor_of(g, i, [&](std::uint64_t n) { live.next(n); });
  });
  return live.peak;
}

// A graph whose ops run once (vision::layer_graph): its ops in order.
template <class Graph>
constexpr std::uint64_t adam_loop_elements(const Graph& g, const training_spec&) {
  adam_loop_live live{};
  for (std::size_t i = 0; i < g.size; ++i) each_trainable_tensor_of(g, i, [&](std::uint64_t n) { live.next(n); });
  return live.peak;
}

template <class Graph>
constexpr bytes optimizer_step_temporaries(const Graph& g, const training_spec& run) {
  if (run.offload_optimizer) return {};
  std::uint64_t largest = 0;
  std::uint64_t all = 0;
  for_each_trainable_tensor(g, [&](std::uint64_t rows, std::uint64_t cols, std::uint64_t copies) {
    largest = detail::max(largest, detail::checked_mul(rows, cols));
    all = detail::checked_add(all, detail::checked_mul(rows, cols, copies));
  });
  return step_temporaries_of(largest, all, adam_loop_elements(g, run), run);
}

}  // namespace memscale
