// memscale/planner.hpp: which MemScale mode makes a run fit a GPU, at what micro-batch, and
// how sure the answer is.
//
// The modes and their techniques: memscale/modes.hpp. Each mode's peak is estimated by the
// same estimators, never as a flat percentage, and carries the error band the accuracy
// report measured for its class of run (memscale/error_band.hpp). A mode fits only when the
// band's upper end is within the budget. The planner picks the least aggressive mode that
// fits; a more aggressive mode may need more memory than a gentler one (AGGRESSIVE keeps
// its 8-bit optimizer state on the GPU, BALANCED offloads a 32-bit one).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "memscale/detail/largest_fitting.hpp"
#include "memscale/error_band.hpp"
#include "memscale/estimate.hpp"
#include "memscale/gpus.hpp"
#include "memscale/model.hpp"
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
  smaller_micro_batch,
  shorter_sequence,
  smaller_model_or_more_gpus
};

constexpr std::string_view to_string(advice a) noexcept {
  switch (a) {
    case advice::none: return "none";
    case advice::offload_parameters: return "offload_parameters";
    case advice::smaller_micro_batch: return "smaller_micro_batch";
    case advice::shorter_sequence: return "shorter_sequence";
    case advice::smaller_model_or_more_gpus: return "smaller_model_or_more_gpus";
  }
  return "none";
}

// The planner's answer, one of six distinct outcomes.
enum class plan_status : std::uint8_t {
  no_technique_needed,  // the run fits as described
  mode_needed,          // the run fits with `chosen`
  smaller_micro_batch,  // a smaller micro-batch (a divisor of the effective batch) fits with `chosen`
  parameter_offload,    // only AGGRESSIVE with parameters streamed from the host fits (micro-batch 1)
  shorter_sequence,     // nothing fits at this sequence length; max_seq_len does at micro-batch 1
  nothing_fits,         // not even a short sequence: a smaller model or more GPUs
};

