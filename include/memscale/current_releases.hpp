// memscale/current_releases.hpp: the releases a run that states no software is estimated
// under (memscale-plan, run documents, the web page). Ground-truth records keep their own.
#pragma once

#include <cstdint>

namespace memscale {

// major * 100 + minor, as training_spec and inference_spec keep them: the software of the
// project's H100 runs the rules were checked against (docs/data/gpu_measured_h100.json
// "software": torch 2.11.0, transformers 5.17.0).
inline constexpr std::uint32_t current_torch_release = 211;
inline constexpr std::uint32_t current_transformers_release = 517;

}  // namespace memscale
