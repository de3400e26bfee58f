// memscale/json/hf/moe_layers.hpp: Qwen MoE configs may keep some layers dense
// (decoder_sparse_step, mlp_only_layers); memscale's graph repeats one block, so only
// configs where every layer is sparse are read.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/config.hpp"

namespace memscale::json_io::hf {

inline void require_all_layers_sparse(const config& c) {
  if (c.count("decoder_sparse_step", 1) != 1)
    bad_field(error_code::unsupported, "config.decoder_sparse_step", c.raw().at("decoder_sparse_step"),
              "must be 1: mixed dense and sparse layers are not modelled yet");
  if (c.has("mlp_only_layers")) {
    const json& l = c.raw().at("mlp_only_layers");
    if (!l.is_array() || !l.empty())
      bad_field(error_code::unsupported, "config.mlp_only_layers", l,
                "must be empty: mixed dense and sparse layers are not modelled yet");
  }
}

}  // namespace memscale::json_io::hf
