// memscale/json/hf/phimoe.hpp: PhiMoE / Phi-3.5-MoE (transformers
// models/phimoe/modeling_phimoe.py@008f5c8c, configuration_phimoe.py@040e1a7e): Mixtral blocks
// (q/k/v/o with attention_bias, a bias-free router over num_local_experts SwiGLU experts) with
// nn.LayerNorm (weight and bias) in place of RMSNorm, and an lm_head with lm_head_bias.
// With input_jitter_noise > 0 (0.01 in Phi-3.5-MoE) training multiplies the MoE input in place
// by a uniform noise tensor that the mul saves, one (tokens, hidden) tensor of the model dtype
// per layer (model flag moe_input_jitter; from transformers 5.0 twice, graph/layers/mlp.hpp).
// The router is sparsemixer (model flag sparsemixer_router), which picks exactly two experts.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/llama.hpp"

namespace memscale::json_io::hf {

inline model_spec phimoe(const config& c) {
  // PhimoeConfig: vocab 32064, hidden 4096, intermediate 6400, 32 layers, 32 heads, 8 kv heads
  // (None: heads), 131072 positions, attention_bias and lm_head_bias False, untied.
  model_spec m = llama_like(c, {.shape = {.layers = 32, .hidden = 4096, .heads = 32, .ffn = 6400, .vocab = 32064,
                                          .context = 131072}});
  m.kv_heads = c.raw().contains("num_key_value_heads") ? c.count("num_key_value_heads", m.heads) : 8;
  m.head_dim = 0;  // PhimoeAttention: hidden_size // num_attention_heads (no head_dim key)
  // PhimoeDecoderLayer and PhimoeModel.norm: nn.LayerNorm(hidden, eps=rms_norm_eps, elementwise_affine=True).
  m.norm = norm_kind::layernorm;
  m.norm_bias = true;
  m.qkv_bias = c.flag("attention_bias", false);  // q/k/v/o_proj(bias=config.attention_bias)
  m.attn_out_bias = m.qkv_bias;
  m.mlp_bias = false;  // PhimoeBlockSparseTop2MLP w1, w2, w3 without bias
  m.lm_head_bias = c.flag("lm_head_bias", false);
  m.experts = c.count("num_local_experts", 16);
  m.experts_per_token = c.count("num_experts_per_tok", 2);
  // sparsemixer raises unless top_k == 2 (modeling_phimoe.py@008f5c8c) and from 5.0 picks two
  // whatever top_k says (modular_phimoe.py@0233e509).
  if (m.experts_per_token != 2)
    bad_field(error_code::unsupported, c.field("num_experts_per_tok"), m.experts_per_token,
              "must be 2: PhiMoE's sparsemixer router picks exactly two experts");
  m.sparsemixer_router = true;
  m.router_subclasses_linear = true;
  m.moe_input_jitter = c.number("input_jitter_noise", 0.0) > 0.0;  // PhimoeConfig default 0.0
  return m;
}

}  // namespace memscale::json_io::hf
