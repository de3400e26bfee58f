// memscale/json/hf/cohere.hpp: Cohere (Command R, R+) and Cohere 2 (Command R7B) (transformers
// models/cohere/modular_cohere.py@03ea97ae, configuration_cohere.py@008e5743;
// models/cohere2/modular_cohere2.py@008e5743, configuration_cohere2.py@008e5743): LLaMA
// attention and SwiGLU MLP side by side on one CohereLayerNorm (x + attn(ln(x)) + mlp(ln(x))),
// the norm a bias-free LayerNorm written out in Python in fp32 (`layernorm_fp32_python`), a tied
// head and `logits * logit_scale` before the loss (a second logits tensor, as Granite's quotient).
// Command R+ (use_qk_norm) normalizes q and k per head with the same norm, weights (heads,
// head_dim) and (kv_heads, head_dim). RoPE is interleaved on fp32 copies of q and k (transients,
// nothing more saved). Cohere 2's layer_types make every sliding_window_pattern-th layer full
// attention without positions and the others sliding-window layers with RoPE: the window only
// masks scores, so every layer's saved tensors are the same; the window's second mask is not
// modelled, and neither is a decode cache bounded by the window (full-length KV per layer).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/llama.hpp"

namespace memscale::json_io::hf {

// CohereConfig and Cohere2Config: vocab 256000, hidden 8192, intermediate 22528, 40 layers,
// 64 heads (kv None: heads), 8192 positions, tie_word_embeddings True, attention_bias False.
inline constexpr llama_defaults cohere_defaults{
    .tie = true,
    .shape = {.layers = 40, .hidden = 8192, .heads = 64, .ffn = 22528, .vocab = 256000, .context = 8192}};

inline model_spec cohere_like(const config& c) {
  model_spec m = llama_like(c, cohere_defaults);  // attention_bias and attention_dropout as LLaMA
  m.mlp_bias = false;  // CohereMLP: gate, up and down projections without bias
  m.norm = norm_kind::layernorm_fp32_python;
  m.norm_bias = false;
  m.layout = block_layout::parallel;
  m.shared_attention_norm = true;  // CohereDecoderLayer.input_layernorm feeds both branches
  m.logits_scale = true;           // `logits * logit_scale` runs for every value
  return m;
}

inline model_spec cohere(const config& c) {
  model_spec m = cohere_like(c);
  if (c.flag("use_qk_norm", false)) m.qk_norm = qk_norm_kind::per_head;
  return m;
}

inline model_spec cohere2(const config& c) {
  model_spec m = cohere_like(c);
  m.head_dim = 0;  // Cohere2Config.__post_init__: head_dim = hidden_size // num_attention_heads
  check_layer_types(c, m.layers);
  return m;
}

}  // namespace memscale::json_io::hf
