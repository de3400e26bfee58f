// memscale/json/run_report.hpp: the whole JSON report of one training run, as
// `memscale-plan --json` prints it: the estimate, the run document it answers, and with a
// GPU the plan. memscale-plan and the web calculator (web/) build it here, so the page
// shows exactly what the command line prints. Also the OOM cliff (peak against
// micro-batch per mode) that --svg-batch draws and the page plots.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "memscale/device_peak.hpp"
#include "memscale/estimate.hpp"
#include "memscale/graph/layers/image_tower.hpp"
#include "memscale/json/device_report.hpp"
#include "memscale/json/report.hpp"
#include "memscale/json/run_document.hpp"
#include "memscale/json/run_settings.hpp"
#include "memscale/json/software_stack.hpp"
#include "memscale/planner.hpp"

namespace memscale::json_io {

// What the plan changes in the run: one line, or empty when nothing changes.
inline std::string plan_changes_text(const plan_result& plan) {
  using std::to_string;
  switch (plan.status) {
    case plan_status::no_technique_needed:
    case plan_status::mode_needed: return {};
    case plan_status::smaller_micro_batch: {
      std::string out = "micro-batch " + to_string(plan.micro_batch) + " x gradient accumulation " +
                        to_string(plan.grad_accumulation) + " = effective batch " + to_string(plan.effective_batch) +
                        " (kept)";
      if (plan.rounded_micro_batch > 0)
        out += "; or micro-batch " + to_string(plan.rounded_micro_batch) + " x " +
               to_string(plan.rounded_grad_accumulation) + ": the effective batch rounds to " +
               to_string(plan.rounded_micro_batch * plan.rounded_grad_accumulation);
      return out;
    }
    case plan_status::cheaper_levers: {
      std::string out = "switch on";
      for (std::size_t i = 0; i <= plan.levers.first_likely; ++i)
        out += (i == 0 ? " " : ", ") + std::string(memscale::to_string(plan.levers.items[i].what));
      const training_spec& r = plan.lever_plan.run;
      out += "; micro-batch " + to_string(r.micro_batch) + " x gradient accumulation " + to_string(r.grad_accum) +
             " = effective batch " + to_string(plan.effective_batch) + " (kept)";
      if (r.seq_len != plan.modes[0].run.seq_len)
        out += ", sequence length " + to_string(r.seq_len) + " (not " + to_string(plan.modes[0].run.seq_len) + ")";
      return out;
    }
    case plan_status::parameter_offload:
      return "micro-batch 1 x gradient accumulation " + to_string(plan.grad_accumulation) + " = effective batch " +
             to_string(plan.effective_batch) + " (kept), parameters and optimizer on the host";
    case plan_status::shorter_sequence:
      return "sequence length " + to_string(plan.max_seq_len) + " (not " + to_string(plan.modes[0].run.seq_len) +
             ") at micro-batch 1; the effective batch " + to_string(plan.effective_batch) +
             " is kept with gradient accumulation " + to_string(plan.effective_batch);
    case plan_status::nothing_fits: return "nothing fits on this GPU";
  }
  return {};
}

// The "plan" object of the report: plan_to_json plus "changes".
inline json plan_report_json(const plan_result& plan) {
  json j = plan_to_json(plan);
  j["changes"] = plan_changes_text(plan);
  return j;
}

// estimate_to_json plus "model" (the name) and "run" (the settings).
inline json estimate_report_json(const model_spec& model, const training_spec& run, const estimate_result& result) {
  json j = estimate_to_json(result);
  j["model"] = std::string(model.name);
  j["run"] = run_to_json(run);
  j["attention_kernel"] = std::string(to_string(attention_kernel_of(model, run)));  // sdpa resolved
  // A state-space or hybrid stack: which mixer code the estimate assumed (default resolved by the device).
  if (has_state_space_mixer(model)) j["ssm_kernels"] = std::string(to_string(ssm_kernels_of(run)));
  // A multimodal checkpoint in a text-only run: its vision tower's parameters, counted as weights only.
  if (model.idle_tower_parameters > 0) j["idle_tower_parameters"] = model.idle_tower_parameters;
  // Images through the frozen tower (graph/layers/image_tower.hpp): each one's tokens, counted in run.seq_len.
  if (run.images.per_sample > 0)
    j["images"] = {{"per_sample", run.images.per_sample},
                   {"height", run.images.height},
                   {"width", run.images.width},
                   {"tokens_per_image", graph_layers::image_tokens(model.vision, run.images)},
                   {"tower", "frozen"}};
  // DeepSeek's first dense layers: checkpointing keeps them whole (the upper side).
  if (model.leading_dense_layers > 0) j["leading_dense_layers_kept_whole"] = model.leading_dense_layers;
  // Multi-token-prediction layers in the checkpoint that transformers does not build: not counted.
  if (model.unbuilt_mtp_layers > 0) j["unbuilt_mtp_layers"] = model.unbuilt_mtp_layers;
  // Gemma 3n's sparse-gate layers likewise.
  if (model.sparse_leading_layers > 0) j["sparse_leading_layers_kept_whole"] = model.sparse_leading_layers;
  return j;
}

// The allocator replay of `in` on its GPU when it has one: the tensors' estimate with the replay's
// reserved peak and the GPU's context in its reserved and device figures.
inline device_estimate device_estimate_of(const run_input& in) {
  const std::optional<gpu_spec> gpu = gpu_of(in);
  const training_spec run = gpu ? on_gpu(in.run, *gpu) : in.run;
  return estimate_on_device(in.model, run, gpu ? &*gpu : nullptr, device_options_of(in.alloc_conf, in.context_memory));
}

// The allocator section of `in`'s report from its device estimate `d` and, with a GPU, the
// verdict at the plan's budget (without a plan, at the GPU's budget with the run's headroom).
inline json allocator_report_json(const run_input& in, const device_estimate& d, const plan_result* plan) {
  const std::optional<gpu_spec> gpu = gpu_of(in);
  const training_spec run = gpu ? on_gpu(in.run, *gpu) : in.run;
  const device_options o = device_options_of(in.alloc_conf, in.context_memory);
  if (!gpu) return allocator_json(d, in.alloc_conf, nullptr);
  // A run without a plan (torchtitan's own layout) is judged as given, at the GPU's budget.
  const bytes budget =
      plan != nullptr ? plan->budget : budget_of(*gpu, {.headroom = in.headroom.value_or(default_headroom)});
  const device_verdict v = verdict_on_device(in.model, run, d, budget, o);
  return allocator_json(d, in.alloc_conf, &v);
}

// `r` with the reserved and device figures of its peaks taken from the device estimate `d`.
inline estimate_result with_device_figures(estimate_result r, const device_estimate& d) {
  for (auto [mine, its] : {std::pair{&r.steady, &d.tensors.steady}, std::pair{&r.first_step, &d.tensors.first_step}}) {
    mine->reserved = its->reserved;
    mine->device = its->device;
  }
  return r;
}

// The report of `in` from its estimate (on the GPU when there is one) and its plan (null
// without a GPU): the results, then the run document (so the report is a run document).
// On CUDA the peaks' reserved and device figures are the device estimate's, as in its allocator
// section (one figure per quantity in a report).
inline json run_report_json(const run_input& in, const estimate_result& result, const plan_result* plan) {
  const bool cuda = in.run.device == device_kind::cuda;
  const std::optional<device_estimate> d = cuda ? std::optional<device_estimate>(device_estimate_of(in)) : std::nullopt;
  json j = estimate_report_json(in.model, in.run, d ? with_device_figures(result, *d) : result);
  j.update(run_document_json(in));
  if (on_current_releases(in.run.torch_version, in.run.transformers_version))
    j["software_assumed"] = current_releases_json;
  if (d) j["allocator"] = allocator_report_json(in, *d, plan);
  if (plan != nullptr) {
    j["plan"] = plan_report_json(*plan);
  }
  return j;
}

// The plan of `in` on `gpu`, with the document's headroom.
inline plan_result plan_run(const run_input& in, const gpu_spec& gpu) {
  return make_plan(in.model, in.run, gpu,
                   plan_options{.headroom = in.headroom.value_or(default_headroom),
                                .device = device_options_of(in.alloc_conf, in.context_memory)});
}

// The estimate of `in`; with a GPU, of the run on it (its BLAS workspace), as the plan does.
inline estimate_result estimate_run(const run_input& in) {
  const std::optional<gpu_spec> gpu = gpu_of(in);
  return estimate(in.model, gpu ? on_gpu(in.run, *gpu) : in.run);
}

// The OOM cliff: the micro-batches 1, 2, 4, ... up to four times the larger of the run's
// micro-batch and the largest that fits (8 to 1024).
inline std::vector<std::uint64_t> cliff_micro_batches(const training_spec& run, const plan_result& plan) {
  const std::uint64_t last = std::clamp<std::uint64_t>(std::max(plan.max_micro_batch, run.micro_batch) * 4, 8, 1024);
  std::vector<std::uint64_t> out;
  for (std::uint64_t v = 1; v <= last; v *= 2) out.push_back(v);
  if (out.back() != last) out.push_back(last);
  return out;
}

// The planner's own plan of mode `m` for the run at another micro-batch.
inline mode_plan cliff_plan(const model_spec& model, training_spec run, std::uint64_t micro_batch, const gpu_spec& gpu,
                            mode m, bytes budget, const device_options& device = {}) {
  run.micro_batch = micro_batch;
  return memscale::detail::plan_mode(model, run, gpu, m, budget, device);
}

// Device peak of mode `m` for the run at another micro-batch.
inline bytes cliff_peak(const model_spec& model, const training_spec& run, std::uint64_t micro_batch,
                        const gpu_spec& gpu, mode m, bytes budget, const device_options& device = {}) {
  return cliff_plan(model, run, micro_batch, gpu, m, budget, device).peak;
}

// {"micro_batch": [1, 2, ...], "peak": {"none": [bytes, ...], "conservative": ..., ...}}: `peak(b, m)`
// is mode m's device peak at micro-batch b.
template <class Peak>
json cliff_json_of(const std::vector<std::uint64_t>& batches, Peak&& peak) {
  constexpr std::array modes{mode::none, mode::conservative, mode::balanced, mode::aggressive};
  json peaks = json::object();
  for (const auto m : modes) {
    json row = json::array();
    for (const auto b : batches) row.push_back(peak(b, m).value);
    peaks[std::string(to_string(m))] = row;
  }
  return {{"micro_batch", batches}, {"peak", peaks}};
}

inline json cliff_json(const run_input& in, const gpu_spec& gpu, const plan_result& plan) {
  return cliff_json_of(cliff_micro_batches(in.run, plan), [&](std::uint64_t b, mode m) {
    return cliff_peak(in.model, in.run, b, gpu, m, plan.budget, plan.device);
  });
}

}  // namespace memscale::json_io
