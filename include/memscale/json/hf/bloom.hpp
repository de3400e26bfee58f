// memscale/json/hf/bloom.hpp: BLOOM (transformers v4.51 models/bloom/modeling_bloom.py): ALiBi
// (no position table, no length limit), LayerNorm right after the embeddings, fused
// query_key_value and every projection with a bias, 4h GELU MLP, tied head.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/config.hpp"

namespace memscale::json_io::hf {

inline model_spec bloom(const config& c) {
  model_spec m{};
  m.layers = c.count({"n_layer", "num_hidden_layers"}, 2);  // BloomConfig defaults
  m.hidden = c.count({"hidden_size", "n_embed"}, 64);
  m.heads = c.count({"n_head", "num_attention_heads"}, 8);
  m.ffn = 4 * m.hidden;  // BloomMLP: dense_h_to_4h
  m.vocab = c.count("vocab_size", 250880);
  m.positions = position_kind::none;
  m.embedding_norm = true;
  m.fused_qkv = true;
  m.qkv_bias = true;
  m.attn_out_bias = true;
  m.mlp_bias = true;
  m.tied_embeddings = c.flag("tie_word_embeddings", true);
  // BloomAttention.attention_dropout; dropout_add after each branch (hidden_dropout); no
  // dropout on the embeddings.
  apply_dropout(c, m, {.attention = {"attention_dropout", 0.0}, .hidden = {"hidden_dropout", 0.0}});
  m.builds_attention_mask = true;  // BloomModel.forward: torch.ones(b, s) when attention_mask is None
  m.alibi = true;
  m.attention_keeps_locals = true;  // BloomAttention.forward
  return m;
}

}  // namespace memscale::json_io::hf
