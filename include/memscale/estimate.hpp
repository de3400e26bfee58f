// memscale/estimate.hpp: umbrella of estimate/ — the estimate of a model's training step
// (estimate/model.hpp) and the estimators it composes. estimate/checkpoint_state.hpp, the
// checkpoint path, comes with memscale/generic_model.hpp: it needs <algorithm> and <vector>,
// which would add a third to the parse time of every includer.
#pragma once

#include "memscale/estimate/activations.hpp"       // IWYU pragma: export
#include "memscale/estimate/encoder_decoder.hpp"   // IWYU pragma: export
#include "memscale/estimate/gradients.hpp"         // IWYU pragma: export
#include "memscale/estimate/model.hpp"             // IWYU pragma: export
#include "memscale/estimate/optimizer.hpp"         // IWYU pragma: export
#include "memscale/estimate/parameters.hpp"        // IWYU pragma: export
#include "memscale/estimate/single_graph.hpp"      // IWYU pragma: export
#include "memscale/estimate/workspace.hpp"         // IWYU pragma: export
