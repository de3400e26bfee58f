// memscale/json/hf/gptj.hpp: GPT-J (transformers v4.51 models/gptj/modeling_gptj.py): one
// LayerNorm (ln_1) feeding attention and MLP in parallel, bias-free q/k/v/out_proj, rotary
// on the first rotary_dim channels of each head, gelu_new MLP (fc_in/fc_out, n_inner None:
// 4 * n_embd) with biases, untied lm_head with a bias.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/config.hpp"

namespace memscale::json_io::hf {

inline model_spec gptj(const config& c) {
  model_spec m{};
  m.layers = c.count({"n_layer", "num_hidden_layers"}, 28);
  m.hidden = c.count({"n_embd", "hidden_size"}, 4096);
  m.heads = c.count({"n_head", "num_attention_heads"}, 16);
  m.ffn = c.count("n_inner", 4 * m.hidden);
  m.vocab = c.count("vocab_size", 50400);
  m.context_length = c.count({"n_positions", "max_position_embeddings"}, 2048);
  m.positions = position_kind::rotary;
  const std::uint64_t head_dim = m.heads == 0 ? 0 : m.hidden / m.heads;
  const std::uint64_t rotary_dim = c.count("rotary_dim", head_dim);  // None: the whole head
  m.rotary_fraction = head_dim == 0 ? 1.0 : static_cast<double>(rotary_dim) / static_cast<double>(head_dim);
  // GPTJAttention.embed_positions (v4.46): an fp32 n_positions x rotary_dim sin/cos table
  // per layer, kept as a plain attribute and moved to the device on first use.
  m.buffer_bytes_per_layer = m.context_length * rotary_dim * 4;
  m.mlp = plain_activation(c, "activation_function", "gelu_new");
  m.layout = block_layout::parallel;
  m.shared_attention_norm = true;
  m.mlp_bias = true;
  m.tied_embeddings = c.flag("tie_word_embeddings", false);
  m.lm_head_bias = true;
  apply_dropout(c, m, {.attention = {"attn_pdrop", 0.0}, .hidden = {"resid_pdrop", 0.0}, .embedding = {"embd_pdrop", 0.0}});
  return m;
}

}  // namespace memscale::json_io::hf
