// memscale/json/hf/phi.hpp: Phi-1/1.5/2 (transformers v4.51 models/phi/modeling_phi.py): one
// LayerNorm feeding attention and MLP in parallel, q/k/v/dense with biases, partial rotary
// (partial_rotary_factor, default 0.5), gelu_new MLP with biases, final LayerNorm, an untied
// lm_head with a bias; optional per-head LayerNorm on q and k (qk_layernorm).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/gpt_neox.hpp"
#include "memscale/json/hf/config.hpp"

namespace memscale::json_io::hf {

inline model_spec phi(const config& c) {
  model_spec m = rotary_decoder(c);
  m.rotary_fraction = c.number("partial_rotary_factor", 0.5);
  m.mlp = plain_activation(c, "hidden_act", "gelu_new");
  m.layout = block_layout::parallel;
  m.shared_attention_norm = true;
  m.qkv_bias = true;
  m.attn_out_bias = true;
  m.mlp_bias = true;
  m.tied_embeddings = c.flag("tie_word_embeddings", false);
  m.lm_head_bias = true;
  m.softmax_fp32 = true;  // PhiAttention: softmax(dtype=float32).to(value_states.dtype)
  m.upcast_logits = true;
  m.qk_norm = c.flag("qk_layernorm", false) ? qk_norm_kind::per_head : qk_norm_kind::none;
  apply_dropout(c, m, {.attention = {"attention_dropout", 0.0}, .hidden = {"resid_pdrop", 0.0},
                       .embedding = {"embd_pdrop", 0.0}});
  return m;
}

// A ground-truth record's Phi: half the head dimension rotated (partial_rotary_factor), one
// LayerNorm for both branches, separate q/k/v projections, a biased lm_head.
inline model_spec phi_record(const record_model& r) {
  return parallel_block_record(
      r, {.rotary_fraction = 0.5, .shared_attention_norm = true, .fused_qkv = false, .lm_head_bias = true});
}
inline constexpr record_rules phi_records{.defaults = phi_record};

}  // namespace memscale::json_io::hf
