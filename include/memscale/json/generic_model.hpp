// memscale/json/generic_model.hpp: a config.json no family reader knows, with its checkpoint,
// as a generic_model (memscale/generic_model.hpp).
//
//   generic_model_of(config, checkpoint)   the generic decoder of the config's standard keys
//                                          and the checkpoint's inventory
//   load_model_or_checkpoint("DIR" | "ORG/NAME" | "config.json")
//       a family reader's model_spec when the model_type has one; otherwise the generic model
//       of the config and the checkpoint beside it; otherwise the refusal that names the
//       nearest supported family and a --run model object (json/hf/unknown_model_type.hpp)
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "memscale/error.hpp"
#include "memscale/error_band.hpp"
#include "memscale/generic_model.hpp"
#include "memscale/json/checkpoint.hpp"
#include "memscale/json/fields.hpp"
#include "memscale/json/hf/config.hpp"
#include "memscale/json/hf/quantization.hpp"
#include "memscale/json/hf_config.hpp"
#include "memscale/model.hpp"
#include "memscale/weights_inventory.hpp"

namespace memscale::json_io {

// A model estimated through the generic path, with what the report must say about it.
struct generic_checkpoint {
  generic_model model;
  std::string model_type;
  checkpoint_summary checkpoint;
  std::optional<hf::quantization> quantization;
  std::vector<std::string> notes;  // the band first ("activations estimated from a generic decoder: band +-35%")
};

namespace detail {

// The first of `keys` the config holds (not null), as a count; 0 when none.
inline std::uint64_t first_count(const hf::config& c, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (c.has(k)) return c.count(k, 0);
  return 0;
}

inline std::uint64_t needed_count(const hf::config& c, std::initializer_list<const char*> keys, const std::string& model_type) {
  const std::uint64_t n = first_count(c, keys);
  if (n > 0) return n;
  std::string names;
  for (const char* k : keys) names += (names.empty() ? "" : ", ") + std::string(k);
  throw error(error_code::invalid_model,
              "config." + std::string(*keys.begin()) + " is required (or one of " + names + ", > 0): model_type " +
                  shown(json(model_type)) + " has no reader, so its activations come from a generic decoder of the "
                  "config's sizes; the checkpoint gives parameters, not activation sizes");
}

// Parameter tensors of shape (rows, cols) in the checkpoint.
inline std::uint64_t tensors_shaped(const weights_inventory& w, std::uint64_t rows, std::uint64_t cols) {
  std::uint64_t n = 0;
  for (const auto& s : w.parameter_shapes)
    if (s.leading == 1 && s.matrix && s.rows == rows && s.cols == cols) n = memscale::detail::checked_add(n, s.tensors);
  return n;
}

// The MLP of the generic decoder: hidden_act, and for GELU whether the checkpoint holds
// two (ffn x hidden) projections per (hidden x ffn) one (gate and up: GeGLU) or one.
inline mlp_kind generic_mlp(const hf::config& c, const weights_inventory& w, std::uint64_t hidden, std::uint64_t ffn) {
  const std::string act = c.has("hidden_act") ? c.text("hidden_act", "silu") : c.text("activation_function", "silu");
  if (act == "relu") return mlp_kind::relu;
  if (act.rfind("gelu", 0) == 0) {
    const std::uint64_t up = tensors_shaped(w, ffn, hidden);
    const std::uint64_t down = tensors_shaped(w, hidden, ffn);
    const bool gated = (down > 0 && up >= 2 * down) || tensors_shaped(w, 2 * ffn, hidden) > 0;
    return gated ? mlp_kind::geglu : mlp_kind::gelu;
  }
  return mlp_kind::swiglu;  // silu, swish and anything else: the gated MLP keeps the most
}

}  // namespace detail

// The generic decoder of `config` (the keys of its text_config when it has one: multimodal
// configs keep the language model's sizes there) on the LLaMA recipe (RoPE, RMSNorm, gated
// MLP), with `checkpoint`'s tensors for parameters, gradients and optimizer state.
inline generic_checkpoint generic_model_of(const json& config, checkpoint_summary checkpoint) {
  const hf::config top(config);
  const std::string model_type = top.text("model_type", "");
  const json& text = config.contains("text_config") && config.at("text_config").is_object() ? config.at("text_config") : config;
  const hf::config c(text);
  if (parameter_elements(checkpoint.inventory) == 0)
    throw error(error_code::invalid_model, "checkpoint " + (checkpoint.files.empty() ? std::string("(none)") : checkpoint.files.front()) +
                                               " stores no floating parameter tensor");
  model_spec m{};
  m.name = "generic-decoder";
  m.layers = detail::needed_count(c, {"num_hidden_layers", "n_layer", "num_layers", "n_layers"}, model_type);
  m.hidden = detail::needed_count(c, {"hidden_size", "n_embd", "d_model", "dim"}, model_type);
  m.heads = detail::needed_count(c, {"num_attention_heads", "n_head", "num_heads", "n_heads"}, model_type);
  m.kv_heads = detail::first_count(c, {"num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num"});
  m.head_dim = c.count("head_dim", 0);
  m.ffn = detail::needed_count(c, {"intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size", "d_ff"}, model_type);
  m.vocab = detail::needed_count(c, {"vocab_size", "padded_vocab_size"}, model_type);
  m.context_length = detail::first_count(c, {"max_position_embeddings", "n_positions", "seq_length"});
  // Mixture of experts: the routed experts' width when the config gives one.
  const std::uint64_t experts = detail::first_count(c, {"num_local_experts", "num_experts", "n_routed_experts"});
  const std::uint64_t per_token = detail::first_count(c, {"num_experts_per_tok", "num_experts_per_token", "top_k"});
  if (experts > 0 && per_token > 0) {
    m.experts = experts;
    m.experts_per_token = per_token;
    m.ffn = detail::first_count(c, {"moe_intermediate_size", "expert_intermediate_size"}) > 0
                ? detail::first_count(c, {"moe_intermediate_size", "expert_intermediate_size"})
                : m.ffn;
  }
  m.positions = position_kind::rotary;
  m.norm = norm_kind::rmsnorm;
  m.norm_bias = false;
  m.mlp = detail::generic_mlp(c, checkpoint.inventory, m.hidden, m.ffn);
  m.tied_embeddings = top.flag("tie_word_embeddings", c.flag("tie_word_embeddings", true));  // PretrainedConfig default
  m.upcast_logits = true;   // the loss in fp32, as transformers' ForCausalLMLoss: the larger head
  m.softmax_fp32 = true;
  validate(m);
  generic_checkpoint g{};
  g.model = generic_model{.decoder = m, .weights = checkpoint.inventory};
  g.model_type = model_type;
  g.quantization = hf::quantization_of(config);
  const error_band& band = band_of(generic_run_class, band_quantity::tensor);
  g.notes.push_back(std::string(generic_activation_note) + ": band +-" + std::to_string(static_cast<int>(band.high * 100 + 0.5)) + "%");
  g.notes.push_back("parameters, gradients and optimizer state from the checkpoint's headers (" +
                    std::to_string(checkpoint.files.size()) + " safetensors files), exact for a full fine-tune");
  const bool stores_quantized = total(checkpoint.inventory, tensor_role::quantized).tensors > 0;
  if (g.quantization && !stores_quantized)
    throw error(error_code::invalid_model, "config.quantization_config names " + shown(json(g.quantization->method)) +
                                               " but the checkpoint's headers hold no quantised tensor (only floating parameters)");
  if (!g.quantization && stores_quantized)
    g.notes.push_back("the checkpoint stores quantised tensors but config.json has no quantization_config: they are counted as stored, frozen");
  for (const auto& n : checkpoint.notes) g.notes.push_back(n);
  g.checkpoint = std::move(checkpoint);
  return g;
}

// What --config reads: a family reader's model, or the generic model of an unknown model_type.
struct config_model {
  model_spec model;                         // the family's model, or the generic decoder
  std::optional<generic_checkpoint> generic;  // set when no family reader knows the model_type
  std::optional<hf::quantization> quantization{};  // a family's config: its quantization_config
};

namespace detail {

// The folder a config.json path, a model directory or a Hub id's cached config lies in.
inline std::optional<std::filesystem::path> config_folder(std::string_view path_or_hub_id) {
  namespace fs = std::filesystem;
  const fs::path given{std::string(path_or_hub_id)};
  std::error_code ec;
  if (fs::is_directory(given, ec)) return given;
  if (fs::is_regular_file(given, ec)) return given.parent_path().empty() ? fs::path(".") : given.parent_path();
  const fs::path cached = hub_config(path_or_hub_id);
  if (!cached.empty()) return cached.parent_path();
  return std::nullopt;
}

}  // namespace detail

inline config_model load_model_or_checkpoint(std::string_view path_or_hub_id) {
  const json cfg = load_hf_config_json(path_or_hub_id);
  const std::string type = cfg.is_object() && cfg.contains("model_type") && cfg.at("model_type").is_string()
                               ? cfg.at("model_type").get<std::string>()
                               : std::string();
  if (type.empty() || hf::reader_for(type) != nullptr)
    return {model_from_hf_config(cfg), std::nullopt, hf::quantization_of(cfg)};
  const auto folder = detail::config_folder(path_or_hub_id);
  std::optional<checkpoint_summary> checkpoint;
  if (folder) checkpoint = read_checkpoint(*folder);
  if (!checkpoint) {
    hf::refuse_unknown_model_type(type, cfg, hf::readable_model_types());  // the nearest family, a --run model object
  }
  generic_checkpoint g = generic_model_of(cfg, std::move(*checkpoint));
  const model_spec decoder = g.model.decoder;
  return {decoder, std::move(g)};
}

}  // namespace memscale::json_io
