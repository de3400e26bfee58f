// memscale/detail/plan_steps.hpp: the planner's steps, the same for every kind of model.
// IWYU pragma: private, include <memscale/planner.hpp>
//
// make_plan (memscale/planner.hpp) and vision::make_plan (memscale/vision/planner.hpp) are
// plan_with over a planning kind: what differs between a transformer and a vision network is
// which techniques a mode switches on, how a run is estimated and classed for its error
// band, and the words of the answer. Everything else (each mode's verdict from its band, the
// mode chosen, the micro-batch search, the fallbacks) is written once here, so the two
// plans' fields cannot mean different things.
//
// A planning kind K (a model held by reference) gives:
//   k.validate()                         the model's own checks
//   k.mode_run(request, m, gpu)          the request with mode m's techniques switched on
//   k.plan_run(request, run, gpu, m, b)  run's mode_plan against budget b (mode_plan_of + costs)
//   k.peak_upper_end(run)                what plan_run(...).range.high is, from one estimate (the
//                                        band is the one that estimate carries)
//   K::reason_for(m)                     why mode m is the answer when the request fits in it
//   K::why_order_inverts, K::nothing_fits_reason
//   K::streams_parameters                whether AGGRESSIVE + parameters from the host is modelled
//   k.can_stream_parameters()            ... and, when it is, whether this model takes it
//   K::has_sequence                      whether a shorter sequence is a fallback
#pragma once

#include <array>
#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>

#include "memscale/detail/largest_fitting.hpp"
#include "memscale/error.hpp"
#include "memscale/error_band.hpp"
#include "memscale/gpus.hpp"
#include "memscale/modes.hpp"
#include "memscale/plan_result.hpp"
#include "memscale/precision_support.hpp"
#include "memscale/training.hpp"

namespace memscale::detail {

template <class K>
concept planning_kind = requires(const K& k, const training_spec& t, const gpu_spec& g, mode m, bytes b) {
  k.validate();
  { k.mode_run(t, m, g) } -> std::same_as<training_spec>;
  { k.plan_run(t, t, g, m, b) } -> std::same_as<mode_plan>;
  { k.peak_upper_end(t) } -> std::same_as<bytes>;
  { K::reason_for(m) } -> std::same_as<std::string_view>;
  { K::why_order_inverts } -> std::convertible_to<std::string_view>;
  { K::nothing_fits_reason } -> std::convertible_to<std::string_view>;
  { K::streams_parameters } -> std::convertible_to<bool>;
  { K::has_sequence } -> std::convertible_to<bool>;
};

inline constexpr std::array all_modes{mode::none, mode::conservative, mode::balanced, mode::aggressive};
// The micro-batch searches start with the modes that save the most memory.
inline constexpr std::array search_order{mode::aggressive, mode::balanced, mode::conservative, mode::none};

// The part of a mode's plan that is the same for every kind of model: the device peak (the
// larger of step 1 and the steady state), its band and verdict, what the mode switches on,
// and the recomputation it costs beyond the request. Transfers and host memory are the
// kind's (only transformer modes offload).
constexpr mode_plan mode_plan_of(mode m, const training_spec& request, const training_spec& run,
                                 const estimate_result& e, const error_band& band, bytes budget) {
  mode_plan p{};
  p.m = m;
  p.run = run;
  p.switched_on = switched_on(request, run);
  const peak_estimate& worst = overall_peak(e);
  p.peak = worst.device;
  p.tensor_peak = worst.tensor;
  p.breakdown = worst.breakdown;
  p.at = worst.at;
  p.band = band;
  p.range = range_of(p.peak, p.band);
  p.v = verdict_of(p.range, budget);
  p.fits = p.v == verdict::fits;
  // Full recomputation re-runs each checkpointed block's (stage's) forward once during
  // backward (Korthikanti et al. 2022, arXiv 2205.05198 sec. 4: about one extra forward pass);
  // a technique the request already uses is not charged again.
  if (run.ckpt == checkpointing::full && request.ckpt != checkpointing::full) p.cost.recompute_fraction = 1.0;
  return p;
}

// A mode's peak, range and verdict as the device estimate's verdict gives them at the budget
// (device_peak.hpp verdict_with: where the unconstrained reserved peak outgrows the budget, what
// the capped replay reserves there, and never "fits" for a run that releases the cache), so a plan
// and its caching-allocator section agree.
template <class DeviceVerdict>
constexpr void take_device_verdict(mode_plan& p, const DeviceVerdict& v) {
  p.peak = v.at_budget;
  p.range = v.range;
  p.v = v.v;
  p.fits = p.v == verdict::fits;
}

// The checks of a planner's input that come before any estimate (make_plan and fits()).
template <planning_kind K>
constexpr void validate_plan_input(const K& kind, const training_spec& run, const gpu_spec& gpu,
                                   const plan_options& options) {
  kind.validate();
  validate(run);
  if (gpu.memory.value == 0) fail(error_code::invalid_gpu, "gpu.memory", "must be > 0", 0);
  if (options.max_batch_search == 0) fail(error_code::invalid_plan_option, "plan.max_batch_search", "must be > 0", 0);
  check_precision_support(run.prec, gpu);
}

// One mode's fit results at the micro-batches evaluated so far, so that no estimate is made
// twice: a larger micro-batch never needs less memory, so every micro-batch up to `fits.at`
// fits and none from `over.at` on does (at == 0: none known yet).
struct mode_search {
  training_spec run{};  // the request with the mode's techniques; micro_batch varies
  bytes budget{};
  probe_point fits{};
  probe_point over{};

