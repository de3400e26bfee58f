// memscale/json/hf/quantization.hpp: a config.json's quantization_config, as the stored
// format of its quantised linear layers (memscale/quant_format.hpp) and the layers that
// stay in 16 bits.
//
// Keys and defaults as transformers' quantization configs give them (utils/quantization_config.py
// @ 000e2231: GPTQConfig, AwqConfig, BitsAndBytesConfig, FineGrainedFP8Config,
// CompressedTensorsConfig, Mxfp4Config). Every format replaces nn.Linear modules only, so embeddings and norms stay
// in the model dtype, and the output layer too (transformers get_keys_to_not_convert keeps
// the output embedding for bitsandbytes; replace_with_fp8_linear adds "lm_head"; GPTQ and
// AWQ quantise the decoder blocks; compressed-tensors lists it in "ignore"; gpt-oss lists it
// in modules_to_not_convert); the config's own list adds more.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "memscale/dtype.hpp"
#include "memscale/error.hpp"
#include "memscale/inference/spec.hpp"
#include "memscale/json/fields.hpp"
#include "memscale/json/software_stack.hpp"
#include "memscale/quant_format.hpp"
#include "memscale/training.hpp"
#include "memscale/unquantized_modules.hpp"

namespace memscale::json_io::hf {

struct quantization {
  std::string method{};                     // quant_method as the config names it
  quant_format format{};                    // how a quantised linear stores its weight
  std::vector<std::string> not_converted{}; // modules_to_not_convert / llm_int8_skip_modules / ignore
  std::string not_converted_key = "modules_to_not_convert";  // the key that list came from
  module_match match = module_match::name_or_path;            // how transformers meets its entries with paths
  linear_names names{};                     // the family's names of its MLP matrices and router
  dtype compute = dtype::fp16;              // the dtype kernels dequantise to (bnb_4bit_compute_dtype)
  bool desc_act = false;                    // GPTQ act-order (g_idx permutes columns; same bytes)
  bool dequantize_at_load = false;          // mxfp4 dequantize=True: experts become bf16 at load
  bool experts_only = false;                // mxfp4: only the MoE experts are quantised
  std::uint32_t saved_by = 0;               // config.transformers_version (major * 100 + minor), 0: not stated
};

namespace detail {

inline const std::string qc = "config.quantization_config";

inline std::uint64_t qc_count(const json& q, const char* key, std::uint64_t fallback, const std::string& path = qc) {
  return get_count(q, key, path, fallback, error_code::invalid_model);
}

inline bool qc_flag(const json& q, const char* key, bool fallback, const std::string& path = qc) {
  return get_bool(q, key, path, fallback, error_code::invalid_model);
}

inline std::string qc_text(const json& q, const char* key, const std::string& fallback, const std::string& path = qc) {
  return get_string(q, key, path, fallback, error_code::invalid_model);
}

// A list of module names, or null/absent.
inline std::vector<std::string> qc_names(const json& q, const char* key, const std::string& path = qc) {
  std::vector<std::string> names;
  if (!q.contains(key) || q.at(key).is_null()) return names;
  const json& v = q.at(key);
  if (!v.is_array()) bad_field(error_code::invalid_model, path + "." + key, v, "must be a list of module names or null");
  for (const json& n : v) {
    if (!n.is_string()) bad_field(error_code::invalid_model, path + "." + key, n, "must hold module names (strings)");
    names.push_back(n.get<std::string>());
  }
  return names;
}

// GPTQ group_size: -1 is one group per row.
inline std::uint64_t group_size_of(const json& q, const char* key, std::uint64_t fallback, const std::string& path = qc) {
  if (q.contains(key) && q.at(key).is_number_integer() && q.at(key).get<std::int64_t>() == -1) return 0;
  const auto g = qc_count(q, key, fallback, path);
  if (g == 0) bad_field(error_code::invalid_model, path + "." + key, q.at(key), "must be > 0, or -1 for one group per row");
  return g;
}

// [rows, columns] of positive integers (weight_block_size, block_structure).
inline std::pair<std::uint64_t, std::uint64_t> positive_pair(const json& v, const std::string& field) {
  const auto positive = [](const json& x) { return x.is_number_integer() && x.get<std::int64_t>() > 0; };
  if (!v.is_array() || v.size() != 2 || !positive(v.at(0)) || !positive(v.at(1)))
    bad_field(error_code::invalid_model, field, v, "must be [rows, columns] of positive integers");
  return {v.at(0).get<std::uint64_t>(), v.at(1).get<std::uint64_t>()};
}

inline dtype torch_dtype_named(const std::string& s, const std::string& field) {
  if (s == "float16" || s == "torch.float16" || s == "fp16") return dtype::fp16;
  if (s == "bfloat16" || s == "torch.bfloat16" || s == "bf16") return dtype::bf16;
  if (s == "float32" || s == "torch.float32" || s == "fp32") return dtype::fp32;
  bad_field(error_code::invalid_model, field, s, "must be float16, bfloat16 or float32");
}

// GPTQConfig (transformers utils/quantization_config.py; the stored format is AutoGPTQ's).
inline quantization gptq(const json& q) {
  quantization r{.method = "gptq"};
  r.format = {.method = quant_method::gptq, .bits = qc_count(q, "bits", 4), .group_size = group_size_of(q, "group_size", 128)};
  if (r.format.bits != 2 && r.format.bits != 3 && r.format.bits != 4 && r.format.bits != 8)
    bad_field(error_code::invalid_model, qc + ".bits", q.at("bits"), "must be 2, 3, 4 or 8 for GPTQ");
  r.desc_act = qc_flag(q, "desc_act", false);
  (void)qc_flag(q, "sym", true);  // asymmetric or not, qzeros are stored
  std::string layout = qc_text(q, "checkpoint_format", "gptq");
  for (char& c : layout) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);  // GPTQConfig lowers it
  if (layout != "gptq" && layout != "gptq_v2")
    bad_field(error_code::unsupported, qc + ".checkpoint_format", layout, "is a GPTQ layout memscale does not model (gptq, gptq_v2)");
  r.not_converted = qc_names(q, "modules_to_not_convert");
  return r;
}

// AwqConfig: GEMM checkpoints (exllama and ipex versions load the same tensors).
inline quantization awq(const json& q) {
  quantization r{.method = "awq"};
  const std::uint64_t bits = q.contains("bits") ? qc_count(q, "bits", 4) : qc_count(q, "w_bit", 4);
  const std::uint64_t group = q.contains("group_size") ? group_size_of(q, "group_size", 128) : group_size_of(q, "q_group_size", 128);
  if (bits != 4) bad_field(error_code::unsupported, qc + ".bits", json(bits), "must be 4 (AutoAWQ's GEMM layout)");
  r.format = {.method = quant_method::awq, .bits = bits, .group_size = group, .zero_points = qc_flag(q, "zero_point", true), .g_idx = false};
  std::string version = qc_text(q, "version", "gemm");
  for (char& c : version) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (version != "gemm" && version != "exllama" && version != "ipex")
    bad_field(error_code::unsupported, qc + ".version", q.at("version"), "is an AWQ layout memscale does not model (gemm, exllama, ipex)");
  r.not_converted = qc_names(q, "modules_to_not_convert");
  r.match = module_match::substring;  // integrations/awq.py@027f76a8 replace_with_awq_linear
  return r;
}

// BitsAndBytesConfig: load_in_4bit (NF4/FP4, blocksize 64) or load_in_8bit (LLM.int8).
inline quantization bitsandbytes(const json& q) {
  quantization r{.method = "bitsandbytes"};
  const bool four = qc_flag(q, "load_in_4bit", false);
  const bool eight = qc_flag(q, "load_in_8bit", false);
  if (four == eight)
    bad_field(error_code::invalid_model, qc + ".load_in_4bit", q.value("load_in_4bit", json()),
              "must be true exactly when load_in_8bit is false");
  if (four) {
    const std::string type = qc_text(q, "bnb_4bit_quant_type", "fp4");  // BitsAndBytesConfig default "fp4"
    if (type != "nf4" && type != "fp4") bad_field(error_code::invalid_model, qc + ".bnb_4bit_quant_type", type, "must be nf4 or fp4");
    r.format = {.method = quant_method::bnb_4bit, .double_quant = qc_flag(q, "bnb_4bit_use_double_quant", false)};
    r.compute = torch_dtype_named(qc_text(q, "bnb_4bit_compute_dtype", "float32"), qc + ".bnb_4bit_compute_dtype");
  } else {
    r.format = {.method = quant_method::bnb_int8};
  }
  r.not_converted = qc_names(q, "llm_int8_skip_modules");
  r.not_converted_key = "llm_int8_skip_modules";
  return r;
}

// FineGrainedFP8Config: e4m3 weights, one fp32 scale per weight_block_size tile (128 x 128 default).
inline quantization fp8(const json& q) {
  quantization r{.method = "fp8"};
  std::uint64_t rows = 128;
  std::uint64_t cols = 128;
  if (q.contains("weight_block_size") && q.at("weight_block_size").is_null())
    bad_field(error_code::unsupported, qc + ".weight_block_size", q.at("weight_block_size"),
              "must be [rows, columns]: per-tensor FP8 (no weight blocks) is not modelled");
  if (q.contains("weight_block_size"))
    std::tie(rows, cols) = positive_pair(q.at("weight_block_size"), qc + ".weight_block_size");
  const std::string fmt = qc_text(q, "fmt", "e4m3");
  if (fmt != "e4m3") bad_field(error_code::unsupported, qc + ".fmt", fmt, "must be e4m3 (the format transformers loads)");
  // FineGrainedFP8Config.post_init (quantization_config.py @ 000e2231) takes "dynamic" only:
  // FP8Linear quantises every input with act_quant.
  std::string scheme = qc_text(q, "activation_scheme", "dynamic");
  for (char& c : scheme) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (scheme != "dynamic")
    bad_field(error_code::unsupported, qc + ".activation_scheme", scheme, "must be dynamic (static input scales are not modelled)");
  r.format = {.method = quant_method::fp8_block, .block_out = rows, .block_in = cols};
  r.not_converted = qc_names(q, "modules_to_not_convert");
  return r;
}

inline scale_granularity strategy_named(const std::string& s, const std::string& field) {
  if (s == "tensor") return scale_granularity::tensor;
  if (s == "channel") return scale_granularity::channel;
  if (s == "group") return scale_granularity::group;
  if (s == "block") return scale_granularity::block;
  bad_field(error_code::unsupported, field, s, "must be tensor, channel, group or block");
}

// CompressedTensorsConfig: one weight scheme for all config_groups; float-quantized (fp8)
// and pack-quantized (int) formats.
inline quantization compressed_tensors(const json& q, dtype model_dtype) {
  quantization r{.method = "compressed-tensors"};
  if (!q.contains("config_groups") || !q.at("config_groups").is_object() || q.at("config_groups").empty())
    bad_field(error_code::invalid_model, qc + ".config_groups", q.value("config_groups", json()), "must be a non-empty object");
  const json* weights = nullptr;
  const json* inputs = nullptr;
  std::string group_format;
  for (const auto& g : q.at("config_groups").items()) {
    const std::string path = qc + ".config_groups." + g.key();
    const json& group = g.value();
    if (!group.is_object()) bad_field(error_code::invalid_model, path, group, "must be an object");
    if (!group.contains("weights") || !group.at("weights").is_object())
      bad_field(error_code::unsupported, path + ".weights", group.value("weights", json()), "must describe the weight quantisation");
    const json& w = group.at("weights");
    if (weights != nullptr && w != *weights)
      bad_field(error_code::unsupported, path + ".weights", w, "differs from another group's; mixed schemes are not modelled");
    weights = &w;
    const bool quantised_inputs = group.contains("input_activations") && group.at("input_activations").is_object();
    inputs = quantised_inputs ? &group.at("input_activations") : nullptr;
    group_format = qc_text(group, "format", "", path);
  }
  const std::string format = qc_text(q, "format", group_format);
  const std::string wpath = qc + ".config_groups.*.weights";
  const std::string type = qc_text(*weights, "type", "int", wpath);
  quant_format f{};
  f.bits = qc_count(*weights, "num_bits", 8, wpath);
  if (f.bits == 0 || f.bits > 8) bad_field(error_code::unsupported, wpath + ".num_bits", weights->at("num_bits"), "must be 1 to 8");
  f.scales = strategy_named(qc_text(*weights, "strategy", "tensor", wpath), wpath + ".strategy");
  f.group_size = f.scales == scale_granularity::group ? group_size_of(*weights, "group_size", 128, wpath) : 128;
  f.zero_points = !qc_flag(*weights, "symmetric", true, wpath);
  f.g_idx = qc_text(*weights, "actorder", "", wpath) == "group";
  if (f.scales == scale_granularity::block)
    std::tie(f.block_out, f.block_in) = positive_pair(weights->value("block_structure", json()), wpath + ".block_structure");
  f.scale_type = model_dtype;
  f.input_scale = inputs != nullptr && !qc_flag(*inputs, "dynamic", false, qc + ".config_groups.*.input_activations");
  f.quantized_inputs = inputs != nullptr;
  if (format == "float-quantized" && type == "float" && f.bits == 8) {
    f.method = quant_method::ct_float;
  } else if (format == "pack-quantized" && type == "int") {
    f.method = quant_method::ct_int;
  } else {
    bad_field(error_code::unsupported, qc + ".format", format + " (" + type + ", " + std::to_string(f.bits) + " bits)",
              "is a compressed-tensors format memscale does not model (float-quantized fp8, pack-quantized int)");
  }
  r.format = f;
  r.compute = model_dtype;
  r.not_converted = qc_names(q, "ignore");
  r.not_converted_key = "ignore";
  return r;
}

// Mxfp4Config (gpt-oss): the MoE experts' weights in MXFP4, the rest in bf16.
inline quantization mxfp4(const json& q) {
  quantization r{.method = "mxfp4"};
  r.format = {.method = quant_method::mxfp4};
  r.compute = dtype::bf16;
  r.dequantize_at_load = qc_flag(q, "dequantize", false);
  r.experts_only = true;
  r.not_converted = qc_names(q, "modules_to_not_convert");
  return r;
}

}  // namespace detail

