// Gemma 3n E2B's config.json as tests/data/hf_configs/refused/ holds it (written from the card),
// shared by gemma3n_test.cpp and gemma3n_towers_test.cpp.
#pragma once

#include <fstream>
#include <string>

#include "memscale/json.hpp"

namespace gemma3n_configs {

inline nlohmann::json e2b() {
  std::ifstream in(std::string(MEMSCALE_SOURCE_DIR) + "/tests/data/hf_configs/refused/google--gemma-3n-E2B.json");
  return nlohmann::json::parse(in);
}

}  // namespace gemma3n_configs
