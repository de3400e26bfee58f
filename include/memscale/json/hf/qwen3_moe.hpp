// memscale/json/hf/qwen3_moe.hpp: Qwen3-MoE (transformers v4.51
// models/qwen3_moe/modeling_qwen3_moe.py): Qwen3 attention (per-head qk-norm, no biases),
// num_experts experts of moe_intermediate_size, a router Linear(hidden, experts), no
// shared expert.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/moe_layers.hpp"
#include "memscale/json/hf/qwen3.hpp"

namespace memscale::json_io::hf {

inline model_spec qwen3_moe(const config& c) {
  require_all_layers_sparse(c);
  model_spec m = qwen3(c);
  m.ffn = c.count("moe_intermediate_size", 768);  // Qwen3MoeConfig defaults
  m.experts = c.count("num_experts", 128);
  m.experts_per_token = c.count("num_experts_per_tok", 8);
  return m;
}

}  // namespace memscale::json_io::hf
