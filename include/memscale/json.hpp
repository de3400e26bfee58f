// memscale/json.hpp: opt-in nlohmann_json adapter (target memscale::json).
//
// Reads model and run descriptions (memscale's own keys, or ground-truth records as in
// shared/ground-truth/SCHEMA.md) and writes estimates. Unknown keys and unknown enum
// strings are errors that name the field and the value: nlohmann's own enum macro would
// silently map them to the first enumerator.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "memscale/estimate.hpp"
#include "memscale/model.hpp"
#include "memscale/presets.hpp"
#include "memscale/training.hpp"

namespace memscale::json_io {

using json = nlohmann::json;

[[noreturn]] inline void bad_field(error_code code, const std::string& field, const json& value,
                                   std::string_view requirement) {
  throw error(code, field + " " + std::string(requirement) + " (got " + value.dump() + ")");
}

inline std::uint64_t get_count(const json& obj, const char* key, const std::string& path, std::uint64_t fallback,
                               error_code code) {
  if (!obj.contains(key) || obj.at(key).is_null()) return fallback;
  const json& v = obj.at(key);
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0)
    bad_field(code, path + "." + key, v, "must be a non-negative integer");
  return v.get<std::uint64_t>();
}

inline std::string get_string(const json& obj, const char* key, const std::string& path, const std::string& fallback,
                              error_code code) {
  if (!obj.contains(key) || obj.at(key).is_null()) return fallback;
  const json& v = obj.at(key);
  if (!v.is_string()) bad_field(code, path + "." + key, v, "must be a string");
  return v.get<std::string>();
}

inline bool get_bool(const json& obj, const char* key, const std::string& path, bool fallback, error_code code) {
  if (!obj.contains(key) || obj.at(key).is_null()) return fallback;
  const json& v = obj.at(key);
  if (!v.is_boolean()) bad_field(code, path + "." + key, v, "must be true or false");
  return v.get<bool>();
}

inline precision parse_precision(const std::string& s, const std::string& field) {
  if (s == "fp32") return precision::fp32;
  if (s == "amp_fp16") return precision::amp_fp16;
  if (s == "amp_bf16") return precision::amp_bf16;
  if (s == "pure_bf16" || s == "bf16") return precision::pure_bf16;
  if (s == "pure_fp16" || s == "fp16") return precision::pure_fp16;
  bad_field(error_code::invalid_run, field, s, "must be one of fp32, amp_fp16, amp_bf16, pure_bf16, pure_fp16");
}

inline optimizer_kind parse_optimizer(const std::string& s, const std::string& field) {
  if (s == "sgd") return optimizer_kind::sgd;
  if (s == "sgd_momentum") return optimizer_kind::sgd_momentum;
  if (s == "adam") return optimizer_kind::adam;
  if (s == "adamw") return optimizer_kind::adamw;
  if (s == "adamw_8bit" || s == "adam8bit" || s == "adamw8bit") return optimizer_kind::adamw_8bit;
  if (s == "adafactor") return optimizer_kind::adafactor;
  if (s == "lion") return optimizer_kind::lion;
  bad_field(error_code::invalid_run, field, s,
            "must be one of sgd, sgd_momentum, adam, adamw, adamw_8bit, adafactor, lion");
}

inline optimizer_implementation parse_optimizer_impl(const std::string& s, const std::string& field) {
  if (s == "foreach") return optimizer_implementation::foreach;
  if (s == "fused") return optimizer_implementation::fused;
  if (s == "for_loop" || s.rfind("single_tensor", 0) == 0) return optimizer_implementation::for_loop;
  bad_field(error_code::invalid_run, field, s, "must be one of for_loop, foreach, fused");
}

inline checkpointing parse_checkpointing(const std::string& s, const std::string& field) {
  if (s == "none") return checkpointing::none;
  if (s == "full") return checkpointing::full;
  if (s == "selective") return checkpointing::selective;
  bad_field(error_code::invalid_run, field, s, "must be one of none, full, selective");
}

inline attention_impl parse_attention(const std::string& s, const std::string& field) {
  if (s == "eager") return attention_impl::eager;
  if (s == "sdpa_math" || s == "math") return attention_impl::sdpa_math;
  if (s == "sdpa" || s == "flash" || s == "mem_efficient") return attention_impl::flash;
  bad_field(error_code::invalid_run, field, s, "must be one of eager, sdpa_math, sdpa, flash");
}

inline implementation parse_impl(const std::string& s, const std::string& field) {
  if (s == "hf-transformers" || s == "transformers" || s == "hf") return implementation::hf_transformers;
  if (s == "litgpt" || s == "lit-gpt") return implementation::litgpt;
  bad_field(error_code::unsupported, field, s, "names an implementation memscale does not model yet");
}

