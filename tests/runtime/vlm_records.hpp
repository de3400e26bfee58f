// The CPU-traced steps with images (docs/data/cpu_traced_vlm.json) read by the VLM image tests:
// each record whose id starts with a prefix estimated within a band, counted.
#pragma once

#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <fstream>
#include <string>
#include <string_view>

#include "memscale/json.hpp"

namespace vlm_records {

inline int check_within(std::string_view id_prefix, double band_percent) {
  std::ifstream in(MEMSCALE_SOURCE_DIR "/docs/data/cpu_traced_vlm.json");
  REQUIRE(in);
  int cases = 0;
  for (const auto& record : memscale::json_io::json::parse(in)) {
    const std::string id = record.at("id").get<std::string>();
    if (id.rfind(id_prefix, 0) != 0) continue;
    INFO(id);
    const auto answer = memscale::json_io::estimate_record(record);
    INFO(answer.dump());
    REQUIRE(answer.contains("estimated_bytes"));
    const double measured = record.at("measured_bytes").get<double>();
    const double error = (answer.at("estimated_bytes").get<double>() - measured) / measured * 100.0;
    CHECK(error > -band_percent);
    CHECK(error < band_percent);
    ++cases;
  }
  return cases;
}

}  // namespace vlm_records
