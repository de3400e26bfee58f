// memscale/json/hf/starcoder2.hpp: StarCoder2 (transformers v4.51
// models/starcoder2/modeling_starcoder2.py): GQA with RoPE, LayerNorm (with bias), biases
// on q/k/v/o and on the plain c_fc / c_proj MLP (use_bias), gelu_pytorch_tanh, tied head
// by default.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/config.hpp"

namespace memscale::json_io::hf {

inline model_spec starcoder2(const config& c) {
  model_spec m = rotary_decoder(c);
  m.mlp = plain_activation(c, "hidden_act", "gelu_pytorch_tanh");
  const bool bias = c.flag("use_bias", true);
  m.qkv_bias = bias;
  m.attn_out_bias = bias;
  m.mlp_bias = bias;
  m.tied_embeddings = c.flag("tie_word_embeddings", true);
  m.upcast_logits = true;
  m.softmax_fp32 = true;
  apply_dropout(c, m, {.attention = {"attention_dropout", 0.0}, .hidden = {"residual_dropout", 0.0},
                       .embedding = {"embedding_dropout", 0.0}});
  return m;
}

}  // namespace memscale::json_io::hf
