// memscale/json/hf/exaone4.hpp: EXAONE 4.0 (transformers models/exaone4/modeling_exaone4.py@0205eec1,
// configuration_exaone4.py@008e5743): LLaMA projections and SwiGLU without biases, RMSNorm after each
// branch instead of before it (post_attention_layernorm, post_feedforward_layernorm, as OLMo 2) and
// on each head's queries and keys (q_norm, k_norm of head_dim, as Qwen3). With a sliding window, layer
// i slides unless (i + 1) % sliding_window_pattern == 0, and only the sliding layers rotate q and k
// (Exaone4Attention.forward: apply_rotary_pos_emb if sliding_window is None or is_sliding; q_norm and
// k_norm on every layer): the full-attention layers are NoPE layers that keep their qk-norm, every
// period-th (model_spec::nope_layer_interval, nope_keeps_qk_norm). A stack that is not a whole number
// of periods rotates every layer, which overstates a full layer by the rotation's transients.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "memscale/json/hf/llama.hpp"

namespace memscale::json_io::hf {

// The period of the full-attention layers: sliding_window_pattern as an int, or as a string of 'L's
// ending in one 'G' ("LLLG": 4), or read off layer_types; each must make every period-th layer
// full_attention and the others sliding_attention. 0: every layer slides.
inline std::uint64_t exaone4_full_attention_period(const config& c, std::uint64_t layers) {
  check_layer_types(c, layers);
  std::uint64_t period = 4;  // Exaone4Config(sliding_window_pattern=4)
  if (c.has("layer_types")) {
    const json& types = c.raw().at("layer_types");
    period = 0;
    for (std::uint64_t i = 0; i < layers && period == 0; ++i)
      if (types.at(static_cast<std::size_t>(i)) == "full_attention") period = i + 1;
  } else if (c.has("sliding_window_pattern") && c.raw().at("sliding_window_pattern").is_string()) {
    const std::string pattern = c.text("sliding_window_pattern", "");
    if (pattern.size() < 2 || pattern.back() != 'G' ||
        pattern.find_first_not_of('L') != pattern.size() - 1)
      bad_field(error_code::unsupported, c.field("sliding_window_pattern"), pattern,
                "must be 'L' repeated, then one 'G' (every period-th layer full attention)");
    period = pattern.size();
  } else {
    period = c.count("sliding_window_pattern", 4);
  }
  if (period == 1)
    bad_field(error_code::unsupported, c.field("layer_types"), c.raw().value("layer_types", json()),
              "must have sliding layers when sliding_window is set (set sliding_window to null instead)");
  if (c.has("layer_types"))
    for (std::uint64_t i = 0; i < layers; ++i)
      if ((c.raw().at("layer_types").at(static_cast<std::size_t>(i)) == "sliding_attention") !=
          (period == 0 || (i + 1) % period != 0))
        bad_field(error_code::unsupported, c.field("layer_types"), c.raw().at("layer_types"),
                  "must make every period-th layer full_attention and the others sliding_attention");
  return period;
}

// Exaone4Config: vocab 102400, hidden 4096, intermediate 16384, 32 layers, 32 heads and kv heads,
// 2048 positions, untied, sliding_window 4096.
inline model_spec exaone4(const config& c) {
  model_spec m = llama_like(
      c, {.shape = {.layers = 32, .hidden = 4096, .heads = 32, .ffn = 16384, .vocab = 102400, .context = 2048}});
  m.qkv_bias = false;  // Exaone4Attention and Exaone4MLP: every projection without bias
  m.attn_out_bias = false;
  m.mlp_bias = false;
  m.block_norms = branch_norms::post;
  m.qk_norm = qk_norm_kind::per_head;
  // Absent: the default window; null (None): every layer full attention, with RoPE.
  if (c.raw().contains("sliding_window") && c.raw().at("sliding_window").is_null()) {
    if (c.has("layer_types"))
      for (const json& t : c.raw().at("layer_types"))
        if (t != "full_attention")
          bad_field(error_code::unsupported, c.field("layer_types"), c.raw().at("layer_types"),
                    "must be full_attention throughout when sliding_window is null");
    return m;
  }
  m.sliding_window = c.count("sliding_window", 4096);
  if (m.sliding_window == 0)
    bad_field(error_code::invalid_model, c.field("sliding_window"), 0, "must be > 0 (the sliding layers' window)");
  const std::uint64_t period = exaone4_full_attention_period(c, m.layers);
  m.sliding_layers = period == 0 ? m.layers : m.layers - m.layers / period;
  m.sliding_period = period;
  if (period > 0 && m.layers % period == 0) {
    m.nope_layer_interval = period;
    m.nope_keeps_qk_norm = true;
  }
  return m;
}

}  // namespace memscale::json_io::hf
