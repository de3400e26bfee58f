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

// The Qwen MoE families' routed experts (Qwen2MoeSparseMoeBlock, Qwen3MoeSparseMoeBlock):
// num_experts experts of moe_intermediate_size, num_experts_per_tok of them per token; the
// defaults are the family Config's.
struct qwen_experts_defaults {
  std::uint64_t expert_ffn = 0;
  std::uint64_t experts = 0;
  std::uint64_t per_token = 0;
};

inline void read_qwen_experts(const config& c, model_spec& m, const qwen_experts_defaults& d) {
  m.ffn = c.count("moe_intermediate_size", d.expert_ffn);
  m.experts = c.count("num_experts", d.experts);
  m.experts_per_token = c.count("num_experts_per_tok", d.per_token);
}

}  // namespace memscale::json_io::hf
