// memscale/planner.hpp: which MemScale mode makes a run fit a GPU, at what micro-batch, and
// how sure the answer is.
//
// The modes and their techniques: memscale/modes.hpp. Each mode's peak is estimated by the
// same estimators, never as a flat percentage, and carries the error band the accuracy
// report measured for its class of run (memscale/error_band.hpp). A mode fits only when the
// band's upper end is within the budget. The planner picks the least aggressive mode that
// fits; a more aggressive mode may need more memory than a gentler one (AGGRESSIVE keeps
// its 8-bit optimizer state on the GPU, BALANCED offloads a 32-bit one).
// The steps of a plan are shared with the vision planner (memscale/detail/plan_steps.hpp);
// this header gives them the transformer's modes, estimates and words.
#pragma once

#include <cstdint>
#include <string_view>

#include "memscale/detail/plan_steps.hpp"
#include "memscale/device_peak.hpp"
#include "memscale/error_band.hpp"
#include "memscale/estimate.hpp"
#include "memscale/gpus.hpp"
#include "memscale/levers.hpp"
#include "memscale/model.hpp"
#include "memscale/modes.hpp"
#include "memscale/plan_result.hpp"
#include "memscale/training.hpp"

namespace memscale {

namespace detail {

// Host traffic and host memory of a mode's offloads (the memory is the estimate's host_bytes,
// estimate/host_bytes.hpp), the traffic beyond what the request already pays (the recomputation
// is mode_plan_of's, the same for every kind of model).
constexpr void add_offload_cost(mode_cost& c, const estimate_result& e, bytes checkpointed_inputs,
                                const training_spec& request, const training_spec& run, const gpu_spec& gpu) {
  const double link = gpu.host_link_gb_per_s * 1e9;
  double moved = 0.0;
  // Gradients go to the host and updated parameters come back every step.
  if (run.offload_optimizer && !request.offload_optimizer)
    moved += static_cast<double>(e.gradient_bytes.value) + static_cast<double>(e.parameter_bytes.value);
  // Parameters stream in for the forward and again for the backward, block by block.
  if (run.offload_parameters && !request.offload_parameters)
    moved += 2.0 * static_cast<double>(e.parameter_bytes.value);
  // Checkpointed inputs go out, then come back.
  if (run.offload_activations && run.ckpt == checkpointing::full && !request.offload_activations)
    moved += 2.0 * static_cast<double>(checkpointed_inputs.value);
  c.host_memory = e.host_bytes;
  c.transfer_seconds = moved / link;
}

constexpr std::string_view reason_for(mode m) {
  switch (m) {
    case mode::none: return "the run fits without memory-saving techniques";
    case mode::conservative: return "gradient checkpointing alone brings the peak under the budget";
    case mode::balanced:
      return "checkpointing is not enough; with optimizer state and checkpointed activations offloaded to the CPU "
             "the run fits";
    case mode::aggressive:
      return "only the full stack (checkpointing, activation offloading, tiled attention, 16-bit weights, 8-bit "
             "optimizer) fits";
  }
  return "";
}

// A transformer (decoder, encoder or encoder-decoder) as plan_with plans it. Every run it
// estimates is estimated on the device (memscale/device_peak.hpp): on CUDA the step's events
// replayed through the caching allocator plus the GPU's context, with the band measured for
// replayed figures of the run's class; where the replay does not apply, the rounding rule
// with the same context and its class's band. So the plan's modes, its micro-batch search
// and the levers compare the same figure as the report's allocator section.
struct transformer_planning {
  const model_spec& model;
  const gpu_spec& gpu;
  device_options device{};

  static constexpr bool streams_parameters = true;
  static constexpr bool has_sequence = true;
  static constexpr std::string_view why_order_inverts =
      "AGGRESSIVE keeps its 8-bit optimizer state on the GPU; BALANCED moves its state to the host";
  static constexpr std::string_view nothing_fits_reason =
      "the model states alone exceed the budget: use a smaller model or shard over more GPUs";
  static constexpr std::string_view reason_for(mode m) { return detail::reason_for(m); }

