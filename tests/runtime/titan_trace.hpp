// The torchtitan CPU traces (docs/data/cpu_traced_frameworks.json) and memscale's answer to one
// of them, shared by torchtitan_test.cpp (FSDP2) and torchtitan_tp_test.cpp (TP x FSDP2).
#pragma once

#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <fstream>
#include <string>

#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace titan_trace {

using nlohmann::json;

inline json framework_records() {
  return json::parse(std::ifstream(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_frameworks.json"));
}

// The record "cpu-torchtitan-llama-b2-s256-<suffix>".
inline json titan_record(const std::string& suffix) {
  for (const json& r : framework_records())
    if (r.at("id").get<std::string>() == "cpu-torchtitan-llama-b2-s256-" + suffix) return r;
  FAIL("no record " << suffix);
  return {};
}

inline std::int64_t estimated(const json& record) {
  const json answer = memscale::json_io::estimate_record(record);
  INFO(answer.dump());
  REQUIRE(answer.contains("estimated_bytes"));
  return answer.at("estimated_bytes").get<std::int64_t>();
}

// The fused attention op of the first repeated block of a built graph.
inline memscale::op first_attention(const memscale::graph& g) {
  for (std::size_t i = g.block_begin; i < g.block_end; ++i)
    if (g.ops[i].kind == memscale::op_kind::attention) return g.ops[i];
  FAIL("no attention op");
  return {};
}

inline std::string refusal(const json& record) {
  const json answer = memscale::json_io::estimate_record(record);
  INFO(answer.dump());
  REQUIRE(answer.contains("error"));
  return answer.at("error").get<std::string>();
}

}  // namespace titan_trace
