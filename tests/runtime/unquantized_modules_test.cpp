// A quantised checkpoint's modules_to_not_convert (llm_int8_skip_modules, ignore): which linears
// of the model graph it keeps in 16 bits (memscale/unquantized_modules.hpp), and the weight bytes
// that changes for generate() and for a QLoRA base, against figures worked out by hand.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <string>

#include "error_capture.hpp"
#include "memscale/inference.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace unquantized_modules_test {
namespace {

using namespace memscale;
using json_io::json;
using memscale_test::contains;
using memscale_test::error_message;

std::string config_path(const std::string& name) {
  return std::string(MEMSCALE_SOURCE_DIR) + "/tests/data/hf_configs/" + name + ".json";
}

// A config.json fixture with `quantization_config` added.
json with_quantization(const std::string& name, const json& quantization_config) {
  json config = json_io::detail::read_json_file(config_path(name));
  config["quantization_config"] = quantization_config;
  return config;
}

json awq(const json& not_converted) {
  return {{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"version", "gemm"}, {"modules_to_not_convert", not_converted}};
}

json nf4(const json& skipped) {
  return {{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}, {"bnb_4bit_quant_type", "nf4"}, {"llm_int8_skip_modules", skipped}};
}

unquantized_modules kept_by(const json& config) {
  const auto q = json_io::hf::quantization_of(config);
  REQUIRE(q.has_value());
  return json_io::hf::unquantized_of(*q, json_io::model_from_hf_config(config));
}

constexpr lora_modules only(lora_target t) { return static_cast<lora_modules>(t); }

// A kept o_proj is stored in fp16 by generate()'s weights, in constant evaluation as at run time.
// AWQ GEMM of 4096 x 4096, group 128: qweight 4096 x 512 int32 (8,388,608 B), qzeros 32 x 512
// int32 (65,536 B), scales 32 x 4096 fp16 (262,144 B): 8,716,288 B against fp16's 33,554,432 B.
constexpr bool kept_o_proj_is_16_bit() {
  model_spec m = presets::llama_2_7b;
  m.layers = 2;
  inference_spec r{.weights = weight_format::awq_4bit};
  const bytes quantised = inference_weight_bytes(detail::weights_graph(m).stack(), r);
  r.unquantized = only(lora_target::o);
  const bytes kept = inference_weight_bytes(detail::weights_graph(m, r.unquantized).stack(), r);
  return kept - quantised == bytes{(33'554'432 - 8'716'288) * 2};
}
static_assert(kept_o_proj_is_16_bit());

}  // namespace

TEST_CASE("modules_to_not_convert: entries map onto the graph's linear roles as transformers matches them",
          "[quant][unquantized]") {
  const std::string mixtral = "mistralai--Mixtral-8x7B-v0.1";
  const std::string qwen_moe = "Qwen--Qwen1.5-MoE-A2.7B";
  // Mixtral's experts are w1, w2, w3: AWQ's substring "gate" finds only block_sparse_moe.gate.
  CHECK(kept_by(with_quantization(mixtral, awq({"gate"}))).roles == only(lora_target::router));
  // Qwen-MoE names its matrices gate_proj and has a shared_expert_gate: AWQ's substring keeps them all
  // (integrations/awq.py@027f76a8), bitsandbytes' name-or-path rule only mlp.gate.
  CHECK(kept_by(with_quantization(qwen_moe, awq({"gate"}))).roles ==
        (lora_target::router | lora_target::gate | lora_target::shared_expert_gate));
  CHECK(kept_by(with_quantization(qwen_moe, nf4({"mlp.gate"}))).roles == only(lora_target::router));
  // gpt-oss-style paths with a wildcard layer, a whole attention and modules that are no Linear.
  const unquantized_modules attention =
      kept_by(with_quantization(mixtral, awq({"model.layers.*.self_attn", "model.embed_tokens", "lm_head"})));
  CHECK(has(attention.roles, lora_target::q));
  CHECK(has(attention.roles, lora_target::o));
  CHECK(has(attention.roles, lora_target::head));
  CHECK_FALSE(has(attention.roles, lora_target::router));
  const unquantized_modules vlm = kept_by(with_quantization(mixtral, awq({"vision_tower", "multi_modal_projector"})));
  CHECK(vlm.roles == 0);
  CHECK(vlm.vision_tower);
  CHECK(vlm.vision_projector);
  // What cannot be placed is refused, naming the entry.
  CHECK(contains(error_message([&] { (void)kept_by(with_quantization(mixtral, awq({"wrong_name"}))); }),
                 "config.quantization_config.modules_to_not_convert names \"wrong_name\""));
  CHECK(contains(error_message([&] { (void)kept_by(with_quantization(mixtral, awq({"model.layers.0.self_attn"}))); }),
                 "one layer's modules"));
  CHECK(contains(error_message([&] {
                   (void)kept_by(with_quantization(mixtral, {{"quant_method", "gptq"}, {"modules_to_not_convert", {"gate"}}}));
                 }),
                 "is not read by a GPTQ load"));
  CHECK(kept_by(with_quantization(mixtral, {{"quant_method", "gptq"}, {"modules_to_not_convert", {"lm_head"}}})).roles ==
        only(lora_target::head));
  CHECK(contains(error_message([&] { (void)kept_by(with_quantization(qwen_moe, nf4({"mlp.experts"}))); }),
                 "config.quantization_config.llm_int8_skip_modules names \"mlp.experts\""));
}

