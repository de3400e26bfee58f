// Gemma 3n's towers (json/hf/gemma3n_towers.hpp, json/hf/mobilenetv5.hpp): the MobileNetV5 vision
// encoder, the audio encoder and both multimodal embedders counted from vision_config and
// audio_config. The vision count is timm's own: sum(p.numel()) of
// timm.create_model("mobilenetv5_300m_enc") at timm@aa4b5850 is 294,126,912, and
// tools/families/gemma3n_towers_torch.py rebuilds all three from their shapes with torch alone.
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
#include "memscale/json/hf/gemma3n_towers.hpp"
#include "gemma3n_configs.hpp"

namespace gemma3n_towers_test {
namespace {

using namespace memscale;
using nlohmann::json;
using memscale_test::contains;
using memscale_test::error_message;

using gemma3n_configs::e2b;

std::uint64_t vision(const json& c) {
  const json_io::hf::config cfg(c);
  return json_io::hf::gemma3n_vision_tower_parameters(cfg.nested_or_defaults("vision_config"));
}

std::uint64_t audio(const json& c) {
  const json_io::hf::config cfg(c);
  return json_io::hf::gemma3n_audio_tower_parameters(cfg.nested_or_defaults("audio_config"));
}

std::uint64_t towers(const json& c) {
  const json_io::hf::config cfg(c);
  const json_io::hf::config text = json_io::hf::gemma3n_text_config(cfg);
  const std::uint64_t h = text.count("hidden_size", json_io::hf::gemma3n_text_defaults::hidden);
  const token_embedder v = json_io::hf::gemma3n_vision_embedder(cfg);
  const token_embedder a = json_io::hf::gemma3n_audio_embedder(cfg);
  return json_io::hf::gemma3n_tower_parameters(cfg) + json_io::hf::gemma3n_embedder_parameters(v.vocab, v.width, h) +
         json_io::hf::gemma3n_embedder_parameters(a.vocab, a.width, h);
}

std::uint64_t total(const json& c) {
  const json_io::hf::config cfg(c);
  return json_io::hf::gemma3n_text_parameters(json_io::hf::gemma3n_text_config(cfg)) + towers(c);
}

// Audio: SSCP 1,611,040 (convs 1,152 + 36,864, norms 128 + 32, input_proj 32 x 32 x 1536) and 12
// conformer blocks of 24 H^2 + 9 H + conv_kernel H + head_dim = 56,644,800. Embedders: vision
// 128 x 2048 + 2 x 2048 + 2048 x 2048 = 4,460,544, audio 128 x 1536 + 2 x 1536 + 1536 x 2048 = 3,345,408.
TEST_CASE("gemma3n towers: E2B's vision and audio towers and embedders are counted exactly", "[gemma3n]") {
  CHECK(vision(e2b()) == 294'126'912ULL);
  CHECK(audio(e2b()) == 681'348'640ULL);
  CHECK(towers(e2b()) == 294'126'912ULL + 681'348'640ULL + 4'460'544ULL + 3'345'408ULL);
}

// The published totals: the cards call E2B and E4B "5B" and "8B" raw parameters; the Hugging Face
// collection lists 5.98B and 8.39B (quoted in ollama/ollama#11286), which are these totals plus
// exactly one more vocab x hidden table (262400 x 2048 = 537,395,200: 5,976,833,472 and
// 8,387,373,392), the checkpoint storing lm_head beside the tied embed_tokens.
TEST_CASE("gemma3n towers: text + towers is the card's raw size for E2B and E4B", "[gemma3n]") {
  const std::uint64_t e2b_total = total(e2b());
  CHECK(e2b_total == 4'456'156'768ULL + 983'281'504ULL);  // 5,439,438,272
  // Gemma3nConfig() builds each sub-config from its defaults: the E4B text sizes, the same towers.
  const std::uint64_t e4b_total = total(json{{"model_type", "gemma3n"}});
  CHECK(e4b_total == 6'866'696'688ULL + 983'281'504ULL);  // 7,849,978,192
  CHECK((e2b_total + 500'000'000ULL) / 1'000'000'000ULL == 5);
  CHECK((e4b_total + 500'000'000ULL) / 1'000'000'000ULL == 8);
  constexpr std::uint64_t head = 262'400ULL * 2'048ULL;
  CHECK((e2b_total + head + 5'000'000ULL) / 10'000'000ULL == 598);
  CHECK((e4b_total + head + 5'000'000ULL) / 10'000'000ULL == 839);
}

TEST_CASE("gemma3n towers: the audio config's keys size the encoder", "[gemma3n]") {
  json c = e2b();
  c["audio_config"]["conf_num_hidden_layers"] = 6;
  CHECK(audio(c) == 1'611'040ULL + 6 * 56'644'800ULL);
  c = e2b();
  c["audio_config"]["sscp_conv_channel_size"] = json::array({64, 16});
  // convs 64 x 9 + 64 x 16 x 9, norms 64 + 16, input_proj 16 x 32 x 1536.
  CHECK(audio(c) == 576 + 9'216 + 80 + 786'432 + 12 * 56'644'800ULL);
  c = e2b();
  c["audio_config"]["sscp_conv_stride_size"] = json::array({json::array({2, 4}), json::array({2, 2})});
  // frequencies: (128 + 2 - 3) / 4 + 1 = 32, then (32 + 2 - 3) / 2 + 1 = 16.
  CHECK(audio(c) == 1'152 + 36'864 + 160 + 32ULL * 16 * 1536 + 12 * 56'644'800ULL);
}

TEST_CASE("gemma3n towers: a vision or audio config that cannot be counted is named", "[gemma3n]") {
  json c = e2b();
  c["vision_config"]["architecture"] = "mobilenetv5_base";
  std::string message = error_message([&] { (void)vision(c); });
  CHECK(contains(message, "config.vision_config.architecture"));
  CHECK(contains(message, "mobilenetv5_base"));
  c = e2b();
  c["vision_config"]["model_args"] = json{{"drop_path_rate", 0.1}};
  CHECK(contains(error_message([&] { (void)vision(c); }), "config.vision_config.model_args"));
  c = e2b();
  c["vision_config"]["hidden_size"] = 1024;
  CHECK(contains(error_message([&] { (void)vision(c); }), "config.vision_config.hidden_size"));
  c = e2b();
  c["audio_config"]["conf_num_attention_heads"] = 7;
  CHECK(contains(error_message([&] { (void)audio(c); }), "config.audio_config.conf_num_attention_heads"));
  c = e2b();
  c["audio_config"]["sscp_conv_channel_size"] = json::array({128, 32, 16});
  CHECK(contains(error_message([&] { (void)audio(c); }), "config.audio_config.sscp_conv_channel_size"));
  c = e2b();
  c["audio_config"]["sscp_conv_kernel_size"] = json::array({json::array({3}), json::array({3, 3})});
  CHECK(contains(error_message([&] { (void)audio(c); }), "config.audio_config.sscp_conv_kernel_size"));
  c = e2b();
  c["audio_config"]["input_feat_size"] = 0;
  CHECK(contains(error_message([&] { (void)audio(c); }), "config.audio_config.input_feat_size"));
  c = e2b();
  c["audio_config"]["vocab_size"] = 0;
  CHECK(contains(error_message([&] { (void)towers(c); }), "config.audio_config.vocab_size"));
}

// tools/trace/mobilenetv5_cases.py's torch-only MobileNetV5 forward is built from the same block
// strings: its sum(p.numel()) is the reader's count, and its output is (images, neck_out, 16, 16),
// the 256 soft tokens per image get_image_features reshapes whatever the input side.
TEST_CASE("gemma3n towers: the traced MobileNetV5 forward is the reader's network", "[gemma3n]") {
  const auto arch = json_io::hf::find_mobilenetv5_encoder("mobilenetv5_300m_enc");
  REQUIRE(arch.has_value());
  std::ifstream in(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_mobilenetv5.json");
  REQUIRE(in.good());
  const json records = json::parse(in);
  REQUIRE(records.size() == 4);
  for (const json& r : records) {
    INFO(r.at("id").get<std::string>());
    CHECK(r.at("model").at("params").get<std::uint64_t>() == json_io::hf::mobilenetv5_encoder_parameters(*arch));
    const json& shape = r.at("output_shape");
    CHECK(shape.at(0) == r.at("input").at("images"));
    CHECK(shape.at(1).get<std::uint64_t>() == arch->neck_out);
    CHECK(shape.at(2).get<std::uint64_t>() * shape.at(3).get<std::uint64_t>() == 256);
  }
}

}  // namespace
}  // namespace gemma3n_towers_test
