// memscale/modes.hpp: MemScale's modes as runs with techniques switched on, what each
// switches on relative to the request, and the throughput it costs beyond the request.
//
// Modes (MemScale docs at 03b6d40a, pages/concepts/modes.mdx and techniques.mdx):
// CONSERVATIVE = gradient checkpointing; BALANCED = checkpointing + CPU offloading
// (optimizer state, inactive activations); AGGRESSIVE = the full stack: checkpointing,
// offloading of inactive activations, attention tiling, 16-bit precision, 8-bit optimizer.
// Each mode has its own peak: AGGRESSIVE keeps its (8-bit) optimizer state on the GPU,
// BALANCED keeps its (32-bit) state on the host, so AGGRESSIVE can need more memory.
#pragma once

#include <cstdint>
#include <string_view>

#include "memscale/bytes.hpp"
#include "memscale/gpus.hpp"
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

// One memory-saving technique a mode can switch on.
enum class technique : std::uint16_t {
  checkpointing = 1,
  offload_optimizer = 2,
  offload_activations = 4,
  tiled_attention = 8,
  half_precision = 16,    // 16-bit weights, gradients and activations (BF16, FP16 without BF16)
  optimizer_8bit = 32,
  offload_parameters = 64,
  mixed_precision = 128,  // autocast: 16-bit matmuls and activations over fp32 weights (AMP)
};

inline constexpr technique all_techniques[] = {technique::checkpointing,   technique::offload_optimizer,
                                                technique::offload_activations, technique::tiled_attention,
                                                technique::half_precision,  technique::optimizer_8bit,
                                                technique::offload_parameters, technique::mixed_precision};

constexpr std::string_view to_string(technique t) noexcept {
  switch (t) {
    case technique::checkpointing: return "checkpointing";
    case technique::offload_optimizer: return "offload_optimizer";
    case technique::offload_activations: return "offload_activations";
    case technique::tiled_attention: return "tiled_attention";
    case technique::half_precision: return "half_precision";
    case technique::optimizer_8bit: return "optimizer_8bit";
    case technique::offload_parameters: return "offload_parameters";
    case technique::mixed_precision: return "mixed_precision";
  }
  return "unknown";
}

// A set of techniques (bit flags).
struct technique_set {
  std::uint16_t bits = 0;
  [[nodiscard]] constexpr bool has(technique t) const { return (bits & static_cast<std::uint16_t>(t)) != 0; }
  constexpr void add(technique t) { bits = static_cast<std::uint16_t>(bits | static_cast<std::uint16_t>(t)); }
  [[nodiscard]] constexpr bool empty() const { return bits == 0; }
};

constexpr bool is_half_precision(precision p) { return p == precision::pure_bf16 || p == precision::pure_fp16; }
constexpr bool is_mixed_precision(precision p) { return p == precision::amp_bf16 || p == precision::amp_fp16; }

// The techniques a run uses.
constexpr technique_set techniques_of(const training_spec& run) {
  technique_set s{};
  if (run.ckpt == checkpointing::full) s.add(technique::checkpointing);
  if (run.offload_optimizer) s.add(technique::offload_optimizer);
  if (run.offload_activations) s.add(technique::offload_activations);
  if (run.attention == attention_impl::flash) s.add(technique::tiled_attention);
  if (is_half_precision(run.prec)) s.add(technique::half_precision);
  if (is_mixed_precision(run.prec)) s.add(technique::mixed_precision);
  if (run.optimizer == optimizer_kind::adamw_8bit) s.add(technique::optimizer_8bit);
  if (run.offload_parameters) s.add(technique::offload_parameters);
  return s;
}

// What `after` uses that `before` does not: what a mode switches on for this run.
constexpr technique_set switched_on(const training_spec& before, const training_spec& after) {
  const technique_set a = techniques_of(before);
  const technique_set b = techniques_of(after);
  return {static_cast<std::uint16_t>(b.bits & ~a.bits)};
}

// The run with a mode's techniques switched on. A technique the run already uses stays as
// the run has it, and a mode never switches off what the run does.
constexpr training_spec apply_mode(training_spec run, mode m, const gpu_spec& gpu) {
  run.blas_workspace = gpu.cublas_workspace;
  if (m == mode::none) return run;
  run.ckpt = checkpointing::full;  // every mode checkpoints (Chen et al. 2016, arXiv 1604.06174)
  if (m == mode::conservative) return run;
  run.offload_activations = true;  // checkpointed block inputs wait on the host
  if (m == mode::balanced) {
    // ZeRO-Offload (Ren et al. 2021, arXiv 2101.06840). A step taken inside backward, one
    // parameter at a time on the GPU, has no host step to move the state to: it stays. A paged
    // optimizer's state already leaves the device when it is short (estimate/optimizer.hpp).
    run.offload_optimizer = !run.optimizer_in_backward && !run.paged_optimizer;
    return run;
  }
  // AGGRESSIVE in the configuration MemScale's measured figures imply (benchmarking.mdx at
  // 03b6d40a: about 6 bytes per parameter on the GPU): 16-bit weights and gradients and the
  // two 1-byte Adam states stay on the device; the 8-bit state is small enough that the
  // optimizer is not offloaded, so only the inactive (checkpointed) activations go to the host.
  // Tiled attention (techniques.mdx "notably attention"): no s x s matrix kept (Dao et al.
  // 2022, arXiv 2205.14135). A padded batch's mask rules flash out: SDPA then runs the
  // memory-efficient kernel, which keeps no s x s matrix either (attention_kernel.hpp padded_row_mask).
  run.attention = run.padded ? attention_impl::sdpa : attention_impl::flash;
  // model.to(bf16): no fp32 master copy on the device; BF16 where the GPU has it, FP16 otherwise.
  if (!is_half_precision(run.prec)) run.prec = gpu.bf16 ? precision::pure_bf16 : precision::pure_fp16;
  // 16-bit adapters under autocast were already in the model's dtype: without autocast they are the base's.
  if (run.adapters == adapter_dtype::autocast_dtype) run.adapters = adapter_dtype::as_base;
  // bitsandbytes AdamW8bit replaces Adam/AdamW (Dettmers et al. 2022, arXiv 2110.02861);
  // SGD, Adafactor and Lion already keep less than two 32-bit moments and stay.
  if (run.optimizer == optimizer_kind::adam || run.optimizer == optimizer_kind::adamw)
    run.optimizer = optimizer_kind::adamw_8bit;
  return run;
}

// Throughput cost of a mode beyond what the run already pays, as a model the user can check.
struct mode_cost {
  double recompute_fraction = 0.0;  // extra forward passes per step (1 = one full forward)
  double transfer_seconds = 0.0;    // host<->device traffic per optimizer step / link bandwidth
  bytes host_memory{};              // host RAM the offloaded state needs (all of it)
};

}  // namespace memscale
