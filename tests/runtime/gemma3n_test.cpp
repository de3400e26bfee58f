// Gemma 3n's config.json (json/hf/gemma3n.hpp; transformers models/gemma3n @ b87ecf8c): the text
// stack counted exactly, gemma3n_text estimated through the AltUp graph
// (graph/recipes/altup_stack.hpp) against the CPU-traced steps, and the multimodal gemma3n with its
// towers as weights and its multimodal embedders run over every token
// (graph/layers/multimodal_embedders.hpp), trained in full training.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "error_capture.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "gemma3n_configs.hpp"

namespace gemma3n_test {
namespace {

using namespace memscale;
using nlohmann::json;
using memscale_test::contains;
using memscale_test::error_message;

using gemma3n_configs::e2b;

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

// The multimodal config: its text stack with the vision tower and audio encoder as idle weights
// (gemma3n_towers.hpp: 294,126,912 + 681,348,640) and both embedders as the ops Gemma3nModel.forward
// runs over every token (vision 4,460,544 + audio 3,345,408).
TEST_CASE("gemma3n: the multimodal config reads with its towers as weights and trains its embedders",
          "[gemma3n]") {
  const model_spec m = json_io::model_from_hf_config(e2b());
  CHECK(m.idle_tower_parameters == 294'126'912ULL + 681'348'640ULL);
  CHECK(m.vision_embedder.vocab == 128);
  CHECK(m.vision_embedder.width == 2048);
  CHECK(m.audio_embedder.width == 1536);
  CHECK(m.upcast_logits);  // Gemma3nForConditionalGeneration's own loss: logits.float(), shifted copy
  const training_spec full{.micro_batch = 1, .seq_len = 128};
  const estimate_result trained = estimate(m, full);
  CHECK(trained.parameter_count == 4'456'156'768ULL + 983'281'504ULL);
  // The towers take no gradient (they do not run); neither do the soft embedding norms (hard ids
  // only): torch.optim makes no state for a parameter whose .grad is None.
  CHECK(trained.trainable_parameter_count == 4'456'156'768ULL + 4'460'544ULL + 3'345'408ULL - 2048 - 1536);
  const model_spec text = json_io::model_from_hf_config(e2b()["text_config"]);
  CHECK(text.idle_tower_parameters == 0);
  CHECK(trained.saved_activation_bytes.value > estimate(text, full).saved_activation_bytes.value);
  training_spec lora = full;
  lora.target = training_target::lora;
  lora.lora_rank = 16;
  const estimate_result with_towers = estimate(m, lora);
  // The frozen base: text stack 4,456,156,768 + towers and embedders 983,281,504.
  CHECK(with_towers.parameter_count - with_towers.trainable_parameter_count == 5'439'438'272ULL);
  // The towers and embedders hold their weights (fp32 by default) and nothing else under LoRA.
  CHECK(with_towers.parameter_bytes.value - estimate(text, lora).parameter_bytes.value == 983'281'504ULL * 4);
  // Under LoRA no gradient reaches the embedders: their weights only, nothing saved.
  model_spec without_embedders = m;
  without_embedders.vision_embedder = {};
  without_embedders.audio_embedder = {};
  const estimate_result bare = estimate(without_embedders, lora);
  CHECK(with_towers.saved_activation_bytes.value == bare.saved_activation_bytes.value);
  CHECK(with_towers.parameter_bytes.value - bare.parameter_bytes.value == (4'460'544ULL + 3'345'408ULL) * 4);
  // Images run the frozen MobileNetV5 forward (gemma3n_image_test.cpp); a size its neck would
  // resize bilinearly is refused by name.
  training_spec with_images = lora;
  with_images.seq_len = 512;  // 256 image tokens, boi and eoi among them
  with_images.images = {.per_sample = 1, .height = 768, .width = 768, .tower_frozen = true};
  CHECK(build(m, with_images).stack().tower_forward.value > 0);
  with_images.images.width = 640;
  CHECK(contains(error_message([&] { (void)estimate(m, with_images); }), "run.images.height x width"));
}

// Its text_config alone reads as Gemma3nForCausalLM: the graph owns every parameter the reader
// counts (the per-layer table, AltUp's projections and coefficients, Laurel, the gates).
TEST_CASE("gemma3n: a gemma3n_text config estimates, its graph holding the reader's count", "[gemma3n]") {
  const json text = e2b().at("text_config");
  const model_spec m = json_io::model_from_hf_config(text);
  CHECK(m.altup_inputs == 4);
  CHECK(m.sparse_leading_layers == 10);  // E2B: 0.95 on the first 10 of 30 layers
  CHECK(m.value_norm);
  CHECK(parameter_count(m) == 4'456'156'768ULL);
  const model_spec e4b = json_io::model_from_hf_config(json{{"model_type", "gemma3n_text"}});
  CHECK(parameter_count(e4b) == 6'866'696'688ULL);
  const training_spec run{.micro_batch = 1, .seq_len = 2048};
  const estimate_result r = estimate(m, run);
  CHECK(r.parameter_count == 4'456'156'768ULL);
  CHECK(r.saved_activation_bytes.value > 0);
}

// "gemma3n_text": Gemma3nForCausalLM's records; "gemma3n-": Gemma3nForConditionalGeneration's.
std::vector<json> traced_records(const std::string& model_type = "gemma3n_text") {
  std::vector<json> found;
  for (const json& r : json::parse(std::ifstream(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_families_2025.json")))
    if (r.at("id").get<std::string>().find("cpu-" + model_type) == 0) found.push_back(r);
  return found;
}

// The CPU-traced small model (tools/trace/gemma3n_cases.py, a torch re-implementation of
// Gemma3nForCausalLM): its sum(p.numel()) is the reader's count and the graph's.
TEST_CASE("gemma3n: the traced small model's parameters are the reader's count", "[gemma3n]") {
  const std::vector<json> records = traced_records();
  REQUIRE(records.size() == 3);
  for (const json& r : records) {
    const json& c = r.at("model").at("hf_config");
    const std::uint64_t params = r.at("model").at("params").get<std::uint64_t>();
    CHECK(text_parameters(c) == params);
    CHECK(parameter_count(json_io::model_from_hf_config(c)) == params);
  }
}

// Peaks of the second step, fp32, AdamW, eager (the backward peak): within 1%. The checkpointed
// step holds the base model's two (batch, 1, seq, seq) masks and both rotary pairs as every
// layer's checkpoint inputs until the first layer's backward (graph::held): without them it reads -3.0%.
TEST_CASE("gemma3n: the traced steps are estimated within 1%", "[gemma3n]") {
  const std::vector<json> records = traced_records();
  REQUIRE(records.size() == 3);
  for (const json& r : records) {
    const json answer = json_io::estimate_record(r);
    INFO(r.at("id").get<std::string>() << ": " << answer.dump());
    const double error = answer.at("estimated_bytes").get<double>() / r.at("measured_bytes").get<double>() - 1.0;
    CHECK(error > -0.01);
    CHECK(error < 0.01);
  }
}

// tools/trace/gemma3n_cases.py's Gemma3nForConditionalGeneration, fp32, AdamW, eager, text-only
// full training: embed_vision (a 2048-wide table) and embed_audio run over every token and their
// saved tensors count; the towers (one parameter of their counts each, 1.2 GB) take no gradient and
// no AdamW state. Within 1%, and within 1% of what the step adds to the built model too (the
// towers' weights would otherwise hide an error in the activations).
TEST_CASE("gemma3n: the traced multimodal full-training steps are estimated within 1%", "[gemma3n]") {
  const std::vector<json> records = traced_records("gemma3n-");
  REQUIRE(records.size() == 2);
  for (const json& r : records) {
    const model_spec m = json_io::model_from_hf_config(r.at("model").at("hf_config"));
    CHECK(parameter_count(m) == r.at("model").at("params").get<std::uint64_t>());
    const json answer = json_io::estimate_record(r);
    INFO(r.at("id").get<std::string>() << ": " << answer.dump());
    const double estimated = answer.at("estimated_bytes").get<double>();
    const double measured = r.at("measured_bytes").get<double>();
    const double built = r.at("detail").at("built").get<double>();
    CHECK(std::abs(estimated / measured - 1.0) < 0.01);
    CHECK(std::abs((estimated - built) / (measured - built) - 1.0) < 0.01);
  }
}

// generate() shares the last layers' keys and values and is not written for AltUp; sharding
// would take the sparse-gate layers before the block as the root unit.
TEST_CASE("gemma3n: what is not modelled is refused by its field", "[gemma3n]") {
  const model_spec m = json_io::model_from_hf_config(e2b().at("text_config"));
  const training_spec run{.micro_batch = 1, .seq_len = 512};
  CHECK(contains(error_message([&] { (void)build_forward(m, run, 0); }), "model.altup_inputs"));
  training_spec sharded = run;
  sharded.shard = sharding::full;
  CHECK(contains(error_message([&] { (void)validate(m, sharded); }), "run.shard"));
  json scattered = e2b().at("text_config");
  scattered["activation_sparsity_pattern"][12] = 0.5;
  CHECK(contains(error_message([&] { (void)json_io::model_from_hf_config(scattered); }), "config.activation_sparsity_pattern"));
  json uneven = e2b().at("text_config");
  uneven["intermediate_size"] = json::array();
  for (int i = 0; i < 30; ++i) uneven["intermediate_size"].push_back(i == 0 ? 4096 : 8192);
  CHECK(contains(error_message([&] { (void)json_io::model_from_hf_config(uneven); }), "config.intermediate_size"));
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
