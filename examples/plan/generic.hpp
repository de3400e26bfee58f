// memscale-plan: a --config model whose model_type no family reader knows, estimated from its
// checkpoint's headers and a generic decoder (memscale/json/generic_model.hpp). The report says
// which figures are exact and which band the rest takes.
#pragma once

#include <string>

#include "args.hpp"
#include "memscale/json/generic_model.hpp"

namespace memscale_plan {

// The generic model --config loaded, while it is still the run's model (a later --model or
// --run replaces the model, not this record); nullptr otherwise.
const memscale::json_io::generic_checkpoint* generic_model_in_use(const options& o);

// The run's estimate on it, text or --json, with the notes and the checkpoint's summary.
std::string generic_report(const options& o, const memscale::json_io::generic_checkpoint& g);

}  // namespace memscale_plan
