// DeepSpeed's model-states estimators evaluate at compile time (parallel/deepspeed_estimator.hpp).
#include "memscale/parallel/deepspeed_estimator.hpp"

namespace ds = memscale::deepspeed;

// bigscience/T0_3B on 1 GPU, no offload: 4 * 65,798,144 + 18 * 2,783,959,040 bytes -> "46.91GB".
constexpr ds::model_states_inputs t0_3b{.total_params = 2'783'959'040, .largest_layer_params = 65'798'144,
                                        .cpu_offload = false, .cpu_offload_params = false};
static_assert(ds::zero3_model_states_mem_needs(t0_3b).gpu.value == 50'374'455'296);
static_assert(ds::printed_gib_hundredths(ds::zero3_model_states_mem_needs(t0_3b).gpu) == 4691);
// Sharding over more GPUs never needs more GPU memory per GPU.
static_assert(ds::zero3_model_states_mem_needs({.total_params = 1'000'000, .largest_layer_params = 10,
                                                .num_gpus_per_node = 8, .cpu_offload = false})
                  .gpu < ds::zero3_model_states_mem_needs({.total_params = 1'000'000, .largest_layer_params = 10,
                                                           .num_gpus_per_node = 4, .cpu_offload = false})
                             .gpu);
