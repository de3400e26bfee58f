// memscale-plan: what the run and list commands print (text and JSON).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "memscale/device_peak.hpp"
#include "memscale/estimate.hpp"
#include "memscale/gpus.hpp"
#include "memscale/model.hpp"
#include "memscale/planner.hpp"
#include "memscale/training.hpp"
#include "units.hpp"  // set_size_unit: --units

namespace memscale_plan {

// The text report: model summary, run settings, breakdown table, steady-state and step-1 peaks.
std::string text_report(const memscale::model_spec& model, const memscale::training_spec& run,
                        const memscale::estimate_result& result);

// json_io::estimate_to_json(result) plus "model" (the preset name) and "run" (the settings).
nlohmann::json json_report(const memscale::model_spec& model, const memscale::training_spec& run,
                           const memscale::estimate_result& result);

// The training settings as JSON, with the option spellings memscale-plan accepts.
nlohmann::json run_to_json(const memscale::training_spec& run);

// A verdict as the reports and pictures say it: "fits", "borderline", "does not fit".
std::string verdict_words(memscale::verdict v);

// What a caching-allocator section shows of a training step's or a generate() call's device estimate.
struct device_figures {
  memscale::replay_fallback fallback = memscale::replay_fallback::none;
  memscale::bytes tensor{};
  memscale::bytes reserved{};
  memscale::bytes device{};
  memscale::allocator::context_estimate context{};
  memscale::context_source context_from = memscale::context_source::flat;
};

// The section itself: the reserved peak (`replayed_events` says what was replayed), the context
// and, with a verdict, the point verdict at its budget and the verdict with the band;
// `smaller_run` is what a borderline run should try first.
std::string device_figures_text(const device_figures& d, const memscale::gpu_spec* gpu, const std::string& alloc_conf,
                                std::string_view replayed_events, const memscale::device_verdict* v,
                                std::string_view smaller_run);

// The allocator section: the software assumed, the replayed reserved peak, the CUDA context
// and, with a budget, the verdict there: the capped replay's point verdict and the band's
// (memscale/device_peak.hpp).
std::string allocator_text(const memscale::model_spec& model, const memscale::training_spec& run,
                           const memscale::gpu_spec* gpu, const std::string& alloc_conf, memscale::bytes context_memory,
                           std::optional<memscale::bytes> budget);

// --list-models: one line per preset (name, exact parameter count, layers, hidden, heads).
std::string model_list_text();
nlohmann::json model_list_json();

// --list-families: one line per row of the family registry (json_io::hf::families): its
// model_type, whether --config reads it, whether ground-truth records may name it.
std::string family_list_text();
nlohmann::json family_list_json();

// --list-gpus: one line per gpu_catalog entry (name, label, memory in the --units unit, bf16, SMs, memory source).
std::string gpu_list_text();
nlohmann::json gpu_list_json();

// --gpu: the "Plan on <label>" section appended to the text report, and the "plan" object
// of the JSON report.
std::string plan_text(const memscale::gpu_spec& gpu, const memscale::plan_result& plan);

// When the plan weighed the cheaper levers (nothing fits even the smallest micro-batch): each
// with its peak, and the one make_plan advises; empty otherwise.
std::string levers_text(const memscale::model_spec& model, const memscale::gpu_spec& gpu, const std::string& alloc_conf,
                        memscale::bytes context_memory, const memscale::plan_result& plan);

// One line per technique the chosen mode switches on: which engine config or code does it
// (switch_on.cpp); empty when no mode is chosen or it switches nothing on.
std::string switch_on_text(const memscale::plan_result& plan);
nlohmann::json plan_json(const memscale::plan_result& plan);

}  // namespace memscale_plan
