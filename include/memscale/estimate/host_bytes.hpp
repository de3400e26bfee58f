// memscale/estimate/host_bytes.hpp: the host memory an offloading run holds (one rank's): its
// offloaded optimizer state, gradients and parameters, and its offloaded activations.
#pragma once

#include <cstdint>

#include "memscale/estimate/activations.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/training.hpp"

namespace memscale {

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
  bytes gradients{};
  bytes optimizer_state{};
  std::uint64_t trainable = 0;   // trainable elements
  bytes checkpointed_inputs{};  // checkpointed_block_inputs
};

// Host bytes one rank holds at the end of backward (gradients there, before the step):
// - torchtune's fsdp_cpu_offload (CPUOffloadPolicy, training/_distributed.py shard_model @ v0.6.1):
//   the rank's 1/N shards, their gradients and the AdamW state built on them; under optimizer_in_bwd
//   each host gradient is dropped by the hook's zero_grad right after its step (training/memory.py
//   register_optim_in_bwd_hooks @ v0.6.1), so none is held;
// - ZeRO-Offload and the modes' optimizer offload: host_optimizer_partition, over the ranks that
//   partition the state; streamed parameters: every parameter (the rank's shard under full sharding);
// - offloaded activations (with full checkpointing): every block's checkpointed input.
constexpr bytes host_resident_bytes(const offloadable_bytes& b, const training_spec& run) {
  bytes host{};
  if (runs_fsdp2(run)) {
    if (run.offload_parameters) {
      const std::uint64_t n = detail::checked_mul(run.data_parallel, run.context_parallel);
      const bytes grads = run.optimizer_in_backward ? bytes{} : b.gradients;
      host += ceil_div(b.parameters + grads + b.optimizer_state, n);
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
