// memscale/json/hf/qwen2.hpp: Qwen2 / Qwen2.5 (transformers v4.51 models/qwen2/modeling_qwen2.py):
// LLaMA blocks whose q, k and v projections have biases (o_proj has none).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/llama.hpp"

namespace memscale::json_io::hf {

inline model_spec qwen2(const config& c) {
  model_spec m = llama_like(c);
  m.qkv_bias = true;  // Qwen2Attention: q/k/v_proj(bias=True), o_proj(bias=False)
  m.attn_out_bias = false;
  m.rotary_tables_per_layer_before = 442;  // the Mistral family's per-layer rotary tables (PR #30642)
  return m;
}

// A ground-truth record's Qwen2: LLaMA with q/k/v biases (Qwen2Attention).
inline model_spec qwen2_record(const record_model& r) {
  model_spec m = llama_record_as(r, {.qkv_bias = true});
  m.rotary_tables_per_layer_before = 442;
  return m;
}
inline constexpr record_rules qwen2_records{.defaults = qwen2_record};

}  // namespace memscale::json_io::hf
