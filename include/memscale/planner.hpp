// memscale/planner.hpp: which MemScale mode makes a run fit a GPU, and at what cost.
//
// Modes (MemScale documentation): CONSERVATIVE = gradient checkpointing; BALANCED =
// checkpointing + CPU offloading (optimizer state, checkpointed activations); AGGRESSIVE
// = the full stack: checkpointing, offloading, activation tiling (memory-efficient
// attention, chunked cross-entropy), mixed precision (BF16, FP16 without BF16) and an
// 8-bit optimizer. Each mode's peak is estimated by the same estimators, never as a
// flat percentage; the planner picks the least aggressive mode whose peak fits the budget.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "memscale/estimate.hpp"
#include "memscale/gpus.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale {

enum class mode : std::uint8_t { none, conservative, balanced, aggressive };

constexpr std::string_view to_string(mode m) noexcept {
  switch (m) {
    case mode::none: return "none";
    case mode::conservative: return "conservative";
    case mode::balanced: return "balanced";
    case mode::aggressive: return "aggressive";
  }
  return "none";
}

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

// Throughput cost of a mode, as a model the user can check.
struct mode_cost {
  double recompute_fraction = 0.0;      // extra forward passes per step (1 = one full forward)
  double transfer_seconds = 0.0;        // host<->device traffic per optimizer step / link bandwidth
  bytes host_memory{};                  // host RAM the offloaded state needs
};

struct mode_plan {
  mode m = mode::none;
  training_spec run{};       // the run with the mode's techniques switched on
  bytes peak{};              // device total (reserved + context), the larger of step 1 and steady state
  bytes tensor_peak{};       // max_memory_allocated
  memory_breakdown breakdown{};
  phase at = phase::backward;
  bool fits = false;
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

struct plan_result {
  bytes vram{};                  // what the device offers
  bytes budget{};                // vram * (1 - headroom)
  double headroom = default_headroom;
  bytes unoptimized_peak{};
  double pressure = 0.0;         // unoptimized peak / vram
  std::array<mode_plan, 4> modes{};
  mode_plan parameter_offload{};       // AGGRESSIVE + parameters streamed from the host, when no mode fits
  mode chosen = mode::none;
  bool fits = false;
  std::uint64_t max_micro_batch = 0;   // largest micro-batch that fits with the chosen (or most aggressive) mode
  std::uint64_t grad_accumulation = 1; // keeps micro_batch * grad_accum of the request
  std::uint64_t max_seq_len = 0;       // largest sequence length that fits at micro-batch 1 (when nothing fits)
  advice next_step = advice::none;
  std::string_view reason{};

