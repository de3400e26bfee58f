// memscale-plan: what the run and list commands print (text and JSON).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "memscale/estimate.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale_plan {

// The text report: model summary, run settings, breakdown table, steady-state and step-1 peaks.
std::string text_report(const memscale::model_spec& model, const memscale::training_spec& run,
                        const memscale::estimate_result& result);

// json_io::estimate_to_json(result) plus "model" (the preset name) and "run" (the settings).
nlohmann::json json_report(const memscale::model_spec& model, const memscale::training_spec& run,
                           const memscale::estimate_result& result);

// The training settings as JSON, with the option spellings memscale-plan accepts.
nlohmann::json run_to_json(const memscale::training_spec& run);

// --list-models: one line per preset (name, exact parameter count, layers, hidden, heads).
std::string model_list_text();
nlohmann::json model_list_json();

// EXTENSION POINT (planner): plan_text(...) / plan_json(...) for --gpu go here; text_report
// and json_report then gain a "fit" section after the peaks.

}  // namespace memscale_plan
