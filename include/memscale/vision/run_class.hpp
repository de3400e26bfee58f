// memscale/vision/run_class.hpp: the measured class of a vision training run (error_band.hpp).
#pragma once

#include "memscale/error_band.hpp"
#include "memscale/training.hpp"
#include "memscale/vision/model.hpp"

namespace memscale::vision {

// The measured class of a vision run: the torchvision cases (CPU traces and H100 steps) cover
// full training without offloading or sharding, which the vision estimator does not model.
constexpr run_class class_of(const vision_spec&, const training_spec& run) {
  const bool modelled = run.target == training_target::full && run.shard == sharding::none &&
                        !run.offload_optimizer && !run.offload_parameters && !run.offload_activations;
  return modelled ? run_class::torchvision : run_class::unmeasured;
}

}  // namespace memscale::vision
