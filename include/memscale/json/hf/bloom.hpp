// memscale/json/hf/bloom.hpp: BLOOM (transformers v4.51 models/bloom/modeling_bloom.py): ALiBi
// (no position table, no length limit), LayerNorm right after the embeddings, fused
// query_key_value and every projection with a bias, 4h GELU MLP, tied head.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/config.hpp"
#include "memscale/json/hf/record_rules.hpp"
#include "memscale/presets.hpp"

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

// A ground-truth record's BLOOM (modeling_bloom.py): ALiBi (no position table), LayerNorm
// after the embeddings, fused query_key_value, BloomGelu keeps its input, no dropout by default.
inline model_spec bloom_record(const record_model& r) {
  model_spec spec = presets::gpt2_base("custom", r.layers, r.hidden, r.heads);
  spec.positions = position_kind::none;
  spec.embedding_norm = true;
  spec.mlp = mlp_kind::gelu;
  spec.dropout = false;
  spec.buffer_bytes_per_layer = 0;
  return spec;
}
inline constexpr record_rules bloom_records{.defaults = bloom_record};

}  // namespace memscale::json_io::hf
