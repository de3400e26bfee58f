// EXAONE 4.0's full-attention layers take no RoPE but keep q_norm and k_norm
// (transformers modeling_exaone4.py@0205eec1 Exaone4Attention.forward): json/hf/exaone4.hpp reads
// them as NoPE layers that keep the qk-norm (graph/layers/layer_pattern.hpp), against the CPU traces
// of tools/trace/families_2025.py (every 4th and every 2nd layer NoPE).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include "memscale/graph/layers/layer_pattern.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "exaone4_configs.hpp"

namespace exaone4_nope_test {
namespace {

using namespace memscale;
using nlohmann::json;
using exaone4_configs::small;

training_spec cpu_step(checkpointing ckpt = checkpointing::none) {
  training_spec r{};
  r.micro_batch = 2;
  r.seq_len = 256;
  r.attention = attention_impl::eager;
  r.device = device_kind::cpu;
  r.ckpt = ckpt;
  return r;
}

model_spec every_layer_rotating(model_spec m) {
  m.nope_layer_interval = 0;
  m.nope_keeps_qk_norm = false;
  return m;
}

// The rotate_half rotations a step's graph writes, over all its layers.
std::uint64_t rotations(const model_spec& m, const training_spec& run) {
  const auto built = std::make_unique<model_graph>(build(m, run));
  const graph& g = built->stack();
  std::uint64_t in_block = 0, outside = 0;
  for (std::size_t i = 0; i < g.size; ++i) {
    if (g.ops[i].temporaries != forward_temporaries::rotary_half) continue;
    (i >= g.block_begin && i < g.block_end ? in_block : outside) += 1;
  }
  return in_block * g.block_repeats + outside;
}

}  // namespace

TEST_CASE("EXAONE 4's full-attention layers are NoPE layers that keep their qk-norm") {
  const model_spec m = json_io::model_from_hf_config(small());
  CHECK(m.nope_layer_interval == 4);
  CHECK(m.nope_keeps_qk_norm);
  const model_spec full = graph_layers::layer_at(m, 3);
  CHECK(full.positions == position_kind::none);
  CHECK(full.qk_norm == qk_norm_kind::per_head);
  CHECK(graph_layers::layer_at(m, 0).positions == position_kind::rotary);
  const json types = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
  CHECK(json_io::model_from_hf_config(small({{"layer_types", types}})).nope_layer_interval == 2);
  // No window: every layer full attention with RoPE. A stack that is not a whole number of periods
  // rotates every layer (the upper side).
  const model_spec global = json_io::model_from_hf_config(small({{"sliding_window", nullptr}}));
  CHECK(global.nope_layer_interval == 0);
  CHECK(json_io::model_from_hf_config(small({{"num_hidden_layers", 6}})).nope_layer_interval == 0);
  // Llama 4's NoPE layers drop the qk-norm.
  model_spec llama4_like = m;
  llama4_like.nope_keeps_qk_norm = false;
  CHECK(graph_layers::layer_at(llama4_like, 3).qk_norm == qk_norm_kind::none);
}

TEST_CASE("EXAONE 4's NoPE layers skip the rotation, checkpointed and generate() runs rotate every layer") {
  const model_spec m = json_io::model_from_hf_config(small({{"sliding_window_pattern", 2}}));
  CHECK(rotations(m, cpu_step()) * 2 == rotations(every_layer_rotating(m), cpu_step()));
  CHECK(rotations(m, cpu_step()) > 0);
  // The rotation's saved tensors are the same size either way (q and k enter attention rotated or not).
  CHECK(estimate(m, cpu_step()).saved_activation_bytes == estimate(every_layer_rotating(m), cpu_step()).saved_activation_bytes);
  // Checkpointed, a period of layers would be recomputed as one unit: every layer is written rotating.
  CHECK(rotations(m, cpu_step(checkpointing::full)) == rotations(every_layer_rotating(m), cpu_step(checkpointing::full)));
  CHECK(estimate(m, cpu_step(checkpointing::full)).steady.tensor ==
        estimate(every_layer_rotating(m), cpu_step(checkpointing::full)).steady.tensor);
  inference_spec generate{};
  generate.batch = 2;
  generate.context = 64;
  generate.new_tokens = 4;
  generate.compute = dtype::fp32;
  generate.kv = dtype::fp32;
  generate.attention = attention_impl::eager;
  generate.device = device_kind::cpu;
  CHECK(estimate_inference(m, generate).peak.tensor == estimate_inference(every_layer_rotating(m), generate).peak.tensor);
}

TEST_CASE("The traced EXAONE 4 steps with NoPE layers are estimated within 0.3%") {
  int checked = 0;
  for (const json& r : json::parse(std::ifstream(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_families_2025.json"))) {
    if (r.at("id").get<std::string>().find("exaone4") == std::string::npos) continue;
    const json answer = json_io::estimate_record(r);
    INFO(r.at("id").get<std::string>() << ": " << answer.dump());
    const double error = answer.at("estimated_bytes").get<double>() / r.at("measured_bytes").get<double>() - 1.0;
    CHECK(error > -0.003);
    CHECK(error < 0.003);
    ++checked;
  }
  CHECK(checked == 4);
}

}  // namespace exaone4_nope_test
