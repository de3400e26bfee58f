// memscale/json/hf/qwen3.hpp: Qwen3 (transformers v4.51 models/qwen3/modeling_qwen3.py):
// LLaMA blocks with RMSNorm on each head's queries and keys (q_norm, k_norm of head_dim).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/llama.hpp"

namespace memscale::json_io::hf {

inline model_spec qwen3(const config& c) {
  model_spec m = llama_like(c, {.head_dim = 128});  // Qwen3Config(head_dim=128)
  m.qk_norm = qk_norm_kind::per_head;
  return m;
}

}  // namespace memscale::json_io::hf
