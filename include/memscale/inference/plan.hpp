// memscale/inference/plan.hpp: whether generate() fits a GPU, and the largest batch and
// prompt that do: the device figure of inference/device.hpp (the allocator replay and the GPU's
// context) with its band, as a training plan judges a step.
#pragma once

#include <cstdint>

#include "memscale/detail/largest_fitting.hpp"
#include "memscale/device_options.hpp"
#include "memscale/device_peak.hpp"
#include "memscale/gpus.hpp"
#include "memscale/inference/device.hpp"
#include "memscale/inference/generate_peak.hpp"
#include "memscale/inference/spec.hpp"
#include "memscale/model.hpp"
#include "memscale/plan_result.hpp"

namespace memscale {

struct inference_plan {
  bytes vram{};
  bytes budget{};                    // vram x (1 - headroom)
  double headroom = default_headroom;
  inference_result estimate{};       // the tensors (device.tensors)
  inference_device_estimate device{};
  device_verdict verdict{};          // the device figure with its band against the budget
  bool fits = false;                 // verdict.v == verdict::fits: the band's upper end and the point verdict
  double pressure = 0.0;             // device peak / vram
  std::uint64_t max_batch = 0;       // largest batch whose band's upper end fits at this context
  std::uint64_t max_context = 0;     // largest prompt whose band's upper end fits at this batch
};

// Upper bound of the context search when the model has no position table.
inline constexpr std::uint64_t max_context_search = 1ULL << 21;

// The call at another batch or prompt length (the plan's searches and the OOM-cliff picture). A
// static cache sized for the request follows the new length.
constexpr inference_spec inference_at(const inference_spec& r, std::uint64_t batch, std::uint64_t context) {
  inference_spec t = r;
  t.batch = batch;
  t.context = context;
  if (t.cache == kv_cache_kind::static_preallocated && t.max_cache_len != 0 &&
      t.max_cache_len < detail::checked_add(context, t.new_tokens))
    t.max_cache_len = 0;
  validate(t);
  return t;
}

namespace detail {

// inference_upper_end over the run's weights graph (inference_weights_graph).
constexpr bytes inference_upper_end_with(const model_spec& model, const inference_spec& run, const gpu_spec& gpu,
                                         const device_options& device, const graph& weights) {
  const gpu_spec on = gpu;  // a local: g++ 12 cannot compare the address of an optional's payload in constant evaluation
  check_inference(model, run);
  const inference_device_estimate d = estimate_inference_on_device_with(model, run, &on, device, weights);
  return range_of(d.device, inference_band_of(model, run, d)).high;
}

}  // namespace detail

// The figure a search compares with the budget: the upper end of the band of the device peak.
constexpr bytes inference_upper_end(const model_spec& model, const inference_spec& run, const gpu_spec& gpu,
                                    const device_options& device = {}) {
  detail::check_inference(model, run);
  const model_graph weights = detail::inference_weights_graph(model, run);
  return detail::inference_upper_end_with(model, run, gpu, device, weights.stack());
}

constexpr inference_plan plan_inference(const model_spec& model, const inference_spec& run, const gpu_spec& gpu,
                                        const plan_options& options = {}, const device_options& device = {}) {
  if (gpu.memory.value == 0) detail::fail(error_code::invalid_gpu, "gpu.memory", "must be > 0", 0);
  inference_spec r = run;
  r.blas_workspace = gpu.cublas_workspace;
  inference_plan p{};
  p.vram = gpu.memory;
  p.headroom = detail::validated_headroom(options);
  p.budget = budget_of(gpu, options);
  const gpu_spec on = gpu;  // see inference_upper_end
  detail::check_inference(model, r);
  // Every estimate of the searches below reads the same weights graph: built once.
  const model_graph weights = detail::inference_weights_graph(model, r);
  p.device = detail::estimate_inference_on_device_with(model, r, &on, device, weights.stack());
  p.estimate = p.device.tensors;
  p.verdict = inference_verdict_on_device(model, r, p.device, p.budget, device);
  p.fits = p.verdict.v == verdict::fits;
  p.pressure = ratio(p.device.device, p.vram);
  auto upper_end_at = [&](std::uint64_t batch, std::uint64_t context) {
    return detail::inference_upper_end_with(model, inference_at(r, batch, context), on, device, weights.stack()).value;
  };
  // Both searches start from the request's own figure, a point known to fit or not, and solve
  // for the crossing from the figures (largest_within_budget): 8 estimates instead of 36 keep a 7B
  // plan in a static_assert well under clang's default constexpr step limit (docs/inference.md).
  const bool request_fits = p.verdict.range.high <= p.budget;
  const auto known = [&](std::uint64_t at, std::uint64_t hi, bool fit_side) {
    const detail::probe_point point{.at = at, .value = p.verdict.range.high.value};
    return (fit_side == request_fits && (!request_fits || at <= hi)) ? point : detail::probe_point{};
  };
  const std::uint64_t batch_hi = options.max_batch_search;
  p.max_batch = detail::largest_within_budget(
      batch_hi, p.budget.value, [&](std::uint64_t b) { return upper_end_at(b, r.context); },
      known(r.batch, batch_hi, true), known(r.batch, batch_hi, false));
  // Learned positions bound the prompt and the new tokens, and so does gpt-fast's block_size (its
  // freqs_cis and causal mask have that many rows: model.py@32971d31 setup_caches).
  const std::uint64_t limit = model.positions == position_kind::learned ? model.max_positions
                              : r.loop == generate_loop::gpt_fast       ? sequence_limit_of(model).tokens
                                                                         : 0;
  const std::uint64_t positions_left = limit > r.new_tokens ? limit - r.new_tokens : max_context_search;
  p.max_context = detail::largest_within_budget(
      positions_left, p.budget.value, [&](std::uint64_t c) { return upper_end_at(r.batch, c); },
      known(r.context, positions_left, true), known(r.context, positions_left, false));
  return p;
}

}  // namespace memscale
