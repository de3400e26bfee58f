// How long a generate() estimate and an inference plan take at run time: three forward graphs
// walked per estimate (prefill, first and last decoding step), a plan's searches solved from peak values.
#include <benchmark/benchmark.h>

#include <memscale/inference.hpp>
#include <memscale/presets.hpp>

namespace {

void estimate_inference_llama_2_7b(benchmark::State& state) {
  memscale::inference_spec run{.batch = 4, .context = 2048, .new_tokens = 96};
  for ([[maybe_unused]] auto _ : state) {
    benchmark::DoNotOptimize(run);
    auto result = memscale::estimate_inference(memscale::presets::llama_2_7b, run);
    benchmark::DoNotOptimize(result);
  }
}
BENCHMARK(estimate_inference_llama_2_7b)->Unit(benchmark::kMicrosecond);

void plan_inference_llama_2_7b_rtx4090(benchmark::State& state) {
  memscale::inference_spec run{.batch = 4, .context = 2048, .new_tokens = 96};
  const memscale::gpu_spec gpu = *memscale::find_gpu("rtx4090");
  for ([[maybe_unused]] auto _ : state) {
    benchmark::DoNotOptimize(run);
    auto plan = memscale::plan_inference(memscale::presets::llama_2_7b, run, gpu);
    benchmark::DoNotOptimize(plan);
  }
}
BENCHMARK(plan_inference_llama_2_7b_rtx4090)->Unit(benchmark::kMicrosecond);

}  // namespace
