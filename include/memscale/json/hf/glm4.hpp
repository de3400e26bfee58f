// memscale/json/hf/glm4.hpp: GLM-4 (transformers models/glm4/modular_glm4.py@08c53278,
// configuration_glm4.py@008e5743): LLaMA projections with q/k/v biases (attention_bias) and an
// o_proj without one, RoPE on half of head_dim (partial_rotary_factor 0.5), Phi-3's fused
// gate_up_proj (model.fused_gate_up), and Gemma-2 sandwich norms:
// input, post_self_attn, post_attention (before the MLP) and post_mlp RMSNorms per layer.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/llama.hpp"

namespace memscale::json_io::hf {

inline model_spec glm4(const config& c) {
  // Glm4Config: vocab 151552, hidden 4096, intermediate 13696, 40 layers, 32 heads, 2 kv heads,
  // head_dim 128, 131072 positions, partial_rotary_factor 0.5, attention_bias True, untied.
  model_spec m = llama_like(c, {.head_dim = 128,
                                .shape = {.layers = 40, .hidden = 4096, .heads = 32, .ffn = 13696, .vocab = 151552,
                                          .context = 131072}});
  m.kv_heads = c.count("num_key_value_heads", 2);
  m.rotary_fraction = c.number("partial_rotary_factor", 0.5);
  m.qkv_bias = c.flag("attention_bias", true);
  m.attn_out_bias = false;  // GlmAttention.o_proj(bias=False)
  m.mlp_bias = false;       // Phi3MLP: gate_up_proj and down_proj without bias
  m.fused_gate_up = true;   // Glm4MLP.gate_up_proj, one nn.Linear
  m.block_norms = branch_norms::sandwich;
  return m;
}

}  // namespace memscale::json_io::hf
