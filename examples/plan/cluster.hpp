// memscale-plan: multi-GPU output: the per-GPU estimate of a layout (--gpus with --strategy),
// the cluster plan (--gpus with --gpu, no --strategy), and the engine configs (--emit).
#pragma once

#include <string>

#include "args.hpp"

namespace memscale_plan {

// The report (text or JSON, per opt.json) or, with --emit, the engine config alone.
std::string run_cluster(const options& opt);

}  // namespace memscale_plan
