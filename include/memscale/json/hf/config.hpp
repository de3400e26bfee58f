// memscale/json/hf/config.hpp: typed reads of a Hugging Face config.json's keys, and the
// head that the class named in "architectures" puts on the model.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "memscale/error.hpp"
#include "memscale/json/fields.hpp"
#include "memscale/model.hpp"

namespace memscale::json_io::hf {

// A config.json object, or one nested in it (a multimodal config's text_config). An absent or
// null key takes the default that the family's configuration_<family>.py gives it; a present key
// of the wrong type is an error naming the key's path (config.<key>, config.text_config.<key>)
// and the value.
class config {
 public:
  explicit config(const json& c, std::string path = "config") : c_(c), path_(std::move(path)) {
    if (!c_.is_object()) bad_field(error_code::invalid_model, path_, c_, "must be a JSON object");
  }
  // The object under `key`, read with this one's path before its keys.
  [[nodiscard]] config nested(const char* key) const {
    if (!has(key)) bad_field(error_code::invalid_model, field(key), json(), "is required for this model_type");
    return config(c_.at(key), field(key));
  }
  // The object under `key`, or an empty one when the key is absent or null: a sub-config the
  // family's Config class builds from its defaults (Gemma3Config: SiglipVisionConfig()).
  [[nodiscard]] config nested_or_defaults(const char* key) const {
    static const json no_keys = json::object();
    return has(key) ? nested(key) : config(no_keys, field(key));
  }
  // How an error names `key`.
  [[nodiscard]] std::string field(const char* key) const { return path_ + "." + key; }

  [[nodiscard]] bool has(const char* key) const { return c_.contains(key) && !c_.at(key).is_null(); }

  [[nodiscard]] std::uint64_t count(const char* key, std::uint64_t fallback) const {
    return get_count(c_, key, path_, fallback, error_code::invalid_model);
  }
  // The first of several spellings that is present (GPT-2's n_embd, BLOOM's n_embed, ...).
  [[nodiscard]] std::uint64_t count(std::initializer_list<const char*> keys, std::uint64_t fallback) const {
    for (const char* k : keys)
      if (has(k)) return count(k, fallback);
    return fallback;
  }
  [[nodiscard]] std::uint64_t required(std::initializer_list<const char*> keys) const {
    for (const char* k : keys)
      if (has(k)) return count(k, 0);
    bad_field(error_code::invalid_model, field(*keys.begin()), json(), "is required for this model_type");
  }
  [[nodiscard]] bool flag(const char* key, bool fallback) const {
    return get_bool(c_, key, path_, fallback, error_code::invalid_model);
  }
  [[nodiscard]] double number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = c_.at(key);
    if (!v.is_number()) bad_field(error_code::invalid_model, field(key), v, "must be a number");
    return v.get<double>();
  }
  [[nodiscard]] std::string text(const char* key, const std::string& fallback) const {
    return get_string(c_, key, path_, fallback, error_code::invalid_model);
  }
  [[nodiscard]] const json& raw() const { return c_; }

 private:
  const json& c_;
  std::string path_;
};

// architectures[0], or "" when the config names none.
inline std::string class_name(const config& c) {
  if (!c.has("architectures")) return {};
  const json& a = c.raw().at("architectures");
  if (!a.is_array() || a.empty() || !a.at(0).is_string())
    bad_field(error_code::invalid_model, "config.architectures", a, "must be a non-empty array of class names");
  return a.at(0).get<std::string>();
}

