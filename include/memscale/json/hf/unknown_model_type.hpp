// memscale/json/hf/unknown_model_type.hpp: the refusal for a config.json whose model_type no
// reader knows and whose weights are not at hand: the nearest supported family, and the two
// ways forward (the checkpoint's headers, or a --run model object of the config's sizes).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "memscale/detail/nearest_name.hpp"
#include "memscale/error.hpp"
#include "memscale/json/fields.hpp"

namespace memscale::json_io::hf {

namespace detail {

// The supported model_type nearest to `type`: the longest one `type` starts with
// ("qwen2_audio" -> qwen2, "llama5" -> llama), else the closest by edit distance ("olmo3" ->
// olmo2); empty when none is close.
inline std::string nearest_model_type(std::string_view type, const std::vector<std::string_view>& supported) {
  std::string_view prefix;
  for (std::string_view s : supported)
    if (s.size() >= 3 && type.substr(0, s.size()) == s && s.size() > prefix.size()) prefix = s;
  if (!prefix.empty()) return std::string(prefix);
  memscale::detail::nearest_name nearest(type);
  for (std::string_view s : supported) nearest.offer(s);
  const std::string hint = nearest.hint();  // "; did you mean NAME?"
  constexpr std::string_view lead = "; did you mean ";
  return hint.empty() ? std::string() : hint.substr(lead.size(), hint.size() - lead.size() - 1);
}

// The first of `keys` the config holds as a non-negative integer, or `fallback`.
inline std::string size_or(const json& config, std::initializer_list<const char*> keys, std::string_view fallback) {
  for (const char* k : keys)
    if (config.contains(k) && config.at(k).is_number_unsigned()) return std::to_string(config.at(k).get<std::uint64_t>());
  return std::string(fallback);
}

}  // namespace detail

// A --run model object (docs/run-json.md, the record format of SCHEMA.md) of the config's
// sizes on the LLaMA recipe (RoPE, RMSNorm, gated MLP); sizes the config lacks are left as
// upper-case placeholders.
inline std::string run_model_example(const json& config) {
  const json& c = config.contains("text_config") && config.at("text_config").is_object() ? config.at("text_config") : config;
  const std::string heads = detail::size_or(c, {"num_attention_heads", "n_head", "num_heads"}, "HEADS");
  return R"({"model": {"family": "llama", "layers": )" + detail::size_or(c, {"num_hidden_layers", "n_layer", "num_layers"}, "LAYERS") +
         R"(, "hidden": )" + detail::size_or(c, {"hidden_size", "n_embd", "d_model"}, "HIDDEN") + R"(, "heads": )" + heads +
         R"(, "kv_heads": )" + detail::size_or(c, {"num_key_value_heads", "num_kv_heads"}, heads) + R"(, "ffn": )" +
         detail::size_or(c, {"intermediate_size", "ffn_dim", "n_inner"}, "FFN") + R"(, "vocab": )" +
         detail::size_or(c, {"vocab_size"}, "VOCAB") + "}}";
}

// Refuses `type` (a config's model_type no reader in `supported` knows), naming the nearest
// supported one and the ways forward; the supported list itself is --list-families' (the
// message stays one terminal line under the malformed corpus's 1000 bytes as families are added).
[[noreturn]] inline void refuse_unknown_model_type(const std::string& type, const json& config,
                                                   const std::vector<std::string_view>& supported) {
  const std::string nearest = detail::nearest_model_type(type, supported);
  throw error(error_code::unsupported,
              "config.model_type " + shown(json(type)) + " is not a model_type memscale reads" +
                  (nearest.empty() ? std::string() : " (nearest supported: " + nearest + ")") +
                  ". Put the model's *.safetensors files or model.safetensors.index.json beside config.json: memscale "
                  "then takes parameters, gradients and optimizer state exactly from their headers and estimates "
                  "activations from a generic decoder (band +-35%). Or describe the model as a --run model object, e.g. " +
                  run_model_example(config) + " (`memscale-plan --list-families` lists the " +
                  std::to_string(supported.size()) + " supported model_types)");
}

}  // namespace memscale::json_io::hf
