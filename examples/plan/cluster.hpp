// memscale-plan: multi-GPU output: the per-GPU estimate of a layout (--gpus with --strategy),
// the cluster plan (--gpus with --gpu, no --strategy), and the engine configs (--emit).
#pragma once

#include <string>

#include "args.hpp"

namespace memscale_plan {

// The report (text or JSON, per opt.json) or, with --emit, the engine config alone.
std::string run_cluster(const options& opt);

// Refuses multi-GPU options that would be ignored: a layout option without --gpus, and --gpus
// with what only a single-GPU report has (vision models, --inference, the SVG pictures).
void check_multi_gpu_options(const options& opt);

}  // namespace memscale_plan
