// How long an estimate takes at run time ("instant" is a claim to measure); plans: plan_bench.cpp.
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

}  // namespace
