// memscale/json/hf/gemma.hpp: Gemma, Gemma 2 and Gemma 3 text decoders (transformers v4.51
// models/gemma/modeling_gemma.py, gemma2/modeling_gemma2.py, gemma3/modeling_gemma3.py):
// LLaMA blocks with a GeGLU MLP (gelu_pytorch_tanh gate), embeddings scaled by
// sqrt(hidden_size), a tied head and head_dim 256 by default. Gemma 2 and 3 add
// sandwich norms (pre- and post-attention, pre- and post-feedforward RMSNorm); Gemma 2
// caps attention scores and final logits with tanh; Gemma 3 has per-head qk-norm.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/llama.hpp"

namespace memscale::json_io::hf {

inline model_spec gemma_like(const config& c) {
  // GemmaConfig: hidden_activation (newer) or hidden_act, both gelu_pytorch_tanh.
  const char* act_key = c.has("hidden_activation") ? "hidden_activation" : "hidden_act";
  model_spec m = llama_like(c, {.tie = true, .head_dim = 256, .act = "gelu_pytorch_tanh"});
  m.mlp = gated_activation(c, act_key, "gelu_pytorch_tanh");
  m.scale_embeddings = true;
  m.rms_norm_fp32_scale = true;  // GemmaRMSNorm, Gemma2RMSNorm: (x * (1 + w.float())).type_as(x)
  return m;
}

inline model_spec gemma(const config& c) {
  model_spec m = gemma_like(c);
  m.batch_causal_mask_release = 438;  // modeling_gemma.py@v4.38 shares LLaMA's _update_causal_mask
  return m;
}

inline model_spec gemma2(const config& c) {
  model_spec m = gemma_like(c);
  m.block_norms = branch_norms::sandwich;
  m.logit_softcap = c.has("final_logit_softcapping") || !c.raw().contains("final_logit_softcapping");  // default 30.0
  m.attention_softcap = c.has("attn_logit_softcapping") || !c.raw().contains("attn_logit_softcapping");  // default 50.0
  return m;
}

// Gemma3TextConfig (configuration_gemma3.py@008f5c8c): vocab 262208, hidden 2304, intermediate
// 9216, 26 layers, 8 heads, 4 kv heads, head_dim 256, 131072 positions, hidden_activation
// gelu_pytorch_tanh (no hidden_act), tied, attention_bias False, both softcaps None.
inline model_spec gemma3_text(const config& c) {
  model_spec m = llama_like(c, {.tie = true,
                                .head_dim = 256,
                                .act = "gelu_pytorch_tanh",
                                .shape = {.layers = 26, .hidden = 2304, .heads = 8, .ffn = 9216, .vocab = 262208,
                                          .context = 131072}});
  m.kv_heads = c.count("num_key_value_heads", 4);
  m.mlp = gated_activation(c, "hidden_activation", "gelu_pytorch_tanh");  // Gemma3MLP reads only this key
  m.mlp_bias = false;  // Gemma3MLP: gate, up and down projections without bias
  m.scale_embeddings = true;
  m.rms_norm_fp32_scale = true;  // Gemma3RMSNorm for the block norms, q_norm, k_norm and the final norm
  m.block_norms = branch_norms::sandwich;
  m.qk_norm = qk_norm_kind::per_head;
  m.logit_softcap = c.has("final_logit_softcapping");    // Gemma3TextConfig default None
  m.attention_softcap = c.has("attn_logit_softcapping");  // default None
  return m;
}

// A ground-truth record's Gemma: GemmaMLP's gelu(tanh) gate * up, tied head; Gemma 2 adds
// pre/post feed-forward norms and final_logit_softcapping.
inline model_spec gemma_record(const record_model& r) {
  model_spec m = llama_record_as(r, {.geglu_tied = true});
  m.rms_norm_fp32_scale = true;
  m.batch_causal_mask_release = 438;  // as the gemma reader
  return m;
}
inline model_spec gemma2_record(const record_model& r) {
  model_spec m = llama_record_as(r, {.geglu_tied = true, .extra_norms = 2, .logit_softcap = true});
  m.rms_norm_fp32_scale = true;
  return m;
}
inline constexpr record_rules gemma_records{.defaults = gemma_record};
inline constexpr record_rules gemma2_records{.defaults = gemma2_record};

}  // namespace memscale::json_io::hf
