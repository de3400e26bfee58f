// What the state-space tests (mamba_test.cpp, mamba2_test.cpp) read: the SSM configs, the
// CPU-traced records of docs/data/cpu_traced_ssm.json, and one block's saved bytes.
#pragma once

#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace memscale_test {

inline std::string ssm_config(const std::string& name) {
  return std::string(MEMSCALE_SOURCE_DIR) + "/tests/data/hf_configs/ssm-multimodal/" + name + ".json";
}

inline memscale::json_io::json ssm_records() {
  return memscale::json_io::json::parse(std::ifstream(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_ssm.json"));
}

inline memscale::json_io::json ssm_record(const std::string& id) {
  for (const memscale::json_io::json& r : ssm_records())
    if (r.at("id") == id) return r;
  FAIL("no record " << id);
  return {};
}

// The saved bytes of one repeated block (op_saved_bytes over the block section).
inline std::uint64_t block_saved_bytes(const memscale::model_spec& m, const memscale::training_spec& run) {
  const auto g = std::make_unique<memscale::graph>(memscale::build(m, run).stack());
  std::uint64_t total = 0;
  for (std::size_t i = g->block_begin; i < g->block_end; ++i) total += memscale::op_saved_bytes(g->ops[i]).value;
  return total;
}

}  // namespace memscale_test