  [[nodiscard]] constexpr const mode_plan& chosen_plan() const { return modes[static_cast<std::size_t>(chosen)]; }
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

// The run with a mode's techniques switched on.
constexpr training_spec apply_mode(training_spec run, mode m, const gpu_spec& gpu) {
  run.blas_workspace = gpu.cublas_workspace;
  if (m == mode::none) return run;
  run.ckpt = checkpointing::full;  // every mode checkpoints (Chen et al. 2016, arXiv 1604.06174)
  if (m == mode::conservative) return run;
  run.offload_optimizer = true;    // ZeRO-Offload (Ren et al. 2021, arXiv 2101.06840)
  run.offload_activations = true;  // checkpointed block inputs wait on the host
  if (m == mode::balanced) return run;
  run.attention = attention_impl::flash;  // tiled attention (Dao et al. 2022, arXiv 2205.14135)
  run.loss = loss_impl::chunked;          // tiled loss over sequence chunks
  // Mixed precision with the fp32 master weights kept on the host beside the offloaded
  // optimizer (ZeRO-Offload sec. 4; Micikevicius et al. 2018, arXiv 1710.03740): the
  // device holds 16-bit parameters, gradients and activations; BF16 where the GPU
  // supports it, FP16 otherwise.
  run.prec = gpu.bf16 ? precision::pure_bf16 : precision::pure_fp16;
  run.optimizer = optimizer_kind::adamw_8bit;  // Dettmers et al. 2022, arXiv 2110.02861
  return run;
}

constexpr mode_cost cost_of(const estimate_result& e, const graph& g, const training_spec& run,
                            const gpu_spec& gpu) {
  mode_cost c{};
  // Full recomputation re-runs each block's forward once during backward (Korthikanti et
  // al. 2022, arXiv 2205.05198 sec. 4: about one extra forward pass).
  if (run.ckpt == checkpointing::full) c.recompute_fraction = 1.0;
  const double link = gpu.host_link_gb_per_s * 1e9;
  double moved = 0.0;
  if (run.offload_optimizer) {
    // Gradients go to the host and updated parameters come back every step; the host
    // holds the optimizer state and, for 16-bit device weights, fp32 master weights.
    moved += static_cast<double>(e.gradient_bytes.value) + static_cast<double>(e.parameter_bytes.value);
    c.host_memory += e.optimizer_bytes + e.gradient_bytes;
    if (run.prec == precision::pure_bf16 || run.prec == precision::pure_fp16)
      c.host_memory += storage(dtype::fp32, e.trainable_parameter_count);  // fp32 master weights
  }
  if (run.offload_parameters) {
    // Parameters stream in for the forward and again for the backward, block by block.
    moved += 2.0 * static_cast<double>(e.parameter_bytes.value);
    c.host_memory += e.parameter_bytes;
  }
  if (run.offload_activations && run.ckpt == checkpointing::full) {
    const bytes inputs = section_saved_bytes(g, block_of(g), run, true) * g.block_repeats;
    moved += 2.0 * static_cast<double>(inputs.value);  // out after forward, back for backward
    c.host_memory += inputs;
  }
  c.transfer_seconds = moved / link;
  return c;
}

constexpr mode_plan plan_mode(const model_spec& model, const training_spec& request, const gpu_spec& gpu, mode m,
                              bytes budget) {
  mode_plan p{};
  p.m = m;
  p.run = apply_mode(request, m, gpu);
  const graph g = build_graph(model, p.run);  // encoder-decoder: one stack's shape, for transfer costs
  const estimate_result e = model.arch == architecture::encoder_decoder ? estimate(model, p.run) : estimate(g, p.run);
  const bool step_one_larger = e.first_step.device > e.steady.device;
  const peak_estimate& worst = step_one_larger ? e.first_step : e.steady;
  p.peak = worst.device;
  p.tensor_peak = worst.tensor;
  p.breakdown = worst.breakdown;
  p.at = worst.at;
  p.fits = p.peak <= budget;
  p.cost = cost_of(e, g, p.run, gpu);
  return p;
}

constexpr bool mode_fits(const model_spec& model, training_spec run, const gpu_spec& gpu, mode m, bytes budget) {
  return plan_mode(model, run, gpu, m, budget).fits;
}

// Largest value in [1, hi] for which fits_at(v) holds, assuming fits is monotone
// (a larger batch or sequence never needs less memory); 0 when even 1 does not fit.
template <class Fits>
constexpr std::uint64_t largest_fitting(std::uint64_t hi, Fits fits_at) {
  if (hi == 0 || !fits_at(std::uint64_t{1})) return 0;
  std::uint64_t lo = 1;  // fits
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo + 1) / 2;
    if (fits_at(mid)) lo = mid; else hi = mid - 1;
  }
  return lo;
}

}  // namespace detail

constexpr bytes budget_of(const gpu_spec& gpu, const plan_options& options = {}) {
  const double headroom = detail::validated_headroom(options);
  // Round down: the budget must never exceed what the headroom allows.
  // The double nearest a memory close to 2^64 may be 2^64 itself: floor_to_u64 refuses it.
  return bytes{detail::min(gpu.memory.value, detail::floor_to_u64(static_cast<double>(gpu.memory.value) * (1.0 - headroom),
                                                                  detail::quantity{"plan.budget (gpu.memory x (1 - headroom))"}))};
}

