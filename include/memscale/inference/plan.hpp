// memscale/inference/plan.hpp: whether generate() fits a GPU, and the largest batch and
// prompt that do.
#pragma once

#include <cstdint>

#include "memscale/detail/largest_fitting.hpp"
#include "memscale/gpus.hpp"
#include "memscale/inference/generate_peak.hpp"
#include "memscale/inference/spec.hpp"
#include "memscale/model.hpp"
#include "memscale/plan_result.hpp"

namespace memscale {

struct inference_plan {
  bytes vram{};
  bytes budget{};                    // vram x (1 - headroom)
  double headroom = default_headroom;
  inference_result estimate{};
  bool fits = false;                 // device peak <= budget
  double pressure = 0.0;             // device peak / vram
  std::uint64_t max_batch = 0;       // largest batch that fits at this context
  std::uint64_t max_context = 0;     // largest prompt that fits at this batch
};

// Upper bound of the context search when the model has no position table.
inline constexpr std::uint64_t max_context_search = 1ULL << 21;

constexpr inference_plan plan_inference(const model_spec& model, const inference_spec& run, const gpu_spec& gpu,
                                        const plan_options& options = {}) {
  if (gpu.memory.value == 0) detail::fail(error_code::invalid_gpu, "gpu.memory", "must be > 0", 0);
  inference_spec r = run;
  r.blas_workspace = gpu.cublas_workspace;
  inference_plan p{};
  p.vram = gpu.memory;
  p.headroom = detail::validated_headroom(options);
  p.budget = budget_of(gpu, options);
  p.estimate = estimate_inference(model, r);
  // Every estimate below is of the same model: its weights graph is built once.
  const model_graph built = detail::weights_graph(model);
  p.fits = p.estimate.peak.device <= p.budget;
  p.pressure = ratio(p.estimate.peak.device, p.vram);
  // The device peak of the run at another batch or prompt length.
  auto device_peak_at = [&](std::uint64_t batch, std::uint64_t context) {
    inference_spec t = r;
    t.batch = batch;
    t.context = context;
    if (t.cache == kv_cache_kind::static_preallocated && t.max_cache_len != 0 &&
        t.max_cache_len < detail::checked_add(context, t.new_tokens))
      t.max_cache_len = 0;
    validate(t);
    return detail::estimate_generate(model, t, built.stack()).peak.device.value;
  };
  // Both searches start from the request's own estimate, a point known to fit or not, and
  // solve for the crossing from the peak values (largest_within_budget): a plan in a
  // static_assert stays within clang's default constexpr step limit.
  const auto known = [&](std::uint64_t at, std::uint64_t hi, bool fit_side) {
    const detail::probe_point point{.at = at, .value = p.estimate.peak.device.value};
    return (fit_side == p.fits && (!p.fits || at <= hi)) ? point : detail::probe_point{};
  };
  const std::uint64_t batch_hi = options.max_batch_search;
  p.max_batch = detail::largest_within_budget(
      batch_hi, p.budget.value, [&](std::uint64_t b) { return device_peak_at(b, r.context); },
      known(r.batch, batch_hi, true), known(r.batch, batch_hi, false));
  const std::uint64_t positions_left =
      model.positions == position_kind::learned && model.max_positions > r.new_tokens ? model.max_positions - r.new_tokens
                                                                                     : max_context_search;
  p.max_context = detail::largest_within_budget(
      positions_left, p.budget.value, [&](std::uint64_t c) { return device_peak_at(r.batch, c); },
      known(r.context, positions_left, true), known(r.context, positions_left, false));
  return p;
}

}  // namespace memscale
