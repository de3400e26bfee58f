// memscale/estimate/stage0_optimizers.hpp: the device buffers of DeepSpeed's optimizer wrappers
// without ZeRO (training_spec::stage0), microsoft/DeepSpeed v0.16.5 @ 38327e07.
#pragma once

#include <cstdint>

#include "memscale/bytes.hpp"
#include "memscale/estimate/optimizer.hpp"
#include "memscale/training.hpp"

namespace memscale::detail {

// BF16_Optimizer pads its flat bf16 group to nccl_start_alignment_factor (2) x DP ranks
// (bf16_optimizer.py _setup_for_real_optimizer: _flatten_dense_tensors_aligned).
constexpr std::uint64_t stage0_flat_elements(std::uint64_t trainable, const training_spec& run) {
  return round_up(trainable, checked_mul(2, run.data_parallel));
}

// BF16_Optimizer's whole-model fp32 gradient accumulation buffer, never partitioned
// (bf16_optimizer.py: fp32_groups_gradients_flat = torch.zeros_like(bf16_groups_flat, fp32);
// engine.py get_data_types: grad_accum_dtype fp32 for bf16 without ZeRO).
constexpr bytes stage0_gradient_buffer(std::uint64_t trainable, const training_spec& run) {
  if (run.stage0 != stage0_optimizer::bf16_optimizer) return {};
  return storage(dtype::fp32, stage0_flat_elements(trainable, run));
}

// The 16-bit gradients still held when the next forward runs: BF16_Optimizer frees them only at
// the start of its backward (bf16_optimizer.py backward -> clear_lp_grads, set_to_none), and the
// engine leaves them after the step (engine.py _take_model_step: bf16 without ZeRO: `pass`).
constexpr bytes stage0_carried_gradients(bytes all_grads, const training_spec& run) {
  return run.stage0 == stage0_optimizer::bf16_optimizer ? all_grads : bytes{};
}

// Temporaries of the moments after backward, beside the parameters, the optimizer state, the
// 16-bit gradients and (bf16) the fp32 buffer: the largest of
// BF16_Optimizer:
// - update_hp_grads: hp_grad.add_(lp.grad.to(fp32)), one fp32 copy of a gradient at a time;
// - engine.allreduce_gradients -> buffered_allreduce_fallback on get_grads_for_reduction (the fp32
//   buffer): allreduce_bucket converts it whole to communication_data_type, bf16 by default
//   (engine.py communication_data_type), when there is more than one rank;
// - step: the wrapped optimizer on the fp32 partition, one flat tensor, whose grad is a view of
//   the buffer (bf16_optimizer.py step); clipping scales in place.
// FP16_Optimizer (needs a fused Adam: engine.py _configure_fp16_optimizer, else FP16_UnfusedOptimizer):
// - step: every fp16 gradient converted to fp32 (p.grad.to(fp32)) and flattened into one fp32
//   tensor, all alive at once beside the fp16 gradients (fused_optimizer.py step), which are
//   freed before optimizer.step() on the flat master;
// - overflow check: x.float() of one gradient at a time (runtime/utils.py CheckOverflow._has_inf_or_nan);
// - the engine's all-reduce: _flatten_dense_tensors of buckets of 500M elements closed once past
//   the cap (engine.py allreduce_no_retain, MEMORY_OPT_ALLREDUCE_SIZE).
constexpr bytes stage0_step_temporaries(std::uint64_t largest, std::uint64_t trainable, const training_spec& run) {
  const dtype lp = precision_policy_of(run).trainable;
  if (run.stage0 == stage0_optimizer::bf16_optimizer) {
    const std::uint64_t flat = stage0_flat_elements(trainable, run);
    const std::uint64_t part = flat / run.data_parallel;
    const bytes accumulate = storage(dtype::fp32, largest);
    const bytes reduce = run.data_parallel > 1 ? storage(lp, flat) : bytes{};
    return max(max(accumulate, reduce), step_temporaries_of(part, part, run));
  }
  if (run.stage0 == stage0_optimizer::fp16_optimizer) {
    constexpr std::uint64_t allreduce_bucket = 500'000'000;  // engine.py MEMORY_OPT_ALLREDUCE_SIZE
    const bytes fp32_flat = storage(dtype::fp32, trainable);
    const bytes flatten = fp32_flat * std::uint64_t{2};
    const bytes overflow = storage(dtype::fp32, largest);
    const bytes reduce = run.data_parallel > 1
                             ? storage(lp, min(trainable, checked_add(allreduce_bucket, largest)))
                             : bytes{};
    // After flattening the fp16 gradients are gone: the flat fp32 gradient and the step's own.
    const bytes step = fp32_flat + step_temporaries_of(trainable, trainable, run);
    const bytes grads = storage(lp, trainable);
    return max(max(flatten, max(overflow, reduce)), step > grads ? step - grads : bytes{});
  }
  return {};
}

}  // namespace memscale::detail
