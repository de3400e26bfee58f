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
// The plan itself is the transformer planner's (memscale/detail/plan_steps.hpp): the same
// verdicts from the same kind of error band, the same choice of mode, the same micro-batch
// search and fallback to a smaller micro-batch dividing the effective batch.
#pragma once

#include <string_view>

#include "memscale/detail/plan_steps.hpp"
#include "memscale/error_band.hpp"
#include "memscale/gpus.hpp"
#include "memscale/plan_result.hpp"
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

// The measured class of a vision run: the torchvision cases (CPU traces and H100 steps) cover
// full training without offloading or sharding, which the vision estimator does not model.
constexpr run_class class_of(const vision_spec&, const training_spec& run) {
  const bool modelled = run.target == training_target::full && run.shard == sharding::none &&
                        !run.offload_optimizer && !run.offload_parameters && !run.offload_activations;
  return modelled ? run_class::torchvision : run_class::unmeasured;
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

// A torchvision network as memscale::detail::plan_with plans it.
struct vision_planning {
  const vision_spec& model;

  static constexpr bool streams_parameters = false;  // the vision estimator models no offloading
  static constexpr bool has_sequence = false;
  static constexpr std::string_view why_order_inverts =
      "autocast keeps a 16-bit copy of every weight it casts, which can outweigh the activations it halves";
  static constexpr std::string_view nothing_fits_reason =
      "not even micro-batch 1 fits in any mode: use a smaller model or image, or shard over more GPUs";
  static constexpr std::string_view reason_for(mode m) { return detail::reason_for(m); }

  constexpr void validate() const { vision::validate(model); }
  static constexpr training_spec mode_run(const training_spec& request, mode m, const gpu_spec& gpu) {
    return apply_vision_mode(request, m, gpu);
  }
  constexpr const error_band& band_for(const training_spec& run) const { return band_of(class_of(model, run)); }
  constexpr mode_plan plan_run(const training_spec& request, const training_spec& run, const gpu_spec&, mode m,
                               bytes budget) const {
    return memscale::detail::mode_plan_of(m, request, run, estimate(model, run), band_for(run), budget);
  }
  constexpr bytes peak_upper_end(const training_spec& run) const {
    return range_of(overall_peak(estimate(model, run)).device, band_for(run)).high;
  }
};

static_assert(memscale::detail::planning_kind<vision_planning>);

}  // namespace detail

constexpr mode_plan plan_mode(const vision_spec& model, const training_spec& request, const gpu_spec& gpu, mode m,
                              bytes budget) {
  return detail::vision_planning{model}.plan_run(request, apply_vision_mode(request, m, gpu), gpu, m, budget);
}

// The plan of a vision run: the same plan_result, filled by the same steps, as
// memscale::make_plan gives a transformer (a shorter sequence and parameter streaming are
// not fallbacks here).
constexpr plan_result make_plan(const vision_spec& model, const training_spec& run, const gpu_spec& gpu,
                                const plan_options& options = {}) {
  return memscale::detail::plan_with(detail::vision_planning{model}, run, gpu, options);
}

// make_plan(...).fits from the modes' peaks at the request alone (as memscale::fits).
constexpr bool fits(const vision_spec& model, const training_spec& run, const gpu_spec& gpu,
                    const plan_options& options = {}) {
  return memscale::detail::fit_with(detail::vision_planning{model}, run, gpu, options).fits;
}

}  // namespace memscale::vision