inline bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The head of the class in "architectures" (XForCausalLM / XLMHeadModel, XForMaskedLM,
// XForSequenceClassification with num_labels, the bare XModel); `fallback` when absent.
inline void apply_head(const config& c, model_spec& m, head_kind fallback) {
  const std::string cls = class_name(c);
  head_kind head = fallback;
  if (cls.empty()) head = fallback;
  else if (ends_with(cls, "ForCausalLM") || ends_with(cls, "LMHeadModel")) head = head_kind::causal_lm;
  // A decoder's ...ForConditionalGeneration (Gemma 3's multimodal class) generates text with an LM head.
  else if (ends_with(cls, "ForConditionalGeneration") && m.arch == architecture::decoder) head = head_kind::causal_lm;
  else if (ends_with(cls, "ForMaskedLM")) head = head_kind::masked_lm;
  else if (ends_with(cls, "ForSequenceClassification")) head = head_kind::sequence_classification;
  else if (ends_with(cls, "Model")) head = head_kind::none;
  else
    bad_field(error_code::unsupported, "config.architectures", cls,
              "names a class memscale does not model (supported: ...ForCausalLM, ...LMHeadModel, ...ForMaskedLM, "
              "...ForSequenceClassification, ...Model, a decoder's ...ForConditionalGeneration)");
  if (head == head_kind::causal_lm && m.arch == architecture::encoder)
    bad_field(error_code::unsupported, "config.architectures", cls, "is a causal-LM head on an encoder");
  m.head = head;
  if (head == head_kind::sequence_classification) {
    // PretrainedConfig: num_labels is len(id2label), 2 by default.
    std::uint64_t labels = 2;
    if (c.has("id2label")) {
      const json& l = c.raw().at("id2label");
      if (!l.is_object()) bad_field(error_code::invalid_model, "config.id2label", l, "must be an object");
      labels = l.size();
    }
    m.num_labels = c.count("num_labels", labels);
    m.tied_embeddings = false;
  }
  if (head != head_kind::causal_lm && head != head_kind::masked_lm) m.tied_embeddings = false;
}

// A family Config class's defaults for the keys that size a decoder; 0: the reader requires
// the key (families whose defaults were not read from their configuration file).
struct decoder_shape_defaults {
  std::uint64_t layers = 0;
  std::uint64_t hidden = 0;
  std::uint64_t heads = 0;
  std::uint64_t ffn = 0;
  std::uint64_t vocab = 0;
  std::uint64_t context = 0;  // max_position_embeddings; 0 here means unknown, never required
};

// `key`, else the family's default, else an error naming the key.
inline std::uint64_t count_or_default(const config& c, const char* key, std::uint64_t fallback) {
  return fallback == 0 ? c.required({key}) : c.count(key, fallback);
}

// The shape of a rotary decoder under LlamaConfig's key names, which Phi, StarCoder2 and
// the LLaMA-recipe families share: layers, widths, heads (num_key_value_heads None: multi-head
// attention), vocabulary and context; the family reader adds the rest.
inline model_spec rotary_decoder(const config& c, const decoder_shape_defaults& d = {}) {
  model_spec m{};
  m.layers = count_or_default(c, "num_hidden_layers", d.layers);
  m.hidden = count_or_default(c, "hidden_size", d.hidden);
  m.heads = count_or_default(c, "num_attention_heads", d.heads);
  m.kv_heads = c.count("num_key_value_heads", m.heads);
  m.ffn = count_or_default(c, "intermediate_size", d.ffn);
  m.vocab = count_or_default(c, "vocab_size", d.vocab);
  m.context_length = c.count("max_position_embeddings", d.context);
  m.positions = position_kind::rotary;
  return m;
}

// The config key of one dropout site and its default in configuration_<family>.py;
// no key: the family's code has no dropout at that site.
struct dropout_key {
  const char* key = nullptr;
  double fallback = 0.0;
};

// The keys of a family's dropout sites (model_spec::attention_dropout, hidden_dropout,
// embedding_dropout).
struct dropout_keys {
  dropout_key attention{};
  dropout_key hidden{};
  dropout_key embedding{};
};

// Each site follows its own key; model_spec::dropout is on when any site is.
inline void apply_dropout(const config& c, model_spec& m, const dropout_keys& keys) {
  const auto active = [&c](const dropout_key& k) { return k.key != nullptr && c.number(k.key, k.fallback) > 0.0; };
  m.attention_dropout = active(keys.attention);
  m.hidden_dropout = active(keys.hidden);
  m.embedding_dropout = active(keys.embedding);
  m.dropout = m.attention_dropout || m.hidden_dropout || m.embedding_dropout;
}

// hidden_act / activation_function of a non-gated MLP.
// `layer_types` (one entry per hidden layer, each sliding_attention or full_attention), read
// to refuse what it cannot be. Where eager training only masks scores by it, every layer has
// the same tensors (Cohere 2, gpt-oss).
inline void check_layer_types(const config& c, std::uint64_t layers) {
  if (!c.has("layer_types")) return;
  const json& types = c.raw().at("layer_types");
  if (!types.is_array() || types.size() != layers)
    bad_field(error_code::invalid_model, c.field("layer_types"), types, "must list one type per hidden layer");
  for (const json& t : types)
    if (t != "sliding_attention" && t != "full_attention")
      bad_field(error_code::unsupported, c.field("layer_types"), t, "must be sliding_attention or full_attention");
}

inline mlp_kind plain_activation(const config& c, const char* key, const std::string& fallback) {
  const std::string act = c.text(key, fallback);
  if (act == "gelu" || act == "gelu_pytorch_tanh") return mlp_kind::gelu;
  // gelu_fast (FastGELUActivation) is written out in Python like gelu_new, so it saves its
  // intermediates, but without pow (transformers src/transformers/activations.py).
  if (act == "gelu_new" || act == "gelu_python") return mlp_kind::gelu_tanh;
  if (act == "gelu_fast") return mlp_kind::gelu_fast;
  if (act == "relu") return mlp_kind::relu;
  bad_field(error_code::unsupported, c.field(key), act,
            "must be one of gelu, gelu_new, gelu_pytorch_tanh, gelu_fast, relu");
}

// hidden_act of a gated MLP (act(gate) * up).
inline mlp_kind gated_activation(const config& c, const char* key, const std::string& fallback) {
  const std::string act = c.text(key, fallback);
  if (act == "silu" || act == "swish") return mlp_kind::swiglu;
  if (act == "gelu" || act == "gelu_pytorch_tanh" || act == "gelu_new") return mlp_kind::geglu;
  bad_field(error_code::unsupported, c.field(key), act, "must be one of silu, gelu, gelu_pytorch_tanh");
}

}  // namespace memscale::json_io::hf
