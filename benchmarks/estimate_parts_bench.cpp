// The two halves of estimate_llama_2_7b (estimate_bench.cpp): building the op graph, and
// walking a built graph for the totals and the peaks (docs/performance.md).
#include <benchmark/benchmark.h>

#include <memscale/memscale.hpp>

namespace {

memscale::training_spec llama_run() {
  return memscale::with_resolved_adapters(
      memscale::presets::llama_2_7b,
      memscale::training_spec{.micro_batch = 4, .seq_len = 2048, .prec = memscale::precision::amp_bf16});
}

void build_graph_llama_2_7b(benchmark::State& state) {
  memscale::training_spec run = llama_run();
  for ([[maybe_unused]] auto _ : state) {
    benchmark::DoNotOptimize(run);
    const memscale::graph g = memscale::build_graph(memscale::presets::llama_2_7b, run);
    benchmark::DoNotOptimize(g.size);
  }
}
BENCHMARK(build_graph_llama_2_7b);

void estimate_built_graph_llama_2_7b(benchmark::State& state) {
  memscale::training_spec run = llama_run();
  const memscale::graph g = memscale::build_graph(memscale::presets::llama_2_7b, run);
  for ([[maybe_unused]] auto _ : state) {
    benchmark::DoNotOptimize(run);
    auto result = memscale::estimate(g, run);
    benchmark::DoNotOptimize(result);
  }
}
BENCHMARK(estimate_built_graph_llama_2_7b);

}  // namespace
