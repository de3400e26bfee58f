// memscale/json/hf/t5.hpp: a T5 / T5 v1.1 / FLAN-T5 / mT5 config.json as a model_spec.
//
// Defaults and key meanings follow transformers src/transformers/models/t5/configuration_t5.py
// (and mt5/configuration_mt5.py, commit 6b8b757d): num_decoder_layers defaults to
// num_layers; feed_forward_proj "relu" is T5DenseActDense, "gated-gelu" is
// T5DenseGatedActDense with gelu_new; tie_word_embeddings defaults to True for T5 and
// False for mT5. The head is the class in "architectures": ...ForConditionalGeneration
// (lm_head + loss) or the bare ...Model.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "memscale/json/fields.hpp"
#include "memscale/json/hf/record_rules.hpp"
#include "memscale/model.hpp"
#include "memscale/presets.hpp"

namespace memscale::json_io {

inline model_spec t5_from_hf_config(const json& cfg) {
  constexpr auto bad = error_code::invalid_model;
  const std::string path = "config";
  if (!cfg.is_object()) bad_field(bad, path, cfg, "must be a JSON object");
  const std::string type = get_string(cfg, "model_type", path, "t5", bad);
  if (type != "t5" && type != "mt5")
    bad_field(error_code::unsupported, path + ".model_type", type, "must be t5 or mt5 for the T5 reader");
  const bool mt5 = type == "mt5";
  const std::uint64_t layers = get_count(cfg, "num_layers", path, mt5 ? 8 : 6, bad);
  model_spec m = presets::t5_family(mt5 ? "mt5" : "t5", layers, get_count(cfg, "d_model", path, 512, bad),
                                    get_count(cfg, "num_heads", path, mt5 ? 6 : 8, bad),
                                    get_count(cfg, "d_ff", path, mt5 ? 1024 : 2048, bad), false);
  m.head_dim = get_count(cfg, "d_kv", path, 64, bad);
  m.vocab = get_count(cfg, "vocab_size", path, mt5 ? 250112 : 32128, bad);
  m.decoder_layers = get_count(cfg, "num_decoder_layers", path, layers, bad);
  m.relative_attention_buckets = get_count(cfg, "relative_attention_num_buckets", path, 32, bad);
  const std::string ffn = get_string(cfg, "feed_forward_proj", path, mt5 ? "gated-gelu" : "relu", bad);
  if (ffn == "relu") m.mlp = mlp_kind::relu;
  else if (ffn == "gated-gelu") m.mlp = mlp_kind::geglu;  // gelu_new gate (configuration_t5.py)
  else bad_field(error_code::unsupported, path + ".feed_forward_proj", ffn, "must be relu or gated-gelu");
  m.tied_embeddings = get_bool(cfg, "tie_word_embeddings", path, !mt5, bad);
  const json rate = cfg.value("dropout_rate", json(0.1));
  if (!rate.is_number()) bad_field(bad, path + ".dropout_rate", rate, "must be a number");
  m.dropout = rate.get<double>() > 0.0;  // one rate for every site (T5Config.dropout_rate)
  // The class in "architectures".
  std::string cls = mt5 ? "MT5ForConditionalGeneration" : "T5ForConditionalGeneration";
  if (cfg.contains("architectures") && !cfg.at("architectures").is_null()) {
    const json& a = cfg.at("architectures");
    if (!a.is_array() || a.empty() || !a.at(0).is_string())
      bad_field(bad, path + ".architectures", a, "must be a non-empty array of class names");
    cls = a.at(0).get<std::string>();
  }
  if (cls == "T5ForConditionalGeneration" || cls == "MT5ForConditionalGeneration") {
    m.head = head_kind::causal_lm;  // lm_head over the decoder's positions + cross-entropy
  } else if (cls == "T5Model" || cls == "MT5Model") {
    m.head = head_kind::none;
    m.tied_embeddings = false;
  } else {
    bad_field(error_code::unsupported, path + ".architectures", cls,
              "must be T5ForConditionalGeneration, MT5ForConditionalGeneration, T5Model or MT5Model");
  }
  m.name = type == "mt5" ? "mt5" : "t5";
  return validate(m);
}

namespace hf {

// A ground-truth record's T5 (modeling_t5.py T5ForConditionalGeneration, T5Model when the name
// says so): an encoder-decoder with as many decoder as encoder blocks.
inline model_spec t5_record(const record_model& r) {
  model_spec spec = presets::t5_family("custom", r.layers, r.hidden, r.heads, 1, false);
  if (r.class_name.find("T5Model") != std::string_view::npos) spec.head = head_kind::none;
  return spec;
}
inline constexpr record_rules t5_records{.defaults = t5_record};

}  // namespace hf

}  // namespace memscale::json_io
