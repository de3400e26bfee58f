// memscale/json/hf/bert.hpp: BERT, RoBERTa and DistilBERT encoders (transformers v4.51
// models/bert/modeling_bert.py, roberta/modeling_roberta.py, distilbert/modeling_distilbert.py):
// word + learned position (+ token-type) embeddings and a LayerNorm, post-LayerNorm blocks
// with biases everywhere, GELU MLP. Heads: ...Model has BERT's pooler (RoBERTa's too);
// ...ForMaskedLM has dense + LayerNorm + a tied decoder with its own bias and no pooler;
// ...ForSequenceClassification has a dense h x h (pooler / classification dense /
// pre_classifier) and a classifier of num_labels.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/config.hpp"
#include "memscale/json/hf/record_rules.hpp"
#include "memscale/presets.hpp"

namespace memscale::json_io::hf {

inline model_spec bert_encoder(const config& c) {
  model_spec m = presets::bert_base("bert", c.count("num_hidden_layers", 12), c.count("hidden_size", 768),
                                    c.count("num_attention_heads", 12));
  m.ffn = c.count("intermediate_size", 3072);
  m.vocab = c.count("vocab_size", 30522);
  m.max_positions = c.count("max_position_embeddings", 512);
  m.context_length = m.max_positions;
  m.type_vocab = c.count("type_vocab_size", 2);
  m.mlp = plain_activation(c, "hidden_act", "gelu");
  m.tied_embeddings = c.flag("tie_word_embeddings", true);
  // BertSelfAttention.dropout (attention_probs_dropout_prob); BertEmbeddings, BertSelfOutput
  // and BertOutput dropout (hidden_dropout_prob).
  apply_dropout(c, m, {.attention = {"attention_probs_dropout_prob", 0.1}, .hidden = {"hidden_dropout_prob", 0.1},
                       .embedding = {"hidden_dropout_prob", 0.1}});
  return m;
}

// No architectures: the masked-LM head, the larger loss region (as records without a head).
inline model_spec with_encoder_head(const config& c, model_spec m) {
  apply_head(c, m, head_kind::masked_lm);
  m.pooler = m.head == head_kind::none;
  return m;
}

inline model_spec bert(const config& c) { return with_encoder_head(c, bert_encoder(c)); }

inline model_spec roberta(const config& c) {
  model_spec m = bert_encoder(c);
  m.vocab = c.count("vocab_size", 50265);
  // RobertaEmbeddings: positions start at padding_idx + 1 = 2, so the 514-row table
  // holds 512 tokens.
  const std::uint64_t offset = c.count("pad_token_id", 1) + 1;
  m.context_length = m.max_positions > offset ? m.max_positions - offset : 0;
  return with_encoder_head(c, m);
}

inline model_spec distilbert(const config& c) {
  model_spec m = presets::bert_base("distilbert", c.count("n_layers", 6), c.count("dim", 768), c.count("n_heads", 12));
  m.ffn = c.count("hidden_dim", 3072);
  m.vocab = c.count("vocab_size", 30522);
  m.max_positions = c.count("max_position_embeddings", 512);
  m.context_length = m.max_positions;
  m.type_vocab = 0;  // DistilBERT has no token types
  m.mlp = plain_activation(c, "activation", "gelu");
  m.tied_embeddings = c.flag("tie_weights_", true);
  // MultiHeadSelfAttention.dropout (attention_dropout); Embeddings and FFN dropout (dropout).
  apply_dropout(c, m, {.attention = {"attention_dropout", 0.1}, .hidden = {"dropout", 0.1}, .embedding = {"dropout", 0.1}});
  m = with_encoder_head(c, m);
  m.pooler = false;  // DistilBertModel has no pooler
  return m;
}

// A ground-truth record's BERT or RoBERTa. BertForSequenceClassification: pooler +
// classifier. BertForMaskedLM, and a record that names no head: the MLM head's b*s*V logits
// are the larger loss region, so an unknown head is never under-estimated.
inline model_spec encoder_record(const record_model& r, std::uint64_t type_vocab) {
  model_spec spec = presets::bert_base("custom", r.layers, r.hidden, r.heads);
  spec.type_vocab = type_vocab;
  if (r.class_name.find("SequenceClassification") != std::string_view::npos) {
    spec.head = head_kind::sequence_classification;
    spec.tied_embeddings = false;
  } else {
    spec.head = head_kind::masked_lm;
    spec.pooler = false;
  }
  return spec;
}
inline model_spec bert_record(const record_model& r) { return encoder_record(r, 2); }
inline model_spec roberta_record(const record_model& r) { return encoder_record(r, 1); }  // RobertaConfig type_vocab_size
inline constexpr record_rules bert_records{.defaults = bert_record};
inline constexpr record_rules roberta_records{.defaults = roberta_record};

}  // namespace memscale::json_io::hf
