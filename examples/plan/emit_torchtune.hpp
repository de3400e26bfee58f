// memscale-plan --emit torchtune: the torchtune recipe config of a single-device run.
#pragma once

#include <string>

#include "args.hpp"

namespace memscale_plan {

// Refuses --emit torchtune where no single-device torchtune run is described.
void check_torchtune_emit(const options& opt);

// The recipe config YAML (memscale/json/emit_torchtune.hpp) of the run as given.
std::string torchtune_config(const options& opt);

}  // namespace memscale_plan
