// memscale/memscale.hpp: the umbrella header (standard library only; fmt and JSON
// adapters are opt-in: <memscale/fmt.hpp>, <memscale/json.hpp>).
#pragma once

#include "memscale/attention_kernel.hpp"
#include "memscale/bytes.hpp"
#include "memscale/current_releases.hpp"
#include "memscale/dtype.hpp"
#include "memscale/error.hpp"
#include "memscale/estimate.hpp"
#include "memscale/gpus.hpp"
#include "memscale/liger.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/model.hpp"
#include "memscale/planner.hpp"
#include "memscale/presets.hpp"
#include "memscale/release_text.hpp"
#include "memscale/training.hpp"
#include "memscale/graph/model_graph.hpp"
