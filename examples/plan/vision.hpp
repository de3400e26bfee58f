// memscale-plan: reports for torchvision models (--model resnet50 --image 384x384).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "args.hpp"

namespace memscale_plan {

// The vision model the options describe (the preset with --image / --channels-last);
// throws usage_error for --image or --channels-last without a vision --model.
std::optional<memscale::vision::vision_spec> vision_model_of(const options& opt);

// The estimate (and with --gpu the plan) of a vision run, as text or JSON.
std::string vision_report(const options& opt, const memscale::vision::vision_spec& model);

// --list-models: the vision presets (name, exact parameter count, family).
std::string vision_model_list_text();
nlohmann::json vision_model_list_json();

}  // namespace memscale_plan
