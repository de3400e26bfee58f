// Run-time checks of the encoder-decoder (T5) graph, its estimator and its config reader.
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
#include "memscale/memscale.hpp"

namespace t5_test {
namespace {

using memscale::json_io::json;
using namespace memscale;
using memscale_test::error_code_of;
using memscale_test::error_message;

json read_json(const std::string& relative) {
  std::ifstream in(std::string(MEMSCALE_SOURCE_DIR) + "/" + relative);
  REQUIRE(in.good());
  return json::parse(in);
}

std::uint64_t config_count(const std::string& name) {
  return parameter_count(json_io::t5_from_hf_config(read_json("tests/data/hf_configs/" + name + ".json")));
}

training_spec cpu_run(std::uint64_t batch, std::uint64_t seq, std::uint64_t target) {
  training_spec t{.micro_batch = batch, .seq_len = seq, .attention = attention_impl::eager};
  t.device = device_kind::cpu;
  t.target_len = target;
  return t;
}

}  // namespace

TEST_CASE("t5: config.json files give the published totals") {
  // Sources: docs/estimators.md, "Encoder-decoder models (T5)".
  CHECK(config_count("google-t5--t5-small") == 60'506'624ULL);
  CHECK(config_count("google-t5--t5-base") == 222'903'552ULL);
  CHECK(config_count("google-t5--t5-large") == 737'668'096ULL);
  CHECK(config_count("google--t5-v1_1-base") == 247'577'856ULL);
  CHECK(config_count("google--flan-t5-base") == 247'577'856ULL);
  CHECK(config_count("google--mt5-small") == 300'176'768ULL);
  // T5Model has no lm_head: t5-small's total is the same (the head is tied), flan-t5-base
  // loses its untied 32128 x 768 head.
  json flan = read_json("tests/data/hf_configs/google--flan-t5-base.json");
  flan["architectures"] = json::array({"T5Model"});
  CHECK(parameter_count(json_io::t5_from_hf_config(flan)) == 247'577'856ULL - 32128ULL * 768ULL);
}

TEST_CASE("t5: the reader refuses what it cannot model, naming the field") {
  json c = read_json("tests/data/hf_configs/google-t5--t5-small.json");
  json silu = c;
  silu["feed_forward_proj"] = "gated-silu";
  CHECK(error_message([&] { (void)json_io::t5_from_hf_config(silu); }).find("config.feed_forward_proj") !=
        std::string::npos);
  json encoder_only = c;
  encoder_only["architectures"] = json::array({"T5EncoderModel"});
  CHECK(error_message([&] { (void)json_io::t5_from_hf_config(encoder_only); }).find("T5EncoderModel") !=
        std::string::npos);
  json wrong_type = c;
  wrong_type["num_layers"] = "six";
  CHECK(error_message([&] { (void)json_io::t5_from_hf_config(wrong_type); }).find("config.num_layers") !=
        std::string::npos);
  json llama = c;
  llama["model_type"] = "llama";
  CHECK(error_code_of([&] { (void)json_io::t5_from_hf_config(llama); }) == error_code::unsupported);
}

TEST_CASE("t5: the encoder-decoder estimator refuses runs it does not model") {
  training_spec lora = cpu_run(1, 64, 0);
  lora.target = training_target::lora;
  lora.lora_rank = 8;
  CHECK(error_code_of([&] { (void)estimate(presets::t5_small, lora); }) == error_code::unsupported);
  CHECK(error_message([&] { (void)recipes::build_encoder_decoder(presets::gpt2, cpu_run(1, 64, 0)); })
            .find("model.arch") != std::string::npos);
}

TEST_CASE("t5: every traced CPU step is estimated within the CPU band") {
  const json records = read_json("docs/data/cpu_traced_t5.json");
  REQUIRE(records.size() >= 10);
  for (const json& r : records) {
    INFO(r.at("id").get<std::string>());
    const json answer = json_io::estimate_record(r);
    REQUIRE_FALSE(answer.contains("error"));
    const double measured = r.at("measured_bytes").get<double>();
    const double err = (answer.at("estimated_bytes").get<double>() - measured) / measured;
    CHECK(err >= -0.05);
    CHECK(err <= 0.10);
    // The record's parameter total is the traced model's.
    CHECK(parameter_count(json_io::model_from_record(r.at("model"))) == r.at("model").at("params").get<std::uint64_t>());
  }
}

TEST_CASE("t5: the estimate grows with batch, source length and target length") {
  for (const auto& m : {presets::t5_small, presets::flan_t5_base}) {
    INFO(m.name);
    const auto at = [&](std::uint64_t b, std::uint64_t s, std::uint64_t t) {
      return estimate(m, cpu_run(b, s, t)).steady.tensor;
    };
    for (std::uint64_t s : {32U, 128U, 512U}) {
      CHECK(at(2, s, 64) < at(4, s, 64));
      CHECK(at(2, s, 64) < at(2, 2 * s, 64));
      CHECK(at(2, 64, s) < at(2, 64, 2 * s));
    }
  }
}

TEST_CASE("t5: cross-stack tensors and checkpointing") {
  const training_spec run = cpu_run(4, 256, 64);
  const encoder_decoder_graph g = build(presets::t5_small, run).stacks;
  // The encoder output is b x s_enc x d_model fp32, and saved for the decoder in fp32 runs.
  CHECK(g.encoder_output == storage(dtype::fp32, 4ULL * 256 * 512));
  CHECK(g.encoder_output_saved);
  // The position bias every encoder block adds: b x heads x s x s fp32, and its gradient.
  CHECK(g.encoder_bias_grad == storage(dtype::fp32, 4ULL * 8 * 256 * 256));
  // Autocast gives each cross-attention projection its own 16-bit copy instead.
  training_spec amp = run;
  amp.prec = precision::amp_bf16;
  CHECK_FALSE(build(presets::t5_small, amp).stacks.encoder_output_saved);
  // Full checkpointing keeps less after the forward than no checkpointing.
  training_spec ckpt = run;
  ckpt.ckpt = checkpointing::full;
  CHECK(estimate(presets::t5_small, ckpt).saved_activation_bytes < estimate(presets::t5_small, run).saved_activation_bytes);
  CHECK(build(presets::t5_small, ckpt).stacks.decoder_cache == bytes{});
  // T5Attention has no flash path: the attention setting does not change the estimate.
  training_spec flash = run;
  flash.attention = attention_impl::flash;
  CHECK(estimate(presets::t5_small, flash).steady.tensor == estimate(presets::t5_small, run).steady.tensor);
}

TEST_CASE("t5: the planner plans an encoder-decoder") {
  const auto gpu = find_gpu("rtx3090");
  REQUIRE(gpu.has_value());
  const plan_result p = make_plan(presets::t5_base_model, training_spec{.micro_batch = 8, .seq_len = 512}, *gpu);
  CHECK(p.modes[0].tensor_peak == estimate(presets::t5_base_model, p.modes[0].run).steady.tensor);
  CHECK(p.modes[0].tensor_peak.value > 16ULL * 222'903'552ULL);
}

TEST_CASE("t5: the norm's x^2 is kept by the mean only before torch 2.2") {
  // T5LayerNorm's pow(2).mean(-1): mean.dim saved its input before pytorch PR #109935 (v2.2.0).
  training_spec before = cpu_run(4, 256, 64);
  before.torch_version = 201;
  training_spec after = before;
  after.torch_version = 202;
  const auto m = presets::t5_small;  // 6 + 6 blocks, d_model 512
  // Every norm's fp32 x^2: two per encoder block and its final norm over 4 x 256 rows, three per
  // decoder block and its final norm over 4 x 64 rows.
  const std::uint64_t encoder_norms = 2 * 6 + 1;
  const std::uint64_t decoder_norms = 3 * 6 + 1;
  const bytes x_squared = storage(dtype::fp32, encoder_norms * 4 * 256 * 512 + decoder_norms * 4 * 64 * 512);
  CHECK(estimate(m, before).saved_activation_bytes - estimate(m, after).saved_activation_bytes == x_squared);
}

}  // namespace t5_test