constexpr std::string_view to_string(plan_status s) noexcept {
  switch (s) {
    case plan_status::no_technique_needed: return "no_technique_needed";
    case plan_status::mode_needed: return "mode_needed";
    case plan_status::smaller_micro_batch: return "smaller_micro_batch";
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
  bytes unoptimized_peak{};      // modes[none].peak: the report's peak for this GPU
  double pressure = 0.0;         // unoptimized peak / vram
  std::array<mode_plan, 4> modes{};
  mode_plan parameter_offload{};       // AGGRESSIVE + parameters streamed from the host, when nothing else fits
  plan_status status = plan_status::nothing_fits;
  mode chosen = mode::none;            // the mode of the answer (statuses up to parameter_offload)
  bool fits = false;                   // the request as given fits (status no_technique_needed or mode_needed)
  verdict v = verdict::does_not_fit;   // for the request as given, with the error band
  std::uint64_t effective_batch = 0;   // requested micro_batch * grad_accum
  std::uint64_t micro_batch = 0;       // planned micro-batch; micro_batch * grad_accumulation == effective_batch
  std::uint64_t grad_accumulation = 1;
  std::uint64_t max_micro_batch = 0;   // largest micro-batch that fits in any mode (0: not even 1)
  mode max_micro_batch_mode = mode::none;  // a mode that reaches it
  // When the exact divisor is under half of max_micro_batch (e.g. a prime effective batch):
  // the alternative that rounds the effective batch to rounded_micro_batch * rounded_grad_accumulation
  // (0 when there is none).
  std::uint64_t rounded_micro_batch = 0;
  std::uint64_t rounded_grad_accumulation = 0;
  std::uint64_t max_seq_len = 0;       // largest sequence length that fits at micro-batch 1 (shorter_sequence)
  bool mode_order_inverted = false;    // a more aggressive mode needs more memory than a gentler one
  advice next_step = advice::none;
  std::string_view reason{};

  [[nodiscard]] constexpr const mode_plan& chosen_plan() const {
    return status == plan_status::parameter_offload ? parameter_offload : modes[static_cast<std::size_t>(chosen)];
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

// Cost beyond what the request already pays: a technique the run uses is not charged again.
constexpr mode_cost cost_of(const estimate_result& e, bytes checkpointed_inputs, const training_spec& request,
                            const training_spec& run, const gpu_spec& gpu) {
  mode_cost c{};
  // Full recomputation re-runs each block's forward once during backward (Korthikanti et
  // al. 2022, arXiv 2205.05198 sec. 4: about one extra forward pass).
  if (run.ckpt == checkpointing::full && request.ckpt != checkpointing::full) c.recompute_fraction = 1.0;
  const double link = gpu.host_link_gb_per_s * 1e9;
  double moved = 0.0;
  if (run.offload_optimizer) {
    // Gradients go to the host and updated parameters come back every step; the host
    // holds the optimizer state and, for 16-bit device weights, fp32 master weights.
    if (!request.offload_optimizer)
      moved += static_cast<double>(e.gradient_bytes.value) + static_cast<double>(e.parameter_bytes.value);
    c.host_memory += e.optimizer_bytes + e.gradient_bytes;
    if (is_half_precision(run.prec)) c.host_memory += storage(dtype::fp32, e.trainable_parameter_count);
  }
  if (run.offload_parameters) {
    // Parameters stream in for the forward and again for the backward, block by block.
    if (!request.offload_parameters) moved += 2.0 * static_cast<double>(e.parameter_bytes.value);
    c.host_memory += e.parameter_bytes;
  }
  if (run.offload_activations && run.ckpt == checkpointing::full) {
    const bytes inputs = checkpointed_inputs;
    if (!request.offload_activations) moved += 2.0 * static_cast<double>(inputs.value);  // out, then back
    c.host_memory += inputs;
  }
  c.transfer_seconds = moved / link;
  return c;
}

// `run` is the run to estimate (a mode's run), `request` the run as the user gave it.
constexpr mode_plan plan_run(const model_spec& model, const training_spec& request, const training_spec& run,
                             const gpu_spec& gpu, mode m, bytes budget) {
  mode_plan p{};
  p.m = m;
  p.run = run;
  p.switched_on = switched_on(request, run);
  // Estimated as estimate(model, run) does: with the adapter dtype the framework gives the mode's
  // precision (PEFT keeps LoRA adapters over a 16-bit base in fp32), or a plan's peak would be
  // below the report's.
  const training_spec resolved = with_resolved_adapters(model, p.run);
  estimate_result e{};
  bytes checkpointed_inputs{};  // what offloading the checkpointed activations moves
  if (model.arch == architecture::encoder_decoder) {
    const encoder_decoder_graph g = build_encoder_decoder_graph(model, resolved);
    e = estimate(g, resolved);
    checkpointed_inputs = checkpointed_block_inputs(g, resolved);
  } else {
    const graph g = build_graph(model, resolved);
    e = estimate(g, resolved);
    checkpointed_inputs = checkpointed_block_inputs(g, resolved);
  }
  const peak_estimate& worst = overall_peak(e);
  p.peak = worst.device;
  p.tensor_peak = worst.tensor;
  p.breakdown = worst.breakdown;
  p.at = worst.at;
  p.band = band_of(class_of(model, p.run));
  p.range = range_of(p.peak, p.band);
  p.v = verdict_of(p.range, budget);
  p.fits = p.v == verdict::fits;
  p.cost = cost_of(e, checkpointed_inputs, request, p.run, gpu);
  return p;
}

constexpr mode_plan plan_mode(const model_spec& model, const training_spec& request, const gpu_spec& gpu, mode m,
                              bytes budget) {
  return plan_run(model, request, apply_mode(request, m, gpu), gpu, m, budget);
}

constexpr bool mode_fits(const model_spec& model, training_spec run, const gpu_spec& gpu, mode m, bytes budget) {
  return plan_mode(model, run, gpu, m, budget).fits;
}

// What a search needs of one run: the upper end of the error band of its device peak (the
// larger of step 1 and the steady state), which `fits` compares with the budget. The same
// estimate plan_run makes, without what only a plan shows (the saved-activation total, the
// breakdown, the costs): plan_run(...).fits == (peak_upper_end(...) <= budget).
constexpr bytes peak_upper_end(const model_spec& model, const training_spec& run, const error_band& band) {
  bytes device{};
  if (model.arch == architecture::encoder_decoder) {
    device = overall_peak(estimate(model, run)).device;
  } else {
    const training_spec resolved = with_resolved_adapters(model, run);  // as plan_run estimates
    const graph g = build_graph(model, resolved);
    const step_peaks p = estimate_peaks(g, resolved, totals_of(g, resolved));
    device = p.first_step.device > p.steady.device ? p.first_step.device : p.steady.device;
  }
  return range_of(device, band).high;
}

// One mode's fit results at the micro-batches evaluated so far, so that no estimate is made
// twice: a larger micro-batch never needs less memory, so every micro-batch up to `fits.at`
// fits and none from `over.at` on does (at == 0: none known yet).
struct mode_search {
  training_spec run{};  // the request with the mode's techniques; micro_batch varies
  error_band band{};
  bytes budget{};
  probe_point fits{};
  probe_point over{};

  // The upper end of the peak's band at micro-batch b: one estimate, remembered.
  constexpr std::uint64_t value_at(const model_spec& model, std::uint64_t b) {
    training_spec t = run;
    t.micro_batch = b;
    const std::uint64_t v = peak_upper_end(model, t, band).value;
    if (v <= budget.value) {
      if (b > fits.at) fits = {b, v};
    } else if (over.at == 0 || b < over.at) {
      over = {b, v};
    }
    return v;
  }

  // detail::mode_fits(model, run at b, gpu, m, budget), from what is known when it can be.
  constexpr bool fits_at(const model_spec& model, std::uint64_t b) {
    if (b <= fits.at) return true;
    if (over.at != 0 && b >= over.at) return false;
    return value_at(model, b) <= budget.value;
  }
};

// A first guess at the largest micro-batch that fits mode p, from its plan of the request
// at micro_batch: the activations grow with the micro-batch and the rest of the peak does
// not. Only a guess (0: none): the search evaluates it like any other point.
constexpr std::uint64_t first_guess(const mode_plan& p, std::uint64_t micro_batch, bytes budget) {
  const double per_sample =
      static_cast<double>(p.breakdown.activations.value) / static_cast<double>(micro_batch) / (1.0 + p.band.low);
  if (!(per_sample > 0.0)) return 0;
  const double x = static_cast<double>(micro_batch) +
                   (static_cast<double>(budget.value) - static_cast<double>(p.range.high.value)) / per_sample;
  if (!(x >= 1.0)) return 1;
  if (!(x < 18446744073709549568.0)) return u64_max;
  return static_cast<std::uint64_t>(x);
}

// The search state of mode p.m, knowing p (the mode's plan of the request).
constexpr mode_search search_of(const mode_plan& p, const training_spec& request, const gpu_spec& gpu, bytes budget) {
  mode_search s{};
  s.run = apply_mode(request, p.m, gpu);
  s.band = p.band;
  s.budget = budget;
  (p.fits ? s.fits : s.over) = probe_point{request.micro_batch, p.range.high.value};
  return s;
}

// Largest divisor of n that is <= limit (limit >= 1).
constexpr std::uint64_t largest_divisor_up_to(std::uint64_t n, std::uint64_t limit) {
  for (std::uint64_t d = limit < n ? limit : n; d > 1; --d)
    if (n % d == 0) return d;
  return 1;
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

}  // namespace detail

constexpr bytes budget_of(const gpu_spec& gpu, const plan_options& options = {}) {
  const double headroom = detail::validated_headroom(options);
  // Round down: the budget must never exceed what the headroom allows.
  // The double nearest a memory close to 2^64 may be 2^64 itself: floor_to_u64 refuses it.
  return bytes{detail::min(gpu.memory.value, detail::floor_to_u64(static_cast<double>(gpu.memory.value) * (1.0 - headroom),
                                                                  detail::quantity{"plan.budget (gpu.memory x (1 - headroom))"}))};
}

namespace detail {
// The checks of a planner's input that come before any estimate (make_plan and fits()).
constexpr void validate_plan_input(const model_spec& model, const training_spec& run, const gpu_spec& gpu,
                                   const plan_options& options) {
  validate(model);
  validate(run);
  if (gpu.memory.value == 0) detail::fail(error_code::invalid_gpu, "gpu.memory", "must be > 0", 0);
  if (options.max_batch_search == 0)
    detail::fail(error_code::invalid_plan_option, "plan.max_batch_search", "must be > 0", 0);
}
}  // namespace detail

constexpr plan_result make_plan(const model_spec& model, const training_spec& run, const gpu_spec& gpu,
                                const plan_options& options = {}) {
  detail::validate_plan_input(model, run, gpu, options);
  plan_result r{};
  r.vram = gpu.memory;
  r.headroom = detail::validated_headroom(options);
  r.budget = budget_of(gpu, options);
  r.effective_batch = detail::checked_mul(run.micro_batch, run.grad_accum);
  r.micro_batch = run.micro_batch;
  r.grad_accumulation = run.grad_accum;
  constexpr std::array all_modes{mode::none, mode::conservative, mode::balanced, mode::aggressive};
  for (std::size_t i = 0; i < all_modes.size(); ++i)
    r.modes[i] = detail::plan_mode(model, run, gpu, all_modes[i], r.budget);
  r.unoptimized_peak = r.modes[0].peak;
  r.pressure = ratio(r.unoptimized_peak, r.vram);
  for (std::size_t i = 1; i < r.modes.size(); ++i)
    for (std::size_t j = i + 1; j < r.modes.size(); ++j)
      if (r.modes[j].peak > r.modes[i].peak) r.mode_order_inverted = true;

  // The largest micro-batch over all modes: each mode's search is monotone in the budget,
  // so their maximum never falls when VRAM grows. The most memory-saving modes are searched
  // first; a later mode is searched only if it fits one more than the best so far. Each
  // search solves for the crossing from the peak values (largest_within_budget) and
  // remembers what it evaluated (mode_search), so no micro-batch is estimated twice.
  std::array<detail::mode_search, 4> searches{};
  for (std::size_t i = 0; i < searches.size(); ++i) searches[i] = detail::search_of(r.modes[i], run, gpu, r.budget);
  const std::uint64_t search_hi = options.max_batch_search;
  bool request_fits = false;
  for (const auto& p : r.modes) request_fits = request_fits || p.fits;
  std::uint64_t divisor = 0;  // when nothing fits the request: step 2's micro-batch for the max so far
  constexpr std::array search_order{mode::aggressive, mode::balanced, mode::conservative, mode::none};
  for (const mode m : search_order) {
    const auto i = static_cast<std::size_t>(m);
    detail::mode_search& s = searches[i];
    // A mode that does not fit the request fits less than the request's micro-batch.
    const std::uint64_t hi = r.modes[i].fits ? search_hi : detail::min(search_hi, run.micro_batch - 1);
    if (r.max_micro_batch >= hi) continue;
    if (r.max_micro_batch > 0) {
      // Step 2 will ask this mode (gentler than the one of the max so far) about the divisor
      // d <= max_micro_batch: asked first, a mode that does not fit d cannot fit one more
      // than the max, and needs no other estimate.
      if (!request_fits && !s.fits_at(model, divisor)) continue;
      if (!s.fits_at(model, r.max_micro_batch + 1)) continue;
    }
    const auto value_at = [&](std::uint64_t b) { return s.value_at(model, b); };
    const std::uint64_t largest =
        s.fits.at >= hi ? hi
                        : detail::largest_within_budget(hi, r.budget.value, value_at, s.fits, s.over,
                                                        detail::first_guess(r.modes[i], run.micro_batch, r.budget));
    if (largest == 0) continue;
    r.max_micro_batch = largest;
    r.max_micro_batch_mode = m;
    if (!request_fits) divisor = detail::largest_divisor_up_to(r.effective_batch, r.max_micro_batch);
  }

  // 1. The request fits in some mode: the least aggressive one.
  for (const auto& p : r.modes) {
    if (!p.fits) continue;
    r.chosen = p.m;
    r.fits = true;
    r.v = verdict::fits;
    r.status = p.m == mode::none ? plan_status::no_technique_needed : plan_status::mode_needed;
    r.reason = detail::reason_for(p.m);
    return r;
  }
  r.v = verdict::does_not_fit;
  for (const auto& p : r.modes)
    if (p.v == verdict::borderline) r.v = verdict::borderline;

  // 2. A smaller micro-batch that divides the effective batch, so micro x accumulation
  //    stays exactly the requested effective batch; the least aggressive mode that fits it.
  if (r.max_micro_batch > 0) {
    const std::uint64_t d = detail::largest_divisor_up_to(r.effective_batch, r.max_micro_batch);
    r.chosen = r.max_micro_batch_mode;  // fits d <= max_micro_batch; a gentler mode may too
    for (const mode m : all_modes) {
      if (m == r.max_micro_batch_mode) break;
      if (!searches[static_cast<std::size_t>(m)].fits_at(model, d)) continue;
      r.chosen = m;
      break;
    }
    r.micro_batch = d;
    r.grad_accumulation = r.effective_batch / d;
    if (2 * d < r.max_micro_batch) {
      // Exact but slow (e.g. a prime effective batch): also say what rounding would change,
      // with the fewest accumulation steps and the micro-batch closest to an even split.
      const std::uint64_t accum = detail::ceil_div(r.effective_batch, r.max_micro_batch);
      const std::uint64_t micro = detail::min(r.max_micro_batch, (r.effective_batch + accum / 2) / accum);
      if (micro * accum != r.effective_batch) {
        r.rounded_micro_batch = micro;
        r.rounded_grad_accumulation = accum;
      }
    }
    r.status = plan_status::smaller_micro_batch;
    r.next_step = advice::smaller_micro_batch;
    r.reason = "no mode fits at this micro-batch; a smaller micro-batch that divides the effective batch does, with "
               "more gradient accumulation";
    return r;
  }

  // 3. Not even micro-batch 1: stream the parameters from the host as well and keep the
  //    optimizer there (ZeRO-Infinity, Rajbhandari et al. 2021, arXiv 2104.07857), at micro-batch 1.
  training_spec single = run;
  single.micro_batch = 1;
  single.grad_accum = r.effective_batch;
  training_spec streamed = apply_mode(single, mode::aggressive, gpu);
  streamed.offload_parameters = true;
  streamed.offload_optimizer = true;  // ZeRO-Infinity keeps optimizer state and gradients off the device too
  r.parameter_offload = detail::plan_run(model, run, streamed, gpu, mode::aggressive, r.budget);
  if (r.parameter_offload.fits) {
    r.chosen = mode::aggressive;
    r.micro_batch = 1;
    r.grad_accumulation = r.effective_batch;
    r.status = plan_status::parameter_offload;
    r.next_step = advice::offload_parameters;
    r.reason = "no mode fits even at micro-batch 1; AGGRESSIVE fits when parameters are also streamed from the host";
    return r;
  }

  // 4. A shorter sequence at micro-batch 1, in any mode: the largest over the modes. As for the
  //    micro-batch, the most memory-saving modes go first, and a later mode is searched only if
  //    it fits one more than the best so far (one estimate otherwise).
  for (const mode m : search_order) {
    training_spec t = apply_mode(single, m, gpu);
    const error_band& band = band_of(class_of(model, t));
    const auto value_at = [&](std::uint64_t len) {
      t.seq_len = len;
      return detail::peak_upper_end(model, t, band).value;
    };
    // At micro-batch 1 the request is `single` itself: its full length is known not to fit.
    const detail::probe_point over =
        run.micro_batch == 1 ? detail::probe_point{run.seq_len, r.modes[static_cast<std::size_t>(m)].range.high.value}
                             : detail::probe_point{};
    detail::probe_point fit{};
    if (r.max_seq_len > 0) {
      if (r.max_seq_len + 1 >= run.seq_len) break;  // nothing longer is left to find below the request
      fit = {r.max_seq_len + 1, value_at(r.max_seq_len + 1)};
      if (fit.value > r.budget.value) continue;
    }
    const std::uint64_t s = detail::largest_within_budget(run.seq_len, r.budget.value, value_at, fit, over);
    r.max_seq_len = detail::max(r.max_seq_len, s);
  }
  if (r.max_seq_len > 0) {
    r.micro_batch = 1;
    r.grad_accumulation = r.effective_batch;
    r.status = plan_status::shorter_sequence;
    r.next_step = advice::shorter_sequence;
    r.reason = "even micro-batch 1 does not fit; a shorter sequence does";
    return r;
  }
  r.status = plan_status::nothing_fits;
  r.next_step = advice::smaller_model_or_more_gpus;
  r.reason = "the model states alone exceed the budget: use a smaller model or shard over more GPUs";
  return r;
}

namespace detail {

// The verdict of make_plan(model, run, gpu, options).fits without the rest of the plan: the
// same checks of the input, then the modes' peaks at the request, stopping at the first mode
// that fits. `least_required` (when none fits) is the smallest upper end of any mode's band.
struct request_fit {
  bool fits = false;
  bytes least_required{};
  bytes budget{};
};

constexpr request_fit fit_of_request(const model_spec& model, const training_spec& run, const gpu_spec& gpu,
                                     const plan_options& options) {
  validate_plan_input(model, run, gpu, options);
  request_fit f{};
  f.budget = budget_of(gpu, options);
  static_cast<void>(checked_mul(run.micro_batch, run.grad_accum));  // the effective batch, as make_plan checks it
  constexpr std::array all_modes{mode::none, mode::conservative, mode::balanced, mode::aggressive};
  for (const mode m : all_modes) {
    const training_spec t = apply_mode(run, m, gpu);
    const bytes need = peak_upper_end(model, t, band_of(class_of(model, t)));
    if (need <= f.budget) {
      f.fits = true;
      f.least_required = need;
      return f;
    }
    f.least_required = m == mode::none ? need : min(f.least_required, need);
  }
  return f;
}

}  // namespace detail

// True when the run, as described, fits the GPU in at least one mode with the error band's
// upper end within the budget (never optimistic): make_plan(...).fits, from the modes' peaks
// at the request alone, stopping at the first mode that fits (one estimate when the run fits
// as it is). It estimates nothing else, so it returns where make_plan could still fail on a
// later mode or micro-batch whose bytes overflow.
constexpr bool fits(const model_spec& model, const training_spec& run, const gpu_spec& gpu,
                    const plan_options& options = {}) {
  return detail::fit_of_request(model, run, gpu, options).fits;
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
