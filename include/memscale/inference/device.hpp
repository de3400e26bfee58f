// memscale/inference/device.hpp: the three figures of a generate() call on a CUDA device and the
// verdict on a memory budget, as device_peak.hpp gives them for a training step:
// - tensor (max_memory_allocated): estimate_inference();
// - reserved (max_memory_reserved): setup, the prefill and every decoding step replayed through
//   the caching allocator (allocator/replay_generate.hpp), where an event stream describes the call;
//   else the rounding rule of estimate_inference(), and `fallback` says why;
// - device (nvidia-smi): reserved plus the context of an inference process on that GPU
//   (allocator/context.hpp, workload::inference: no training kernels loaded).
// The verdict takes the band measured for its class of generate() call; a class without a
// measurement of its reserved figure takes the policy band.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "memscale/allocator/context.hpp"
#include "memscale/allocator/replay_generate.hpp"
#include "memscale/device_options.hpp"
#include "memscale/device_peak.hpp"
#include "memscale/error_band.hpp"
#include "memscale/gpus.hpp"
#include "memscale/inference/generate_peak.hpp"
#include "memscale/inference/spec.hpp"
#include "memscale/model.hpp"

namespace memscale {

struct inference_device_estimate {
  inference_result tensors{};
  bytes tensor{};            // tensors.peak.tensor: max_memory_allocated
  bytes reserved{};          // max_memory_reserved
  bytes device{};            // nvidia-smi: reserved + context
  bytes replay_allocated{};  // the replay's max_memory_allocated (blocks and unsplit tails)
  allocator::context_estimate context{};
  context_source context_from = context_source::flat;
  replay_fallback fallback = replay_fallback::none;

