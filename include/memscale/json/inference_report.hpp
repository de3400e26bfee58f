// memscale/json/inference_report.hpp: generate() as a run document ({"model", "infer", ...},
// docs/run-json.md) and the inference report as JSON, the one memscale-plan --inference --json
// and --run prints and the web calculator (web/) shows. Opt-in: not part of <memscale/json.hpp>.
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "memscale/gpus.hpp"
#include "memscale/inference.hpp"
#include "memscale/json/device_report.hpp"
#include "memscale/json/fields.hpp"
#include "memscale/json/inference.hpp"
#include "memscale/json/run_document.hpp"
#include "memscale/model.hpp"
#include "memscale/presets.hpp"
#include "memscale/validate.hpp"

namespace memscale::json_io {

// What an inference document describes. Fields the document leaves out keep their values here.
struct inference_input {
  model_spec model = presets::gpt2;
  json model_description;  // null for a preset, else the document's model object
  inference_spec spec{};
  std::string gpu;                     // a gpu_catalog name; empty: none (or custom_gpu)
  std::optional<gpu_spec> custom_gpu;  // a GPU described by its memory
  std::optional<double> headroom;
  std::string alloc_conf;  // PYTORCH_CUDA_ALLOC_CONF for the allocator replay; empty: defaults
  bytes context_memory{};  // a measured CUDA context + non-PyTorch memory; zero: modelled
};

inline std::optional<gpu_spec> gpu_of(const inference_input& in) {
  if (in.custom_gpu) return in.custom_gpu;
  if (!in.gpu.empty()) return find_gpu(in.gpu);
  return std::nullopt;
}

namespace detail {

inline constexpr std::array<std::string_view, 8> inference_document_fields{
    "model", "infer", "gpu", "headroom", "alloc_conf", "context_memory", "software", "framework"};

// "framework": "hf" (transformers' generate(), the default) or "gpt-fast" (its generate.py, whose
// KVCache is static: model.py setup_caches @ 32971d31), as a name or {"name"}.
inline void read_inference_framework(const json& f, inference_spec& spec) {
  std::string name;
  if (f.is_string()) {
    name = f.get<std::string>();
  } else if (f.is_object()) {
    for (const auto& item : f.items())
      if (item.key() != "name")
        throw error(bad_run, field_name("framework", item.key()) +
                                 " is not a field of framework for generate() (name; transformers' release is "
                                 "software.transformers)");
    name = get_string(f, "name", "framework", "", bad_run);
  } else {
    bad_field(bad_run, "framework", f, "must be \"hf\" or \"gpt-fast\"");
  }
  if (name == "hf") return;
  if (name != "gpt-fast")
    bad_field(error_code::unsupported, "framework", json(name),
              "must be hf or gpt-fast for generate(): the training frameworks' generation is not modelled");
  if (spec.cache != kv_cache_kind::dynamic && spec.cache != kv_cache_kind::static_preallocated)
    bad_field(bad_run, "infer.kv_cache", json(std::string(to_string(spec.cache))),
              "does not apply to framework gpt-fast: its cache is static");
  spec.cache = kv_cache_kind::static_preallocated;
  spec.loop = generate_loop::gpt_fast;
}

// The "infer" object with memscale-plan --inference's defaults (--batch's, context 512, 128 new
// tokens, attention flash, a quantized cache in int4), read by the records' reader.
inline inference_spec infer_object(const json& t) {
  require_known_keys(t, infer_fields, "infer");
  const inference_spec defaults{};
  json with_defaults = t;
  if (!t.contains("batch")) with_defaults["batch"] = default_run().micro_batch;
  if (!t.contains("context")) with_defaults["context"] = defaults.context;
  if (!t.contains("new_tokens")) with_defaults["new_tokens"] = defaults.new_tokens;
  if (!t.contains("attention")) with_defaults["attention"] = std::string(to_string(default_run().attention));
  if (!t.contains("kv_dtype") && t.contains("kv_cache") && t.at("kv_cache") == "quantized")
    with_defaults["kv_dtype"] = "int" + std::to_string(defaults.kv_bits);
  inference_spec spec = inference_from_record(json{{"infer", with_defaults}});
  // The records' reader fills a static cache's length in; left out it is context + new_tokens.
  spec.max_cache_len = get_count(t, "max_cache_len", "infer", 0, bad_run);
  return spec;
}

}  // namespace detail

// Reads the inference document `doc` ({"model", "infer"} and optionally "gpu", "headroom",
// "alloc_conf", "context_memory", "software", "framework"; docs/run-json.md) into `out`, which
// changes only when the whole document is valid. Errors name the field.
inline void read_inference_document(const json& doc, inference_input& out) {
  if (!is_inference_document(doc))
    bad_field(detail::bad_run, "infer", json(), "is missing: an inference document describes generate() with it");
  detail::require_known_keys(doc, detail::inference_document_fields, "");
  if (!doc.contains("model")) bad_field(error_code::invalid_model, "model", json(), "is missing");
  inference_input in = out;
  run_input device;  // the readers of the GPU and the allocator fields are the training document's
  device.gpu = in.gpu;
  device.custom_gpu = in.custom_gpu;
  device.headroom = in.headroom;
  device.alloc_conf = in.alloc_conf;
  device.context_memory = in.context_memory;
  in.model = validate(detail::model_of(doc.at("model"), device));
  in.model_description = device.model_description;
  inference_spec spec = detail::infer_object(doc.at("infer"));
  // A document that states no stack runs the current releases (a record keeps its own).
  spec.transformers_version = current_transformers_release;
  spec.torch_version = current_torch_release;
  if (doc.contains("framework") && !doc.at("framework").is_null())
    detail::read_inference_framework(doc.at("framework"), spec);
  if (doc.contains("software")) {
    const json& sw = doc.at("software");
    if (!sw.is_object()) bad_field(detail::bad_run, "software", sw, "must be an object of version strings");
    for (const auto& item : sw.items()) {
      const std::string field = "software." + item.key();
      if (!item.value().is_string()) bad_field(detail::bad_run, field, item.value(), "must be a version string like \"2.5\"");
      set_inference_software(spec, item.key(), item.value().get<std::string>(), field);
    }
  }
  check_sequence(in.model, spec.context, spec.new_tokens, "infer.context + infer.new_tokens");
  in.spec = validate(spec);
  detail::read_device_fields(doc, device);
  in.gpu = std::move(device.gpu);
  in.custom_gpu = device.custom_gpu;
  in.headroom = device.headroom;
  in.alloc_conf = std::move(device.alloc_conf);
  in.context_memory = device.context_memory;
  out = std::move(in);
}

// What memscale-plan reports for a generate() call: with a GPU the plan (verdict, largest batch and
// context), on a CUDA device the caching allocator's replay, and the tensors' peaks.
struct inference_report {
  inference_spec spec;  // as estimated: on a GPU with its cuBLAS workspace
  std::optional<inference_plan> plan;
  std::optional<inference_device_estimate> device;
  inference_result result;
};

inline inference_report report_inference(const model_spec& model, inference_spec spec, const std::optional<gpu_spec>& gpu,
                                         std::optional<double> headroom, const std::string& alloc_conf,
                                         bytes context_memory) {
  inference_report r{.spec = spec, .plan = std::nullopt, .device = std::nullopt, .result = {}};
  if (gpu) {
    r.spec.blas_workspace = gpu->cublas_workspace;
    r.plan = plan_inference(model, r.spec, *gpu, plan_options{.headroom = headroom.value_or(default_headroom)},
                            device_options_of(alloc_conf, context_memory));
  }
  // On a CUDA device the caching allocator's figures: the plan's, or without a GPU with the flat context.
  if (r.plan)
    r.device = r.plan->device;
  else if (r.spec.device == device_kind::cuda)
    r.device = estimate_inference_on_device(model, r.spec, nullptr, device_options_of(alloc_conf, context_memory));
  r.result = r.device ? r.device->tensors : estimate_inference(model, r.spec);
  return r;
}

inline inference_report report_inference(const inference_input& in) {
  return report_inference(in.model, in.spec, gpu_of(in), in.headroom, in.alloc_conf, in.context_memory);
}

// The "inference" object of the report: the call as estimated.
inline json inference_spec_json(const inference_spec& s) {
  const bool quantized = s.cache == kv_cache_kind::quantized;
  json j{{"batch", s.batch},
         {"context", s.context},
         {"new_tokens", s.new_tokens},
         {"dtype", std::string(to_string(s.compute))},
         {"weights", std::string(to_string(s.weights))},
         {"kv_dtype", quantized ? "int" + std::to_string(s.kv_bits) : std::string(to_string(s.kv))},
         {"kv_cache", std::string(to_string(s.cache))},
         {"attention", s.flash_attention_2 ? std::string("flash_attention_2") : std::string(to_string(s.attention))}};
  if (s.loop == generate_loop::gpt_fast) j["loop"] = std::string(to_string(s.loop));
  if (s.weights == weight_format::gptfast_int4) j["group_size"] = s.group_size;  // the layers' groupsize
  if (s.padded) j["padded"] = true;
  if (quantized) {
    j["kv_quant_backend"] = std::string(to_string(s.kv_backend));
    j["kv_group_size"] = s.kv_group;
    j["kv_residual_length"] = s.kv_residual;
  }
  return j;
}

// The report memscale-plan --inference --json prints: the estimate's figures, "model",
// "inference" (with its "software"), with a plan "plan", on a CUDA device "allocator".
inline json inference_report_json(const model_spec& model, const inference_spec& spec, const inference_result& result,
                                  const inference_device_estimate* device, const inference_plan* plan,
                                  const std::string& alloc_conf) {
  json j = inference_to_json(result);
  j["model"] = std::string(model.name);
  j["inference"] = inference_spec_json(spec);
  j["inference"]["software"] = inference_software_json(model, spec);
  if (plan != nullptr) {
    j["plan"] = {{"fits", plan->fits},           {"verdict", std::string(to_string(plan->verdict.v))},
                 {"budget", plan->budget.value}, {"vram", plan->vram.value},
                 {"pressure", plan->pressure},   {"max_batch", plan->max_batch},
                 {"max_context", plan->max_context}};
  }
  if (device != nullptr) j["allocator"] = allocator_json(*device, alloc_conf, plan != nullptr ? &plan->verdict : nullptr);
  return j;
}

inline json inference_report_json(const model_spec& model, const inference_report& r, const std::string& alloc_conf) {
  return inference_report_json(model, r.spec, r.result, r.device ? &*r.device : nullptr, r.plan ? &*r.plan : nullptr,
                               alloc_conf);
}

}  // namespace memscale::json_io