// A model from a ground-truth record's "model" object: the family picks the
// architecture, the numeric fields size it.
inline model_spec model_from_record(const json& m) {
  const std::string path = "model";
  constexpr auto bad = error_code::invalid_model;
  const std::string family = get_string(m, "family", path, "", bad);
  const std::string name = get_string(m, "name", path, "", bad);
  const implementation impl = parse_impl(get_string(m, "impl", path, "hf-transformers", bad), path + ".impl");
  const auto layers = get_count(m, "layers", path, 0, bad);
  const auto hidden = get_count(m, "hidden", path, 0, bad);
  const auto heads = get_count(m, "heads", path, 0, bad);
  model_spec spec{};
  if (family == "gpt2") {
    spec = presets::gpt2_base("custom", layers, hidden, heads);
  } else if (family == "bert") {
    spec = presets::bert_base("custom", layers, hidden, heads);
    if (name.find("MaskedLM") != std::string::npos) {
      spec.head = head_kind::masked_lm;
      spec.pooler = false;
    } else {
      // AutoModelForSequenceClassification (and unnamed fine-tunes): pooler + classifier.
      spec.head = head_kind::sequence_classification;
      spec.tied_embeddings = false;
    }
  } else if (family == "llama" || family == "mistral" || family == "qwen2") {
    spec = presets::llama_base("custom", layers, hidden, heads, get_count(m, "kv_heads", path, heads, bad), 1, 1);
  } else if (family == "phi" || family == "stablelm" || family == "gpt_neox") {
    // GPT-NeoX-style blocks (lit-gpt config.py: phi-1_5, stablelm-base-alpha-3b):
    // parallel attention and MLP, LayerNorm with bias, biases everywhere, partial RoPE.
    spec = model_spec{.layers = layers,
                      .hidden = hidden,
                      .heads = heads,
                      .positions = position_kind::rotary,
                      .rotary_fraction = family == "phi" ? 0.5 : 0.25,
                      .mlp = mlp_kind::gelu,  // lit-gpt: F.gelu(approximate=...) is one op that keeps its input
                      .layout = block_layout::parallel,
                      .shared_attention_norm = family == "phi",
                      .fused_qkv = true,
                      .qkv_bias = true,
                      .attn_out_bias = true,
                      .mlp_bias = true,
                      .lm_head_bias = family == "phi"};
  } else {
    bad_field(error_code::unsupported, path + ".family", family, "is not a transformer family memscale models yet");
  }
  spec.impl = impl;
  spec.layers = layers;
  spec.hidden = hidden;
  spec.heads = heads;
  spec.kv_heads = get_count(m, "kv_heads", path, 0, bad);
  spec.head_dim = get_count(m, "head_dim", path, 0, bad);
  spec.ffn = get_count(m, "ffn", path, 0, bad);
  spec.vocab = get_count(m, "vocab", path, 0, bad);
  if (spec.positions == position_kind::learned) spec.max_positions = get_count(m, "max_pos", path, 0, bad);
  spec.tied_embeddings = get_bool(m, "tied_embeddings", path, spec.tied_embeddings, bad) &&
                         spec.head != head_kind::sequence_classification;
  if (impl == implementation::litgpt) {
    // lit-gpt has one fused qkv projection and keeps logits in the compute dtype.
    spec.fused_qkv = true;
    spec.upcast_logits = false;
  }
  return validate(spec);
}

// A run from a ground-truth record's "train" object (and the record's device).
inline training_spec run_from_record(const json& record) {
  const std::string path = "train";
  constexpr auto bad = error_code::invalid_run;
  const json& t = record.at("train");
  training_spec run{};
  run.micro_batch = get_count(t, "batch", path, 1, bad);
  run.seq_len = get_count(t, "seq", path, 0, bad);
  if (run.seq_len == 0) bad_field(error_code::unsupported, path + ".seq", t.value("seq", json()),
                                  "is missing: only sequence models are modelled yet");
  run.prec = parse_precision(get_string(t, "precision", path, "fp32", bad), path + ".precision");
  run.optimizer = parse_optimizer(get_string(t, "optimizer", path, "adamw", bad), path + ".optimizer");
  run.grad_accum = get_count(t, "grad_accum", path, 1, bad);
  run.ckpt = parse_checkpointing(get_string(t, "checkpointing", path, "none", bad), path + ".checkpointing");
  run.attention = parse_attention(get_string(t, "attention", path, "sdpa", bad), path + ".attention");
  const auto rank = get_count(t, "lora_rank", path, 0, bad);
  if (rank > 0) {
    run.target = t.contains("quant") && t.at("quant").is_string() ? training_target::qlora : training_target::lora;
    run.lora_rank = rank;
    if (run.target == training_target::qlora)
      run.quant = t.at("quant").get<std::string>().find("dq") != std::string::npos ? base_quant::nf4_double_quant
                                                                                 : base_quant::nf4;
    const std::string targets = get_string(t, "lora_targets", path, "q,v", bad);
    std::uint8_t set = 0;
    for (char c : targets) {
      if (c == 'q') set = set | lora_target::q;
      if (c == 'k') set = set | lora_target::k;
      if (c == 'v') set = set | lora_target::v;
      if (c == 'o') set = set | lora_target::o;
    }
    run.lora_targets = set;
  }
  const auto dp = get_count(t, "dp", path, 1, bad);
  const auto zero = get_count(t, "zero_stage", path, 0, bad);
  if (dp > 1 || zero > 0)
    bad_field(error_code::unsupported, path + ".dp", t.value("dp", json()), "data-parallel sharding is a later issue");
  const std::string device = record.value("device", std::string("cuda"));
  run.device = device == "cpu" ? device_kind::cpu : device_kind::cuda;
  const std::string opt_impl = get_string(t, "optimizer_impl", path, "", bad);
  if (!opt_impl.empty()) run.optimizer_impl = parse_optimizer_impl(opt_impl, path + ".optimizer_impl");
  if (record.contains("torch") && record.at("torch").is_string()) {
    // "1.13.0a0" -> 113; anything else is reported, not guessed.
    const std::string v = record.at("torch").get<std::string>();
    std::uint32_t major = 0;
    std::uint32_t minor = 0;
    std::size_t i = 0;
    for (; i < v.size() && v[i] >= '0' && v[i] <= '9' && major < 100; ++i) major = major * 10 + static_cast<std::uint32_t>(v[i] - '0');
    const bool dot = i < v.size() && v[i] == '.';
    std::size_t j = i + 1;
    for (; dot && j < v.size() && v[j] >= '0' && v[j] <= '9' && minor < 100; ++j) minor = minor * 10 + static_cast<std::uint32_t>(v[j] - '0');
    if (i == 0 || !dot || j == i + 1) bad_field(error_code::invalid_run, "torch", v, "must be a version like 2.1.0");
    run.torch_version = major * 100 + minor;
  }
  if (record.contains("model") && record.at("model").value("impl", std::string()) == "litgpt") {
    // lit-gpt finetune/lora.py: chunked cross-entropy over 128-token chunks, no dropout
    // inside the model (LoRA dropout only).
    run.loss = loss_impl::chunked;
    run.loss_chunk = 128;
  }
  return validate(run);
}

