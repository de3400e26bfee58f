// memscale/vision/device.hpp: a vision training step's tensor, reserved and device peaks on a
// CUDA device, as memscale/device_peak.hpp gives a transformer's: the step's events (setup, step
// 1, a steady step; allocator/vision_events.hpp) replayed through the caching allocator, plus the
// CUDA context with cuDNN's kernels; and the verdict at a budget with the replayed band.
//
// The rounding rule of vision::estimate is kept where the stream does not describe the run (not
// CUDA, sharded or offloaded) and in constant evaluation: the smallest preset, resnet18 (69
// layers), already hits clang 14's default step limit there (g++ 12 replays it).
#pragma once

#include <cstddef>
#include <type_traits>

#include "memscale/allocator/replay_vision.hpp"
#include "memscale/device_peak.hpp"
#include "memscale/error.hpp"
#include "memscale/error_band.hpp"
#include "memscale/gpus.hpp"
#include "memscale/training.hpp"
#include "memscale/vision/estimate.hpp"
#include "memscale/vision/model.hpp"
#include "memscale/vision/run_class.hpp"

namespace memscale::vision {

namespace detail {

constexpr replay_fallback replay_precondition(const training_spec& run) {
  if (run.device != device_kind::cuda) return replay_fallback::not_cuda;
  if (run.shard != sharding::none || run.data_parallel != 1) return replay_fallback::distributed;
  if (run.offload_optimizer || run.offload_parameters || run.offload_activations) return replay_fallback::offloaded;
  return replay_fallback::none;
}

template <std::size_t Capacity>
constexpr memscale::detail::replay_outcome replay_with(const layer_graph& g, const training_spec& run,
                                                       const device_options& o, bytes cap) {
  return {allocator::replay_vision_training<Capacity, Capacity>(g, run, o.allocator, cap,
                                                                memscale::detail::stream_of(run))};
}

// The replay (against `cap`, zero: none), or why not.
constexpr memscale::detail::replay_outcome replay_of(const layer_graph& g, const training_spec& run,
                                                     const device_options& o, bytes cap) {
  if (std::is_constant_evaluated()) return {{}, replay_fallback::constant_evaluation};
  try {
    return replay_with<memscale::detail::run_time_replay_capacity>(g, run, o, cap);
  } catch (const error& e) {
    // The tables' limits are the only unsupported case once replay_precondition holds.
    if (e.code() != error_code::unsupported) throw;
    return {{}, replay_fallback::too_large};
  }
}

}  // namespace detail

// The step's three figures. `gpu` (may be null) sizes the context; the run's blas_workspace
// should be the GPU's (apply_vision_mode, on_gpu).
constexpr device_estimate estimate_on_device(const vision_spec& model, const training_spec& run,
                                             const gpu_spec* gpu = nullptr, const device_options& o = {}) {
  device_estimate d{};
  const layer_graph g = build_graph(model, run);
  d.tensors = estimate(g, run);
  d.context = memscale::detail::context_of(run, gpu, o, d.context_from, true);
  memscale::detail::complete(d, detail::replay_precondition(run), [&] { return detail::replay_of(g, run, o, {}); });
  return d;
}

// Whether the step fits `budget` by the point estimates, as memscale::fit_on_device decides a
// transformer's: the capped replay decides between the allocated and the reserved peak.
constexpr device_fit fit_on_device(const vision_spec& model, const training_spec& run, const device_estimate& d,
                                   bytes budget, const device_options& o = {}) {
  return memscale::detail::fit_by_replay(d.replayed(), d.device, d.context.total(), d.replay_allocated, d.reserved,
                                         budget, [&](bytes capacity) {
                                           return detail::replay_of(build_graph(model, run), run, o, capacity);
                                         });
}

// The replayed vision steps on an H100 (torch 2.11; tools/allocator/check.cpp over
// docs/data/gpu_measured_h100.json): resnet50 in fp32 and autocast bf16 and vit_b_16, reserved
// -4.21% / -4.21% / -3.88%, nvidia-smi -3.83% / -3.49% / -3.22% (the cuDNN workspaces the walk
// leaves out, docs/allocator.md). Three runs bound neither end, so both are the transformer
// replay's (replayed_device_band), which the same allocator rules give.
inline constexpr error_band replayed_vision_band{
    run_class::torchvision, -0.05, 0.04, true,
    "docs/allocator.md, resnet50 (fp32, autocast bf16) and vit_b_16 on an H100 with the allocator replay and the "
    "context model: reserved -4.21% .. -3.88%, nvidia-smi -3.83% .. -3.22%, the ends those of the transformer replay", band_quantity::device};

// The band of d.device: replayed from torch 2.0, the measured class takes the replayed band;
// otherwise the class's own (the rounding rule's).
constexpr const error_band& device_band_of(const vision_spec& model, const training_spec& run, const device_estimate& d) {
  const run_class c = class_of(model, run);
  if (d.replayed() && c == run_class::torchvision && run.torch_version >= 200) return replayed_vision_band;
  return band_of(c, verdict_quantity_of(run));
}

constexpr device_verdict verdict_on_device(const vision_spec& model, const training_spec& run, const device_estimate& d,
                                           bytes budget, const device_options& o = {}) {
  return memscale::detail::verdict_with(device_band_of(model, run, d), d.device,
                                        fit_on_device(model, run, d, budget, o), budget);
}

}  // namespace memscale::vision
