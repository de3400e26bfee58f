// memscale-plan: "did you mean ...?" for a misspelt option, model or GPU name; the class is
// shared with the run-document reader (memscale::nearest_name, memscale/detail/nearest_name.hpp).
#pragma once

#include "memscale/detail/nearest_name.hpp"

namespace memscale_plan {

using memscale::nearest_name;

}  // namespace memscale_plan