  // The upper end of the peak's band at micro-batch b: one estimate, remembered.
  template <planning_kind K>
  constexpr std::uint64_t value_at(const K& kind, std::uint64_t b) {
    training_spec t = run;
    t.micro_batch = b;
    const std::uint64_t v = kind.peak_upper_end(t).value;
    if (v <= budget.value) {
      if (b > fits.at) fits = {b, v};
    } else if (over.at == 0 || b < over.at) {
      over = {b, v};
    }
    return v;
  }

  // Whether the mode fits at micro-batch b, from what is known when it can be.
  template <planning_kind K>
  constexpr bool fits_at(const K& kind, std::uint64_t b) {
    if (b <= fits.at) return true;
    if (over.at != 0 && b >= over.at) return false;
    return value_at(kind, b) <= budget.value;
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
template <planning_kind K>
constexpr mode_search search_of(const K& kind, const mode_plan& p, const training_spec& request, const gpu_spec& gpu,
                                bytes budget) {
  mode_search s{};
  s.run = kind.mode_run(request, p.m, gpu);
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

// The plan of `run` on `gpu` for a model of kind K.
// A plan that runs at micro-batch 1, accumulating the whole effective batch.
constexpr plan_result at_micro_batch_one(plan_result r, plan_status status, advice next_step,
                                         std::string_view reason) {
  r.micro_batch = 1;
  r.grad_accumulation = r.effective_batch;
  r.status = status;
  r.next_step = next_step;
  r.reason = reason;
  return r;
}

template <planning_kind K>
constexpr plan_result plan_with(const K& kind, const training_spec& run, const gpu_spec& gpu,
                                const plan_options& options) {
  validate_plan_input(kind, run, gpu, options);
  plan_result r{};
  r.vram = gpu.memory;
  r.headroom = validated_headroom(options);
  r.device = options.device;
  r.budget = budget_of(gpu, options);
  r.effective_batch = checked_mul(run.micro_batch, run.grad_accum);
  r.micro_batch = run.micro_batch;
  r.grad_accumulation = run.grad_accum;
  for (std::size_t i = 0; i < all_modes.size(); ++i)
    r.modes[i] = kind.plan_run(run, kind.mode_run(run, all_modes[i], gpu), gpu, all_modes[i], r.budget);
  r.unoptimized_peak = r.modes[0].peak;
  r.pressure = ratio(r.unoptimized_peak, r.vram);
  for (std::size_t i = 1; i < r.modes.size(); ++i)
    for (std::size_t j = i + 1; j < r.modes.size(); ++j)
      if (r.modes[j].peak > r.modes[i].peak) r.mode_order_inverted = true;
  if (r.mode_order_inverted) r.why_order_inverts = K::why_order_inverts;

  // The largest micro-batch over all modes: each mode's search is monotone in the budget,
  // so their maximum never falls when VRAM grows. The most memory-saving modes are searched
  // first; a later mode is searched only if it fits one more than the best so far. Each
  // search solves for the crossing from the peak values (largest_within_budget) and
  // remembers what it evaluated (mode_search), so no micro-batch is estimated twice.
  std::array<mode_search, 4> searches{};
  for (std::size_t i = 0; i < searches.size(); ++i) searches[i] = search_of(kind, r.modes[i], run, gpu, r.budget);
  const std::uint64_t search_hi = options.max_batch_search;
  bool request_fits = false;
  for (const auto& p : r.modes) request_fits = request_fits || p.fits;
  std::uint64_t divisor = 0;  // when nothing fits the request: step 2's micro-batch for the max so far
  for (const mode m : search_order) {
    const auto i = static_cast<std::size_t>(m);
    mode_search& s = searches[i];
    // A mode that does not fit the request fits less than the request's micro-batch.
    const std::uint64_t hi = r.modes[i].fits ? search_hi : min(search_hi, run.micro_batch - 1);
    if (r.max_micro_batch >= hi) continue;
    if (r.max_micro_batch > 0) {
      // Step 2 will ask this mode (gentler than the one of the max so far) about the divisor
      // d <= max_micro_batch: asked first, a mode that does not fit d cannot fit one more
      // than the max, and needs no other estimate.
      if (!request_fits && !s.fits_at(kind, divisor)) continue;
      if (!s.fits_at(kind, r.max_micro_batch + 1)) continue;
    }
    const auto value_at = [&](std::uint64_t b) { return s.value_at(kind, b); };
    const std::uint64_t largest =
        s.fits.at >= hi ? hi
                        : largest_within_budget(hi, r.budget.value, value_at, s.fits, s.over,
                                                first_guess(r.modes[i], run.micro_batch, r.budget));
    if (largest == 0) continue;
    r.max_micro_batch = largest;
    r.max_micro_batch_mode = m;
    if (!request_fits) divisor = largest_divisor_up_to(r.effective_batch, r.max_micro_batch);
  }

  // 1. The request fits in some mode: the least aggressive one.
  for (const auto& p : r.modes) {
    if (!p.fits) continue;
    r.chosen = p.m;
    r.fits = true;
    r.v = verdict::fits;
    r.status = p.m == mode::none ? plan_status::no_technique_needed : plan_status::mode_needed;
    r.reason = K::reason_for(p.m);
    return r;
  }
  r.v = verdict::does_not_fit;
  for (const auto& p : r.modes)
    if (p.v == verdict::borderline) r.v = verdict::borderline;

  // 2. A smaller micro-batch that divides the effective batch, so micro x accumulation
  //    stays exactly the requested effective batch; the least aggressive mode that fits it.
  if (r.max_micro_batch > 0) {
    const std::uint64_t d = largest_divisor_up_to(r.effective_batch, r.max_micro_batch);
    r.chosen = r.max_micro_batch_mode;  // fits d <= max_micro_batch; a gentler mode may too
    for (const mode m : all_modes) {
      if (m == r.max_micro_batch_mode) break;
      if (!searches[static_cast<std::size_t>(m)].fits_at(kind, d)) continue;
      r.chosen = m;
      break;
    }
    r.micro_batch = d;
    r.grad_accumulation = r.effective_batch / d;
    if (2 * d < r.max_micro_batch) {
      // Exact but slow (e.g. a prime effective batch): also say what rounding would change,
      // with the fewest accumulation steps and the micro-batch closest to an even split.
      const std::uint64_t accum = ceil_div(r.effective_batch, r.max_micro_batch);
      const std::uint64_t micro = min(r.max_micro_batch, (r.effective_batch + accum / 2) / accum);
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

  training_spec single = run;
  single.micro_batch = 1;
  single.grad_accum = r.effective_batch;
  if constexpr (K::streams_parameters) {
    // 3. Not even micro-batch 1: stream the parameters from the host as well and keep the
    //    optimizer there (ZeRO-Infinity, Rajbhandari et al. 2021, arXiv 2104.07857), at micro-batch 1.
    //    A model whose streaming is not modelled goes on to the next step.
    if (kind.can_stream_parameters()) {
      training_spec streamed = kind.mode_run(single, mode::aggressive, gpu);
      streamed.offload_parameters = true;
      streamed.offload_optimizer = true;  // ZeRO-Infinity keeps optimizer state and gradients off the device too
      streamed.paged_optimizer = false;   // its host optimizer replaces bitsandbytes' paged one
      r.parameter_offload = kind.plan_run(run, streamed, gpu, mode::aggressive, r.budget);
      if (r.parameter_offload.fits) {
        r.chosen = mode::aggressive;
        return at_micro_batch_one(r, plan_status::parameter_offload, advice::offload_parameters,
                                  "no mode fits even at micro-batch 1; AGGRESSIVE fits when parameters are also "
                                  "streamed from the host");
      }
    }
  }

  if constexpr (K::has_sequence) {
    // 4. A shorter sequence at micro-batch 1, in any mode: the largest over the modes. As for
    //    the micro-batch, the most memory-saving modes go first, and a later mode is searched
    //    only if it fits one more than the best so far (one estimate otherwise).
    for (const mode m : search_order) {
      training_spec t = kind.mode_run(single, m, gpu);
      const auto value_at = [&](std::uint64_t len) {
        t.seq_len = len;
        return kind.peak_upper_end(t).value;
      };
      // At micro-batch 1 the request is `single` itself: its full length is known not to fit.
      const probe_point over = run.micro_batch == 1
                                   ? probe_point{run.seq_len, r.modes[static_cast<std::size_t>(m)].range.high.value}
                                   : probe_point{};
      probe_point fit{};
      if (r.max_seq_len > 0) {
        if (r.max_seq_len + 1 >= run.seq_len) break;  // nothing longer is left to find below the request
        fit = {r.max_seq_len + 1, value_at(r.max_seq_len + 1)};
        if (fit.value > r.budget.value) continue;
      }
      const std::uint64_t s = largest_within_budget(run.seq_len, r.budget.value, value_at, fit, over);
      r.max_seq_len = max(r.max_seq_len, s);
    }
    if (r.max_seq_len > 0)
      return at_micro_batch_one(r, plan_status::shorter_sequence, advice::shorter_sequence,
                                "even micro-batch 1 does not fit; a shorter sequence does");
  }
  r.status = plan_status::nothing_fits;
  r.next_step = advice::smaller_model_or_more_gpus;
  r.reason = K::nothing_fits_reason;
  return r;
}

// The verdict of plan_with(kind, run, gpu, options).fits without the rest of the plan: the
// same checks of the input, then the modes' peaks at the request, stopping at the first mode
// that fits. `least_required` (when none fits) is the smallest upper end of any mode's band.
struct request_fit {
  bool fits = false;
  bytes least_required{};
  bytes budget{};
};

template <planning_kind K>
constexpr request_fit fit_with(const K& kind, const training_spec& run, const gpu_spec& gpu,
                               const plan_options& options) {
  validate_plan_input(kind, run, gpu, options);
  request_fit f{};
  f.budget = budget_of(gpu, options);
  static_cast<void>(checked_mul(run.micro_batch, run.grad_accum));  // the effective batch, as plan_with checks it
  for (const mode m : all_modes) {
    const training_spec t = kind.mode_run(run, m, gpu);
    const bytes need = kind.peak_upper_end(t);
    if (need <= f.budget) {
      f.fits = true;
      f.least_required = need;
      return f;
    }
    f.least_required = m == mode::none ? need : min(f.least_required, need);
  }
  return f;
}

}  // namespace memscale::detail