TEST_CASE("modules_to_not_convert: a Mixtral AWQ checkpoint's router stays 16-bit in generate()", "[quant][unquantized]") {
  const model_spec m = json_io::load_hf_model(config_path("mistralai--Mixtral-8x7B-v0.1"));
  inference_spec quantised{.batch = 1, .context = 128, .new_tokens = 1, .compute = dtype::bf16};
  json_io::hf::apply_quantization(*json_io::hf::quantization_of(with_quantization("mistralai--Mixtral-8x7B-v0.1", awq({}))),
                                  quantised);
  inference_spec router_kept = quantised;
  json_io::hf::apply_unquantized(kept_by(with_quantization("mistralai--Mixtral-8x7B-v0.1", awq({"gate"}))), router_kept);
  // The router is 8 x 4096. AWQ GEMM stores qweight (4096 x 8/8 int32) 16,384 B, qzeros (32 x 1 int32)
  // 128 B and scales (32 x 8 fp16) 512 B: 17,024 B; bf16 it is 65,536 B. 32 layers.
  const bytes per_layer{65'536 - 17'024};
  CHECK(estimate_inference(m, router_kept).weight_bytes == estimate_inference(m, quantised).weight_bytes + per_layer * 32U);
  // ["lm_head"] changes nothing: the output layer is never quantised.
  inference_spec head_kept = quantised;
  json_io::hf::apply_unquantized(kept_by(with_quantization("mistralai--Mixtral-8x7B-v0.1", awq({"lm_head"}))), head_kept);
  CHECK(estimate_inference(m, head_kept).weight_bytes == estimate_inference(m, quantised).weight_bytes);
}

