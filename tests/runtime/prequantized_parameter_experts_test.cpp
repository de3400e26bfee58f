// Pre-quantised checkpoints over experts held as bare nn.Parameters (inference/weights.hpp
// expert_parameters_quantized, inference/generate_peak.hpp check_quantized_parameter_experts):
// bitsandbytes checkpoints saved before 5.0 refused under 5.x's merged experts, 5.x-saved ones
// 16-bit; Llama 4's experts swapped for per-expert Linears in 5.x too; compressed-tensors experts
// decompressed into the compute dtype; fine-grained FP8 experts in float8 with block scales; the
// layouts no loader fills refused.
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
#include "memscale/memscale.hpp"
#include "test_inputs.hpp"

namespace prequantized_parameter_experts_test {
namespace {

using memscale_test::config_path;
using memscale_test::contains;
using memscale_test::error_message;
using memscale_test::expert_bytes;
using memscale_test::scout_text;
using memscale_test::served;
using memscale_test::served_experts;

memscale::inference_spec prequantized(memscale::weight_format format, std::uint32_t transformers_version,
                                      std::uint32_t saved_by) {
  memscale::inference_spec r = served(format, transformers_version);
  r.prequantized = true;
  r.saved_by_transformers = saved_by;
  return r;
}

// A compressed-tensors W4A16 scheme (pack-quantized int4, groups of 128).
memscale::inference_spec ct_w4a16(std::uint32_t transformers_version) {
  memscale::inference_spec r = prequantized(memscale::weight_format::ct_int, transformers_version, transformers_version);
  r.quant_scheme = {.method = memscale::quant_method::ct_int, .bits = 4, .group_size = 128, .zero_points = false,
                    .g_idx = false, .scales = memscale::scale_granularity::group};
  return r;
}

memscale::inference_spec fp8_block(std::uint32_t transformers_version) {
  memscale::inference_spec r = prequantized(memscale::weight_format::fp8_block, transformers_version, transformers_version);
  r.quant_scheme = {.method = memscale::quant_method::fp8_block, .block_out = 128, .block_in = 128};
  return r;
}

std::string refusal(const memscale::model_spec& m, const memscale::inference_spec& r) {
  return error_message([&] { (void)memscale::estimate_inference(m, r); });
}

}  // namespace

TEST_CASE("prequantized parameter experts: a bitsandbytes checkpoint saved before 5.0 does not load under 5.x") {
  const memscale::model_spec qwen = memscale::json_io::load_hf_model(config_path("Qwen--Qwen3-30B-A3B"));
  const auto nf4 = memscale::weight_format::bnb_nf4;
  // Saved by 4.51 (per-expert Linear4bit): 5.17's MergeModulelist stacks the packed bytes as bf16.
  for (const std::uint32_t saved_by : {451u, 0u}) {
    const std::string why = refusal(qwen, prequantized(nf4, 517, saved_by));
    CHECK(contains(why, "config.transformers_version"));
    CHECK(contains(why, "expert converters"));
    CHECK(contains(why, saved_by == 0 ? "(got not stated)" : "(got 4.51)"));  // the release as written, not its code
  }
  CHECK(contains(refusal(qwen, prequantized(memscale::weight_format::bnb_int8, 517, 446)), "config.transformers_version"));
  // Served by the release that saved it, the experts are per-expert 4-bit Linears.
  const expert_bytes v4 = served_experts(qwen, prequantized(nf4, 451, 451));
  CHECK(v4.stored < v4.sixteen);
  CHECK(memscale::estimate_inference(qwen, prequantized(nf4, 451, 451)).weight_bytes.value > 0);
  // Saved by 5.x: bitsandbytes left the experts 16-bit and they load so, as a BitsAndBytesConfig load.
  const memscale::inference_spec v5_saved = prequantized(nf4, 517, 517);
  const expert_bytes v5 = served_experts(qwen, v5_saved);
  CHECK(v5.stored == v5.sixteen);
  CHECK(memscale::estimate_inference(qwen, v5_saved).weight_bytes ==
        memscale::estimate_inference(qwen, served(nf4, 517)).weight_bytes);
  // Experts that are parameters in every release load their checkpoint's 3-D tensors as stored.
  const memscale::model_spec oss = memscale::json_io::load_hf_model(config_path("openai--gpt-oss-20b"));
  const expert_bytes oss_experts = served_experts(oss, prequantized(nf4, 517, 455));
  CHECK(oss_experts.stored == oss_experts.sixteen);
}

TEST_CASE("prequantized parameter experts: Llama 4's experts are swapped for per-expert Linears in 5.x too") {
  const memscale::model_spec scout = scout_text();
  for (const std::uint32_t release : {451u, 517u}) {
    const expert_bytes at_load = served_experts(scout, served(memscale::weight_format::bnb_nf4, release));
    CHECK(at_load.stored.value == 193'273'528'320ULL);  // docs/data/cpu_traced_llama4_quantized_experts.json
    const expert_bytes stored = served_experts(scout, prequantized(memscale::weight_format::bnb_nf4, release, release));
    CHECK(stored.stored.value == 54'358'327'296ULL);
  }
  // compressed-tensors is in MODULES_TO_PATCH_FOR_QUANTIZATION too: per-expert quantised Linears,
  // each with the decompressed copy it keeps from its first forward on (weights.hpp quantized_matrix_bytes).
  const expert_bytes ct = served_experts(scout, ct_w4a16(517));
  CHECK(ct.stored > ct.sixteen);
}

TEST_CASE("prequantized parameter experts: compressed-tensors experts are decompressed into 5.x's 3-D parameters") {
  const memscale::model_spec qwen = memscale::json_io::load_hf_model(config_path("Qwen--Qwen3-30B-A3B"));
  // 4.x: every expert an nn.Linear that compressed-tensors quantises, its decompressed copy beside it.
  const expert_bytes v4 = served_experts(qwen, ct_w4a16(451));
  CHECK(v4.stored > v4.sixteen);
  // 5.x: DecompressExperts dequantises each expert before the merge; the experts are held in bf16.
  const expert_bytes v5 = served_experts(qwen, ct_w4a16(517));
  CHECK(v5.stored == v5.sixteen);
  CHECK(v5.sixteen == v4.sixteen);
  // Qwen3-30B-A3B: 48 layers x 128 experts x 3 matrices of 2048 x 768, bf16
  // (tools/trace/fused_quantized_experts.py, docs/data/cpu_traced_fused_quantized_experts.json).
  CHECK(v5.stored.value == 48ULL * 128 * 3 * 2048 * 768 * 2);
  // No converter fills GraniteMoE's experts from per-expert tensors (gpt-oss's generate() takes
  // native and MXFP4 weights only).
  const memscale::model_spec granite = memscale::json_io::load_hf_model(config_path("ibm-granite--granite-3.1-3b-a800m-instruct"));
  for (const std::uint32_t release : {451u, 517u})
    CHECK(contains(refusal(granite, ct_w4a16(release)), "must not be compressed-tensors"));
}

TEST_CASE("prequantized parameter experts: fine-grained FP8 experts in float8 with fp32 block scales") {
  const memscale::model_spec qwen = memscale::json_io::load_hf_model(config_path("Qwen--Qwen3-30B-A3B"));
  // FP8Expert: gate_up_proj [128, 1536, 2048] and down_proj [128, 2048, 768] in float8, one fp32
  // scale per 128 x 128 tile (gate_up 12 x 16, down 16 x 6), over 48 layers: per-expert FP8Linear
  // at 4.x and FP8Expert at 5.x hold the same bytes (docs/data/cpu_traced_fused_quantized_experts.json).
  const std::uint64_t per_expert = 1536ULL * 2048 + 4ULL * 12 * 16 + 2048ULL * 768 + 4ULL * 16 * 6;
  for (const std::uint32_t release : {451u, 517u}) {
    const expert_bytes experts = served_experts(qwen, fp8_block(release));
    CHECK(experts.stored.value == 48ULL * 128 * per_expert);
  }
  // GraniteMoE's and Llama 4's experts fit neither FP8Linear nor FP8Expert.
  const memscale::model_spec granite = memscale::json_io::load_hf_model(config_path("ibm-granite--granite-3.1-3b-a800m-instruct"));
  CHECK(contains(refusal(granite, fp8_block(517)), "must not be fp8-block"));
  CHECK(contains(refusal(scout_text(), fp8_block(451)), "must not be fp8-block"));
}

TEST_CASE("prequantized parameter experts: a config's transformers_version is the release that saved it") {
  memscale::json_io::json config = memscale::json_io::json::parse(std::ifstream(config_path("Qwen--Qwen3-30B-A3B")));
  config["quantization_config"] = {{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}, {"bnb_4bit_quant_type", "nf4"}};
  config["transformers_version"] = "4.51.3";
  memscale::inference_spec spec{};
  memscale::json_io::hf::apply_quantization(*memscale::json_io::hf::quantization_of(config), spec);
  CHECK(spec.saved_by_transformers == 451);
  config["transformers_version"] = "5.17.0.dev0";
  memscale::json_io::hf::apply_quantization(*memscale::json_io::hf::quantization_of(config), spec);
  CHECK(spec.saved_by_transformers == 517);
  config.erase("transformers_version");
  memscale::json_io::hf::apply_quantization(*memscale::json_io::hf::quantization_of(config), spec);
  CHECK(spec.saved_by_transformers == 0);
  config["transformers_version"] = "five";
  CHECK(contains(error_message([&] { (void)memscale::json_io::hf::quantization_of(config); }), "config.transformers_version"));
}

}  // namespace prequantized_parameter_experts_test
