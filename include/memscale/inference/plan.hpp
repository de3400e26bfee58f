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
  auto fits_with = [&](std::uint64_t batch, std::uint64_t context) {
    inference_spec t = r;
    t.batch = batch;
    t.context = context;
    if (t.cache == kv_cache_kind::static_preallocated && t.max_cache_len != 0 &&
        t.max_cache_len < detail::checked_add(context, t.new_tokens))
      t.max_cache_len = 0;
    validate(t);
    return detail::estimate_generate(model, t, built.stack()).peak.device <= p.budget;
  };
  p.max_batch = detail::largest_fitting(options.max_batch_search, [&](std::uint64_t b) { return fits_with(b, r.context); });
  const std::uint64_t positions_left =
      model.positions == position_kind::learned && model.max_positions > r.new_tokens ? model.max_positions - r.new_tokens
                                                                                     : max_context_search;
  p.max_context = detail::largest_fitting(positions_left, [&](std::uint64_t c) { return fits_with(r.batch, c); });
  return p;
}

}  // namespace memscale
