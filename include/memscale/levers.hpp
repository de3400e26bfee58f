// memscale/levers.hpp: what to try before streaming parameters from the host. When no mode
// fits a request, the planner's fallback streams parameters (seconds of host traffic per
// step). Cheaper levers cost no transfer at all: checkpointing (one more forward), a chunked
// loss (no full-vocabulary fp32 logits at once), an 8-bit optimizer, QLoRA instead of LoRA,
// a smaller micro-batch with more accumulation (same effective batch), a shorter sequence.
// Each is applied on top of the ones before it, in that order (cheapest in step time first),
// and estimated by the same estimators as the plan, with the error band of its class of run.
// `first_fitting` is the lever to recommend: a slower technique is never advised while one
// of these fits; `first_likely`, whose point estimate fits but not its band's upper end, is
// advised as "likely fits" when none does.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "memscale/error_band.hpp"
#include "memscale/estimate.hpp"
#include "memscale/gpus.hpp"
#include "memscale/model.hpp"
#include "memscale/plan_result.hpp"
#include "memscale/training.hpp"

namespace memscale {

enum class lever : std::uint8_t {
  checkpointing,        // recompute each block in backward (one more forward)
  chunked_loss,         // cross-entropy over 128-token chunks (lit-gpt chunked_cross_entropy, Liger)
  optimizer_8bit,       // bitsandbytes AdamW8bit for a full fine-tune
  qlora,                // a 4-bit NF4 base instead of a 16-bit one under LoRA
  smaller_micro_batch,  // micro-batch 1 with the effective batch kept by accumulation
  shorter_sequence,     // half the tokens per sequence
};

constexpr std::string_view to_string(lever l) noexcept {
  switch (l) {
    case lever::checkpointing: return "checkpointing";
    case lever::chunked_loss: return "chunked_loss";
    case lever::optimizer_8bit: return "optimizer_8bit";
    case lever::qlora: return "qlora";
    case lever::smaller_micro_batch: return "smaller_micro_batch";
    case lever::shorter_sequence: return "shorter_sequence";
  }
  return "checkpointing";
}

struct lever_option {
  lever what = lever::checkpointing;
  training_spec run{};  // the request with this lever and the ones before it
  bytes peak{};         // device total, the larger of step 1 and the steady state
  error_band band{};
  peak_range range{};
  verdict v = verdict::does_not_fit;
};

struct lever_list {
  std::array<lever_option, 6> items{};
  std::size_t count = 0;
  std::size_t first_fitting = 6;  // index into items of the first that fits (count: none)
  // The first whose point estimate is within the budget (borderline: likely fits): still
  // cheaper than streaming parameters, so advised with its range when none fits.
  std::size_t first_likely = 6;

  [[nodiscard]] constexpr bool any_fits() const { return first_fitting < count; }
  [[nodiscard]] constexpr bool any_likely() const { return first_likely < count; }
};

// The levers that change `request` (one already switched on is skipped), cumulative.
constexpr lever_list cheaper_levers(const model_spec& model, const training_spec& request, const gpu_spec& gpu,
                                    bytes budget) {
  lever_list out{};
  training_spec run = on_gpu(request, gpu);
  const auto consider = [&](lever l, bool applies) {
    if (!applies) return;
    const model_graph g = build(model, run);
    const estimate_result e = estimate(g);
    lever_option o{.what = l, .run = run, .peak = overall_peak(e).device, .band = band_of(class_of(model, g.run))};
    o.range = range_of(o.peak, o.band);
    o.v = verdict_of(o.range, budget);
    if (o.v == verdict::fits && out.first_fitting == out.items.size()) out.first_fitting = out.count;
    if (o.peak <= budget && out.first_likely == out.items.size()) out.first_likely = out.count;
    out.items[out.count++] = o;
  };
  const bool ckpt = run.ckpt != checkpointing::full;
  run.ckpt = checkpointing::full;
  consider(lever::checkpointing, ckpt);
  // A fused linear cross-entropy already keeps less than a chunked loss.
  const bool chunk = run.loss == loss_impl::standard;
  run.loss = loss_impl::chunked;
  consider(lever::chunked_loss, chunk);
  const bool adam = run.target == training_target::full &&
                    (run.optimizer == optimizer_kind::adamw || run.optimizer == optimizer_kind::adam);
  if (adam) run.optimizer = optimizer_kind::adamw_8bit;
  consider(lever::optimizer_8bit, adam);
  // A model with a vision tower refuses QLoRA (validate.hpp): the lever does not apply to it.
  const bool lora = run.target == training_target::lora && model.idle_tower_parameters == 0;
  if (lora) {
    run.target = training_target::qlora;
    run.quant = base_quant::nf4;
  }
  consider(lever::qlora, lora);
  const bool batch = run.micro_batch > 1;
  if (batch) {
    run.grad_accum = detail::checked_mul(run.grad_accum, run.micro_batch);
    run.micro_batch = 1;
  }
  consider(lever::smaller_micro_batch, batch);
  const bool sequence = run.seq_len > 1;
  run.seq_len = run.seq_len / 2;
  consider(lever::shorter_sequence, sequence);
  if (out.first_fitting == out.items.size()) out.first_fitting = out.count;
  if (out.first_likely == out.items.size()) out.first_likely = out.count;
  return out;
}

}  // namespace memscale
