// memscale/json/hf/gpt_neox.hpp: GPT-NeoX / Pythia (transformers v4.51
// models/gpt_neox/modeling_gpt_neox.py): two LayerNorms feeding attention and MLP in
// parallel (use_parallel_residual; sequential otherwise), fused query_key_value and dense
// with biases (attention_bias), partial rotary (rotary_pct, default 0.25), plain GELU MLP
// with biases, untied embed_out without a bias.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/config.hpp"
#include "memscale/json/hf/record_rules.hpp"

namespace memscale::json_io::hf {

inline model_spec gpt_neox(const config& c) {
  model_spec m{};
  m.layers = c.required({"num_hidden_layers"});
  m.hidden = c.required({"hidden_size"});
  m.heads = c.required({"num_attention_heads"});
  m.ffn = c.required({"intermediate_size"});
  m.vocab = c.required({"vocab_size"});
  m.context_length = c.count("max_position_embeddings", 0);
  m.positions = position_kind::rotary;
  m.rotary_fraction = c.has("partial_rotary_factor") ? c.number("partial_rotary_factor", 0.25)
                                                     : c.number("rotary_pct", 0.25);
  m.mlp = plain_activation(c, "hidden_act", "gelu");
  m.layout = c.flag("use_parallel_residual", true) ? block_layout::parallel : block_layout::sequential;
  m.fused_qkv = true;
  m.qkv_bias = c.flag("attention_bias", true);
  m.attn_out_bias = m.qkv_bias;
  m.mlp_bias = true;
  m.tied_embeddings = c.flag("tie_word_embeddings", false);
  m.mask_buffers_per_layer_before = 448;  // each layer's causal mask and rotary tables (_init_bias)
  // GPTNeoXModel.emb_dropout and each branch's post_*_dropout use hidden_dropout.
  apply_dropout(c, m, {.attention = {"attention_dropout", 0.0}, .hidden = {"hidden_dropout", 0.0},
                       .embedding = {"hidden_dropout", 0.0}});
  return m;
}

// A ground-truth record's GPT-NeoX-style parallel block (modeling_gpt_neox.py,
// modeling_phi.py, modeling_falcon.py; lit-gpt config.py for phi-1_5 and
// stablelm-base-alpha): what the families sharing it set differently.
struct parallel_block_variant {
  double rotary_fraction = 0.25;  // GPTNeoXConfig rotary_pct
  bool shared_attention_norm = false;
  bool fused_qkv = true;
  bool biases = true;
  bool lm_head_bias = false;
};

inline model_spec parallel_block_record(const record_model& r, const parallel_block_variant& v) {
  return model_spec{.layers = r.layers,
                    .hidden = r.hidden,
                    .heads = r.heads,
                    .positions = position_kind::rotary,
                    .rotary_fraction = v.rotary_fraction,
                    .mlp = mlp_kind::gelu,
                    .layout = block_layout::parallel,
                    .shared_attention_norm = v.shared_attention_norm,
                    .fused_qkv = v.fused_qkv,
                    .qkv_bias = v.biases,
                    .attn_out_bias = v.biases,
                    .mlp_bias = v.biases,
                    .lm_head_bias = v.lm_head_bias};
}

inline model_spec gpt_neox_record(const record_model& r) {
  model_spec m = parallel_block_record(r, {});
  m.mask_buffers_per_layer_before = 448;  // as the gpt_neox reader
  return m;
}
inline constexpr record_rules gpt_neox_records{.defaults = gpt_neox_record};

}  // namespace memscale::json_io::hf
