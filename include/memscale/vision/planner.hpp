// memscale/vision/planner.hpp: which memory-saving mode makes a vision training run fit.
//
// The transformer planner's modes carry techniques that have no CNN counterpart (tiled
// attention, chunked loss, offloaded block inputs). For a vision network the same three
// modes switch on what applies, each estimated by the vision estimator:
//   CONSERVATIVE: checkpoint every stage (torch.utils.checkpoint per ResNet layer, per
//                 MobileNet/EfficientNet feature stack, per ViT encoder stack);
//   BALANCED:     + automatic mixed precision (bf16 where the GPU has it, else fp16);
//   AGGRESSIVE:   + an 8-bit AdamW (bitsandbytes) for the optimizer state.
// Unlike the transformer modes these are not always ordered: autocast's weight copies
// can outweigh the activations it halves (ViT at small batches).
// cuDNN's workspace is bounded by the free memory at each convolution (vision/estimate.hpp:
// cudnn_mandatory_workspace), so "fits" needs no extra term for it.
#pragma once

#include <array>
#include <cstdint>

#include "memscale/detail/largest_fitting.hpp"
#include "memscale/gpus.hpp"
#include "memscale/planner.hpp"
#include "memscale/vision/estimate.hpp"

namespace memscale::vision {

constexpr training_spec apply_vision_mode(training_spec run, mode m, const gpu_spec& gpu) {
  run.blas_workspace = gpu.cublas_workspace;
  if (m == mode::none) return run;
  run.ckpt = checkpointing::full;
  if (m == mode::conservative) return run;
  // Micikevicius et al. 2018 (arXiv 1710.03740): fp32 master weights, 16-bit activations.
  if (run.prec == precision::fp32) run.prec = gpu.bf16 ? precision::amp_bf16 : precision::amp_fp16;
  if (m == mode::balanced) return run;
  run.optimizer = optimizer_kind::adamw_8bit;  // Dettmers et al. 2022, arXiv 2110.02861
  return run;
}

constexpr mode_plan plan_mode(const vision_spec& model, const training_spec& request, const gpu_spec& gpu, mode m,
                              bytes budget) {
  mode_plan p{};
  p.m = m;
  p.run = apply_vision_mode(request, m, gpu);
  const estimate_result e = estimate(model, p.run);
  const peak_estimate& worst = e.first_step.device > e.steady.device ? e.first_step : e.steady;
  p.peak = worst.device;
  p.tensor_peak = worst.tensor;
  p.breakdown = worst.breakdown;
  p.at = worst.at;
  p.fits = p.peak <= budget;
  // Checkpointed stages run their forward again during backward: one extra forward.
  p.cost.recompute_fraction = p.run.ckpt == checkpointing::full ? 1.0 : 0.0;
  return p;
}

constexpr plan_result make_plan(const vision_spec& model, const training_spec& run, const gpu_spec& gpu,
                                const plan_options& options = {}) {
  validate(model);
  validate(run);
  if (gpu.memory.value == 0) memscale::detail::fail(error_code::invalid_gpu, "gpu.memory", "must be > 0", 0);
  plan_result r{};
  r.vram = gpu.memory;
  r.headroom = memscale::detail::validated_headroom(options);
  r.budget = budget_of(gpu, options);
  constexpr std::array all_modes{mode::none, mode::conservative, mode::balanced, mode::aggressive};
  for (std::size_t i = 0; i < all_modes.size(); ++i) r.modes[i] = plan_mode(model, run, gpu, all_modes[i], r.budget);
  r.unoptimized_peak = r.modes[0].peak;
  r.pressure = ratio(r.unoptimized_peak, r.vram);
  for (const auto& p : r.modes) {
    if (p.fits) {
      r.chosen = p.m;
      r.fits = true;
      break;
    }
  }
  // The largest batch that fits in any mode: for a ViT, mixed precision can cost more
  // than it saves (autocast keeps 16-bit copies of every weight), so no mode is always
  // the most frugal one.
  for (const mode m : all_modes) {
    const std::uint64_t largest =
        memscale::detail::largest_fitting(options.max_batch_search, [&](std::uint64_t b) {
          training_spec t = run;
          t.micro_batch = b;
          return plan_mode(model, t, gpu, m, r.budget).fits;
        });
    if (largest > r.max_micro_batch) r.max_micro_batch = largest;
  }
  r.grad_accumulation = run.grad_accum;
  if (r.fits) {
    r.reason = r.chosen == mode::none           ? "the run fits without memory-saving techniques"
               : r.chosen == mode::conservative ? "checkpointing the stages brings the peak under the budget"
               : r.chosen == mode::balanced     ? "stage checkpointing plus mixed precision fits"
                                                : "stage checkpointing, mixed precision and an 8-bit optimizer fit";
    return r;
  }
  if (r.max_micro_batch > 0) {
    r.max_micro_batch = memscale::detail::min(r.max_micro_batch, run.micro_batch);
    r.grad_accumulation =
        memscale::detail::ceil_div(memscale::detail::checked_mul(run.micro_batch, run.grad_accum), r.max_micro_batch);
    r.next_step = advice::smaller_micro_batch;
    r.reason = "no mode fits at this batch; AGGRESSIVE fits a smaller batch with more gradient accumulation";
    return r;
  }
  r.next_step = advice::smaller_model_or_more_gpus;
  r.reason = "even batch 1 does not fit: use a smaller model or image, or more GPUs";
  return r;
}

}  // namespace memscale::vision
