// memscale/inference.hpp: umbrella of inference/ — the GPU memory of generate()
// (inference/generate_peak.hpp) and whether it fits a GPU (inference/plan.hpp).
#pragma once

#include "memscale/inference/generate_peak.hpp"  // IWYU pragma: export
#include "memscale/inference/kv_cache.hpp"       // IWYU pragma: export
#include "memscale/inference/plan.hpp"           // IWYU pragma: export
#include "memscale/inference/spec.hpp"           // IWYU pragma: export
#include "memscale/inference/weights.hpp"        // IWYU pragma: export
