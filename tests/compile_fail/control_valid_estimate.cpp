// Positive control for the estimate compile-fail tests (invalid_model_*.cpp,
// invalid_run_*.cpp): the same kind of constant-evaluated estimate() in a static_assert,
// with a valid model and run, must compile. If it does not, those tests prove nothing.
#include <memscale/estimate.hpp>
#include <memscale/presets.hpp>

constexpr memscale::estimate_result gpt2_estimate =
    memscale::estimate(memscale::presets::gpt2, memscale::training_spec{.micro_batch = 1});
static_assert(gpt2_estimate.parameter_count == 124'439'808);

constexpr memscale::model_spec eight_kv_heads = [] {
  memscale::model_spec m = memscale::presets::llama_2_7b;
  m.kv_heads = 8;  // divides 32: grouped-query attention
  return m;
}();
static_assert(memscale::estimate(eight_kv_heads, memscale::training_spec{}).parameter_count > 0);