// The estimate quantity a record's "measure" names.
enum class quantity : std::uint8_t { tensor, allocated, reserved, device };

inline quantity quantity_of(const std::string& measure) {
  if (measure == "cpu-tensor-peak") return quantity::tensor;
  if (measure == "max_memory_allocated") return quantity::allocated;
  if (measure == "max_memory_reserved") return quantity::reserved;
  if (measure == "nvidia-smi") return quantity::device;
  bad_field(error_code::invalid_run, "measure", measure,
            "must be one of cpu-tensor-peak, max_memory_allocated, max_memory_reserved, nvidia-smi");
}

inline std::string_view to_string(quantity q) {
  switch (q) {
    case quantity::tensor: return "tensor";
    case quantity::allocated: return "allocated";
    case quantity::reserved: return "reserved";
    case quantity::device: return "device";
  }
  return "tensor";
}

inline bytes pick(const peak_estimate& p, quantity q) {
  switch (q) {
    case quantity::tensor:
    case quantity::allocated: return p.tensor;
    case quantity::reserved: return p.reserved;
    case quantity::device: return p.device;
  }
  return p.tensor;
}

inline json breakdown_to_json(const memory_breakdown& b) {
  return {{"parameters", b.parameters.value},
          {"gradients", b.gradients.value},
          {"optimizer", b.optimizer.value},
          {"activations", b.activations.value},
          {"workspace", b.workspace.value}};
}

inline json peak_to_json(const peak_estimate& p) {
  return {{"tensor", p.tensor.value},
          {"reserved", p.reserved.value},
          {"device", p.device.value},
          {"phase", std::string(to_string(p.at))}};
}

inline json estimate_to_json(const estimate_result& r) {
  return {{"parameters", r.parameter_count},
          {"trainable_parameters", r.trainable_parameter_count},
          {"breakdown", breakdown_to_json(r.steady.breakdown)},
          {"peak", peak_to_json(r.steady)},
          {"first_step", {{"peak", peak_to_json(r.first_step)}, {"breakdown", breakdown_to_json(r.first_step.breakdown)}}},
          {"static",
           {{"parameters", r.parameter_bytes.value},
            {"gradients", r.gradient_bytes.value},
            {"optimizer", r.optimizer_bytes.value},
            {"saved_activations", r.saved_activation_bytes.value}}}};
}

// One --cases answer: {"id", "estimated_bytes", "quantity"} or {"id", "error"}.
inline json estimate_record(const json& record) {
  const std::string id = record.is_object() && record.contains("id") && record.at("id").is_string()
                             ? record.at("id").get<std::string>()
                             : std::string();
  try {
    const model_spec model = model_from_record(record.at("model"));
    const training_spec run = run_from_record(record);
    const quantity q = quantity_of(record.value("measure", std::string("max_memory_allocated")));
    const estimate_result r = estimate(model, run);
    return {{"id", id}, {"estimated_bytes", pick(r.steady, q).value}, {"quantity", std::string(to_string(q))}};
  } catch (const error& e) {
    return {{"id", id}, {"error", e.what()}};
  } catch (const json::exception& e) {
    return {{"id", id}, {"error", std::string("[memscale.invalid_record] ") + e.what()}};
  }
}

}  // namespace memscale::json_io
