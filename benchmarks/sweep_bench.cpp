// The sweep a planner front end draws (the OOM cliff): 10^6 estimates, one per
// (micro-batch x sequence length x mode) point, on one core.
#include <benchmark/benchmark.h>

#include <cstdint>

#include <memscale/memscale.hpp>

namespace {

constexpr std::uint64_t sweep_batches = 250;    // micro-batch 1..250
constexpr std::uint64_t sweep_sequences = 1000;  // sequence 4, 8, ..., 4000
constexpr std::uint64_t sweep_points = sweep_batches * sweep_sequences * 4;  // x 4 modes = 10^6

void sweep_llama_2_7b_a100_million_points(benchmark::State& state) {
  const memscale::gpu_spec gpu = *memscale::find_gpu("a100-80gb");
  const memscale::training_spec base{.prec = memscale::precision::amp_bf16};
  constexpr std::array modes{memscale::mode::none, memscale::mode::conservative, memscale::mode::balanced,
                             memscale::mode::aggressive};
  for ([[maybe_unused]] auto _ : state) {
    std::uint64_t fitting = 0;  // points whose peak is within the budget: keeps every estimate observable
    const memscale::bytes budget = memscale::budget_of(gpu);
    for (const memscale::mode m : modes) {
      for (std::uint64_t b = 1; b <= sweep_batches; ++b) {
        for (std::uint64_t s = 1; s <= sweep_sequences; ++s) {
          memscale::training_spec run = base;
          run.micro_batch = b;
          run.seq_len = 4 * s;
          const auto e = memscale::estimate(memscale::presets::llama_2_7b, memscale::apply_mode(run, m, gpu));
          fitting += memscale::overall_peak(e).device <= budget ? 1 : 0;
        }
      }
    }
    benchmark::DoNotOptimize(fitting);
  }
  state.counters["points"] = static_cast<double>(sweep_points);
  state.counters["ns_per_point"] = benchmark::Counter(static_cast<double>(sweep_points) * static_cast<double>(state.iterations()),
                                                      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(sweep_llama_2_7b_a100_million_points)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