TEST_CASE("modules_to_not_convert: Qwen-MoE's AWQ \"gate\" keeps its router, gate_proj matrices and shared-expert gate",
          "[quant][unquantized]") {
  const std::string qwen_moe = "Qwen--Qwen1.5-MoE-A2.7B";
  const model_spec m = json_io::load_hf_model(config_path(qwen_moe));
  inference_spec quantised{.batch = 1, .context = 128, .new_tokens = 1, .compute = dtype::bf16};
  json_io::hf::apply_quantization(*json_io::hf::quantization_of(with_quantization(qwen_moe, awq({}))), quantised);
  // WQLinear_GEMM packs eight outputs an int32: any AWQ checkpoint keeps the 1-wide shared_expert_gate and
  // the 60-wide router.
  json_io::hf::apply_unquantized(kept_by(with_quantization(qwen_moe, awq({"shared_expert_gate", "mlp.gate"}))), quantised);
  CHECK(quantised.unquantized == (lora_target::shared_expert_gate | lora_target::router));
  inference_spec kept = quantised;
  json_io::hf::apply_unquantized(kept_by(with_quantization(qwen_moe, awq({"gate"}))), kept);
  // tools/trace/unquantized_modules.py walks the module tree with replace_with_awq_linear's rule:
  // 6,557,270,016 B more (docs/data/cpu_traced_unquantized_modules.json).
  CHECK((estimate_inference(m, kept).weight_bytes - estimate_inference(m, quantised).weight_bytes).value == 6'557'270'016ULL);
}

TEST_CASE("modules_to_not_convert: a QLoRA base over a bitsandbytes checkpoint keeps the skipped router in bf16",
          "[quant][unquantized][qlora]") {
  const model_spec m = json_io::load_hf_model(config_path("mistralai--Mixtral-8x7B-v0.1"));
  training_spec run{.micro_batch = 1, .seq_len = 128, .prec = precision::pure_bf16};
  run.target = training_target::qlora;
  run.lora_rank = 8;
  const bytes all_four_bit = estimate(m, run).parameter_bytes;
  run.unquantized = kept_by(with_quantization("mistralai--Mixtral-8x7B-v0.1", nf4({"gate"}))).roles;
  // The 8 x 4096 router: bf16 65,536 B against NF4's 16,384 B of codes and 2,048 B of fp32 absmax
  // (one per 64 weights). 32 layers.
  const bytes per_layer{65'536 - 16'384 - 2'048};
  CHECK(estimate(m, run).parameter_bytes == all_four_bit + per_layer * 32U);
}

TEST_CASE("modules_to_not_convert: a QLoRA base that keeps every linear in bf16 is a LoRA base", "[quant][unquantized][qlora]") {
  const model_spec m = presets::llama_2_7b;
  training_spec lora{.micro_batch = 1, .seq_len = 256, .prec = precision::pure_bf16};
  lora.target = training_target::lora;
  lora.lora_rank = 16;
  training_spec qlora = lora;
  qlora.target = training_target::qlora;
  qlora.unquantized = lora_all_linear;
  const estimate_result a = estimate(m, lora);
  const estimate_result b = estimate(m, qlora);
  CHECK(b.parameter_bytes == a.parameter_bytes);
  // No 4-bit weight is dequantised: the same activations.
  CHECK(b.steady.tensor == a.steady.tensor);
  qlora.unquantized = 0;
  CHECK(estimate(m, qlora).parameter_bytes < a.parameter_bytes);
}

TEST_CASE("modules_to_not_convert: a VLM's tower and projector kept unquantised are counted in the compute dtype",
          "[quant][unquantized][tower]") {
  const std::string gemma3 = "ssm-multimodal/google--gemma-3-4b-it";
  const model_spec m = json_io::load_hf_model(config_path(gemma3));
  model_spec text_only = m;
  text_only.idle_tower_parameters = 0;
  inference_spec spec{.batch = 1, .context = 128, .new_tokens = 1, .compute = dtype::bf16};
  json_io::hf::apply_quantization(*json_io::hf::quantization_of(with_quantization(gemma3, awq({}))), spec);
  // Without the list the quantised tower's bytes are not known: refused.
  CHECK(contains(error_message([&] { (void)estimate_inference(m, spec); }), "infer.weights"));
  json_io::hf::apply_unquantized(kept_by(with_quantization(gemma3, awq({"vision_tower", "multi_modal_projector"}))), spec);
  CHECK(estimate_inference(m, spec).weight_bytes ==
        estimate_inference(text_only, spec).weight_bytes + bytes{2 * m.idle_tower_parameters});
  // The tower without its projector is not what memscale counts: refused.
  inference_spec tower_only = spec;
  CHECK(contains(error_message([&] {
                   json_io::hf::apply_unquantized(kept_by(with_quantization(gemma3, awq({"vision_tower"}))), tower_only);
                 }),
                 "must keep the vision tower and its projector both"));
}

}  // namespace unquantized_modules_test
