// How long an estimate and a plan take at run time ("instant" is a claim to measure).
#include <benchmark/benchmark.h>

#include <memscale/memscale.hpp>

namespace {

void estimate_llama_2_7b(benchmark::State& state) {
  memscale::training_spec run{.micro_batch = 4, .seq_len = 2048, .prec = memscale::precision::amp_bf16};
  for ([[maybe_unused]] auto _ : state) {
    benchmark::DoNotOptimize(run);
    auto result = memscale::estimate(memscale::presets::llama_2_7b, run);
    benchmark::DoNotOptimize(result);
  }
}
BENCHMARK(estimate_llama_2_7b);

void make_plan_gpt2_xl_rtx3090(benchmark::State& state) {
  const memscale::gpu_spec gpu = *memscale::find_gpu("rtx3090");
  memscale::training_spec run{.micro_batch = 1, .seq_len = 512};
  for ([[maybe_unused]] auto _ : state) {
    benchmark::DoNotOptimize(run);
    auto plan = memscale::make_plan(memscale::presets::gpt2_xl, run, gpu);
    benchmark::DoNotOptimize(plan);
  }
}
BENCHMARK(make_plan_gpt2_xl_rtx3090);

// A plan that searches for the largest micro-batch (nothing fits as asked).
void make_plan_with_batch_search(benchmark::State& state) {
  const memscale::gpu_spec gpu = *memscale::find_gpu("rtx3090");
  memscale::training_spec run{.micro_batch = 64, .seq_len = 1024, .grad_accum = 2};
  for ([[maybe_unused]] auto _ : state) {
    benchmark::DoNotOptimize(run);
    auto plan = memscale::make_plan(memscale::presets::gpt2_xl, run, gpu);
    benchmark::DoNotOptimize(plan);
  }
}
BENCHMARK(make_plan_with_batch_search);

}  // namespace
