// memscale/json/report.hpp: estimates as JSON (sizes as integer bytes).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "memscale/estimate.hpp"
#include "memscale/json/band_json.hpp"
#include "memscale/json/run_settings.hpp"
#include "memscale/planner.hpp"

namespace memscale::json_io {

using json = nlohmann::json;

inline json breakdown_to_json(const memory_breakdown& b) {
  return {{"parameters", b.parameters.value},
          {"gradients", b.gradients.value},
          {"optimizer", b.optimizer.value},
          {"activations", b.activations.value},
          {"workspace", b.workspace.value}};
}

inline json peak_to_json(const peak_estimate& p) {
  return {{"tensor", p.tensor.value},
          {"reserved", p.reserved.value},
          {"device", p.device.value},
          {"phase", std::string(to_string(p.at))}};
}

inline json estimate_to_json(const estimate_result& r) {
  json j = {{"parameters", r.parameter_count},
          {"trainable_parameters", r.trainable_parameter_count},
          {"breakdown", breakdown_to_json(r.steady.breakdown)},
          {"peak", peak_to_json(r.steady)},
          {"first_step", {{"peak", peak_to_json(r.first_step)}, {"breakdown", breakdown_to_json(r.first_step.breakdown)}}},
          {"static",
           {{"parameters", r.parameter_bytes.value},
            {"gradients", r.gradient_bytes.value},
            {"optimizer", r.optimizer_bytes.value},
            {"saved_activations", r.saved_activation_bytes.value}}}};
  // A paged optimizer's unified memory, outside every peak (estimate_result::paged_optimizer_bytes).
  if (r.paged_optimizer_bytes.value > 0) j["static"]["paged_optimizer"] = r.paged_optimizer_bytes.value;
  // What the run's offloads hold in host memory, outside every peak (estimate_result::host_bytes).
  if (r.host_bytes.value > 0) j["static"]["host_memory"] = r.host_bytes.value;
  return j;
}

// Plans (memscale/planner.hpp): every mode with its verdict, error band and what it
// switches on; "status" tells "no_technique_needed" from "nothing_fits" ("mode" is null then).
inline json techniques_json(technique_set set) {
  json list = json::array();
  for (const auto t : all_techniques)
    if (set.has(t)) list.push_back(std::string(to_string(t)));
  return list;
}

inline json mode_json(const mode_plan& m) {
  return {{"mode", std::string(to_string(m.m))},
          {"peak", m.peak.value},
          {"tensor_peak", m.tensor_peak.value},
          {"fits", m.fits},
          {"verdict", std::string(to_string(m.v))},
          {"band", band_json(m.band)},
          {"peak_range", {{"low", m.range.low.value}, {"high", m.range.high.value}}},
          {"phase", std::string(to_string(m.at))},
          {"breakdown", breakdown_to_json(m.breakdown)},
          {"switches_on", techniques_json(m.switched_on)},
          {"run",
           {{"precision", std::string(to_string(m.run.prec))},
            {"optimizer", std::string(to_string(m.run.optimizer))},
            {"checkpointing", std::string(to_string(m.run.ckpt))},
            {"attention", std::string(to_string(m.run.attention))},
            {"offload_optimizer", m.run.offload_optimizer},
            {"offload_activations", m.run.offload_activations},
            {"offload_parameters", m.run.offload_parameters}}},
          {"recompute_forward_passes", m.cost.recompute_fraction},
          {"transfer_seconds_per_step", m.cost.transfer_seconds},
          {"host_memory", m.cost.host_memory.value}};
}

// {"options": [{"lever", "peak", "up_to", "band", "verdict"}, ...], "advice", "first_fitting"}:
// "advice" is the lever make_plan advises, the first whose point estimate fits the budget;
// "first_fitting" the first whose band's upper end does (null: none).
inline json levers_json(const lever_list& levers) {
  json list = json::array();
  for (std::size_t i = 0; i < levers.count; ++i) {
    const lever_option& l = levers.items[i];
    list.push_back({{"lever", std::string(to_string(l.what))},
                    {"peak", l.peak.value},
                    {"up_to", l.range.high.value},
                    {"band", band_json(l.band)},
                    {"verdict", std::string(to_string(l.v))}});
  }
  const auto name_at = [&](std::size_t i) {
    return i < levers.count ? json(std::string(to_string(levers.items[i].what))) : json();
  };
  return {{"options", list}, {"advice", name_at(levers.first_likely)}, {"first_fitting", name_at(levers.first_fitting)}};
}

// The advised lever's plan: mode_json plus the whole run it estimates ("run_settings", as a
// run document writes them: the loss, the adapters, the micro-batch and the sequence too).
inline json lever_plan_json(const mode_plan& m) {
  json j = mode_json(m);
  j["run_settings"] = run_to_json(m.run);
  return j;
}

inline json plan_to_json(const plan_result& plan) {
  json modes = json::array();
  for (const auto& m : plan.modes) modes.push_back(mode_json(m));
  json j = {
      {"status", std::string(to_string(plan.status))},
      // "none" only when no technique is needed; null when nothing fits.
      {"mode", plan.has_chosen_mode() ? json(std::string(to_string(plan.chosen))) : json(nullptr)},
      {"fits", plan.fits},
      {"verdict", std::string(to_string(plan.v))},
      {"budget", plan.budget.value},
      {"unoptimized_peak", plan.unoptimized_peak.value},
      {"pressure", plan.pressure},
      {"mode_order_inverted", plan.mode_order_inverted},
      {"modes", modes},
      {"effective_batch", plan.effective_batch},
      {"micro_batch", plan.micro_batch},
      {"grad_accumulation", plan.grad_accumulation},
      {"max_micro_batch", plan.max_micro_batch},
      {"max_micro_batch_mode", std::string(to_string(plan.max_micro_batch_mode))},
      {"max_seq_len", plan.max_seq_len},
      {"next_step", std::string(to_string(plan.next_step))},
      {"reason", std::string(plan.reason)},
      {"parameter_offload", mode_json(plan.parameter_offload)}};
  if (plan.levers.count > 0) j["levers"] = levers_json(plan.levers);
  if (plan.status == plan_status::cheaper_levers) j["lever_plan"] = lever_plan_json(plan.lever_plan);
  if (plan.rounded_micro_batch > 0)
    j["rounded"] = {{"micro_batch", plan.rounded_micro_batch},
                    {"grad_accumulation", plan.rounded_grad_accumulation},
                    {"effective_batch", plan.rounded_micro_batch * plan.rounded_grad_accumulation}};
  return j;
}

}  // namespace memscale::json_io
