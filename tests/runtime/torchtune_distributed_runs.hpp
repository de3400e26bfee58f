// The torchtune distributed runs the runtime tests share: Llama-3-8B under
// full_finetune_distributed (FSDP2 over `ranks`, bf16, every layer checkpointed) and the
// framework traces' records file (docs/data/cpu_traced_frameworks.json).
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "memscale/memscale.hpp"

namespace memscale_test {

constexpr memscale::training_spec torchtune_distributed(std::uint64_t ranks) {
  memscale::training_spec r =
      memscale::with_framework({.micro_batch = 2, .seq_len = 4096, .prec = memscale::precision::pure_bf16,
                                .ckpt = memscale::checkpointing::full},
                               memscale::framework_kind::torchtune);
  r.shard = memscale::sharding::full;
  r.data_parallel = ranks;
  return r;
}

inline nlohmann::json framework_trace_records() {
  return nlohmann::json::parse(std::ifstream(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_frameworks.json"));
}

}  // namespace memscale_test
