// memscale/json/hf/llama.hpp: the LLaMA recipe (RoPE, RMSNorm, gated MLP, untied head) that
// most decoder families reuse, and the llama and mistral readers.
// Source: transformers v4.51 models/llama/{configuration,modeling}_llama.py,
// models/mistral/{configuration,modeling}_mistral.py.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/config.hpp"
#include "memscale/json/hf/record_rules.hpp"
#include "memscale/model.hpp"
#include "memscale/presets.hpp"

namespace memscale::json_io::hf {

struct llama_defaults {
  bool tie = false;  // LlamaConfig(tie_word_embeddings=False)
  std::uint64_t head_dim = 0;  // 0: hidden_size // num_attention_heads
  const char* act = "silu";
  decoder_shape_defaults shape{};  // the family Config's sizes (none: the sizing keys are required)
};

inline model_spec llama_like(const config& c, const llama_defaults& d = {}) {
  model_spec m = rotary_decoder(c, d.shape);
  m.head_dim = c.count("head_dim", d.head_dim);  // None: hidden // heads
  m.rotary_fraction = c.number("partial_rotary_factor", 1.0);
  m.norm = norm_kind::rmsnorm;
  m.norm_bias = false;
  m.mlp = gated_activation(c, "hidden_act", d.act);
  // LlamaAttention: q/k/v/o_proj(bias=config.attention_bias); LlamaMLP: bias=config.mlp_bias.
  m.qkv_bias = c.flag("attention_bias", false);
  m.attn_out_bias = m.qkv_bias;
  m.mlp_bias = c.flag("mlp_bias", false);
  m.tied_embeddings = c.flag("tie_word_embeddings", d.tie);
  // LlamaForCausalLM's loss_function upcasts logits (loss_utils.py ForCausalLMLoss);
  // eager_attention_forward runs softmax in fp32 and casts back.
  m.upcast_logits = true;
  m.softmax_fp32 = true;
  // LlamaConfig has one dropout, on the attention probabilities (attention_dropout).
  apply_dropout(c, m, {.attention = {"attention_dropout", 0.0}});
  return m;
}

inline model_spec llama(const config& c) {
  model_spec m = llama_like(c);
  m.rotary_tables_per_layer_before = 440;  // per-layer tables until 4.40 (4.38.0/1 read as 4.38.2)
  m.batch_causal_mask_release = 438;       // _update_causal_mask's per-batch (max_pos)^2 copies
  return m;
}

// MistralConfig: same blocks as LLaMA; sliding_window only masks scores, so eager
// attention's score tensors keep their size.
inline model_spec mistral(const config& c) {
  model_spec m = llama_like(c);
  m.rotary_tables_per_layer_before = 442;  // per-layer tables until PR #30642 (4.42)
  return m;
}

// What a LLaMA-recipe family changes in a ground-truth record's defaults.
struct llama_record_variant {
  bool qkv_bias = false;          // q/k/v projections with biases
  bool fused_qkv = false;         // one qkv projection
  bool geglu_tied = false;        // a gelu(tanh) gate * up MLP and a tied head
  std::uint64_t extra_norms = 0;  // norms per block beyond the two
  bool logit_softcap = false;
};

// A ground-truth record's LLaMA-recipe decoder; the record gives kv_heads, ffn and vocab.
inline model_spec llama_record_as(const record_model& r, const llama_record_variant& v) {
  model_spec spec = presets::llama_base("custom", r.layers, r.hidden, r.heads, r.heads, 1, 1);
  spec.qkv_bias = v.qkv_bias;
  spec.fused_qkv = v.fused_qkv;
  if (v.geglu_tied) {
    spec.mlp = mlp_kind::geglu;
    spec.tied_embeddings = true;
  }
  spec.extra_norms_per_block = v.extra_norms;
  spec.logit_softcap = v.logit_softcap;
  return spec;
}
inline model_spec llama_record(const record_model& r) {
  model_spec m = llama_record_as(r, {});
  m.rotary_tables_per_layer_before = 440;  // as the llama reader
  m.batch_causal_mask_release = 438;
  return m;
}
inline constexpr record_rules llama_records{.defaults = llama_record};

}  // namespace memscale::json_io::hf
