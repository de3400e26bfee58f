// memscale/json/hf/gpt_bigcode.hpp: GPTBigCode, StarCoder and SantaCoder (transformers
// models/gpt_bigcode/modeling_gpt_bigcode.py@00574544, configuration_gpt_bigcode.py@05ff2e98):
// the GPT-2 layout (learned positions, pre-LayerNorm, biases, tied head) with multi-query
// attention: one fused c_attn of hidden + 2 x head_dim outputs (kv_heads 1; multi_query false:
// kv_heads = heads), k and v read as views of it, and one n_positions^2 bool causal mask
// registered on the model (not per layer).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/config.hpp"
#include "memscale/json/hf/gpt2.hpp"

namespace memscale::json_io::hf {

inline model_spec gpt_bigcode(const config& c) {
  // GPTBigCodeConfig: GPT2Config's sizes, activation_function "gelu_pytorch_tanh".
  model_spec m = gpt2_layout(c, "gpt_bigcode", "gelu_pytorch_tanh");
  m.kv_heads = c.flag("multi_query", true) ? 1 : m.heads;  // num_key_value_heads = 1 if multi_query else n_head
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
