// memscale/json/hf/olmo2.hpp: OLMo 2 (transformers v4.51 models/olmo2/modeling_olmo2.py):
// LLaMA projections with RMSNorm after each branch instead of before it
// (post_attention_layernorm, post_feedforward_layernorm; no input_layernorm) and qk-norm
// over the whole projection (q_norm of heads*head_dim, k_norm of kv_heads*head_dim).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/llama.hpp"

namespace memscale::json_io::hf {

inline model_spec olmo2(const config& c) {
  model_spec m = llama_like(c);
  m.block_norms = branch_norms::post;
  m.qk_norm = qk_norm_kind::full_width;
  return m;
}

}  // namespace memscale::json_io::hf
