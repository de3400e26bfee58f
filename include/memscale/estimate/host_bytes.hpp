// memscale/estimate/host_bytes.hpp: the host memory an offloading run holds (one rank's): its
// offloaded optimizer state, gradients and parameters, and its offloaded activations, with the
// pinned ones as PyTorch's caching host allocator holds them.
#pragma once

#include <cstdint>

#include "memscale/estimate/activations.hpp"
#include "memscale/estimate/gradients.hpp"
#include "memscale/estimate/parameters.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/training.hpp"

namespace memscale {

// A pinned host tensor's block: PyTorch's caching host allocator rounds every request up to the
// next power of two (CachingHostAllocatorImpl::allocate, aten/src/ATen/core/CachingHostAllocator.h
// @ v2.6.0: `c10::llvm::PowerOf2Ceil(size)`) and keeps freed blocks for reuse by later requests
// of that size, never handing them back during training.
constexpr bytes pinned_block(bytes b) {
  if (b.value == 0) return b;
  std::uint64_t block = 1;
  while (block < b.value) block = detail::checked_mul(block, 2);
  return bytes{block};
}
static_assert(pinned_block(bytes{3 * 1024 * 1024}).value == 4 * 1024 * 1024);
static_assert(pinned_block(bytes{1024}).value == 1024);

// FSDP2's host shards under CPUOffloadPolicy (pin_memory=True by default, the policy torchtune's
// shard_model and torchtitan's apply_fsdp pass): each parameter's padded dim-0 shard is pinned
// (FSDPParam._init_sharded_param: `padded_sharded_param.pin_memory()`, chunks[0]'s size, so
// ceil(rows / N) rows), and each gradient shard is copied to pinned memory (foreach_reduce:
// `.to(cpu, non_blocking=fsdp_param.pin_memory)`, which allocates the copy pinned), one block
// per tensor (torch/distributed/fsdp/_fully_shard/_fsdp_param.py, _fsdp_collectives.py @ v2.6.0).
struct pinned_shards {
  bytes parameters{};
  bytes gradients{};
  bytes largest_unit_gradients{};  // the largest FSDP unit's: a layer's or the root's
};

namespace detail {

// One op's parameter (or gradient) shards as pinned blocks, one per tensor.
constexpr bytes pinned_op_shards(const op& o, const training_spec& run, std::uint64_t n, bool gradients) {
  const precision_policy p = precision_policy_of(run);
  const dtype d = o.frozen ? p.param : p.trainable;
  const auto shard = [&](const param_tensor& t) {
    const std::uint64_t elements = checked_mul(ceil_div(t.rows, n), t.cols);
    const bytes b = !gradients && quantized_base(o, run) ? quantized_base_bytes(elements, run, d) : storage(d, elements);
    return pinned_block(b) * t.count;
  };
  if (gradients && o.frozen) return {};
  bytes total{};
  const bool weight = gradients ? !o.weight_grad_exists : !o.borrows_weight;
  if (weight && o.weight.rows != 0) total += shard(o.weight);
  if (o.bias.rows != 0) total += shard(o.bias);
  return total;
}

constexpr bytes pinned_section_shards(const graph& g, section s, const training_spec& run, std::uint64_t n,
                                      bool gradients) {
  bytes total{};
  for (std::size_t i = s.begin; i < s.end; ++i) total += pinned_op_shards(g.ops[i], run, n, gradients);
  return total;
}

}  // namespace detail

constexpr pinned_shards pinned_fsdp2_shards(const graph& g, const training_spec& run) {
  const std::uint64_t n = detail::checked_mul(run.data_parallel, run.context_parallel);
  const auto of = [&](section s, bool gradients) { return detail::pinned_section_shards(g, s, run, n, gradients); };
  const bytes block_grads = of(block_of(g), true);
  const bytes outer_grads = of(prologue_of(g), true) + of(epilogue_of(g), true);
  // The prologue's first layer, when written apart, is a block unit, not the root's.
  const bytes root_grads = g.first_layer_apart ? outer_grads - block_grads : outer_grads;
  return {.parameters = of(prologue_of(g), false) + of(epilogue_of(g), false) + of(block_of(g), false) * g.block_repeats,
          .gradients = outer_grads + block_grads * g.block_repeats,
          .largest_unit_gradients = block_grads > root_grads ? block_grads : root_grads};
}

// torchtune's OffloadActivations copies each saved tensor into its own pinned host tensor
// (pack_tensor: `torch.empty_like(activation, pin_memory=self.use_pin_memory, device="cpu")`,
// use_pin_memory=True by default, training/_activation_offloading.py lines 66-88, 171-172 @ v0.6.1);
// with full checkpointing that is each block's input. Other offloads hold them unpinned.
constexpr bytes offloaded_block_inputs_on_host(const graph& g, const training_spec& run) {
  const bytes one = section_saved_bytes(g, block_of(g), run, true);
  return (run.framework == framework_kind::torchtune ? pinned_block(one) : one) * g.block_repeats;
}

// One micro-batch's checkpointed block inputs, every layer: what offloading the checkpointed
// activations moves to the host.
// Whether the run offloads its checkpointed block inputs to the host (then they are host bytes).
constexpr bool offloads_block_inputs(const training_spec& run) {
  return run.offload_activations && run.ckpt == checkpointing::full;
}

constexpr bytes checkpointed_block_inputs(const graph& g, const training_spec& run) {
  return section_saved_bytes(g, block_of(g), run, true) * g.block_repeats;
}

// ZeRO-Offload's host partition per rank: the optimizer state, fp32 master weights and an fp32
// gradient copy (16 bytes per parameter with Adam, the figure DeepSpeed's ZeRO-3 estimator uses,
// stage3.py estimate_zero3_model_states_mem_needs); a state that already holds the master (an
// engine's fp32_master) adds only the gradient copy.
constexpr bytes host_optimizer_partition(bytes state, std::uint64_t trainable, std::uint64_t n,
                                         bool master_in_state = false) {
  return ceil_div(state + storage(dtype::fp32, detail::checked_mul(trainable, master_in_state ? 1 : 2)), n);
}

// What a run's estimate holds, whole (before any sharding), that an offload may move.
struct offloadable_bytes {
  bytes parameters{};
  bytes optimizer_state{};
  std::uint64_t trainable = 0;   // trainable elements
  bytes checkpointed_inputs{};  // offloaded_block_inputs_on_host (when the run offloads them)
  pinned_shards fsdp2_shards{};  // one rank's pinned_fsdp2_shards (when FSDP2 offloads to the host)
};

// Host bytes one rank holds at the end of backward (gradients there, before the step):
// - torchtune's fsdp_cpu_offload (CPUOffloadPolicy, training/_distributed.py shard_model @ v0.6.1):
//   the rank's pinned parameter and gradient shards and the AdamW state built on them (pageable:
//   torch.optim's zeros_like asks for no pinning); under optimizer_in_bwd each host gradient is
//   dropped by the hook's zero_grad right after its step (training/memory.py
//   register_optim_in_bwd_hooks @ v0.6.1), its pinned block kept by the allocator for the next
//   gradient of its size once the copy into it is done: one unit's gradients, copied back to back
//   without waiting, are the blocks it keeps;
// - ZeRO-Offload and the modes' optimizer offload: host_optimizer_partition, over the ranks that
//   partition the state; streamed parameters: every parameter (the rank's shard under full sharding);
// - offloaded activations (with full checkpointing): every block's checkpointed input (pinned
//   under torchtune's OffloadActivations).
constexpr bytes host_resident_bytes(const offloadable_bytes& b, const training_spec& run) {
  bytes host{};
  if (runs_fsdp2(run)) {
    if (run.offload_parameters) {
      const std::uint64_t n = detail::checked_mul(run.data_parallel, run.context_parallel);
      const pinned_shards& pinned = b.fsdp2_shards;
      host += pinned.parameters + (run.optimizer_in_backward ? pinned.largest_unit_gradients : pinned.gradients) +
              ceil_div(b.optimizer_state, n);
    }
  } else {
    const std::uint64_t dp = run.data_parallel;
    if (run.offload_optimizer)
      host += host_optimizer_partition(b.optimizer_state, b.trainable, run.shard != sharding::none ? dp : 1,
                                       run.fp32_master);
    if (run.offload_parameters) host += run.shard == sharding::full ? ceil_div(b.parameters, dp) : b.parameters;
  }
  if (offloads_block_inputs(run)) host += b.checkpointed_inputs;
  return host;
}

}  // namespace memscale