  [[nodiscard]] constexpr bool replayed() const { return fallback == replay_fallback::none; }
};

namespace detail {

// The generate() calls an event stream describes (allocator/generate_events.hpp).
constexpr bool generate_streamed(const model_spec& model, const inference_spec& run) {
  if (!generate_walk_covers(model) || run.kv_lora_rank != 0) return false;
  if (run.loop == generate_loop::gpt_fast) return run.weights == weight_format::native || is_gpt_fast_weights(run.weights);
  if (run.weights != weight_format::native && run.weights != weight_format::mxfp4) return false;
  return run.cache != kv_cache_kind::sliding_window;
}

// The events of one call: the prefill's ops plus every decoding step's, each a layer walk.
constexpr std::uint64_t generate_stream_ops(const model_spec& model, const inference_spec& run) {
  const std::uint64_t forwards = checked_add(run.new_tokens > 1 ? run.new_tokens - 1 : 0, 1);
  return checked_mul(forwards, checked_add(model.layers, 2), graph_capacity / 16);
}

template <std::size_t Capacity>
constexpr replay_outcome replay_generate_with(const model_spec& model, const inference_spec& run,
                                              const device_options& o, bytes cap) {
  return {allocator::replay_generate<Capacity, Capacity>(model, run, o.allocator, cap)};
}

// generate() replayed (capped when `cap` is not zero), or why not. In constant evaluation only a
// call as small as the training replay's limit (constant_replay_ops) is replayed.
constexpr replay_outcome replay_generate_of(const model_spec& model, const inference_spec& run,
                                            const device_options& o, bytes cap) {
  if (!generate_streamed(model, run)) return {{}, replay_fallback::no_stream};
  if (std::is_constant_evaluated()) {
    if (generate_stream_ops(model, run) > constant_replay_ops) return {{}, replay_fallback::constant_evaluation};
    return replay_generate_with<constant_replay_capacity>(model, run, o, cap);
  }
  try {
    return replay_generate_with<run_time_replay_capacity>(model, run, o, cap);
  } catch (const error& e) {
    // The tables' limits are the only unsupported case left once generate_streamed holds.
    if (e.code() != error_code::unsupported) throw;
    return {{}, replay_fallback::too_large};
  }
}

// An inference process's context: no training kernels; SDPA's flash and memory-efficient kernels
// in half precision (allocator/context.hpp).
constexpr allocator::context_estimate inference_context_of(const inference_spec& run, const gpu_spec* gpu,
                                                           const device_options& o, context_source& from) {
  if (o.context_override.value != 0) {
    from = context_source::measured;
    return allocator::context_memory({.lazy_loading = run.cuda_lazy_loading, .override_total = o.context_override});
  }
  const bool half = run.compute != dtype::fp32;
  if (gpu == nullptr || gpu->multiprocessors == 0 || gpu->max_threads_per_multiprocessor == 0 ||
      gpu->vendor != gpu_vendor::nvidia) {
    from = context_source::flat;
    allocator::context_estimate flat{};
    flat.base = cuda_context_bytes(run.cuda_lazy_loading);
    flat.eager_loading = !run.cuda_lazy_loading;
    return flat;
  }
  from = context_source::model;
  return allocator::context_memory({.streaming_multiprocessors = gpu->multiprocessors,
                                    .max_threads_per_sm = gpu->max_threads_per_multiprocessor,
                                    .work = allocator::workload::inference,
                                    .half_precision = half,
                                    .flash_attention = half && (run.attention == attention_impl::sdpa ||
                                                                run.attention == attention_impl::flash),
                                    .lazy_loading = run.cuda_lazy_loading});
}

// estimate_inference_on_device of a checked model and run (check_inference) over the run's
// weights graph (inference_weights_graph), which a plan builds once for all its estimates.
constexpr inference_device_estimate estimate_inference_on_device_with(const model_spec& model,
                                                                      const inference_spec& run, const gpu_spec* gpu,
                                                                      const device_options& o, const graph& weights) {
  inference_device_estimate d{};
  d.tensors = estimate_checked_inference(model, run, weights);
  d.tensor = d.tensors.peak.tensor;
  if (run.device != device_kind::cuda) {
    d.fallback = replay_fallback::not_cuda;
    d.reserved = d.tensors.peak.reserved;
    d.device = d.tensors.peak.device;
    return d;
  }
  d.context = detail::inference_context_of(run, gpu, o, d.context_from);
  const detail::replay_outcome r = detail::replay_generate_of(model, run, o, {});
  d.fallback = r.fallback;
  if (d.replayed()) {
    d.replay_allocated = r.result.allocated_peak;
    d.reserved = r.result.reserved_peak;
  } else {
    d.reserved = d.tensors.peak.reserved;
  }
  d.device = d.reserved + d.context.total();
  return d;
}

}  // namespace detail

// generate()'s tensor, reserved and device peaks. `gpu` (may be null) sizes the context; the run's
// blas_workspace should be the GPU's (plan_inference sets it).
constexpr inference_device_estimate estimate_inference_on_device(const model_spec& model, const inference_spec& run,
                                                                 const gpu_spec* gpu = nullptr,
                                                                 const device_options& o = {}) {
  detail::check_inference(model, run);
  const model_graph weights = detail::inference_weights_graph(model, run);
  return detail::estimate_inference_on_device_with(model, run, gpu, o, weights.stack());
}

// Whether the call fits `budget` bytes of device memory by the point estimates, as fit_on_device
// decides a training step.
constexpr device_fit fit_inference_on_device(const model_spec& model, const inference_spec& run,
                                             const inference_device_estimate& d, bytes budget,
                                             const device_options& o = {}) {
  return detail::fit_by_replay(d.replayed(), d.device, d.context.total(), d.replay_allocated, d.reserved, budget,
                               [&](bytes capacity) { return detail::replay_generate_of(model, run, o, capacity); });
}

// gpt-fast's generate() replayed: the three H100 runs of docs/data/gpu_allocator_runs/gpt_fast_h100.json
// (torch 2.11), reserved and nvidia-smi +1.14% .. +3.37% with its RMSNorm and RoPE walked tensor by
// tensor; three runs do not bound either end, so both are the transformers replay's
// (replayed_device_band), which the same allocator rules give.
inline constexpr error_band replayed_gpt_fast_band{
    run_class::gpu_published, -0.05, 0.04, true,
    "docs/inference.md, gpt-fast's generate() on an H100 with the allocator replay and the context model (3 runs): "
    "reserved and nvidia-smi +1.14% .. +3.37%, the ends those of the transformers replay", band_quantity::device};

// The band of d.device. Replayed transformers generate() of a dense Hugging Face decoder from torch
// 2.0 under transformers 5 has the band its nine H100 runs measured (replayed_generate_band); before
// 5.0 (no run measured) the replayed class's (replayed_device_band); gpt-fast has its own; every
// other call (experts before 5.0, MXFP4 experts, a quantized or sliding cache, older stacks, the
// rounding rule) has no measurement of its reserved figure and takes the policy band.
constexpr const error_band& inference_band_of(const model_spec& model, const inference_spec& run,
                                              const inference_device_estimate& d) {
  // Experts are measured in generate() under transformers 5 only (the experts interface: OLMoE,
  // Qwen1.5-MoE, Mixtral within -1.30% .. +1.44%); DeepSeek's latent attention is not (-15.3%).
  const bool experts_measured = model.experts == 0 || (run.transformers_version >= 500 && !has_latent_attention(model));
  // MXFP4's matmul_ogs experts are replayed but not measured on a GPU.
  const bool measured_path = d.replayed() && experts_measured && run.weights != weight_format::mxfp4 &&
                             run.torch_version >= 200 &&
                             model.impl == implementation::hf_transformers && run.kv == run.compute &&
                             (run.cache == kv_cache_kind::dynamic || run.cache == kv_cache_kind::static_preallocated ||
                              run.loop == generate_loop::gpt_fast);
  if (!measured_path) return band_of(run_class::unmeasured, band_quantity::device);
  if (run.loop == generate_loop::gpt_fast) return replayed_gpt_fast_band;
  if (model.experts > 0) return replayed_generate_band;
  return run.transformers_version >= 500 ? replayed_generate_band : replayed_device_band;
}

constexpr device_verdict inference_verdict_on_device(const model_spec& model, const inference_spec& run,
                                                     const inference_device_estimate& d, bytes budget,
                                                     const device_options& o = {}) {
  return detail::verdict_with(inference_band_of(model, run, d), d.device, fit_inference_on_device(model, run, d, budget, o),
                              budget);
}

}  // namespace memscale