constexpr plan_result make_plan(const model_spec& model, const training_spec& run, const gpu_spec& gpu,
                                const plan_options& options = {}) {
  validate(model);
  validate(run);
  if (gpu.memory.value == 0) detail::fail(error_code::invalid_gpu, "gpu.memory", "must be > 0", 0);
  plan_result r{};
  r.vram = gpu.memory;
  r.headroom = detail::validated_headroom(options);
  r.budget = budget_of(gpu, options);
  constexpr std::array all_modes{mode::none, mode::conservative, mode::balanced, mode::aggressive};
  for (std::size_t i = 0; i < all_modes.size(); ++i) r.modes[i] = detail::plan_mode(model, run, gpu, all_modes[i], r.budget);
  r.unoptimized_peak = r.modes[0].peak;
  r.pressure = ratio(r.unoptimized_peak, r.vram);

  bool found = false;
  for (const auto& p : r.modes) {
    if (p.fits) {
      r.chosen = p.m;
      found = true;
      break;
    }
  }
  r.fits = found;
  if (!found) {
    // The last technique: stream parameters from the host (ZeRO-Infinity, Rajbhandari
    // et al. 2021, arXiv 2104.07857), before shrinking the batch.
    training_spec streamed = run;
    streamed.offload_parameters = true;
    r.parameter_offload = detail::plan_mode(model, streamed, gpu, mode::aggressive, r.budget);
    if (r.parameter_offload.fits) {
      r.next_step = advice::offload_parameters;
      r.max_micro_batch = run.micro_batch;
      r.grad_accumulation = run.grad_accum;
      r.reason = "no mode fits; AGGRESSIVE fits when parameters are also streamed from the host";
      return r;
    }
  }
  const mode search_mode = found ? r.chosen : mode::aggressive;
  const auto effective = detail::checked_mul(run.micro_batch, run.grad_accum);
  r.max_micro_batch = detail::largest_fitting(found ? options.max_batch_search : run.micro_batch, [&](std::uint64_t b) {
    training_spec t = run;
    t.micro_batch = b;
    return detail::mode_fits(model, t, gpu, search_mode, r.budget);
  });
  if (found) {
    r.grad_accumulation = run.grad_accum;
    r.reason = r.chosen == mode::none ? "the run fits without memory-saving techniques"
               : r.chosen == mode::conservative ? "gradient checkpointing alone brings the peak under the budget"
               : r.chosen == mode::balanced ? "checkpointing is not enough; offloading optimizer state and "
                                              "checkpointed activations to the CPU is"
                                            : "only the full stack (checkpointing, offloading, tiling, 16-bit "
                                              "weights, 8-bit optimizer) fits";
    return r;
  }
  if (r.max_micro_batch > 0) {
    r.grad_accumulation = detail::ceil_div(effective, r.max_micro_batch);
    r.next_step = advice::smaller_micro_batch;
    r.reason = "no mode fits at this micro-batch; AGGRESSIVE fits a smaller micro-batch with more gradient accumulation";
    return r;
  }
  r.max_seq_len = detail::largest_fitting(run.seq_len, [&](std::uint64_t s) {
    training_spec t = run;
    t.micro_batch = 1;
    t.seq_len = s;
    return detail::mode_fits(model, t, gpu, mode::aggressive, r.budget);
  });
  r.next_step = r.max_seq_len > 0 ? advice::shorter_sequence : advice::smaller_model_or_more_gpus;
  r.reason = r.max_seq_len > 0 ? "even micro-batch 1 does not fit; AGGRESSIVE fits a shorter sequence"
                               : "the model states alone exceed the budget: use a smaller model or shard over more "
                                 "GPUs";
  return r;
}

// True when the run fits the GPU in at least one mode.
constexpr bool fits(const model_spec& model, const training_spec& run, const gpu_spec& gpu,
                    const plan_options& options = {}) {
  return make_plan(model, run, gpu, options).fits;
}

// Deliberately not constexpr: reaching it in constant evaluation stops compilation and
// the compiler prints both numbers as template arguments.
template <std::uint64_t RequiredBytes, std::uint64_t BudgetBytes>
void run_does_not_fit_required_vs_budget_bytes() {}

// static_assert(memscale::assert_fits<model, run, gpu>()): on failure the diagnostic
// names run_does_not_fit_required_vs_budget_bytes<required, budget>. Pass variables
// with static storage (inline constexpr) by reference.
template <const model_spec& Model, const training_spec& Run, const gpu_spec& Gpu>
consteval bool assert_fits() {
  constexpr plan_result plan = make_plan(Model, Run, Gpu);
  if constexpr (!plan.fits) {
    run_does_not_fit_required_vs_budget_bytes<plan.modes[3].peak.value, plan.budget.value>();
  }
  return plan.fits;
}

}  // namespace memscale
