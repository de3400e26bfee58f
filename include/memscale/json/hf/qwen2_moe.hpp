// memscale/json/hf/qwen2_moe.hpp: Qwen1.5-MoE / Qwen2-MoE (transformers v4.51
// models/qwen2_moe/modeling_qwen2_moe.py): Qwen2 attention (q/k/v biases); a sparse block of
// num_experts experts of moe_intermediate_size, a router Linear(hidden, experts), and a
// shared expert of shared_expert_intermediate_size scaled by sigmoid(Linear(hidden, 1)).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/moe_layers.hpp"
#include "memscale/json/hf/qwen2.hpp"

namespace memscale::json_io::hf {

inline model_spec qwen2_moe(const config& c) {
  require_all_layers_sparse(c);
  model_spec m = qwen2(c);
  read_qwen_experts(c, m, {.expert_ffn = 1408, .experts = 60, .per_token = 4});  // Qwen2MoeConfig defaults
  m.shared_expert_ffn = c.count("shared_expert_intermediate_size", 5632);
  m.shared_expert_gate = m.shared_expert_ffn > 0;
  return m;
}

}  // namespace memscale::json_io::hf
