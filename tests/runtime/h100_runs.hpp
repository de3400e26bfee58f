// Helpers for run-time tests that replay the project's H100 runs (docs/data/gpu_*_h100.json):
// a run's max_memory_allocated record with its measured max_memory_reserved, the record's
// training step replayed through the caching allocator, and the replay's error.
#pragma once

#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "memscale/allocator/replay.hpp"
#include "memscale/json.hpp"

namespace memscale_test {

struct measured_run {
  nlohmann::json record;
  double reserved = 0;
};

// The "-allocated" record of run `id` in docs/data/`file` and its "-reserved" record's figure.
inline measured_run h100_run(const std::string& file, const std::string& id) {
  std::ifstream in(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/" + file);
  REQUIRE(in);
  measured_run m;
  for (const nlohmann::json& r : nlohmann::json::parse(in)) {
    if (r.at("id") == id + "-allocated") m.record = r;
    if (r.at("id") == id + "-reserved") m.reserved = r.at("measured_bytes").get<double>();
  }
  REQUIRE(!m.record.is_null());
  return m;
}

// The training step of a run's record replayed through the allocator.
inline memscale::allocator::replay_result replayed_training(const measured_run& run) {
  const auto built = std::make_unique<memscale::model_graph>(memscale::build(
      memscale::json_io::model_for_record(run.record), memscale::json_io::run_from_record(run.record)));
  return memscale::allocator::replay_training<16384, 16384, 16384>(built->stack(), built->run);
}

// The replay's reserved peak against the measured one, as a fraction.
inline double reserved_error(const memscale::allocator::replay_result& rep, double reserved) {
  return (static_cast<double>(rep.reserved_peak.value) - reserved) / reserved;
}

}  // namespace memscale_test
