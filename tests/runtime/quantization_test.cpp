// Quantised checkpoints: each format's bytes for one (out x in) linear (memscale/quant_format.hpp)
// equal what a safetensors header of such a layer holds (written here with the tensors,
// dtypes and shapes the format's code creates), and a config.json's quantization_config reads
// into that format (json/hf/quantization.hpp) and changes the weight bytes as it says, for
// generate() and for a QLoRA run over a bitsandbytes 4-bit checkpoint.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "error_capture.hpp"
#include "memscale/inference.hpp"
#include "memscale/json.hpp"
#include "memscale/presets.hpp"
#include "memscale/quant_format.hpp"
#include "safetensors_writer.hpp"

namespace quantization_test {
namespace {

using memscale::bytes;
using memscale::quant_format;
using memscale::quant_method;
using memscale::tensor_role;
using memscale::json_io::json;
using memscale_test::contains;
using memscale_test::error_message;
using memscale_test::fake_tensor;

constexpr std::uint64_t out = 256;
constexpr std::uint64_t in = 512;

struct layer_bytes {
  bytes quantized{};
  bytes metadata{};
  std::uint64_t parameters = 0;
};

// The layer's tensors written as a safetensors file and read back through the reader.
layer_bytes read_layer(const std::vector<fake_tensor>& tensors) {
  const memscale_test::temp_folder dir("quant");
  memscale_test::write_safetensors(dir / "model.safetensors", tensors);
  const auto s = memscale::json_io::read_checkpoint(dir.path());
  REQUIRE(s.has_value());
  return {memscale::total(s->inventory, tensor_role::quantized).stored, memscale::total(s->inventory, tensor_role::metadata).stored,
          memscale::parameter_elements(s->inventory)};
}

std::vector<fake_tensor> gptq_layer(std::uint64_t bits, std::uint64_t groups) {
  const std::string p = "model.layers.0.mlp.down_proj.";
  return {{p + "qweight", "I32", {in / 32 * bits, out}},
          {p + "qzeros", "I32", {groups, out / 32 * bits}},
          {p + "scales", "F16", {groups, out}},
          {p + "g_idx", "I32", {in}}};
}

// LLaMA-2-7B's linear layers per block: q, k, v, o (4096 x 4096), gate and up (11008 x 4096),
// down (4096 x 11008); no biases. The served weights are the fp16 model's with each of these
// replaced by the format's stored bytes, 32 times over.
bytes llama_2_7b_block_linears(const std::function<bytes(std::uint64_t, std::uint64_t)>& per_linear) {
  bytes sum{};
  for (const auto& [o, i] : std::vector<std::pair<std::uint64_t, std::uint64_t>>{
           {4096, 4096}, {4096, 4096}, {4096, 4096}, {4096, 4096}, {11008, 4096}, {11008, 4096}, {4096, 11008}})
    sum += per_linear(o, i);
  return sum;
}

}  // namespace

TEST_CASE("quant_format: GPTQ bytes equal AutoGPTQ's stored tensors at 2, 3, 4 and 8 bits", "[quant]") {
  for (const std::uint64_t bits : {2ULL, 3ULL, 4ULL, 8ULL}) {
    const layer_bytes l = read_layer(gptq_layer(bits, in / 128));
    INFO(bits << " bits");
    CHECK(l.parameters == 0);
    CHECK(l.quantized == memscale::quantized_linear_bytes({.method = quant_method::gptq, .bits = bits, .group_size = 128}, out, in));
  }
  // 4 bits by hand: qweight 64 x 256 x 4 + qzeros 4 x 32 x 4 + scales 4 x 256 x 2 + g_idx 512 x 4.
  CHECK(memscale::quantized_linear_bytes({.method = quant_method::gptq, .bits = 4, .group_size = 128}, out, in) == bytes{70'144});
  // group_size -1: one group per row.
  CHECK(read_layer(gptq_layer(4, 1)).quantized ==
        memscale::quantized_linear_bytes({.method = quant_method::gptq, .bits = 4, .group_size = 0}, out, in));
}

TEST_CASE("quant_format: AWQ bytes equal WQLinear_GEMM's stored tensors", "[quant]") {
  const std::string p = "model.layers.0.self_attn.q_proj.";
  const layer_bytes l = read_layer({{p + "qweight", "I32", {in, out / 8}}, {p + "qzeros", "I32", {in / 128, out / 8}}, {p + "scales", "F16", {in / 128, out}}});
  CHECK(l.parameters == 0);
  CHECK(l.quantized == memscale::quantized_linear_bytes({.method = quant_method::awq, .bits = 4, .group_size = 128}, out, in));
}

TEST_CASE("quant_format: bitsandbytes 4-bit and 8-bit bytes equal the serialised quant state", "[quant]") {
  const std::string p = "model.layers.0.mlp.up_proj.weight";
  const std::uint64_t n = out * in;
  const std::uint64_t blocks = n / 64;
  SECTION("NF4") {
    const layer_bytes l = read_layer({{p, "U8", {n / 2, 1}}, {p + ".absmax", "F32", {blocks}}, {p + ".quant_map", "F32", {16}},
                                      {p + ".quant_state.bitsandbytes__nf4", "U8", {117}}});
    CHECK(l.metadata == bytes{117});  // the JSON blob of blocksize, dtype, shape: read by the loader, never on the device
    CHECK(l.quantized == memscale::quantized_linear_bytes({.method = quant_method::bnb_4bit}, out, in));
  }
  SECTION("NF4 with double quantisation") {
    const layer_bytes l = read_layer({{p, "U8", {n / 2, 1}},
                                      {p + ".absmax", "U8", {blocks}},
                                      {p + ".nested_absmax", "F32", {blocks / 256}},
                                      {p + ".nested_quant_map", "F32", {256}},
                                      {p + ".quant_map", "F32", {16}},
                                      {p + ".quant_state.bitsandbytes__nf4", "U8", {160}}});
    // The fp32 offset is a tensor on the device but a number inside the file's blob.
    CHECK(l.quantized + bytes{4} == memscale::quantized_linear_bytes({.method = quant_method::bnb_4bit, .double_quant = true}, out, in));
  }
  SECTION("NF4 under bnb_4bit_quant_storage=bfloat16: the weight is known by its quant state") {
    const layer_bytes l = read_layer({{p, "BF16", {n / 4, 1}}, {p + ".absmax", "F32", {blocks}}, {p + ".quant_map", "F32", {16}},
                                      {p + ".quant_state.bitsandbytes__nf4", "U8", {117}}});
    CHECK(l.parameters == 0);
    CHECK(l.quantized == memscale::quantized_linear_bytes({.method = quant_method::bnb_4bit}, out, in));
  }
  SECTION("LLM.int8") {
    const std::string q = "model.layers.0.mlp.up_proj.";
    const layer_bytes l = read_layer({{q + "weight", "I8", {out, in}}, {q + "SCB", "F32", {out}}, {q + "weight_format", "U8", {}}});
    CHECK(l.metadata == bytes{1});
    CHECK(l.quantized == memscale::quantized_linear_bytes({.method = quant_method::bnb_int8}, out, in));
  }
}

TEST_CASE("quant_format: fine-grained fp8, compressed-tensors and MXFP4 bytes equal their stored tensors", "[quant]") {
  const std::string p = "model.layers.0.mlp.down_proj.";
  SECTION("fine-grained fp8, 128 x 128 tiles over a shape that is not a multiple") {
    const layer_bytes l = read_layer({{p + "weight", "F8_E4M3", {300, 520}}, {p + "weight_scale_inv", "F32", {3, 5}}});
    CHECK(l.quantized == memscale::quantized_linear_bytes({.method = quant_method::fp8_block}, 300, 520));
    CHECK(l.quantized == bytes{300 * 520 + 15 * 4});
  }
  SECTION("compressed-tensors float-quantized, channel scales") {
    const layer_bytes l = read_layer({{p + "weight", "F8_E4M3", {out, in}}, {p + "weight_scale", "BF16", {out, 1}}});
    const quant_format f{.method = quant_method::ct_float, .bits = 8, .zero_points = false, .g_idx = false,
                         .scales = memscale::scale_granularity::channel, .scale_type = memscale::dtype::bf16};
    CHECK(l.quantized == memscale::quantized_linear_bytes(f, out, in));
  }
  SECTION("compressed-tensors float-quantized, block scales and a static input scale") {
    const layer_bytes l = read_layer({{p + "weight", "F8_E4M3", {out, in}}, {p + "weight_scale", "BF16", {2, 4}}, {p + "input_scale", "BF16", {1}}});
    const quant_format f{.method = quant_method::ct_float, .bits = 8, .zero_points = false, .g_idx = false,
                         .scales = memscale::scale_granularity::block, .scale_type = memscale::dtype::bf16, .input_scale = true};
    CHECK(l.quantized == memscale::quantized_linear_bytes(f, out, in));
  }
  SECTION("compressed-tensors pack-quantized int4, symmetric and asymmetric with act-order") {
    const layer_bytes sym = read_layer({{p + "weight_packed", "I32", {out, in / 8}}, {p + "weight_shape", "I32", {2}}, {p + "weight_scale", "BF16", {out, in / 128}}});
    const quant_format f{.method = quant_method::ct_int, .bits = 4, .group_size = 128, .zero_points = false, .g_idx = false,
                         .scales = memscale::scale_granularity::group, .scale_type = memscale::dtype::bf16};
    CHECK(sym.quantized == memscale::quantized_linear_bytes(f, out, in));
    const layer_bytes asym = read_layer({{p + "weight_packed", "I32", {out, in / 8}}, {p + "weight_shape", "I32", {2}},
                                         {p + "weight_scale", "BF16", {out, in / 128}}, {p + "weight_zero_point", "I32", {out / 8, in / 128}},
                                         {p + "weight_g_idx", "I32", {in}}});
    quant_format g = f;
    g.zero_points = true;
    g.g_idx = true;
    CHECK(asym.quantized == memscale::quantized_linear_bytes(g, out, in));
  }
  SECTION("MXFP4 experts (gpt-oss): blocks and scales per expert, the bias a parameter") {
    const std::string e = "model.layers.0.mlp.experts.";
    const layer_bytes l = read_layer({{e + "gate_up_proj_blocks", "U8", {2, out, in / 32, 16}}, {e + "gate_up_proj_scales", "U8", {2, out, in / 32}},
                                      {e + "gate_up_proj_bias", "BF16", {2, out}}});
    CHECK(l.quantized == memscale::quantized_linear_bytes({.method = quant_method::mxfp4}, out, in) * 2U);
    CHECK(l.parameters == 2 * out);
  }
}

TEST_CASE("quantization_config: each format reads into its stored format", "[quant]") {
  using memscale::json_io::hf::quantization_of;
  CHECK_FALSE(quantization_of(json{{"model_type", "llama"}}).has_value());
  SECTION("AWQ (AutoAWQ GEMM)") {
    const auto q = quantization_of(json{{"quantization_config",
                                         {{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"zero_point", true}, {"version", "gemm"},
                                          {"modules_to_not_convert", nullptr}}}});
    REQUIRE(q.has_value());
    CHECK(q->format.method == quant_method::awq);
    CHECK(q->format.group_size == 128);
    CHECK(q->not_converted.empty());
    CHECK(contains(error_message([] {
                     (void)quantization_of(json{{"quantization_config", {{"quant_method", "awq"}, {"version", "GEMV"}}}});
                   }),
                   "config.quantization_config.version"));
  }
  SECTION("GPTQ") {
    const auto q = quantization_of(json{{"quantization_config",
                                         {{"quant_method", "gptq"}, {"bits", 3}, {"group_size", -1}, {"desc_act", true}, {"sym", false}}}});
    REQUIRE(q.has_value());
    CHECK(q->format.bits == 3);
    CHECK(q->format.group_size == 0);
    CHECK(q->desc_act);
    CHECK(contains(error_message([] { (void)quantization_of(json{{"quantization_config", {{"quant_method", "gptq"}, {"bits", 5}}}}); }),
                   "config.quantization_config.bits must be 2, 3, 4 or 8 for GPTQ (got 5)"));
  }
  SECTION("bitsandbytes 4-bit and 8-bit") {
    const auto q = quantization_of(json{{"quantization_config",
                                         {{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}, {"bnb_4bit_quant_type", "nf4"},
                                          {"bnb_4bit_use_double_quant", true}, {"bnb_4bit_compute_dtype", "bfloat16"},
                                          {"llm_int8_skip_modules", {"lm_head", "vision_tower"}}}}});
    REQUIRE(q.has_value());
    CHECK(q->format.method == quant_method::bnb_4bit);
    CHECK(q->format.double_quant);
    CHECK(q->compute == memscale::dtype::bf16);
    CHECK(q->not_converted.size() == 2);
    CHECK(memscale::json_io::hf::qlora_base_of(*q) == memscale::base_quant::nf4_double_quant);
    const auto eight = quantization_of(json{{"quantization_config", {{"load_in_8bit", true}}}});  // no quant_method: old configs
    CHECK(eight->format.method == quant_method::bnb_int8);
    CHECK(contains(error_message([] {
                     (void)quantization_of(json{{"quantization_config", {{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}, {"load_in_8bit", true}}}});
                   }),
                   "load_in_4bit"));
  }
  SECTION("fine-grained fp8 (DeepSeek-V3)") {
    const auto q = quantization_of(json{{"quantization_config",
                                         {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"}, {"weight_block_size", {128, 128}}}}});
    REQUIRE(q.has_value());
    CHECK(q->format.method == quant_method::fp8_block);
    CHECK(memscale::quantized_linear_bytes(q->format, 7168, 2048) == bytes{7168ULL * 2048 + 56 * 16 * 4});
    CHECK(contains(error_message([] {
                     (void)quantization_of(json{{"quantization_config", {{"quant_method", "fp8"}, {"weight_block_size", {128}}}}});
                   }),
                   "weight_block_size"));
  }
  SECTION("compressed-tensors FP8-dynamic and W4A16") {
    const auto fp8 = quantization_of(json{
        {"torch_dtype", "bfloat16"},
        {"quantization_config",
         {{"quant_method", "compressed-tensors"},
          {"format", "float-quantized"},
          {"ignore", {"lm_head"}},
          {"config_groups",
           {{"group_0",
             {{"targets", {"Linear"}},
              {"weights", {{"num_bits", 8}, {"type", "float"}, {"strategy", "channel"}, {"symmetric", true}, {"dynamic", false}}},
              {"input_activations", {{"num_bits", 8}, {"type", "float"}, {"strategy", "token"}, {"dynamic", true}}}}}}}}}});
    REQUIRE(fp8.has_value());
    CHECK(fp8->format.method == quant_method::ct_float);
    CHECK(fp8->format.scales == memscale::scale_granularity::channel);
    CHECK_FALSE(fp8->format.input_scale);
    CHECK(fp8->not_converted == std::vector<std::string>{"lm_head"});
    CHECK(memscale::quantized_linear_bytes(fp8->format, out, in) == bytes{out * in + 2 * out});
    const auto w4 = quantization_of(json{
        {"quantization_config",
         {{"quant_method", "compressed-tensors"},
          {"format", "pack-quantized"},
          {"config_groups",
           {{"group_0",
             {{"targets", {"Linear"}},
              {"weights", {{"num_bits", 4}, {"type", "int"}, {"strategy", "group"}, {"group_size", 128}, {"symmetric", true}}}}}}}}}});
    REQUIRE(w4.has_value());
    CHECK(w4->format.method == quant_method::ct_int);
    CHECK(memscale::dense_copy_kept(w4->format.method));
  }
  SECTION("MXFP4 (gpt-oss) and an unknown method") {
    const auto q = quantization_of(json{{"quantization_config",
                                         {{"quant_method", "mxfp4"},
                                          {"modules_to_not_convert", {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}}}}});
    REQUIRE(q.has_value());
    CHECK(q->experts_only);
    CHECK(q->not_converted.size() == 4);
    CHECK(contains(error_message([] { (void)quantization_of(json{{"quantization_config", {{"quant_method", "hqq"}}}}); }),
                   "config.quantization_config.quant_method is not a format memscale models"));
  }
}

TEST_CASE("quantization_config: each format changes the served weight bytes as the format says", "[quant][inference]") {
  const memscale::model_spec m = memscale::presets::llama_2_7b;
  const memscale::inference_spec fp16{.batch = 1, .context = 128, .new_tokens = 1};
  const bytes native = memscale::estimate_inference(m, fp16).weight_bytes;
  const bytes native_linears = llama_2_7b_block_linears([](std::uint64_t o, std::uint64_t i) { return memscale::storage(memscale::dtype::fp16, o * i); });
  struct format_case {
    const char* name;
    json config;
    memscale::weight_format served;
  };
  const std::vector<format_case> cases{
      {"AWQ GEMM 4-bit, group 128", {{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"version", "gemm"}}, memscale::weight_format::awq_4bit},
      {"GPTQ 4-bit, group 64, desc_act", {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 64}, {"desc_act", true}}, memscale::weight_format::gptq_4bit},
      {"bitsandbytes NF4, double quantisation",
       {{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}, {"bnb_4bit_quant_type", "nf4"}, {"bnb_4bit_use_double_quant", true}},
       memscale::weight_format::bnb_nf4},
      {"bitsandbytes FP4", {{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}, {"bnb_4bit_quant_type", "fp4"}}, memscale::weight_format::bnb_nf4},
      {"bitsandbytes LLM.int8", {{"quant_method", "bitsandbytes"}, {"load_in_8bit", true}}, memscale::weight_format::bnb_int8},
      {"fine-grained FP8, 128 x 128 blocks",
       {{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}, {"weight_block_size", {128, 128}}},
       memscale::weight_format::fp8_block},
  };
  for (const format_case& c : cases) {
    INFO(c.name);
    const auto q = memscale::json_io::hf::quantization_of(json{{"quantization_config", c.config}});
    REQUIRE(q.has_value());
    memscale::inference_spec spec = fp16;
    memscale::json_io::hf::apply_quantization(*q, spec);
    CHECK(spec.weights == c.served);
    const bytes stored = llama_2_7b_block_linears([&q](std::uint64_t o, std::uint64_t i) { return memscale::quantized_linear_bytes(q->format, o, i); });
    CHECK(stored < native_linears);
    CHECK(memscale::estimate_inference(m, spec).weight_bytes == native - native_linears * 32U + stored * 32U);
  }
}

namespace {

// A compressed-tensors config of one group over every Linear: `weights` and, when not null, `inputs`.
json compressed_tensors_config(const char* format, const json& weights, const json& inputs) {
  json group{{"targets", {"Linear"}}, {"weights", weights}};
  if (!inputs.is_null()) group["input_activations"] = inputs;
  return json{{"torch_dtype", "float16"},
              {"quantization_config",
               {{"quant_method", "compressed-tensors"}, {"format", format}, {"ignore", {"lm_head"}}, {"config_groups", {{"group_0", group}}}}}};
}

// The run `base` with the weight format `config`'s quantization_config gives it.
memscale::inference_spec served(const json& config, memscale::inference_spec base) {
  const auto q = memscale::json_io::hf::quantization_of(config);
  REQUIRE(q.has_value());
  memscale::json_io::hf::apply_quantization(*q, base);
  return base;
}

// Workspace of `r`'s prefill and decoding peaks beyond the same run's over fp16 weights (the cuBLAS workspace).
std::pair<bytes, bytes> quantisation_workspace(const memscale::model_spec& m, const memscale::inference_spec& r) {
  memscale::inference_spec native = r;
  native.weights = memscale::weight_format::native;
  const auto q = memscale::estimate_inference(m, r);
  const auto n = memscale::estimate_inference(m, native);
  return {q.prefill.breakdown.workspace - n.prefill.breakdown.workspace, q.decode.breakdown.workspace - n.decode.breakdown.workspace};
}

}  // namespace

// Llama-2-7B, fp16, one sequence of 128 prompt tokens and 8 new ones: the widest linear input is
// down_proj's 11008 columns, the largest weight gate_proj's 11008 x 4096.
TEST_CASE("generate() over fine-grained FP8: act_quant's fp8 input copy and its block scales", "[quant][inference]") {
  const memscale::model_spec m = memscale::presets::llama_2_7b;
  const memscale::inference_spec fp16{.batch = 1, .context = 128, .new_tokens = 8};
  const auto r = served(json{{"quantization_config", {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}}}}, fp16);
  REQUIRE(r.weights == memscale::weight_format::fp8_block);
  // act_quant: float8 (rows, 11008) and fp32 (rows, 11008 / 128); the triton matmul writes the output.
  const auto [prefill, decode] = quantisation_workspace(m, r);
  CHECK(prefill == bytes{128ULL * 11008 + 4ULL * 128 * 86});
  CHECK(decode == bytes{11008ULL + 4ULL * 86});
  CHECK(memscale::to_string(r.weights) == "fp8-block");
  // An input width the blocks do not divide stops act_quant's assertion.
  memscale::inference_spec odd = r;
  odd.quant_scheme.block_in = 96;
  CHECK(contains(error_message([&] { (void)memscale::estimate_inference(m, odd); }), "weight_block_size[1]"));
  CHECK(contains(error_message([] {
                   (void)memscale::json_io::hf::quantization_of(json{{"quantization_config", {{"quant_method", "fp8"}, {"activation_scheme", "static"}}}});
                 }),
                 "config.quantization_config.activation_scheme"));
  CHECK(contains(error_message([] {
                   (void)memscale::json_io::hf::quantization_of(json{{"quantization_config", {{"quant_method", "fp8"}, {"weight_block_size", nullptr}}}});
                 }),
                 "per-tensor FP8"));
}

TEST_CASE("generate() over compressed-tensors: the kept dense weight and its per-call copies", "[quant][inference]") {
  const memscale::model_spec m = memscale::presets::llama_2_7b;
  const memscale::inference_spec fp16{.batch = 1, .context = 128, .new_tokens = 8};
  const bytes native = memscale::estimate_inference(m, fp16).weight_bytes;
  const bytes native_linears = llama_2_7b_block_linears([](std::uint64_t o, std::uint64_t i) { return memscale::storage(memscale::dtype::fp16, o * i); });
  constexpr std::uint64_t largest = 11008ULL * 4096;
  SECTION("FP8-dynamic (float-quantized, channel scales, dynamic fp8 inputs)") {
    const auto r = served(compressed_tensors_config("float-quantized",
                                                    {{"num_bits", 8}, {"type", "float"}, {"strategy", "channel"}, {"symmetric", true}},
                                                    {{"num_bits", 8}, {"type", "float"}, {"strategy", "token"}, {"dynamic", true}}),
                          fp16);
    REQUIRE(r.weights == memscale::weight_format::ct_float);
    // The dense weight replaces the float8 one; the fp16 channel scales stay.
    const bytes scales = llama_2_7b_block_linears([](std::uint64_t o, std::uint64_t) { return bytes{2 * o}; });
    CHECK(memscale::estimate_inference(m, r).weight_bytes == native + scales * 32U);
    const auto [prefill, decode] = quantisation_workspace(m, r);
    // First forward: the largest weight's fp16 cast and its float8 codes, beside the fake-quantised fp16 input.
    CHECK(prefill == bytes{3 * largest + 2ULL * 128 * 11008});
    // Later: the clone, x / scale, its clamp, the float8 codes and their fp16 copy.
    CHECK(decode == bytes{9 * largest + 2ULL * 11008});
  }
  SECTION("W4A16 (pack-quantized, group 128)") {
    const auto r = served(compressed_tensors_config("pack-quantized",
                                                    {{"num_bits", 4}, {"type", "int"}, {"strategy", "group"}, {"group_size", 128}, {"symmetric", true}},
                                                    nullptr),
                          fp16);
    REQUIRE(r.weights == memscale::weight_format::ct_int);
    // weight_packed and weight_shape beside the dense weight, fp16 group scales.
    const bytes stored = llama_2_7b_block_linears([](std::uint64_t o, std::uint64_t i) { return bytes{o * i / 2 + 8 + 2 * o * (i / 128)}; });
    CHECK(memscale::estimate_inference(m, r).weight_bytes == native + stored * 32U);
    CHECK(stored < native_linears);  // yet the layer holds more than an fp16 one
    const auto [prefill, decode] = quantisation_workspace(m, r);
    // First forward: unpack_from_int32's two int32 copies and the int8 codes; later: four fp16 copies.
    CHECK(prefill == bytes{9 * largest});
    CHECK(decode == bytes{8 * largest});
  }
  SECTION("schemes not modelled are refused naming the field") {
    const json block = compressed_tensors_config("float-quantized",
                                                 {{"num_bits", 8}, {"type", "float"}, {"strategy", "block"}, {"block_structure", {128, 128}}},
                                                 nullptr);
    CHECK(contains(error_message([&] { (void)served(block, fp16); }), "config.quantization_config.config_groups.*.weights.strategy"));
    memscale::inference_spec direct = fp16;
    direct.weights = memscale::weight_format::ct_float;
    direct.quant_scheme.scales = memscale::scale_granularity::block;
    CHECK(contains(error_message([&] { (void)memscale::estimate_inference(m, direct); }), "infer.quant_scheme.scales"));
    const json nvfp4 = compressed_tensors_config("nvfp4-pack-quantized", {{"num_bits", 4}, {"type", "float"}, {"strategy", "tensor_group"}}, nullptr);
    CHECK(contains(error_message([&] { (void)served(nvfp4, fp16); }), "config.quantization_config.config_groups.*.weights.strategy"));
  }
}

TEST_CASE("quantization_config: a bitsandbytes 4-bit checkpoint gives a QLoRA run its base's bytes", "[quant][qlora]") {
  const memscale::model_spec m = memscale::presets::llama_2_7b;
  const auto base_of = [](bool double_quant) {
    const auto q = memscale::json_io::hf::quantization_of(
        json{{"quantization_config", {{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}, {"bnb_4bit_use_double_quant", double_quant}}}});
    REQUIRE(q.has_value());
    const auto base = memscale::json_io::hf::qlora_base_of(*q);
    REQUIRE(base.has_value());
    return *base;
  };
  CHECK(base_of(false) == memscale::base_quant::nf4);
  CHECK(base_of(true) == memscale::base_quant::nf4_double_quant);
  CHECK_FALSE(memscale::json_io::hf::qlora_base_of(
                  *memscale::json_io::hf::quantization_of(json{{"quantization_config", {{"quant_method", "bitsandbytes"}, {"load_in_8bit", true}}}}))
                   .has_value());
  const auto parameter_bytes = [&m](memscale::training_target target, memscale::base_quant quant) {
    memscale::training_spec run{.micro_batch = 1, .seq_len = 128, .prec = memscale::precision::pure_bf16};
    run.target = target;
    run.lora_rank = 16;
    run.lora_targets = memscale::lora_all_linear;
    run.quant = quant;
    return memscale::estimate(m, run).parameter_bytes;
  };
  // Every block linear leaves bf16 for 4-bit codes and one absmax per 64 weights: fp32 (NF4), or
  // an int8 absmax with one fp32 constant per 256 blocks (double quantisation; QLoRA paper sec. 3).
  // The untied lm_head stays bf16: transformers' get_keys_to_not_convert keeps the output embedding.
  const bytes bf16_linears = llama_2_7b_block_linears([](std::uint64_t o, std::uint64_t i) { return memscale::storage(memscale::dtype::bf16, o * i); });
  const auto nf4_linears = [](bool double_quant) {
    return llama_2_7b_block_linears([double_quant](std::uint64_t o, std::uint64_t i) {
      const std::uint64_t blocks = o * i / 64;
      return bytes{o * i / 2} + (double_quant ? bytes{blocks + 4 * ((blocks + 255) / 256)} : bytes{4 * blocks});
    });
  };
  const bytes lora = parameter_bytes(memscale::training_target::lora, memscale::base_quant::nf4);
  CHECK(parameter_bytes(memscale::training_target::qlora, base_of(false)) == lora - bf16_linears * 32U + nf4_linears(false) * 32U);
  CHECK(parameter_bytes(memscale::training_target::qlora, base_of(true)) == lora - bf16_linears * 32U + nf4_linears(true) * 32U);
}

}  // namespace quantization_test
