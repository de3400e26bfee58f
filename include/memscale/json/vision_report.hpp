// memscale/json/vision_report.hpp: the JSON report of a vision training run (a torchvision or
// timm model, json/vision_document.hpp), as `memscale-plan --json` prints it: the estimate on the
// device, the allocator section, the software assumed and with a GPU the plan, then the run
// document it answers. memscale-plan and the web calculator (web/) both build it here.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "memscale/device_peak.hpp"
#include "memscale/json/device_report.hpp"
#include "memscale/json/report.hpp"
#include "memscale/json/run_document.hpp"
#include "memscale/json/run_report.hpp"
#include "memscale/json/software_stack.hpp"
#include "memscale/planner.hpp"
#include "memscale/vision/device.hpp"
#include "memscale/vision/planner.hpp"

namespace memscale::json_io {

// What a vision report says: the step on the device (its reserved and device figures the
// allocator's), with a GPU the plan and on CUDA the verdict at the plan's budget.
struct vision_outcome {
  training_spec run;  // on the GPU when there is one (its BLAS workspace), as the plan does
  device_estimate device;
  std::optional<plan_result> plan;
  std::optional<device_verdict> verdict;
};

// The outcome of the vision run `in` (in.vision set).
inline vision_outcome vision_outcome_of(const run_input& in) {
  const vision::vision_spec& model = *in.vision;
  const std::optional<gpu_spec> gpu = gpu_of(in);
  const training_spec run = gpu ? on_gpu(in.run, *gpu) : in.run;
  const device_options o = device_options_of(in.alloc_conf, in.context_memory);
  vision_outcome out{.run = run,
                     .device = vision::estimate_on_device(model, run, gpu ? &*gpu : nullptr, o),
                     .plan = std::nullopt,
                     .verdict = std::nullopt};
  if (!gpu) return out;
  out.plan = vision::make_plan(model, in.run, *gpu, {.headroom = in.headroom.value_or(default_headroom)}, o);
  if (run.device == device_kind::cuda) out.verdict = vision::verdict_on_device(model, run, out.device, out.plan->budget, o);
  return out;
}

// The report: estimate_to_json of the device estimate, "architecture" (the model's
// description), on CUDA "allocator", with a GPU "plan", then the run document (so the report
// is a run document: "model", "run", "software", "gpu", ...).
inline json vision_report_json(const run_input& in, const vision_outcome& r) {
  json j = estimate_to_json(r.device.tensors);
  j["architecture"] = vision_model_json(*in.vision);
  j.update(run_document_json(in));
  // Its step runs no transformers code: the current torch is the current stack.
  if (in.run.torch_version == current_torch_release) j["software_assumed"] = current_releases_json;
  if (r.run.device == device_kind::cuda)
    j["allocator"] = allocator_json(r.device, in.alloc_conf, r.verdict ? &*r.verdict : nullptr);
  if (r.plan) j["plan"] = plan_report_json(*r.plan);
  return j;
}

inline json vision_report_json(const run_input& in) { return vision_report_json(in, vision_outcome_of(in)); }

// The vision planner's own plan of mode `m` for the run at another micro-batch (as cliff_plan
// for a transformer).
inline mode_plan vision_cliff_plan(const vision::vision_spec& model, training_spec run, std::uint64_t micro_batch,
                                   const gpu_spec& gpu, mode m, bytes budget, const device_options& device = {}) {
  run.micro_batch = micro_batch;
  return vision::plan_mode(model, run, gpu, m, budget, device);
}

// The OOM cliff of a vision run (in.vision set) on `gpu`, as cliff_json draws a transformer's: each
// mode's device peak at the micro-batches of cliff_micro_batches. The web calculator draws it;
// memscale-plan --svg-batch and its text report draw the same figures.
inline json vision_cliff_json(const run_input& in, const gpu_spec& gpu, const plan_result& plan) {
  return cliff_json_of(cliff_micro_batches(in.run, plan), [&](std::uint64_t b, mode m) {
    return vision_cliff_plan(*in.vision, in.run, b, gpu, m, plan.budget, plan.device).peak;
  });
}

}  // namespace memscale::json_io
