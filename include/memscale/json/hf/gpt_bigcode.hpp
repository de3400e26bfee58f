// memscale/json/hf/gpt_bigcode.hpp: GPTBigCode, StarCoder and SantaCoder (transformers
// models/gpt_bigcode/modeling_gpt_bigcode.py@00574544, configuration_gpt_bigcode.py@05ff2e98):
// the GPT-2 layout (learned positions, pre-LayerNorm, biases, tied head) with multi-query
// attention: one fused c_attn of hidden + 2 x head_dim outputs (kv_heads 1; multi_query false:
// kv_heads = heads), k and v read as views of it, and one n_positions^2 bool causal mask
// registered on the model (not per layer).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/config.hpp"
#include "memscale/presets.hpp"

namespace memscale::json_io::hf {

inline model_spec gpt_bigcode(const config& c) {
  // GPTBigCodeConfig: n_layer 12, n_embd 768, n_head 12, n_inner None (4 x n_embd),
  // vocab 50257, n_positions 1024, activation_function "gelu_pytorch_tanh".
  model_spec m = presets::gpt2_base("gpt_bigcode", c.count({"n_layer", "num_hidden_layers"}, 12),
                                    c.count({"n_embd", "hidden_size"}, 768), c.count({"n_head", "num_attention_heads"}, 12));
  m.ffn = c.count("n_inner", 4 * m.hidden);
  m.vocab = c.count("vocab_size", 50257);
  m.max_positions = c.count({"n_positions", "max_position_embeddings"}, 1024);
  m.context_length = m.max_positions;
  m.kv_heads = c.flag("multi_query", true) ? 1 : m.heads;  // num_key_value_heads = 1 if multi_query else n_head
  m.mlp = plain_activation(c, "activation_function", "gelu_pytorch_tanh");
  m.tied_embeddings = c.flag("tie_word_embeddings", true);
  // GPTBigCodeModel registers one bool `bias` of n_positions^2 for the whole model.
  m.buffer_bytes_per_layer = 0;
  m.model_buffer_bytes = memscale::detail::checked_mul(m.max_positions, m.max_positions, memscale::detail::quantity{"causal mask (n_positions^2)"});
  // _attn's upcast_masked_softmax: the scores go to fp32 for the softmax, which is cast back.
  m.softmax_fp32 = c.flag("attention_softmax_in_fp32", true);
  // k and v are views of c_attn's output, which the attention matmuls keep whole; the query
  // is reshaped out of it into a contiguous copy.
  m.attention_keeps_fused_kv = true;
  // GPTBigCodeAttention.attn_dropout (attn_pdrop), resid_dropout and GPTBigCodeMLP.dropout
  // (resid_pdrop), GPTBigCodeModel.drop (embd_pdrop); 0.1 each by default.
  apply_dropout(c, m, {.attention = {"attn_pdrop", 0.1}, .hidden = {"resid_pdrop", 0.1}, .embedding = {"embd_pdrop", 0.1}});
  return m;
}

}  // namespace memscale::json_io::hf
