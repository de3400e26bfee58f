// memscale/json/hf/falcon.hpp: Falcon (transformers v4.51 models/falcon/modeling_falcon.py).
// Fused query_key_value of (heads + 2 * kv) * head_dim, where kv is num_kv_heads with
// new_decoder_architecture, 1 with multi_query, heads otherwise; parallel attention and
// MLP fed by one input_layernorm, or by ln_attn and ln_mlp when new_decoder_architecture
// (num_ln_in_parallel_attn 2); a sequential block with post_attention_layernorm when not
// parallel_attn. RoPE, or ALiBi (alibi); biases on every projection when bias; tied head.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/gpt_neox.hpp"
#include "memscale/json/hf/config.hpp"

namespace memscale::json_io::hf {

inline model_spec falcon(const config& c) {
  model_spec m{};
  m.layers = c.count({"num_hidden_layers", "n_layer"}, 32);  // FalconConfig defaults (Falcon-7B)
  m.hidden = c.count("hidden_size", 4544);
  m.heads = c.count({"num_attention_heads", "n_head"}, 71);
  m.vocab = c.count("vocab_size", 65024);
  m.ffn = c.count("ffn_hidden_size", 4 * m.hidden);
  const bool new_arch = c.flag("new_decoder_architecture", false);
  if (new_arch) m.kv_heads = c.count("num_kv_heads", m.heads);
  else m.kv_heads = c.flag("multi_query", true) ? 1 : m.heads;
  const bool alibi = c.flag("alibi", false);
  m.positions = alibi ? position_kind::none : position_kind::rotary;
  // FalconModel.forward builds the (b * heads, 1, s) bias with build_alibi_tensor, as BLOOM
  // does, and passes it to SDPA inside attn_mask.
  m.alibi = alibi;
  m.context_length = alibi ? 0 : c.count("max_position_embeddings", 2048);
  m.mlp = plain_activation(c, "activation", "gelu");
  if (new_arch) {
    m.layout = block_layout::parallel;
    m.shared_attention_norm = c.count("num_ln_in_parallel_attn", 2) == 1;
  } else {
    m.layout = c.flag("parallel_attn", true) ? block_layout::parallel : block_layout::sequential;
    m.shared_attention_norm = m.layout == block_layout::parallel;
  }
  m.fused_qkv = true;
  const bool bias = c.flag("bias", false);
  m.qkv_bias = bias;
  m.attn_out_bias = bias;
  m.mlp_bias = bias;
  m.tied_embeddings = c.flag("tie_word_embeddings", true);
  // FalconAttention.attention_dropout; dropout_add after the blocks' branches
  // (hidden_dropout); no dropout on the embeddings.
  apply_dropout(c, m, {.attention = {"attention_dropout", 0.0}, .hidden = {"hidden_dropout", 0.0}});
  return m;
}

// A ground-truth record's Falcon: rotary over the whole head, one LayerNorm for both
// branches (parallel_attn), no biases (FalconConfig bias=False).
inline model_spec falcon_record(const record_model& r) {
  return parallel_block_record(r, {.rotary_fraction = 1.0, .shared_attention_norm = true, .biases = false});
}
inline constexpr record_rules falcon_records{.defaults = falcon_record};

}  // namespace memscale::json_io::hf
