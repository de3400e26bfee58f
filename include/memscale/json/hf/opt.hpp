// memscale/json/hf/opt.hpp: OPT (transformers v4.51 models/opt/modeling_opt.py): learned
// positions with an offset of 2 rows, pre-LayerNorm (do_layer_norm_before), q/k/v/out_proj
// and fc1/fc2 with biases (enable_bias), ReLU, final LayerNorm, tied head.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/config.hpp"
#include "memscale/json/hf/record_rules.hpp"
#include "memscale/presets.hpp"

namespace memscale::json_io::hf {

inline model_spec opt(const config& c) {
  if (c.count("word_embed_proj_dim", c.count("hidden_size", 768)) != c.count("hidden_size", 768))
    bad_field(error_code::unsupported, "config.word_embed_proj_dim", c.raw().at("word_embed_proj_dim"),
              "must equal hidden_size: OPT's project_in/project_out are not modelled yet");
  if (!c.flag("do_layer_norm_before", true) || c.flag("_remove_final_layer_norm", false))
    bad_field(error_code::unsupported, "config.do_layer_norm_before", false,
              "must be true: post-LayerNorm OPT (opt-350m) is not modelled yet");
  const bool bias = c.flag("enable_bias", true);
  model_spec m{};
  m.layers = c.count("num_hidden_layers", 12);
  m.hidden = c.count("hidden_size", 768);
  m.heads = c.count("num_attention_heads", 12);
  m.ffn = c.count("ffn_dim", 3072);
  m.vocab = c.count("vocab_size", 50272);
  m.context_length = c.count("max_position_embeddings", 2048);
  m.max_positions = m.context_length + 2;  // OPTLearnedPositionalEmbedding: offset = 2
  m.mlp = plain_activation(c, "activation_function", "relu");
  m.qkv_bias = bias;
  m.attn_out_bias = bias;
  m.mlp_bias = bias;
  m.tied_embeddings = c.flag("tie_word_embeddings", true);
  // OPTAttention drops out its probabilities with attention_dropout; OPTDecoderLayer drops
  // out each branch's output with dropout; OPTDecoder adds no dropout to the embeddings
  // (modeling_opt.py @ 0184d208).
  apply_dropout(c, m, {.attention = {"attention_dropout", 0.0}, .hidden = {"dropout", 0.1}});
  m.builds_attention_mask = true;  // OPTDecoder.forward: torch.ones(b, s) when attention_mask is None
  m.attention_clamp_before = 448;  // torch.max(attn_weights, finfo.min) saves the masked scores
  return m;
}

// A ground-truth record's OPT (modeling_opt.py): learned positions with 2 offset rows,
// pre-LayerNorm, ReLU, biases, tied head, separate q/k/v projections.
inline model_spec opt_record(const record_model& r) {
  model_spec spec = presets::gpt2_base("custom", r.layers, r.hidden, r.heads);
  spec.mlp = mlp_kind::relu;
  spec.fused_qkv = false;
  spec.buffer_bytes_per_layer = 0;
  spec.attention_clamp_before = 448;  // as the opt reader
  return spec;
}
inline constexpr record_rules opt_records{.defaults = opt_record, .position_offset = 2};  // OPTLearnedPositionalEmbedding

}  // namespace memscale::json_io::hf
