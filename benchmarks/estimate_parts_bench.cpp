// The two halves of estimate_llama_2_7b (estimate_bench.cpp): building the op graph, and
// walking a built graph for the totals and the peaks (docs/performance.md). The graphs are
// written by the recipes over the shared layers (graph/recipes/).
#include <benchmark/benchmark.h>

#include <memscale/memscale.hpp>

namespace {

memscale::training_spec llama_run() {
  return memscale::training_spec{.micro_batch = 4, .seq_len = 2048, .prec = memscale::precision::amp_bf16};
}

void build_graph_llama_2_7b(benchmark::State& state) {
  memscale::training_spec run = llama_run();
  for ([[maybe_unused]] auto _ : state) {
    benchmark::DoNotOptimize(run);
    const memscale::model_graph g = memscale::build(memscale::presets::llama_2_7b, run);
    benchmark::DoNotOptimize(g.stacks.decoder.size);
  }
}
BENCHMARK(build_graph_llama_2_7b);


// QLoRA + DoRA on every linear layer and the head: 106 ops, most of them the adapters'.
memscale::training_spec llama_qlora_run() {
  memscale::training_spec run{.micro_batch = 4, .seq_len = 2048, .prec = memscale::precision::pure_bf16};
  run.target = memscale::training_target::qlora;
  run.lora_rank = 16;
  run.lora_targets = memscale::lora_all_linear | memscale::lora_target::head;
  run.lora_kind = memscale::lora_variant::dora;
  return run;
}

void build_graph_llama_2_7b_qlora(benchmark::State& state) {
  memscale::training_spec run = llama_qlora_run();
  for ([[maybe_unused]] auto _ : state) {
    benchmark::DoNotOptimize(run);
    const memscale::model_graph g = memscale::build(memscale::presets::llama_2_7b, run);
    benchmark::DoNotOptimize(g.stacks.decoder.size);
  }
}
BENCHMARK(build_graph_llama_2_7b_qlora);


memscale::training_spec t5_run() {
  return memscale::training_spec{.micro_batch = 8, .seq_len = 512, .prec = memscale::precision::amp_bf16};
}

void build_encoder_decoder_graph_t5_small(benchmark::State& state) {
  memscale::training_spec run = t5_run();
  for ([[maybe_unused]] auto _ : state) {
    benchmark::DoNotOptimize(run);
    const memscale::model_graph g = memscale::build(memscale::presets::t5_small, run);
    benchmark::DoNotOptimize(g.stacks.decoder.size);
  }
}
BENCHMARK(build_encoder_decoder_graph_t5_small);


void estimate_built_graph_llama_2_7b(benchmark::State& state) {
  memscale::training_spec run = llama_run();
  const memscale::model_graph built = memscale::build(memscale::presets::llama_2_7b, run);
  const memscale::graph& g = built.stack();
  run = built.run;
  for ([[maybe_unused]] auto _ : state) {
    benchmark::DoNotOptimize(run);
    auto result = memscale::estimate(g, run);
    benchmark::DoNotOptimize(result);
  }
}
BENCHMARK(estimate_built_graph_llama_2_7b);

}  // namespace
