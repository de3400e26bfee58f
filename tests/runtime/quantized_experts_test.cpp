// Quantised checkpoints over experts held as bare nn.Parameters (graph/layers/mlp.hpp
// expert_parameters; inference/weights.hpp expert_parameters_quantized): GPTQ and AWQ refused over
// them, Llama 4's experts 16-bit under a bitsandbytes load of a 16-bit checkpoint and per-expert
// 4-bit Linears from a pre-quantised one; and flash_attention_2 in generate() as
// a kernel of its own (no repeat_kv copies), refused where it is not modelled.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <string>

#include "error_capture.hpp"
#include "expert_weights.hpp"
#include "memscale/inference.hpp"
#include "memscale/json.hpp"
#include "memscale/json/inference_report.hpp"
#include "memscale/memscale.hpp"
#include "memscale/presets.hpp"
#include "test_inputs.hpp"

namespace quantized_experts_test {
namespace {

using memscale_test::config_path;
using memscale_test::contains;
using memscale_test::error_message;
using memscale_test::expert_bytes;
using memscale_test::scout_text;
using memscale_test::served;
using memscale_test::served_experts;

}  // namespace

TEST_CASE("quantized experts: GPTQ and AWQ over 5.x's stacked experts are refused, 4.x's per-expert Linears served") {
  const memscale::model_spec mixtral = memscale::json_io::load_hf_model(config_path("mistralai--Mixtral-8x7B-v0.1"));
  for (const auto format : {memscale::weight_format::gptq_4bit, memscale::weight_format::awq_4bit}) {
    // 4.x: MixtralBlockSparseTop2MLP's w1, w2, w3 are nn.Linear modules, each a QuantLinear.
    const memscale::inference_result v4 = memscale::estimate_inference(mixtral, served(format, 445));
    CHECK(v4.weight_bytes < memscale::estimate_inference(mixtral, served(memscale::weight_format::native, 445)).weight_bytes);
    const expert_bytes per_expert = served_experts(mixtral, served(format, 445));
    CHECK(per_expert.matrices > 0);
    CHECK(per_expert.stored < per_expert.sixteen);
    // 5.x: MixtralExperts' gate_up_proj and down_proj are 3-D nn.Parameters.
    const std::string refusal = error_message([&] { (void)memscale::estimate_inference(mixtral, served(format, 517)); });
    CHECK(contains(refusal, "infer.weights"));
    CHECK(contains(refusal, "nn.Linear modules only"));
  }
}

TEST_CASE("quantized experts: GPTQ over experts that are parameters in every release is refused") {
  const memscale::model_spec oss = memscale::json_io::load_hf_model(config_path("openai--gpt-oss-20b"));
  CHECK(contains(error_message([&] { (void)memscale::estimate_inference(oss, served(memscale::weight_format::gptq_4bit, 455)); }),
                 "infer.weights"));
  const memscale::model_spec granite =
      memscale::json_io::load_hf_model(config_path("ibm-granite--granite-3.1-3b-a800m-instruct"));
  CHECK(contains(error_message([&] { (void)memscale::estimate_inference(granite, served(memscale::weight_format::awq_4bit, 445)); }),
                 "infer.weights"));
  // Llama 4 before 5.0: its quantizer patches Llama4TextExperts for compressed-tensors and bitsandbytes only.
  CHECK(contains(error_message([&] { (void)memscale::estimate_inference(scout_text(), served(memscale::weight_format::gptq_4bit, 451)); }),
                 "infer.weights"));
}

TEST_CASE("quantized experts: Llama 4's experts under bitsandbytes, quantised at load or stored") {
  const memscale::model_spec scout = scout_text();
  // BitsAndBytesConfig over the bf16 checkpoint: Llama4TextExperts' parameters are no nn.Linear, so they
  // stay bf16 (gate_up_proj and down_proj of the 48 MoE layers).
  const memscale::inference_spec at_load = served(memscale::weight_format::bnb_nf4, 451);
  const expert_bytes loaded = served_experts(scout, at_load);
  REQUIRE(loaded.matrices > 0);
  CHECK(loaded.stored == loaded.sixteen);
  // tools/trace/llama4_quantized_experts.py walks both module trees with bitsandbytes' rule
  // (docs/data/cpu_traced_llama4_quantized_experts.json).
  CHECK(loaded.stored.value == 193'273'528'320ULL);
  // A pre-quantised bitsandbytes checkpoint: SequentialLlama4TextExperts' per-expert Linear4bit.
  memscale::inference_spec stored = at_load;
  stored.prequantized = true;
  const expert_bytes patched = served_experts(scout, stored);
  CHECK(patched.stored.value == 54'358'327'296ULL);
  // Only the experts differ (generate() itself is refused for Llama 4's layer pattern; its weights are read).
  const auto weights = [&](const memscale::inference_spec& r) {
    const auto g = std::make_unique<memscale::model_graph>(memscale::detail::inference_weights_graph(scout, r));
    return memscale::inference_weight_bytes(g->stack(), r);
  };
  CHECK(weights(at_load) == weights(stored) + (loaded.stored - patched.stored));
  // 5.x keeps Llama4TextExperts and the quantizer's swap: the same two figures
  // (tests/runtime/prequantized_parameter_experts_test.cpp).
  memscale::inference_spec v5 = stored;
  v5.transformers_version = 517;
  CHECK(served_experts(scout, v5).stored == patched.stored);
}

TEST_CASE("quantized experts: a config's quantization_config marks the checkpoint pre-quantised") {
  memscale::json_io::json config = memscale::json_io::json::parse(std::ifstream(config_path("meta-llama--Llama-4-Scout-17B-16E")));
  config["quantization_config"] = {{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}, {"bnb_4bit_quant_type", "nf4"}};
  const auto q = memscale::json_io::hf::quantization_of(config);
  REQUIRE(q.has_value());
  memscale::inference_spec spec{};
  CHECK_FALSE(spec.prequantized);
  memscale::json_io::hf::apply_quantization(*q, spec);
  CHECK(spec.prequantized);
  CHECK(spec.weights == memscale::weight_format::bnb_nf4);
}

TEST_CASE("quantized experts: flash_attention_2 in generate() keeps k and v with their kv heads") {
  const memscale::model_spec llama = memscale::presets::llama_3_8b;  // 32 heads over 8 kv heads
  memscale::inference_spec sdpa_flash{.batch = 4, .context = 2048, .new_tokens = 16, .compute = memscale::dtype::bf16};
  sdpa_flash.transformers_version = 445;
  memscale::inference_spec fa2 = sdpa_flash;
  fa2.flash_attention_2 = true;
  const memscale::inference_result a = memscale::estimate_inference(llama, sdpa_flash);
  const memscale::inference_result b = memscale::estimate_inference(llama, fa2);
  // SDPA before 5.0 takes repeat_kv's copies of k and v (32 heads); flash_attn_func takes the 8 kv heads.
  // At the decoding peak the copies span the cache: 2 x batch x cached tokens x 32 x 128 bf16 elements.
  REQUIRE(b.decode.tensor < a.decode.tensor);
  const std::uint64_t per_cached_token = 2ULL * 4 * 32 * 128 * 2;
  const std::uint64_t saved = (a.decode.tensor - b.decode.tensor).value;
  CHECK(saved >= per_cached_token * sdpa_flash.context);
  CHECK(saved <= per_cached_token * (sdpa_flash.context + sdpa_flash.new_tokens));
  CHECK(saved == 134'889'984ULL);  // docs/inference.md
  CHECK(b.weight_bytes == a.weight_bytes);

  // The document reader tells the two apart, and the report names the one asked for.
  memscale::json_io::inference_input in;
  memscale::json_io::read_inference_document(
      {{"model", "llama-3-8b"}, {"infer", {{"attention", "flash_attention_2"}, {"dtype", "bf16"}}}}, in);
  CHECK(in.spec.flash_attention_2);
  CHECK(in.spec.attention == memscale::attention_impl::flash);
  CHECK(memscale::json_io::inference_spec_json(in.spec).at("attention") == "flash_attention_2");
  memscale::json_io::inference_input plain;
  memscale::json_io::read_inference_document({{"model", "llama-3-8b"}, {"infer", {{"attention", "flash"}}}}, plain);
  CHECK_FALSE(plain.spec.flash_attention_2);
}

TEST_CASE("quantized experts: flash_attention_2 in generate() is refused where it is not modelled") {
  const memscale::model_spec llama = memscale::presets::llama_3_8b;
  memscale::inference_spec fa2{.batch = 2, .context = 256, .new_tokens = 4, .compute = memscale::dtype::bf16};
  fa2.flash_attention_2 = true;
  memscale::inference_spec fp32 = fa2;
  fp32.compute = memscale::dtype::fp32;
  fp32.kv = memscale::dtype::fp32;
  CHECK(contains(error_message([&] { (void)memscale::estimate_inference(llama, fp32); }), "infer.dtype"));
  memscale::inference_spec eager = fa2;
  eager.attention = memscale::attention_impl::eager;
  CHECK(contains(error_message([&] { (void)memscale::estimate_inference(llama, eager); }), "infer.attention"));
  memscale::inference_spec padded = fa2;
  padded.padded = true;
  const std::string refusal = error_message([&] { (void)memscale::estimate_inference(llama, padded); });
  CHECK(contains(refusal, "infer.padded"));
  CHECK(contains(refusal, "not under flash"));
  CHECK(contains(refusal, "nor flash_attention_2"));
  memscale::inference_spec fast = fa2;
  fast.loop = memscale::generate_loop::gpt_fast;
  fast.cache = memscale::kv_cache_kind::static_preallocated;
  CHECK(contains(error_message([&] { (void)memscale::estimate_inference(llama, fast); }), "flash_attention_2"));
}

}  // namespace quantized_experts_test
