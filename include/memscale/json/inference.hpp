// memscale/json/inference.hpp: inference records (the "infer" object of
// shared/ground-truth/SCHEMA.md) and inference estimates as JSON.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <nlohmann/json.hpp>
#include <string>

#include "memscale/gpus.hpp"
#include "memscale/inference.hpp"
#include "memscale/json/fields.hpp"
#include "memscale/json/software_stack.hpp"

namespace memscale::json_io {

inline dtype parse_dtype(const std::string& s, const std::string& field) {
  if (s == "fp32" || s == "float32") return dtype::fp32;
  if (s == "fp16" || s == "float16") return dtype::fp16;
  if (s == "bf16" || s == "bfloat16") return dtype::bf16;
  if (s == "fp8" || s == "fp8_e4m3") return dtype::fp8_e4m3;
  if (s == "fp8_e5m2") return dtype::fp8_e5m2;
  if (s == "int8") return dtype::int8;
  bad_field(error_code::invalid_run, field, s, "must be one of fp32, fp16, bf16, fp8, fp8_e5m2, int8");
}

// "fp16" / "bf16" / "fp32" mean unquantised weights in that dtype (returned in `native`).
inline weight_format parse_weight_format(const std::string& s, const std::string& field, dtype& native) {
  if (s == "fp32" || s == "fp16" || s == "bf16") {
    native = parse_dtype(s, field);
    return weight_format::native;
  }
  if (s == "bnb-int8" || s == "int8") return weight_format::bnb_int8;
  if (s == "bnb-nf4" || s == "nf4") return weight_format::bnb_nf4;
  if (s == "bnb-fp4" || s == "fp4") return weight_format::bnb_fp4;
  if (s == "gptq-4bit" || s == "gptq") return weight_format::gptq_4bit;
  if (s == "awq-4bit" || s == "awq") return weight_format::awq_4bit;
  if (s == "mxfp4") return weight_format::mxfp4;
  if (s == "fp8-block") return weight_format::fp8_block;  // FineGrainedFP8Config's 128 x 128 blocks
  // gpt-fast's model dtype: generate.py@32971d31 main, precision = torch.bfloat16.
  if (s == "gptfast-int8" || s == "gptfast-int4") {
    native = dtype::bf16;
    return s == "gptfast-int8" ? weight_format::gptfast_int8 : weight_format::gptfast_int4;
  }
  bad_field(error_code::invalid_run, field, s,
            "must be one of fp32, fp16, bf16, bnb-int8, bnb-nf4, bnb-fp4, gptq-4bit, awq-4bit, mxfp4, fp8-block, "
            "gptfast-int8, gptfast-int4 (compressed-tensors weights come from a config's quantization_config)");
}

inline kv_cache_kind parse_kv_cache(const std::string& s, const std::string& field) {
  if (s == "dynamic") return kv_cache_kind::dynamic;
  if (s == "static") return kv_cache_kind::static_preallocated;
  if (s == "sliding" || s == "sliding_window") return kv_cache_kind::sliding_window;
  if (s == "quantized") return kv_cache_kind::quantized;
  bad_field(error_code::invalid_run, field, s, "must be one of dynamic, static, sliding_window, quantized");
}

inline kv_quant_backend parse_kv_quant_backend(const std::string& s, const std::string& field) {
  if (s == "quanto") return kv_quant_backend::quanto;
  if (s == "hqq" || s == "HQQ") return kv_quant_backend::hqq;
  bad_field(error_code::invalid_run, field, s, "must be quanto or hqq");
}

// A quantized cache's kv_dtype names its packed width (QuantizedCacheConfig.nbits): int2, int4 or
// int8; the stored window and the dequantised copies stay in the compute dtype.
inline std::uint32_t parse_kv_bits(const std::string& s, const std::string& field) {
  if (s == "int2") return 2;
  if (s == "int4") return 4;
  if (s == "int8") return 8;
  bad_field(error_code::invalid_run, field, s, "must be int2, int4 or int8 with kv_cache quantized");
}

// Whether a record ran gpt-fast's generate(): its model says "impl": "gpt-fast".
inline bool gpt_fast_record(const json& record) {
  return record.contains("model") && record.at("model").is_object() &&
         record.at("model").value("impl", std::string()) == "gpt-fast";
}

// One package of the software stack for generate(): torch (which SDPA kernel, lazy module
// loading), transformers (the logits it keeps, tuple caches before the family's Cache
// support), cuda (lazy loading). `field` names it in errors.
inline void set_inference_software(inference_spec& r, std::string_view key, const std::string& value,
                                   const std::string& field) {
  const detail::version_parts v = detail::parse_version(value, field);
  if (set_torch_transformers_cuda(r, key, v)) return;
  if (key == "bitsandbytes") {
    throw error(error_code::unsupported, field + " does not change generate()'s estimate: its 4-bit and 8-bit "
                                                 "weights are modelled at one release; leave it out");
  } else {
    throw error(error_code::invalid_run, field + " is not a known package: expected torch, transformers or cuda");
  }
}

// `--stack torch=2.5,transformers=4.32` for --inference.
inline void read_inference_stack(std::string_view text, inference_spec& r, const std::string& option) {
  for_each_stack_item(text, option, "torch, transformers, cuda",
                      [&](const std::string& key, const std::string& version, const std::string& field) {
                        set_inference_software(r, key, version, field);
                      });
}

// "torch 2.5, transformers 4.45, CUDA modules loaded lazily; generate() holds the previous
// step's cache tuples" (the last part only when it does).
inline std::string inference_software_text(const model_spec& m, const inference_spec& r) {
  std::string out = "torch " + release_text(r.torch_version) + ", transformers " +
                    release_text(r.transformers_version) + ", " + cuda_text(r.cuda_version, r.cuda_lazy_loading);
  if (on_current_releases(r.torch_version, r.transformers_version)) out += current_releases_text;
  if (keeps_tuple_cache(m, r))
    out += "; the model returns tuple caches (before transformers " + release_text(m.generate_tuple_cache_before) +
           "): generate() holds the previous step's while the next is built";
  return out;
}

// {"torch", "transformers", "cuda_lazy_loading", "tuple_cache"}, "cuda" when stated and, on the
// current releases, "assumed": the stack a generate() estimate assumed.
inline json inference_software_json(const model_spec& m, const inference_spec& r) {
  json j = {{"torch", release_text(r.torch_version)},
            {"transformers", release_text(r.transformers_version)},
            {"cuda_lazy_loading", r.cuda_lazy_loading},
            {"tuple_cache", keeps_tuple_cache(m, r)}};
  if (r.cuda_version != 0) j["cuda"] = release_text(r.cuda_version);
  if (on_current_releases(r.torch_version, r.transformers_version)) j["assumed"] = current_releases_json;
  return j;
}

// "4.44.2" -> 444.
inline std::uint32_t parse_major_minor(const json& v, const std::string& field) {
  if (!v.is_string()) bad_field(error_code::invalid_run, field, v, "must be a version string like \"4.44.2\"");
  const std::string s = v.get<std::string>();
  std::uint32_t major = 0;
  std::uint32_t minor = 0;
  std::size_t i = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9' && major < 100; ++i) major = major * 10 + static_cast<std::uint32_t>(s[i] - '0');
  std::size_t j = i + 1;
  for (; i < s.size() && s[i] == '.' && j < s.size() && s[j] >= '0' && s[j] <= '9' && minor < 100; ++j)
    minor = minor * 10 + static_cast<std::uint32_t>(s[j] - '0');
  if (i == 0 || j == i + 1 || minor >= 100) bad_field(error_code::invalid_run, field, v, "must be a version string like \"4.44.2\"");
  return major * 100 + minor;
}

// The fields of an "infer" object (a record's, a run document's).
inline constexpr std::array<std::string_view, 19> infer_fields{
    "batch",          "context",        "new_tokens",   "dtype",        "kv_dtype",         "kv_cache",
    "attention",      "weights",        "max_cache_len", "sliding_window", "group_size",     "double_quant",
    "kv_lora_rank",   "qk_rope_head_dim", "quant_block", "kv_quant_backend", "kv_group_size", "kv_residual_length",
    "padded"};

// An inference run from a record's "infer" object (and its device and software).
inline inference_spec inference_from_record(const json& record) {
  const std::string path = "infer";
  constexpr auto bad = error_code::invalid_run;
  const json& t = record.at("infer");
  reject_misspelt_keys(t, infer_fields, path, bad);
  inference_spec r{};
  r.batch = get_count(t, "batch", path, 1, bad);
  r.context = get_count(t, "context", path, 0, bad);
  r.new_tokens = get_count(t, "new_tokens", path, 1, bad);
  dtype native = dtype::fp16;
  r.weights = parse_weight_format(get_string(t, "weights", path, "fp16", bad), path + ".weights", native);
  r.compute = parse_dtype(get_string(t, "dtype", path, std::string(to_string(native)), bad), path + ".dtype");
  r.cache = parse_kv_cache(get_string(t, "kv_cache", path, "dynamic", bad), path + ".kv_cache");
  const std::string kv_dtype = get_string(t, "kv_dtype", path, std::string(to_string(r.compute)), bad);
  if (r.cache == kv_cache_kind::quantized) {
    r.kv = r.compute;
    r.kv_bits = parse_kv_bits(kv_dtype, path + ".kv_dtype");
    r.kv_backend = parse_kv_quant_backend(get_string(t, "kv_quant_backend", path, "quanto", bad),
                                          path + ".kv_quant_backend");
    r.kv_group = get_count(t, "kv_group_size", path, r.kv_group, bad);
    r.kv_residual = get_count(t, "kv_residual_length", path, r.kv_residual, bad);
  } else {
    for (const char* key : {"kv_quant_backend", "kv_group_size", "kv_residual_length"})
      if (t.contains(key))
        bad_field(bad, path + "." + key, t.at(key), "applies to kv_cache quantized only");
    r.kv = parse_dtype(kv_dtype, path + ".kv_dtype");
  }
  if (gpt_fast_record(record)) r.loop = generate_loop::gpt_fast;
  const std::string attention = get_string(t, "attention", path, "sdpa", bad);
  r.attention = parse_attention(attention, path + ".attention");
  r.flash_attention_2 = names_flash_attention_2(attention);
  r.max_cache_len = get_count(t, "max_cache_len", path, 0, bad);
  r.sliding_window = get_count(t, "sliding_window", path, 0, bad);
  r.group_size = get_count(t, "group_size", path, 128, bad);
  r.quant_block = get_count(t, "quant_block", path, 64, bad);
  r.double_quant = get_bool(t, "double_quant", path, false, bad);
  r.padded = get_bool(t, "padded", path, false, bad);
  r.kv_lora_rank = get_count(t, "kv_lora_rank", path, 0, bad);
  r.qk_rope_head_dim = get_count(t, "qk_rope_head_dim", path, 0, bad);
  r.device = record.value("device", std::string("cuda")) == "cpu" ? device_kind::cpu : device_kind::cuda;
  // The record's GPU, when the table knows it, sets the BLAS workspace (32 MiB on Hopper: the
  // 33,554,432-byte block the H100 histories allocate at the first matmul and keep).
  if (const auto gpu = find_gpu(record.value("device", std::string()));
      gpu && r.device == device_kind::cuda)
    r.blas_workspace = gpu->cublas_workspace;
  if (record.contains("software") && record.at("software").is_object()) {
    const json& sw = record.at("software");
    if (sw.contains("transformers") && !sw.at("transformers").is_null())
      r.transformers_version = parse_major_minor(sw.at("transformers"), "software.transformers");
    // CUDA_MODULE_LOADING=LAZY is PyTorch's default from 1.13 with CUDA >= 11.7.
    if (sw.contains("torch") && !sw.at("torch").is_null()) {
      r.torch_version = parse_major_minor(sw.at("torch"), "software.torch");
      if (r.torch_version < 113) r.cuda_lazy_loading = false;
    }
  }
  return validate(r);
}

inline json inference_breakdown_to_json(const inference_breakdown& b) {
  return {{"weights", b.weights.value},   {"kv_cache", b.kv_cache.value}, {"activations", b.activations.value},
          {"logits", b.logits.value},     {"workspace", b.workspace.value}, {"total", b.total().value}};
}

inline json inference_peak_to_json(const inference_peak& p) {
  return {{"tensor", p.tensor.value},
          {"reserved", p.reserved.value},
          {"device", p.device.value},
          {"at", std::string(to_string(p.at))},
          {"breakdown", inference_breakdown_to_json(p.breakdown)}};
}

inline json inference_to_json(const inference_result& r) {
  return {{"parameter_count", r.parameter_count},
          {"weight_bytes", r.weight_bytes.value},
          {"kv_bytes_per_token", r.kv_bytes_per_token.value},
          {"kv_cache_bytes", r.kv_cache_bytes.value},
          {"prefill", inference_peak_to_json(r.prefill)},
          {"decode", inference_peak_to_json(r.decode)},
          {"peak", inference_peak_to_json(r.peak)}};
}

}  // namespace memscale::json_io
