// EXAONE 4.0's config.json (json/hf/exaone4.hpp; transformers models/exaone4 @ 0205eec1): OLMo 2's
// post-branch norms, Qwen3's per-head q/k norms, and the sliding layers' period in its three spellings,
// against the CPU-traced small model (tools/trace/families_2025.py, docs/data/cpu_traced_families_2025.json).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#endif

#include <cstdint>
#include <fstream>
#include <string>

#include "error_capture.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "exaone4_configs.hpp"

namespace exaone4_test {
namespace {

using namespace memscale;
using nlohmann::json;
using exaone4_configs::small;
using memscale_test::error_message;

}  // namespace

TEST_CASE("EXAONE 4 reads as post-branch norms with per-head q/k norms, without biases") {
  const model_spec m = json_io::model_from_hf_config(small());
  CHECK(m.block_norms == branch_norms::post);
  CHECK(m.qk_norm == qk_norm_kind::per_head);
  CHECK_FALSE(m.qkv_bias);
  CHECK_FALSE(m.mlp_bias);
  CHECK_FALSE(m.tied_embeddings);
  // Embedding and head 2 x 4096 x 256; per layer q, o 256 x 256, k, v 256 x 64, the MLP 3 x 256 x 688,
  // two norms of 256 and the q/k norms of 32; the final norm (the traced model's count).
  CHECK(parameter_count(m) == 4'868'608);
  // Exaone4Config's defaults for what a config leaves out.
  const model_spec defaults = json_io::model_from_hf_config(json{{"model_type", "exaone4"}});
  CHECK(defaults.layers == 32);
  CHECK(defaults.hidden == 4096);
  CHECK(defaults.vocab == 102400);
  CHECK(defaults.sliding_window == 4096);
  CHECK(defaults.sliding_layers == 24);
}

TEST_CASE("EXAONE 4.0 32B and 1.2B: the parameters without embeddings are the model cards' 30.95B and 1.07B") {
  // The 32B's sizes as a public TensorRT-LLM test quotes its config.json (64 layers, hidden 5120, 40
  // heads of 128, 8 kv heads, SwiGLU 27392, vocab 102400, untied); the 1.2B's as a public config
  // parser test quotes them (30 layers, hidden 2048, 32 heads, 8 kv heads, 4096, "LLLG").
  const auto without_embeddings = [](const json& c) {
    const model_spec m = json_io::model_from_hf_config(c);
    return parameter_count(m) - m.vocab * m.hidden * (m.tied_embeddings ? 1 : 2);
  };
  const json big{{"model_type", "exaone4"},      {"hidden_size", 5120},        {"intermediate_size", 27392},
                 {"num_hidden_layers", 64},      {"num_attention_heads", 40},  {"num_key_value_heads", 8},
                 {"head_dim", 128},              {"vocab_size", 102400},       {"sliding_window", 4096},
                 {"sliding_window_pattern", 4},  {"tie_word_embeddings", false}};
  // Per layer q, o 5120 x 5120, k, v 5120 x 1024, the MLP 3 x 5120 x 27392, two norms of 5120 and the
  // q/k norms of 128; the final norm.
  CHECK(without_embeddings(big) == 30'954'640'384ULL);
  const json small_card{{"model_type", "exaone4"},     {"hidden_size", 2048},        {"intermediate_size", 4096},
                        {"num_hidden_layers", 30},     {"num_attention_heads", 32},  {"num_key_value_heads", 8},
                        {"vocab_size", 102400},        {"sliding_window_pattern", "LLLG"}};
  CHECK(without_embeddings(small_card) == 1'069'676'288ULL);
}

TEST_CASE("EXAONE 4's sliding layers: an int period, an L...G string or layer_types, and none without a window") {
  const model_spec by_int = json_io::model_from_hf_config(small());
  CHECK(by_int.sliding_layers == 3);
  CHECK(by_int.sliding_period == 4);
  const model_spec by_string = json_io::model_from_hf_config(small({{"sliding_window_pattern", "LLLG"}}));
  CHECK(by_string.sliding_layers == 3);
  CHECK(by_string.sliding_period == 4);
  const json types = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
  const model_spec by_types = json_io::model_from_hf_config(small({{"layer_types", types}}));
  CHECK(by_types.sliding_period == 2);
  CHECK(by_types.sliding_layers == 2);
  const model_spec global = json_io::model_from_hf_config(
      small({{"sliding_window", nullptr}, {"layer_types", json::array({"full_attention", "full_attention",
                                                                       "full_attention", "full_attention"})}}));
  CHECK(global.sliding_layers == 0);
  CHECK(global.sliding_window == 0);
  CHECK_THAT(error_message([] { (void)json_io::model_from_hf_config(small({{"sliding_window_pattern", "LGLG"}})); }),
             Catch::Matchers::Contains("config.sliding_window_pattern") && Catch::Matchers::Contains("LGLG"));
  const json uneven = {"sliding_attention", "full_attention", "full_attention", "full_attention"};
  CHECK_THAT(error_message([&] { (void)json_io::model_from_hf_config(small({{"layer_types", uneven}})); }),
             Catch::Matchers::Contains("config.layer_types"));
  CHECK_THAT(error_message([&] {
               (void)json_io::model_from_hf_config(small({{"sliding_window", nullptr}, {"layer_types", uneven}}));
             }),
             Catch::Matchers::Contains("full_attention throughout"));
}

TEST_CASE("The traced EXAONE 4 steps are estimated within the CPU-trace band") {
  int checked = 0;
  for (const json& r : json::parse(std::ifstream(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_families_2025.json"))) {
    if (r.at("id").get<std::string>().find("exaone4") == std::string::npos) continue;
    const json answer = json_io::estimate_record(r);
    INFO(r.at("id").get<std::string>() << ": " << answer.dump());
    const double error = answer.at("estimated_bytes").get<double>() / r.at("measured_bytes").get<double>() - 1.0;
    CHECK(error > -0.01);
    CHECK(error < 0.01);
    ++checked;
  }
  CHECK(checked == 4);  // every 4th layer NoPE, and every 2nd (cpu-exaone4-nope2-*)
}

}  // namespace exaone4_test