// The quantization_config of a config.json object, or nullopt when it has none. An unknown
// quant_method is an error naming it (never an fp16 estimate of a quantised checkpoint).
inline std::optional<quantization> quantization_of(const json& config) {
  if (!config.is_object() || !config.contains("quantization_config") || config.at("quantization_config").is_null())
    return std::nullopt;
  const json& q = config.at("quantization_config");
  if (!q.is_object()) bad_field(error_code::invalid_model, detail::qc, q, "must be an object");
  std::string method = detail::qc_text(q, "quant_method", "");
  // Old bitsandbytes configs name no method: transformers reads load_in_4bit / load_in_8bit.
  if (method.empty() && (q.contains("load_in_4bit") || q.contains("load_in_8bit"))) method = "bitsandbytes";
  std::optional<quantization> r;
  if (method == "gptq") r = detail::gptq(q);
  else if (method == "awq") r = detail::awq(q);
  else if (method == "bitsandbytes" || method == "bitsandbytes_4bit" || method == "bitsandbytes_8bit") r = detail::bitsandbytes(q);
  else if (method == "fp8") r = detail::fp8(q);
  else if (method == "compressed-tensors") {
    const std::string dt = get_string(config, "torch_dtype", "config", get_string(config, "dtype", "config", "bfloat16", error_code::invalid_model),
                                      error_code::invalid_model);
    r = detail::compressed_tensors(q, detail::torch_dtype_named(dt, "config.torch_dtype"));
  } else if (method == "mxfp4") r = detail::mxfp4(q);
  else
    bad_field(error_code::unsupported, detail::qc + ".quant_method", q.value("quant_method", json()),
              "is not a format memscale models (gptq, awq, bitsandbytes, fp8, compressed-tensors, mxfp4)");
  memscale::detail::check_format(r->format);
  // save_pretrained writes the release that stored the weights (inference_spec::saved_by_transformers).
  const std::string saved_by = get_string(config, "transformers_version", "config", "", error_code::invalid_model);
  if (!saved_by.empty()) {
    const auto v = json_io::detail::parse_version(saved_by, "config.transformers_version");
    r->saved_by = v.major * 100 + v.minor;
  }
  const std::string type = get_string(config, "model_type", "config", "", error_code::invalid_model);
  if (type == "mixtral" || type == "phimoe") r->names = {.gate = "w1", .up = "w3", .down = "w2", .router = "gate"};
  if (type == "gpt_oss") r->names.router = "router";
  return r;
}

