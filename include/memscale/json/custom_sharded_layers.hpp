// memscale/json/custom_sharded_layers.hpp: torchtune's custom_sharded_layers as a list of module
// names (JSON array, or the CLI's comma-separated text) and back.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "memscale/json/fields.hpp"
#include "memscale/training.hpp"

namespace memscale::json_io::detail {

// The names get_shard_conditions matches against the decoder's named_modules()
// (training/_distributed.py @ v0.6.1): the embedding and the output projection.
inline void add_custom_sharded_layer(custom_sharded_layers& layers, std::string_view name, const std::string& field) {
  if (name == "tok_embeddings") layers.tok_embeddings = true;
  else if (name == "output") layers.output = true;
  else bad_field(error_code::unsupported, field, std::string(name),
                 "names modules memscale models as units of their own: tok_embeddings, output");
}

// "tok_embeddings,output"; "none" or "" is the recipe's default (null).
inline custom_sharded_layers parse_custom_sharded_layers(std::string_view text, const std::string& field) {
  custom_sharded_layers layers{};
  if (text == "none") return layers;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    add_custom_sharded_layer(layers, text.substr(0, comma), field);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
  }
  return layers;
}

// A JSON field: null (the default) or an array of module names.
inline custom_sharded_layers read_custom_sharded_layers(const nlohmann::json& obj, const std::string& key,
                                                        const std::string& path) {
  custom_sharded_layers layers{};
  if (!obj.contains(key) || obj.at(key).is_null()) return layers;
  const nlohmann::json& list = obj.at(key);
  if (!list.is_array())
    bad_field(error_code::invalid_run, path + "." + key, list, "must be null or a list of module names");
  for (const nlohmann::json& name : list) {
    if (!name.is_string())
      bad_field(error_code::invalid_run, path + "." + key, name, "must list module names (strings)");
    add_custom_sharded_layer(layers, name.get<std::string>(), path + "." + key);
  }
  return layers;
}

inline nlohmann::json custom_sharded_layers_json(const custom_sharded_layers& layers) {
  if (!layers.any()) return nullptr;
  nlohmann::json list = nlohmann::json::array();
  if (layers.tok_embeddings) list.push_back("tok_embeddings");
  if (layers.output) list.push_back("output");
  return list;
}

// The recipe config's value: null, or a YAML flow list as the stock configs write it.
inline std::string custom_sharded_layers_yaml(const custom_sharded_layers& layers) {
  if (!layers.any()) return "null";
  std::string y = "[";
  if (layers.tok_embeddings) y += "'tok_embeddings'";
  if (layers.output) y += std::string(layers.tok_embeddings ? ", " : "") + "'output'";
  return y + "]";
}

}  // namespace memscale::json_io::detail
