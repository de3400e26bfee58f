// memscale/vision/estimate.hpp: the peak of one training step of a vision network.
//
// The same phases as memscale::estimate (forward, backward, optimizer step; steady
// state and first step) over a flat layer_graph, reusing the per-op parameter,
// gradient and optimizer-state rules. Forward: a layer's output lives until its last
// consumer has run, or until backward when a backward function saved it. Backward runs
// the layers in reverse; at layer k the live bytes are the saved storages whose earliest
// saver is at or before k, the extra tensors layers <= k saved, the gradient flowing in
// and the one produced, gradients parked on skip connections, and parameter gradients
// created so far.
// Stage checkpointing (torch.utils.checkpoint around each stage, use_reentrant=False)
// keeps only a stage's input through forward; the stage's tensors are rebuilt during
// its backward, one stage at a time.
#pragma once

#include <cstdint>

#include "memscale/estimate.hpp"
#include "memscale/vision/model.hpp"

namespace memscale::vision {

namespace detail {

using memscale::detail::checked_add;
using memscale::detail::checked_mul;

struct walk_result {
  bytes forward_peak{};   // activations at the forward peak (saved + loose + temporaries)
  bytes backward_act{};   // activations at the backward peak
  bytes backward_grads{}; // parameter gradients created by then (not persisting ones)
  bytes saved{};          // live at the end of forward
};

constexpr walk_result walk(const layer_graph& g, const training_spec& run, bool grads_persist) {
  const bool ckpt = run.ckpt != checkpointing::none && g.stages > 0;
  const std::size_t n = g.size;
  walk_result r{};

  // Forward: a difference array of live bytes (a storage is born at its layer and dies
  // after its last use unless a backward keeps it), plus each layer's temporaries. Under
  // checkpointing a stage's own tensors all die young and its input is pinned instead.
  std::array<bytes, layer_capacity + 1> born{};
  std::array<bytes, layer_capacity + 1> dies{};
  bytes saved_total{};
  for (std::size_t i = 0; i < n; ++i) {
    const op& o = g.ops[i];
    const bool dropped = in_checkpointed_stage(g, i, ckpt);
    if (dropped && starts_stage(g, i)) {
      born[i] += g.stage_input[g.stage[i]];
      saved_total += g.stage_input[g.stage[i]];
    }
    born[i] += o.out + (dropped ? bytes{} : o.extra_saved);
    if (output_kept(g, i, ckpt)) {
      saved_total += o.out;
    } else {
      dies[static_cast<std::size_t>(g.last_use[i]) + 1] += o.out;
    }
    if (!dropped) saved_total += o.extra_saved;
  }
  bytes live{};
  for (std::size_t i = 0; i < n; ++i) {
    live += born[i];
    live -= dies[i];
    r.forward_peak = max(r.forward_peak, live + g.ops[i].fwd_temp);
  }
  r.saved = saved_total;

  // Backward over layers [begin, end) with everything they save present (for a
  // checkpointed stage: after its forward has been replayed), `outside` kept meanwhile.
  auto backward_over = [&](std::size_t begin, std::size_t end, bytes outside, bytes grads_before) {
    std::array<bytes, layer_capacity> released_at{};
    for (std::size_t i = begin; i < end; ++i) {
      const op& o = g.ops[i];
      if (o.released_by == not_kept) continue;
      const auto at = o.released_by.index();
      released_at[at < begin ? begin : at] += o.out;
    }
    std::array<bytes, layer_capacity> alive{};
    bytes running{};
    for (std::size_t k = begin; k < end; ++k) {
      running += released_at[k] + g.ops[k].extra_saved;
      alive[k] = running;
    }
    bytes created = grads_before;
    for (std::size_t k = end; k-- > begin;) {
      const op& o = g.ops[k];
      const bytes own = op_gradient_bytes(o, run);
      const bytes grads = grads_persist ? bytes{} : created + own;
      const bytes act = outside + alive[k] + g.grad_out[k] + o.grad_in + o.bwd_temp + g.carried[k];
      if (act + grads > r.backward_act + r.backward_grads) {
        r.backward_act = act;
        r.backward_grads = grads;
      }
      created += own;
    }
    return created;
  };

  if (!ckpt) {
    backward_over(0, n, bytes{}, bytes{});
    return r;
  }
  // Checkpointed: segments of equal stage id from the end. Outside a segment stay the
  // tensors un-checkpointed layers before it saved and the inputs of the stages before
  // it and of its own (a checkpoint holds its input until its backward has run).
  bytes grads_before{};
  std::size_t end = n;
  while (end > 0) {
    std::size_t begin = end - 1;
    const auto s = g.stage[begin];
    while (begin > 0 && g.stage[begin - 1] == s) --begin;
    bytes outside{};
    for (std::size_t i = 0; i < end; ++i) {
      if (starts_stage(g, i)) outside += g.stage_input[g.stage[i]];  // stages not yet through backward
      if (i >= begin || in_checkpointed_stage(g, i, true)) continue;
      if (output_kept(g, i, true)) outside += g.ops[i].out;
      outside += g.ops[i].extra_saved;
    }
    if (s != 0) {
      // torch.utils.checkpoint replays the stage's forward when its backward starts
      // (torch/utils/checkpoint.py, _checkpoint_without_reentrant: the first unpack
      // runs the function again and stores what it saves): the replay's own forward
      // peak comes on top of what is already live.
      bytes replay{};
      bytes replay_peak{};
      std::array<bytes, layer_capacity + 1> gone{};
      for (std::size_t i = begin; i < end; ++i) {
        const op& o = g.ops[i];
        replay += o.out + o.extra_saved;
        if (o.released_by == not_kept) gone[static_cast<std::size_t>(g.last_use[i]) + 1] += o.out;
        replay -= gone[i];
        replay_peak = max(replay_peak, replay + o.fwd_temp);
      }
      const bytes grads = grads_persist ? bytes{} : grads_before;
      const bytes act = outside + replay_peak + g.grad_out[end - 1] + g.carried[end - 1];
      if (act + grads > r.backward_act + r.backward_grads) {
        r.backward_act = act;
        r.backward_grads = grads;
      }
    }
    grads_before = backward_over(begin, end, outside, grads_before);
    end = begin;
  }
  return r;
}

}  // namespace detail

// What cudnn.benchmark may add on CUDA. aten/src/ATen/native/cudnn/Conv_v7.cpp
// (getMaxWorkspaceSize, AlgoIterator::try_all): the benchmark only tries algorithms whose
// workspace fits the largest free block of the caching allocator, and an algorithm whose
// workspace allocation fails is skipped for the next one, down to ones that need none
// (IMPLICIT_GEMM). So the workspace is bounded by the memory left free at the
// convolution: it raises max_memory_allocated up to the capacity but never makes a run
// that fits without it fail. The planner's "fits" therefore counts zero mandatory cuDNN
// workspace and reports the free memory the benchmark may fill.
inline constexpr bytes cudnn_mandatory_workspace{0};

// cuDNN's convolutions go through its v8 (frontend) API by default from torch 2.0 (pytorch PR
// #91117 "cuDNN V8 API on by default"; aten/src/ATen/native/ConvUtils.h@v2.0.0
// cudnnv8_enabled_check_debug, TORCH_CUDNN_V8_API_DISABLED); before, through the v7 API, whose
// heuristics pick other algorithms. The workspace bound of layers.hpp (cudnn_workspace) is read
// off v8 runs only: a CUDA step on an earlier torch is not modelled.
inline constexpr std::uint32_t cudnn_v8_default_torch = 200;

constexpr bool cudnn_workspace_modelled(const training_spec& run) {
  return run.device != device_kind::cuda || run.torch_version >= cudnn_v8_default_torch;
}

constexpr estimate_result estimate(const layer_graph& g, const training_spec& run) {
  validate(run);
  const bool cuda = run.device == device_kind::cuda;
  const bool persist = run.grad_accum > 1 || !run.zero_grad_to_none;
  estimate_result out{};
  bytes params = g.buffers;
  bytes grads{};
  for (std::size_t i = 0; i < g.size; ++i) {
    out.parameter_count = memscale::detail::checked_add(out.parameter_count, stored_elements(g.ops[i]));
    if (!g.ops[i].frozen)
      out.trainable_parameter_count = memscale::detail::checked_add(out.trainable_parameter_count, stored_elements(g.ops[i]));
    params += op_parameter_bytes(g.ops[i], run);
    grads += op_gradient_bytes(g.ops[i], run);
  }
  out.parameter_bytes = params - g.buffers;
  out.gradient_bytes = grads;
  out.optimizer_bytes = optimizer_state_bytes(g, run);
  out.paged_optimizer_bytes = paged_optimizer_bytes(g, run);
  const bool workspace_in_allocator = run.torch_version >= 200;
  const bytes cublas = cuda ? run.blas_workspace : bytes{};
  const bytes workspace = (workspace_in_allocator ? cublas : bytes{}) + (cuda ? cudnn_mandatory_workspace : bytes{});
  const auto w = detail::walk(g, run, persist);
  out.saved_activation_bytes = w.saved;

  auto peak_of = [&](bool state_present) {
    const bytes state = state_present ? out.optimizer_bytes : bytes{};
    const bytes kept_grads = persist ? grads : bytes{};
    using memscale::detail::phase_candidate;
    phase_candidate best{phase::forward, {params, kept_grads, state, g.inputs + w.forward_peak, workspace}};
    best = memscale::detail::larger(
        best, {phase::backward, {params, kept_grads + w.backward_grads, state, g.inputs + w.backward_act, workspace}});
    best = memscale::detail::larger(
        best, {phase::optimizer_step,
               {params, grads, out.optimizer_bytes, g.inputs, workspace + optimizer_step_temporaries(g, run)}});
    peak_estimate p{.at = best.at, .breakdown = best.breakdown};
    p.tensor = best.breakdown.total();
    if (cuda) {
      // Half a 2 MiB granule per large block alive (CUDACachingAllocator.cpp kRoundLarge).
      std::uint64_t large = 0;
      for (std::size_t i = 0; i < g.size; ++i) {
        if (g.ops[i].released_by != not_kept && g.ops[i].out > cuda_small_size) ++large;
        if (storage(precision_policy_of(run).param, g.ops[i].weight.largest()) > cuda_small_size) large += 4;
      }
      p.reserved = round_up(p.tensor + bytes{memscale::detail::checked_mul(large, cuda_round_large.value / 2)},
                            cuda_round_large);
      p.device = p.reserved + cuda_context_bytes(run.cuda_lazy_loading) + (workspace_in_allocator ? bytes{} : cublas);
    } else {
      p.reserved = p.tensor;
      p.device = p.tensor;
    }
    return p;
  };
  out.steady = peak_of(true);
  out.first_step = peak_of(false);
  return out;
}

constexpr estimate_result estimate(const vision_spec& model, const training_spec& run) {
  return estimate(build_graph(model, run), run);
}

constexpr std::uint64_t parameter_count(const vision_spec& model) {
  const layer_graph g = build_graph(model, training_spec{.micro_batch = 1, .seq_len = 1});
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < g.size; ++i) n = memscale::detail::checked_add(n, stored_elements(g.ops[i]));
  return n;
}

}  // namespace memscale::vision
