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
  read_qwen_experts(c, m, {.expert_ffn = 768, .experts = 128, .per_token = 8});  // Qwen3MoeConfig defaults
  return m;
}

}  // namespace memscale::json_io::hf