// The linears `q` keeps in 16 bits in `model` (unquantized_modules.hpp); an entry memscale
// cannot place is an error naming it.
inline unquantized_modules unquantized_of(const quantization& q, const model_spec& model) {
  unquantized_modules kept{};
  const std::string field = detail::qc + "." + q.not_converted_key;
  for (const std::string& entry : q.not_converted) {
    if (entry.starts_with("re:"))
      bad_field(error_code::unsupported, field, entry, "is a regular expression, which memscale does not match against modules");
    // GPTQConfig has no such list: optimum's GPTQQuantizer picks the blocks' layers by
    // modules_in_block_to_quantize (utils/quantization_config.py@000e2231 GPTQConfig).
    if (q.format.method == quant_method::gptq && entry != "lm_head")
      bad_field(error_code::unsupported, field, entry,
                "is not read by a GPTQ load (optimum selects the quantised layers by modules_in_block_to_quantize): not modelled");
    add_unquantized_module(kept, entry, model, q.names, q.match, field);
  }
  return kept;
}

// The inference estimate's weight format for `q` (inference/spec.hpp): 4-bit GPTQ and AWQ,
// bitsandbytes NF4/FP4, LLM.int8, MXFP4 experts, fine-grained FP8 and compressed-tensors
// (float-quantized fp8, pack-quantized int), whose scheme travels in spec.quant_scheme.
inline void apply_quantization(const quantization& q, inference_spec& spec) {
  spec.prequantized = true;  // the config's quantization_config: from_pretrained's pre_quantized
  spec.saved_by_transformers = q.saved_by;
  switch (q.format.method) {
    case quant_method::gptq:
    case quant_method::awq:
      if (q.format.bits != 4 || q.format.group_size == 0)
        bad_field(error_code::unsupported, detail::qc + ".bits", std::to_string(q.format.bits) + " bits, group " + std::to_string(q.format.group_size),
                  "the inference estimate models 4-bit GPTQ/AWQ with groups");
      spec.weights = q.format.method == quant_method::gptq ? weight_format::gptq_4bit : weight_format::awq_4bit;
      spec.group_size = q.format.group_size;
      return;
    case quant_method::bnb_4bit:
      spec.weights = weight_format::bnb_nf4;  // NF4 and FP4 store the same bytes
      spec.quant_block = q.format.bnb_block;
      spec.double_quant = q.format.double_quant;
      return;
    case quant_method::bnb_int8: spec.weights = weight_format::bnb_int8; return;
    case quant_method::mxfp4:
      // Mxfp4Config: the experts in MXFP4, the rest in bf16; dequantize=True loads them as bf16
      // (integrations/mxfp4.py@0189b1d0 dequantize_convertops), an unquantised bf16 model.
      spec.weights = q.dequantize_at_load ? weight_format::native : weight_format::mxfp4;
      spec.compute = q.compute;
      return;
    case quant_method::fp8_block:
      spec.weights = weight_format::fp8_block;
      spec.quant_scheme = q.format;
      return;
    case quant_method::ct_float:
    case quant_method::ct_int:
      // Block-scaled weights: their decompression and fake-quantisation copies are not read here.
      if (q.format.scales == scale_granularity::block)
        bad_field(error_code::unsupported, detail::qc + ".config_groups.*.weights.strategy", "block",
                  "is not modelled for generate() (tensor, channel and group scales are)");
      spec.weights = q.format.method == quant_method::ct_float ? weight_format::ct_float : weight_format::ct_int;
      spec.quant_scheme = q.format;
      return;
    case quant_method::none: break;
  }
  bad_field(error_code::unsupported, detail::qc + ".quant_method", q.method, "has no inference weight format in memscale");
}

// What the checkpoint keeps in 16 bits, on the inference estimate: the tower only with its
// projector (memscale counts them together, graph/layers/idle_tower.hpp).
inline void apply_unquantized(const unquantized_modules& kept, inference_spec& spec) {
  if (kept.vision_tower != kept.vision_projector)
    bad_field(error_code::unsupported, detail::qc + ".modules_to_not_convert",
              kept.vision_tower ? "the vision tower without multi_modal_projector" : "multi_modal_projector without the vision tower",
              "must keep the vision tower and its projector both, which memscale counts together");
  spec.unquantized = kept.roles;
  spec.unquantized_tower = kept.vision_tower;
}

// The QLoRA base a pre-quantised bitsandbytes 4-bit checkpoint gives a LoRA run
// (training.hpp base_quant: NF4 and FP4 store the same bytes); nullopt for other formats.
inline std::optional<base_quant> qlora_base_of(const quantization& q) {
  if (q.format.method != quant_method::bnb_4bit) return std::nullopt;
  return q.format.double_quant ? base_quant::nf4_double_quant : base_quant::nf4;
}

}  // namespace memscale::json_io::hf
