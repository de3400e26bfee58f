// memscale/json/report.hpp: estimates as JSON (sizes as integer bytes).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "memscale/estimate.hpp"

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
  return {{"parameters", r.parameter_count},
          {"trainable_parameters", r.trainable_parameter_count},
          {"breakdown", breakdown_to_json(r.steady.breakdown)},
          {"peak", peak_to_json(r.steady)},
          {"first_step", {{"peak", peak_to_json(r.first_step)}, {"breakdown", breakdown_to_json(r.first_step.breakdown)}}},
          {"static",
           {{"parameters", r.parameter_bytes.value},
            {"gradients", r.gradient_bytes.value},
            {"optimizer", r.optimizer_bytes.value},
            {"saved_activations", r.saved_activation_bytes.value}}}};
}

}  // namespace memscale::json_io
