// Gemma 3n's config.json (json/hf/gemma3n.hpp; transformers models/gemma3n @ b87ecf8c): the text
// stack counted exactly, and the config refused by altup_num_inputs rather than estimated
// without AltUp's parallel copies of the hidden state.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <fstream>
#include <string>

#include "error_capture.hpp"
#include "memscale/json.hpp"

namespace gemma3n_test {
namespace {

using namespace memscale;
using nlohmann::json;
using memscale_test::contains;
using memscale_test::error_message;

json e2b() {
  std::ifstream in(std::string(MEMSCALE_SOURCE_DIR) + "/tests/data/hf_configs/refused/google--gemma-3n-E2B.json");
  return json::parse(in);
}

std::uint64_t text_parameters(const json& c) {
  const json_io::hf::config cfg(c);
  return json_io::hf::gemma3n_text_parameters(json_io::hf::gemma3n_text_config(cfg));
}

// tests/data/hf_configs/README.md (refused/): embed_tokens 537,395,200 + embed_tokens_per_layer
// 2,013,265,920 + per_layer_model_projection and its norm 15,728,896 + AltUp's 6 projections
// 25,165,824 + norm 2,048 + 30 layers x 62,153,296.
TEST_CASE("gemma3n: E2B's text stack is counted exactly", "[gemma3n]") {
  CHECK(text_parameters(e2b()) == 4'456'156'768ULL);
}

// Gemma3nTextConfig's defaults are the E4B sizes: 35 layers, intermediate 16384, 15 shared layers.
TEST_CASE("gemma3n: a gemma3n_text config without keys reads as Gemma3nTextConfig()", "[gemma3n]") {
  CHECK(text_parameters(json{{"model_type", "gemma3n_text"}}) == 6'866'696'688ULL);
  // Gemma3nConfig builds its text_config from the same defaults.
  CHECK(text_parameters(json{{"model_type", "gemma3n"}}) == 6'866'696'688ULL);
  json explicit_e4b{{"model_type", "gemma3n_text"}, {"num_hidden_layers", 35}, {"intermediate_size", 16384},
                    {"hidden_size", 2048},           {"vocab_size", 262400},    {"altup_num_inputs", 4}};
  CHECK(text_parameters(explicit_e4b) == 6'866'696'688ULL);
}

TEST_CASE("gemma3n: the config is refused by altup_num_inputs, with its text stack's count", "[gemma3n]") {
  const std::string message = error_message([] { (void)json_io::model_from_hf_config(e2b()); });
  CHECK(contains(message, "config.text_config.altup_num_inputs"));
  CHECK(contains(message, "4456156768"));
  CHECK(contains(message, "vision tower"));
  json text = e2b().at("text_config");
  const std::string text_message = error_message([&] { (void)json_io::model_from_hf_config(text); });
  CHECK(contains(text_message, "config.altup_num_inputs"));
  CHECK_FALSE(contains(text_message, "vision tower"));
}

// The CPU-traced small model (tools/trace/gemma3n_cases.py, a torch re-implementation of
// Gemma3nForCausalLM): its sum(p.numel()) is the reader's count, and its config is refused too.
TEST_CASE("gemma3n: the traced small model's parameters are the reader's count", "[gemma3n]") {
  std::ifstream in(std::string(MEMSCALE_SOURCE_DIR) + "/docs/research/gemma3n-cpu-traced.json");
  const json records = json::parse(in);
  REQUIRE(records.size() == 2);
  for (const json& r : records) {
    const json& c = r.at("model").at("hf_config");
    CHECK(text_parameters(c) == r.at("model").at("params").get<std::uint64_t>());
    CHECK(contains(error_message([&] { (void)json_io::model_from_hf_config(c); }), "config.altup_num_inputs"));
  }
}

TEST_CASE("gemma3n: sizes that cannot be are named", "[gemma3n]") {
  json c = e2b();
  c["text_config"]["intermediate_size"] = json::array({8192, 8192});
  CHECK(contains(error_message([&] { (void)json_io::model_from_hf_config(c); }), "config.text_config.intermediate_size"));
  c = e2b();
  c["text_config"]["num_kv_shared_layers"] = 30;
  CHECK(contains(error_message([&] { (void)json_io::model_from_hf_config(c); }), "config.text_config.num_kv_shared_layers"));
  c = e2b();
  c["text_config"]["activation_sparsity_pattern"] = json::array({0.95});
  CHECK(contains(error_message([&] { (void)json_io::model_from_hf_config(c); }),
                 "config.text_config.activation_sparsity_pattern"));
  c = e2b();
  c["text_config"]["altup_active_idx"] = 4;
  CHECK(contains(error_message([&] { (void)json_io::model_from_hf_config(c); }), "config.text_config.altup_active_idx"));
}

}  // namespace
}  // namespace gemma3n_test
