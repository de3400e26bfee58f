// memscale/plan_result.hpp: what a plan says, whatever kind of model it plans: each mode's
// peak with its error band and verdict, the mode chosen, the micro-batch planned and the
// largest one that fits. The transformer planner (memscale/planner.hpp) and the vision
// planner (memscale/vision/planner.hpp) fill it through the same steps
// (memscale/detail/plan_steps.hpp), so every field means the same for both.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "memscale/bytes.hpp"
#include "memscale/device_options.hpp"
#include "memscale/error.hpp"
#include "memscale/error_band.hpp"
#include "memscale/estimate.hpp"
#include "memscale/gpus.hpp"
#include "memscale/lever_options.hpp"
#include "memscale/modes.hpp"
#include "memscale/training.hpp"

namespace memscale {

// MemScale's target utilisation is 0.85: keep 15% of VRAM free by default; 10-15% is
// accepted, anything else only as an explicit override.
inline constexpr double default_headroom = 0.15;
inline constexpr double min_headroom = 0.10;
inline constexpr double max_headroom = 0.15;

struct plan_options {
  double headroom = default_headroom;
  bool headroom_override = false;  // allow a headroom outside 10-15% on purpose
  std::uint64_t max_batch_search = 4096;  // upper bound of the micro-batch search
  device_options device{};  // PYTORCH_CUDA_ALLOC_CONF and a measured context, for every run the plan replays
};

// The run as it runs on this GPU: the GPU's BLAS workspace (the report for a GPU and the
// plan use the same run, so their peaks agree).
constexpr training_spec on_gpu(training_spec run, const gpu_spec& gpu) {
  run.blas_workspace = gpu.cublas_workspace;
  return run;
}

// The peak a run needs: the larger device total of step 1 and the steady state.
constexpr const peak_estimate& overall_peak(const estimate_result& e) {
  return e.first_step.device > e.steady.device ? e.first_step : e.steady;
}

struct mode_plan {
  mode m = mode::none;
  training_spec run{};             // the run with the mode's techniques switched on
  technique_set switched_on{};     // what the mode adds to the request (precision, optimizer, offloads, ...)
  bytes peak{};                    // device total (reserved + context), the larger of step 1 and steady state
  bytes tensor_peak{};             // max_memory_allocated at that moment
  memory_breakdown breakdown{};
  phase at = phase::backward;
  error_band band{};               // the accuracy report's band for this class of run
  peak_range range{};              // where the measured peak can lie, given the band
  verdict v = verdict::does_not_fit;
  bool fits = false;               // v == verdict::fits: the band's upper end is within the budget
  mode_cost cost{};
};

enum class advice : std::uint8_t {
  none,
  offload_parameters,  // AGGRESSIVE plus streaming parameters from the host fits
  switch_on_levers,    // checkpointing and the cheaper levers up to plan_result::levers.advised()
  smaller_micro_batch,
  shorter_sequence,
  smaller_model_or_more_gpus
};

constexpr std::string_view to_string(advice a) noexcept {
  switch (a) {
    case advice::none: return "none";
    case advice::offload_parameters: return "offload_parameters";
    case advice::switch_on_levers: return "switch_on_levers";
    case advice::smaller_micro_batch: return "smaller_micro_batch";
    case advice::shorter_sequence: return "shorter_sequence";
    case advice::smaller_model_or_more_gpus: return "smaller_model_or_more_gpus";
  }
  return "none";
}

// The planner's answer, one of seven distinct outcomes.
enum class plan_status : std::uint8_t {
  no_technique_needed,  // the run fits as described
  mode_needed,          // the run fits with `chosen`
  smaller_micro_batch,  // a smaller micro-batch (a divisor of the effective batch) fits with `chosen`
  cheaper_levers,       // no mode fits; checkpointing plus cheaper levers does, or likely does (no host traffic)
  parameter_offload,    // only AGGRESSIVE with parameters streamed from the host fits (micro-batch 1)
  shorter_sequence,     // nothing fits at this sequence length; max_seq_len does at micro-batch 1
  nothing_fits,         // not even a short sequence: a smaller model or more GPUs
};

constexpr std::string_view to_string(plan_status s) noexcept {
  switch (s) {
    case plan_status::no_technique_needed: return "no_technique_needed";
    case plan_status::mode_needed: return "mode_needed";
    case plan_status::smaller_micro_batch: return "smaller_micro_batch";
    case plan_status::cheaper_levers: return "cheaper_levers";
    case plan_status::parameter_offload: return "parameter_offload";
    case plan_status::shorter_sequence: return "shorter_sequence";
    case plan_status::nothing_fits: return "nothing_fits";
  }
  return "nothing_fits";
}

struct plan_result {
  bytes vram{};                  // what the device offers
  bytes budget{};                // vram * (1 - headroom)
  double headroom = default_headroom;
  device_options device{};       // the allocator settings and context its device estimates used
  bytes unoptimized_peak{};      // modes[none].peak: the device estimate of the request on this GPU
  double pressure = 0.0;         // unoptimized peak / vram
  std::array<mode_plan, 4> modes{};
  mode_plan parameter_offload{};       // AGGRESSIVE + parameters streamed from the host, when nothing else fits
  // When no mode fits even the smallest micro-batch (transformers): the levers weighed before
  // streaming parameters (count 0: not weighed) and, with status cheaper_levers, the plan of
  // the advised one's run (CONSERVATIVE's checkpointing plus the levers up to it).
  lever_list levers{};
  mode_plan lever_plan{};
  plan_status status = plan_status::nothing_fits;
  mode chosen = mode::none;            // the mode of the answer (has_chosen_mode())
  bool fits = false;                   // the request as given fits (status no_technique_needed or mode_needed)
  verdict v = verdict::does_not_fit;   // for the request as given, with the error band
  std::uint64_t effective_batch = 0;   // requested micro_batch * grad_accum
  std::uint64_t micro_batch = 0;       // planned micro-batch; micro_batch * grad_accumulation == effective_batch
  std::uint64_t grad_accumulation = 1;
  std::uint64_t max_micro_batch = 0;   // largest micro-batch that fits in any mode (0: not even 1)
  mode max_micro_batch_mode = mode::none;  // the first of AGGRESSIVE, BALANCED, CONSERVATIVE, none to reach it
  // When the exact divisor is under half of max_micro_batch (e.g. a prime effective batch):
  // the alternative that rounds the effective batch to rounded_micro_batch * rounded_grad_accumulation
  // (0 when there is none).
  std::uint64_t rounded_micro_batch = 0;
  std::uint64_t rounded_grad_accumulation = 0;
  std::uint64_t max_seq_len = 0;       // largest sequence length that fits at micro-batch 1 (shorter_sequence)
  bool mode_order_inverted = false;    // a more aggressive mode needs more memory than a gentler one
  std::string_view why_order_inverts{};  // why that can happen for this kind of model (when inverted)
  advice next_step = advice::none;
  std::string_view reason{};

