// memscale/json/hf/internlm2.hpp: InternLM2 (the Hub's remote code, internlm/internlm2-7b
// modeling_internlm2.py): LLaMA blocks whose q, k and v come from one fused `wqkv` Linear
// (k and v are views of its output, as in Phi-3), with `bias` on wqkv and wo only.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/llama.hpp"

namespace memscale::json_io::hf {

inline model_spec internlm2(const config& c) {
  model_spec m = llama_like(c);
  m.fused_qkv = true;  // InternLM2Attention.wqkv: (heads + 2 x kv_heads) x head_dim outputs
  // InternLM2Config(bias=True): InternLM2Attention wqkv and wo take it; InternLM2MLP w1/w2/w3 have none.
  m.qkv_bias = c.flag("bias", true);
  m.attn_out_bias = m.qkv_bias;
  // InternLM2Attention._init_rope: an InternLM2RotaryEmbedding per layer with cos/sin caches
  // of max_position_embeddings (InternLM2Config default 2048) rows.
  if (m.context_length == 0) m.context_length = 2048;
  m.rotary_cache_per_layer = true;
  return m;
}

}  // namespace memscale::json_io::hf
