// memscale/levers.hpp: what to try before streaming parameters from the host. When no mode
// fits a request, the planner's fallback streams parameters (seconds of host traffic per
// step). Cheaper levers cost no transfer at all: checkpointing (one more forward), a chunked
// loss (no full-vocabulary fp32 logits at once), an 8-bit optimizer, QLoRA instead of LoRA,
// a smaller micro-batch with more accumulation (same effective batch), a shorter sequence.
// Each is applied on top of the ones before it, in that order (cheapest in step time first),
// and estimated on the device as the plan estimates (memscale/device_peak.hpp), with that figure's band.
// make_plan advises `first_likely`, the first whose point estimate fits the budget (said
// "fits" when its band's upper end does too, "likely fits" otherwise): a slower technique is
// never advised while a faster one's point estimate fits with the headroom kept.
#pragma once

#include "memscale/device_peak.hpp"
#include "memscale/error_band.hpp"
#include "memscale/estimate.hpp"
#include "memscale/gpus.hpp"
#include "memscale/lever_options.hpp"
#include "memscale/model.hpp"
#include "memscale/plan_result.hpp"
#include "memscale/training.hpp"

namespace memscale {

// The levers that change `request` (one already switched on is skipped), cumulative.
constexpr lever_list cheaper_levers(const model_spec& model, const training_spec& request, const gpu_spec& gpu,
                                    bytes budget, const device_options& device = {}) {
  lever_list out{};
  training_spec run = on_gpu(request, gpu);
  const auto consider = [&](lever l, bool applies) {
    if (!applies) return;
    const device_estimate d = estimate_on_device(model, run, &gpu, device);
    lever_option o{.what = l, .run = run, .peak = d.device, .band = device_band_of(model, run, d)};
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