  // Whether the answer runs in a mode (`chosen`): every status but shorter_sequence and
  // nothing_fits. The text report, the JSON and the pictures all ask this.
  [[nodiscard]] constexpr bool has_chosen_mode() const {
    return status != plan_status::shorter_sequence && status != plan_status::nothing_fits;
  }

  [[nodiscard]] constexpr const mode_plan& chosen_plan() const {
    if (status == plan_status::parameter_offload) return parameter_offload;
    if (status == plan_status::cheaper_levers) return lever_plan;
    return modes[static_cast<std::size_t>(chosen)];
  }
};

namespace detail {

// NaN fails every comparison, so each check is written to fail for it; no unchecked
// double is converted to an integer (the value is not echoed: it may be NaN or inf).
constexpr double validated_headroom(const plan_options& o) {
  if (!(o.headroom >= 0.0 && o.headroom < 1.0))
    fail(error_code::invalid_plan_option, "plan.headroom", "must be a fraction within [0, 1)");
  const bool in_range = o.headroom >= min_headroom && o.headroom <= max_headroom;
  if (!in_range && !o.headroom_override)
    fail(error_code::invalid_plan_option, "plan.headroom",
         "must be within 10-15 % unless headroom_override is set; in %", floor_to_u64(o.headroom * 100.0));
  return o.headroom;
}

}  // namespace detail

constexpr bytes budget_of(const gpu_spec& gpu, const plan_options& options = {}) {
  const double headroom = detail::validated_headroom(options);
  // Round down: the budget must never exceed what the headroom allows.
  // The double nearest a memory close to 2^64 may be 2^64 itself: floor_to_u64 refuses it.
  return bytes{detail::min(gpu.memory.value, detail::floor_to_u64(static_cast<double>(gpu.memory.value) * (1.0 - headroom),
                                                                  detail::quantity{"plan.budget (gpu.memory x (1 - headroom))"}))};
}

}  // namespace memscale
