// memscale/device_options.hpp: what a person states about the allocator and the device beyond
// the run itself, for every device estimate (memscale/device_peak.hpp) and plan that replays.
#pragma once

#include "memscale/allocator/options.hpp"
#include "memscale/bytes.hpp"

namespace memscale {

struct device_options {
  allocator::options allocator{};  // PYTORCH_CUDA_ALLOC_CONF (allocator/alloc_conf.hpp)
  bytes context_override{};        // a measured context (--context-memory); zero: the model
};

}  // namespace memscale
