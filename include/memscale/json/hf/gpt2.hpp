// memscale/json/hf/gpt2.hpp: GPT-2 (transformers v4.51 models/gpt2/modeling_gpt2.py): learned
// positions, pre-LayerNorm, fused c_attn and every projection with a bias, gelu_new MLP of
// n_inner (None: 4 * n_embd), tied head; each GPT2Attention registers an
// n_positions^2 bool causal-mask buffer.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/config.hpp"
#include "memscale/json/hf/record_rules.hpp"
#include "memscale/presets.hpp"

namespace memscale::json_io::hf {

// The GPT-2 layout's sizes as GPT2Config and the configs that copy it (GPTBigCodeConfig) name
// them: n_layer 12, n_embd 768, n_head 12, n_inner None (4 x n_embd), vocab 50257,
// n_positions 1024, tied; the activation's default is the family's.
inline model_spec gpt2_layout(const config& c, std::string_view name, const char* activation) {
  model_spec m = presets::gpt2_base(name, c.count({"n_layer", "num_hidden_layers"}, 12),
                                    c.count({"n_embd", "hidden_size"}, 768), c.count({"n_head", "num_attention_heads"}, 12));
  m.ffn = c.count("n_inner", 4 * m.hidden);
  m.vocab = c.count("vocab_size", 50257);
  m.max_positions = c.count({"n_positions", "max_position_embeddings"}, 1024);
  m.context_length = m.max_positions;
  m.mlp = plain_activation(c, "activation_function", activation);
  m.tied_embeddings = c.flag("tie_word_embeddings", true);
  return m;
}

inline model_spec gpt2(const config& c) {
  model_spec m = gpt2_layout(c, "gpt2", "gelu_new");
  m.buffer_bytes_per_layer = m.max_positions * m.max_positions;  // torch.bool mask
  m.generate_tuple_cache_before = 452;  // tuple caches until transformers 4.52 (PR #35761)
  // GPT2Attention.attn_dropout (attn_pdrop), resid_dropout and GPT2MLP.dropout
  // (resid_pdrop), GPT2Model.drop (embd_pdrop).
  apply_dropout(c, m, {.attention = {"attn_pdrop", 0.1}, .hidden = {"resid_pdrop", 0.1}, .embedding = {"embd_pdrop", 0.1}});
  return m;
}

// A ground-truth record's GPT-2: its "activation" says gelu for HF's gelu_new.
inline model_spec gpt2_record(const record_model& r) { return presets::gpt2_base("custom", r.layers, r.hidden, r.heads); }
inline constexpr record_rules gpt2_records{.defaults = gpt2_record, .activation_label_kept = true};

}  // namespace memscale::json_io::hf