  constexpr void validate() const { memscale::validate(model); }
  // Streaming DeepSeek's leading dense layers or a hybrid's periods is not modelled (validate.hpp).
  constexpr bool can_stream_parameters() const { return layers_are_units(model); }
  static constexpr training_spec mode_run(const training_spec& request, mode m, const gpu_spec& gpu) {
    return apply_mode(request, m, gpu);
  }

  // `run` is the run to estimate (a mode's run), `request` the run as the user gave it.
  constexpr mode_plan plan_run(const training_spec& request, const training_spec& run, const gpu_spec& on, mode m,
                               bytes budget) const {
    // The graph estimate(model, run) reads: the adapter dtype follows the mode's precision
    // (PEFT keeps LoRA adapters over a 16-bit base in fp32), as in the report.
    const model_graph g = build(model, run);
    const device_estimate d = estimate_on_device(model, run, &on, device);
    mode_plan p = mode_plan_of(m, request, run, d.tensors, device_band_of(model, run, d), budget);
    take_device_verdict(p, verdict_on_device(model, run, d, budget, device));
    // What offloading the checkpointed activations moves.
    add_offload_cost(p.cost, d.tensors, checkpointed_block_inputs(g), request, run, on);
    return p;
  }

  // What a search needs of one run: the upper end of the error band of its device peak (the
  // larger of step 1 and the steady state), which `fits` compares with the budget. The same
  // estimate plan_run makes, without what only a plan shows (the saved-activation total, the
  // breakdown, the costs): plan_run(...).fits == (peak_upper_end(...) <= budget).
  constexpr bytes peak_upper_end(const training_spec& run) const {
    const device_estimate d = estimate_on_device(model, run, &gpu, device);
    return range_of(d.device, device_band_of(model, run, d)).high;
  }
};

static_assert(planning_kind<transformer_planning>);

constexpr mode_plan plan_run(const model_spec& model, const training_spec& request, const training_spec& run,
                             const gpu_spec& gpu, mode m, bytes budget, const device_options& device = {}) {
  return transformer_planning{model, gpu, device}.plan_run(request, run, gpu, m, budget);
}

constexpr mode_plan plan_mode(const model_spec& model, const training_spec& request, const gpu_spec& gpu, mode m,
                              bytes budget, const device_options& device = {}) {
  return plan_run(model, request, apply_mode(request, m, gpu), gpu, m, budget, device);
}

constexpr bool mode_fits(const model_spec& model, training_spec run, const gpu_spec& gpu, mode m, bytes budget,
                         const device_options& device = {}) {
  return plan_mode(model, run, gpu, m, budget, device).fits;
}

constexpr bytes peak_upper_end(const model_spec& model, const training_spec& run, const gpu_spec& gpu,
                               const device_options& device = {}) {
  return transformer_planning{model, gpu, device}.peak_upper_end(run);
}

constexpr request_fit fit_of_request(const model_spec& model, const training_spec& run, const gpu_spec& gpu,
                                     const plan_options& options) {
  return fit_with(transformer_planning{model, gpu, options.device}, run, gpu, options);
}

// Whether a plan's answer costs enough step time (host traffic) or changes the run enough
// (a shorter sequence, nothing) to weigh the cheaper levers first.
constexpr bool weighs_levers(plan_status s) {
  return s == plan_status::parameter_offload || s == plan_status::shorter_sequence || s == plan_status::nothing_fits;
}

// Plan r of `run` once the modes and the micro-batch have been searched: when its answer
// weighs the levers, the first lever whose point estimate fits the budget replaces it.
constexpr plan_result with_cheaper_levers(plan_result r, const model_spec& model, const training_spec& run,
                                          const gpu_spec& gpu, const device_options& device) {
  if (!weighs_levers(r.status)) return r;
  r.levers = cheaper_levers(model, run, gpu, r.budget, device);
  if (!r.levers.any_likely()) return r;
  const lever_option& advised = r.levers.advised();
  // Half the sequence is no better than the longest sequence the plan found to fit.
  if (advised.what == lever::shorter_sequence && r.status == plan_status::shorter_sequence) return r;
  r.lever_plan = plan_run(model, run, advised.run, gpu, mode::conservative, r.budget, device);
  r.chosen = mode::conservative;  // every lever list starts with CONSERVATIVE's checkpointing
  r.status = plan_status::cheaper_levers;
  r.next_step = advice::switch_on_levers;
  r.micro_batch = advised.run.micro_batch;
  r.grad_accumulation = advised.run.grad_accum;
  r.reason = r.lever_plan.fits ? "no mode fits as requested; checkpointing with the cheaper levers listed fits, "
                                 "without host traffic"
                               : "no mode fits as requested; checkpointing with the cheaper levers listed likely "
                                 "fits (its point estimate is within the budget, its band's upper end is not), "
                                 "without host traffic";
  return r;
}

}  // namespace detail

// The plan: every mode's peak and verdict at the request, the least aggressive mode that
// fits, the largest micro-batch any mode fits, and when nothing fits the request, the
// fallback, in this order: a smaller micro-batch dividing the effective batch; checkpointing
// with the cheaper levers (memscale/levers.hpp) up to the first whose point estimate fits
// the budget, said "likely fits" when its band's upper end does not; parameters streamed from
// the host; a shorter sequence. The levers come before streaming because each costs less
// step time than seconds of host traffic: a slower technique is never chosen while a faster
// one's point estimate fits with the headroom kept.
constexpr plan_result make_plan(const model_spec& model, const training_spec& run, const gpu_spec& gpu,
                                const plan_options& options = {}) {
  return detail::with_cheaper_levers(
      detail::plan_with(detail::transformer_planning{model, gpu, options.device}, run, gpu, options), model, run, gpu,
      options.device);
}

// True when the run, as described, fits the GPU in at least one mode with the error band's
// upper end within the budget (never optimistic): make_plan(...).fits, from the modes' peaks
// at the request alone, stopping at the first mode that fits (one estimate when the run fits
// as it is). It estimates nothing else, so it returns where make_plan could still fail on a
// later mode or micro-batch whose bytes overflow.
constexpr bool fits(const model_spec& model, const training_spec& run, const gpu_spec& gpu,
                    const plan_options& options = {}) {
  return detail::fit_of_request(model, run, gpu, options).fits;
}

// The longest sequence up to `hi` that fits `budget` at the run's micro-batch in any mode,
// and the mode that reaches it, found as make_plan finds the largest micro-batch: the most
// memory-saving modes first, a later mode only when it fits one more (length 0: no mode fits
// even one token).
struct longest_sequence {
  std::uint64_t length = 0;
  mode in = mode::none;
};

constexpr longest_sequence longest_sequence_that_fits(const model_spec& model, const training_spec& run,
                                                      const gpu_spec& gpu, bytes budget, std::uint64_t hi,
                                                      const device_options& device = {}) {
  longest_sequence best{};
  for (const mode m : detail::search_order) {
    const auto fits_at = [&](std::uint64_t s) {
      training_spec t = run;
      t.seq_len = s;
      return detail::mode_fits(model, t, gpu, m, budget, device);
    };
    if (best.length >= hi || (best.length > 0 && !fits_at(best.length + 1))) continue;
    const std::uint64_t s = best.length > 0 ? detail::largest_fitting_from(best.length + 1, hi, fits_at)
                                            : detail::largest_fitting(hi, fits_at);
    if (s > best.length) best = {s, m};
  }
  return best;
}

// Deliberately not constexpr: reaching it in constant evaluation stops compilation and
// the compiler prints both numbers as template arguments.
template <std::uint64_t RequiredBytes, std::uint64_t BudgetBytes>
void run_does_not_fit_required_vs_budget_bytes() {}

// static_assert(memscale::assert_fits<model, run, gpu>()): on failure the diagnostic
// names run_does_not_fit_required_vs_budget_bytes<required, budget>, required being the
// smallest upper end of any mode's error band. Pass variables with static storage
// (inline constexpr) by reference.
template <const model_spec& Model, const training_spec& Run, const gpu_spec& Gpu>
consteval bool assert_fits() {
  constexpr detail::request_fit check = detail::fit_of_request(Model, Run, Gpu, plan_options{});
  if constexpr (!check.fits) {
    run_does_not_fit_required_vs_budget_bytes<check.least_required.value, check.budget.value>();
  }
  return check.fits;
}

}  // namespace memscale
