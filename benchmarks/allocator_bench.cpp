// How long the caching-allocator replay takes (memscale/allocator/replay.hpp): every layer
// walked, and the estimate from walks over 8 and 16 layers (docs/allocator.md).
#include <benchmark/benchmark.h>

#include <memory>

#include <memscale/allocator/replay.hpp>
#include <memscale/allocator/replay_generate.hpp>
#include <memscale/memscale.hpp>

namespace {

using namespace memscale;

void replay(benchmark::State& state, const model_spec& model, std::uint64_t walked_layers) {
  const auto built = std::make_unique<model_graph>(build(model, {.micro_batch = 1, .seq_len = 2048, .prec = precision::amp_bf16}));
  for ([[maybe_unused]] auto _ : state) {
    auto r = allocator::replay_training<16384, 16384, 16384>(built->stack(), built->run, {.walked_layers = walked_layers});
    benchmark::DoNotOptimize(r);
  }
}

// 32 layers (Llama-2-7B) and 80 layers (Llama-2-70B), amp bf16, 1 x 2048.
void replay_32_layers(benchmark::State& state) { replay(state, presets::llama_2_7b, 0); }
void replay_80_layers(benchmark::State& state) { replay(state, presets::llama_2_70b, 0); }
void replay_32_layers_extrapolated(benchmark::State& state) { replay(state, presets::llama_2_7b, 8); }
void replay_80_layers_extrapolated(benchmark::State& state) { replay(state, presets::llama_2_70b, 8); }
BENCHMARK(replay_32_layers)->Unit(benchmark::kMicrosecond);
BENCHMARK(replay_80_layers)->Unit(benchmark::kMicrosecond);
BENCHMARK(replay_32_layers_extrapolated)->Unit(benchmark::kMicrosecond);
BENCHMARK(replay_80_layers_extrapolated)->Unit(benchmark::kMicrosecond);

// generate(): Llama-2-7B bf16, 8 x 2048 prompt, 128 new tokens (every step walked).
void replay_generate_llama_2_7b(benchmark::State& state) {
  const inference_spec run{.batch = 8, .context = 2048, .new_tokens = 128, .compute = dtype::bf16, .kv = dtype::bf16};
  for ([[maybe_unused]] auto _ : state) {
    auto r = allocator::replay_generate<16384, 16384>(presets::llama_2_7b, run);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(replay_generate_llama_2_7b)->Unit(benchmark::kMicrosecond);

}  // namespace
