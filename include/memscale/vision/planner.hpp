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
// Each mode is estimated on the GPU as a transformer's is: the allocator replay and the context
// (memscale/vision/device.hpp), with the replayed band where it is measured.
// The plan itself is the transformer planner's (memscale/detail/plan_steps.hpp): the same
// verdicts from the same kind of error band, the same choice of mode, the same micro-batch
// search and fallback to a smaller micro-batch dividing the effective batch.
#pragma once

#include <string_view>

#include "memscale/detail/plan_steps.hpp"
#include "memscale/error_band.hpp"
#include "memscale/gpus.hpp"
#include "memscale/plan_result.hpp"
#include "memscale/vision/device.hpp"
#include "memscale/vision/estimate.hpp"
#include "memscale/vision/run_class.hpp"

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

namespace detail {

constexpr std::string_view reason_for(mode m) {
  switch (m) {
    case mode::none: return "the run fits without memory-saving techniques";
    case mode::conservative: return "checkpointing the stages brings the peak under the budget";
    case mode::balanced: return "stage checkpointing is not enough; with mixed precision as well the run fits";
    case mode::aggressive: return "only stage checkpointing, mixed precision and an 8-bit optimizer together fit";
  }
  return "";
}

// A torchvision network as memscale::detail::plan_with plans it: each mode's step on the GPU by
// estimate_on_device (the allocator replay and the context), judged with its band.
struct vision_planning {
  const vision_spec& model;
  const gpu_spec& gpu;
  device_options device{};

  static constexpr bool streams_parameters = false;  // the vision estimator models no offloading
  static constexpr bool has_sequence = false;
  static constexpr std::string_view why_order_inverts =
      "autocast keeps a 16-bit copy of every weight it casts, which can outweigh the activations it halves";
  static constexpr std::string_view nothing_fits_reason =
      "not even micro-batch 1 fits in any mode: use a smaller model or image, or shard over more GPUs";
  static constexpr std::string_view reason_for(mode m) { return detail::reason_for(m); }

  constexpr void validate() const { vision::validate(model); }
  static constexpr training_spec mode_run(const training_spec& request, mode m, const gpu_spec& on) {
    return apply_vision_mode(request, m, on);
  }
  constexpr mode_plan plan_run(const training_spec& request, const training_spec& run, const gpu_spec& on, mode m,
                               bytes budget) const {
    const device_estimate d = estimate_on_device(model, run, &on, device);
    mode_plan p = memscale::detail::mode_plan_of(m, request, run, d.tensors, device_band_of(model, run, d), budget);
    memscale::detail::take_device_verdict(p, verdict_on_device(model, run, d, budget, device));
    return p;
  }
  // plan_run(...).range.high from the same estimate.
  constexpr bytes peak_upper_end(const training_spec& run) const {
    const device_estimate d = estimate_on_device(model, run, &gpu, device);
    return range_of(d.device, device_band_of(model, run, d)).high;
  }
};

static_assert(memscale::detail::planning_kind<vision_planning>);

}  // namespace detail

constexpr mode_plan plan_mode(const vision_spec& model, const training_spec& request, const gpu_spec& gpu, mode m,
                              bytes budget, const device_options& device = {}) {
  return detail::vision_planning{model, gpu, device}.plan_run(request, apply_vision_mode(request, m, gpu), gpu, m,
                                                              budget);
}

// The plan of a vision run: the same plan_result, filled by the same steps, as
// memscale::make_plan gives a transformer (a shorter sequence and parameter streaming are
// not fallbacks here).
constexpr plan_result make_plan(const vision_spec& model, const training_spec& run, const gpu_spec& gpu,
                                const plan_options& options = {}, const device_options& device = {}) {
  plan_result r = memscale::detail::plan_with(detail::vision_planning{model, gpu, device}, run, gpu, options);
  r.device = device;  // what its modes' device estimates used, as a transformer plan records it
  return r;
}

// make_plan(...).fits from the modes' peaks at the request alone (as memscale::fits).
constexpr bool fits(const vision_spec& model, const training_spec& run, const gpu_spec& gpu,
                    const plan_options& options = {}, const device_options& device = {}) {
  return memscale::detail::fit_with(detail::vision_planning{model, gpu, device}, run, gpu, options).fits;
}

}  // namespace memscale::vision
