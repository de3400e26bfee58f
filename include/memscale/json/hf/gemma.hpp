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
// Gemma3TextConfig (configuration_gemma3.py@008f5c8c): sliding_window 4096, sliding_window_pattern 6,
// layer i sliding unless (i + 1) % pattern == 0; layer_types, where given, must follow that period.
// Training only masks the sliding layers' scores; generate() keeps a window-bounded cache for them
// and the base model a cos/sin pair per layer type (rope_local_base_freq for the sliding ones).
inline void gemma3_sliding_layers(const config& c, model_spec& m) {
  check_layer_types(c, m.layers);
  const std::uint64_t period = c.count("sliding_window_pattern", 6);
  if (period < 2)
    bad_field(error_code::unsupported, c.field("sliding_window_pattern"), period,
              "must be >= 2 (every period-th layer full attention)");
  if (c.has("layer_types"))
    for (std::uint64_t i = 0; i < m.layers; ++i)
      if ((c.raw().at("layer_types").at(static_cast<std::size_t>(i)) == "sliding_attention") != ((i + 1) % period != 0))
        bad_field(error_code::unsupported, c.field("layer_types"), c.raw().at("layer_types"),
                  "must make every sliding_window_pattern-th layer full_attention and the others sliding_attention");
  m.sliding_window = c.count("sliding_window", 4096);
  if (m.sliding_window == 0)
    bad_field(error_code::invalid_model, c.field("sliding_window"), 0, "must be > 0 (the sliding layers' window)");
  m.sliding_layers = m.layers - m.layers / period;
  m.sliding_period = period;
  m.rotary_per_layer_type = m.sliding_layers < m.layers;
}

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
  gemma3_sliding_layers(c, m);
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
