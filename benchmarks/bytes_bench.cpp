// Placeholder benchmark: checked addition of memscale::bytes (overflow test + add).
#include <benchmark/benchmark.h>

#include <memscale/bytes.hpp>

namespace {

void bytes_addition(benchmark::State& state) {
  memscale::bytes a{123'456'789};
  memscale::bytes b{987'654'321};
  for ([[maybe_unused]] auto _ : state) {
    benchmark::DoNotOptimize(a);
    benchmark::DoNotOptimize(b);
    memscale::bytes sum = a + b;
    benchmark::DoNotOptimize(sum);
  }
}

}  // namespace

BENCHMARK(bytes_addition);
