// Inputs for run-time tests: a value the compiler cannot fold (so the run-time path runs, not a
// constant evaluation), the path of a config.json of tests/data/hf_configs, and a record of a
// docs/data record file.
#pragma once

#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace memscale_test {

inline std::uint64_t opaque(std::uint64_t v) {
  volatile std::uint64_t x = v;
  return x;
}

inline std::string config_path(const std::string& name) {
  return std::string(MEMSCALE_SOURCE_DIR) + "/tests/data/hf_configs/" + name + ".json";
}

// The record `id` of docs/data/`file`.
inline nlohmann::json data_record(const std::string& file, const std::string& id) {
  std::ifstream in(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/" + file);
  REQUIRE(in.good());
  for (const nlohmann::json& r : nlohmann::json::parse(in))
    if (r.at("id") == id) return r;
  FAIL("no record " << id << " in " << file);
  return {};
}

}  // namespace memscale_test
