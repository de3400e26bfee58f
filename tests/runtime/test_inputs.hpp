// Inputs for run-time tests: a value the compiler cannot fold (so the run-time path runs, not a
// constant evaluation) and the path of a config.json of tests/data/hf_configs.
#pragma once

#include <cstdint>
#include <string>

namespace memscale_test {

inline std::uint64_t opaque(std::uint64_t v) {
  volatile std::uint64_t x = v;
  return x;
}

inline std::string config_path(const std::string& name) {
  return std::string(MEMSCALE_SOURCE_DIR) + "/tests/data/hf_configs/" + name + ".json";
}

}  // namespace memscale_test
