// memscale/json/hf/falcon_h1.hpp: Falcon-H1 (transformers models/falcon_h1/
// configuration_falcon_h1.py@020a37d2 and modular_falcon_h1.py@3c0a5c70): LLaMA-style pre-norm
// layers with RoPE in which a Mamba-2 mixer (without its gated norm unless mamba_rms_norm) and
// attention run side by side on the same normed input, then a SwiGLU MLP; the muP multipliers
// are products in the step (model_spec::mup_multipliers), none folded into weights
// (graph/layers/hybrid.hpp).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstdint>
#include <string>

#include "memscale/json/hf/config.hpp"
#include "memscale/json/hf/llama.hpp"
#include "memscale/model.hpp"

namespace memscale::json_io::hf {

// A list of `size` numbers, or null / absent (the Config's all-ones default).
inline void read_multipliers(const config& c, const char* key, std::size_t size) {
  if (!c.has(key) || c.raw().at(key).is_null()) return;
  const json& v = c.raw().at(key);
  bool numbers = v.is_array() && v.size() == size;
  if (numbers)
    for (const json& x : v) numbers = numbers && x.is_number();
  if (!numbers) bad_field(error_code::invalid_model, c.field(key), v, "must list " + std::to_string(size) + " numbers");
}

// FalconH1Config's keys and defaults (configuration_falcon_h1.py@020a37d2).
inline model_spec falcon_h1(const config& c) {
  model_spec m = llama_like(c, {.shape = {.layers = 32, .hidden = 4096, .heads = 32, .ffn = 14336, .vocab = 128000}});
  const bool kv_none = c.raw().contains("num_key_value_heads") && c.raw().at("num_key_value_heads").is_null();
  m.kv_heads = kv_none ? m.heads : c.count("num_key_value_heads", 8);  // None: num_attention_heads
  m.context_length = c.count("max_position_embeddings", 8192);
  m.hybrid_mixer = mixer_kind::mamba2;
  m.ssm_beside_attention = true;
  m.mup_multipliers = true;
  // mamba_d_ssm (1024; None: mamba_expand * hidden_size) split into mamba_n_heads heads of
  // mamba_d_head ("auto": d_ssm // heads).
  const bool d_ssm_none = c.raw().contains("mamba_d_ssm") && c.raw().at("mamba_d_ssm").is_null();
  m.ssm_inner = d_ssm_none ? c.count("mamba_expand", 2) * m.hidden : c.count("mamba_d_ssm", 1024);
  m.ssm_heads = c.count("mamba_n_heads", 128);
  if (m.ssm_heads == 0 || m.ssm_inner % m.ssm_heads != 0)
    bad_field(error_code::invalid_model, c.field("mamba_n_heads"), m.ssm_heads,
              "must divide the Mamba width (mamba_d_ssm or mamba_expand * hidden_size) " + std::to_string(m.ssm_inner));
  if (c.has("mamba_d_head") && !c.raw().at("mamba_d_head").is_string() &&
      c.count("mamba_d_head", 0) * m.ssm_heads != m.ssm_inner)
    bad_field(error_code::invalid_model, c.field("mamba_d_head"), c.raw().at("mamba_d_head"),
              "times mamba_n_heads must equal the Mamba width " + std::to_string(m.ssm_inner));
  if (c.has("mamba_d_head") && c.raw().at("mamba_d_head").is_string() && c.text("mamba_d_head", "auto") != "auto")
    bad_field(error_code::invalid_model, c.field("mamba_d_head"), c.raw().at("mamba_d_head"), "must be \"auto\" or a count");
  m.ssm_groups = c.count("mamba_n_groups", 1);
  m.ssm_state = c.count("mamba_d_state", 256);
  m.ssm_conv = c.count("mamba_d_conv", 4);
  m.ssm_chunk = c.count("mamba_chunk_size", 256);
  m.ssm_conv_bias = c.flag("mamba_conv_bias", true);
  // in_proj(bias=mamba_proj_bias), out_proj(bias=projectors_bias): modelled when they agree.
  m.ssm_proj_bias = c.flag("mamba_proj_bias", false);
  if (c.flag("projectors_bias", false) != m.ssm_proj_bias)
    bad_field(error_code::unsupported, c.field("projectors_bias"), !m.ssm_proj_bias,
              "must equal config.mamba_proj_bias: an out_proj bias without an in_proj bias is not modelled");
  // mamba_rms_norm False: y * silu(gate); True: FalconH1RMSNormGated (n_groups, norm_before_gate),
  // described only as Mamba2's gated norm (gate before the norm, one group).
  m.ssm_gated_norm = c.flag("mamba_rms_norm", false);
  if (m.ssm_gated_norm && (c.flag("mamba_norm_before_gate", true) || m.ssm_groups != 1))
    bad_field(error_code::unsupported, "config.mamba_norm_before_gate", c.flag("mamba_norm_before_gate", true),
              "must be false with mamba_rms_norm and mamba_n_groups 1: other gated norms are not modelled");
  // The multipliers: floats (and lists of floats) multiplied in the step; their values do not
  // change what is kept.
  for (const char* key : {"lm_head_multiplier", "embedding_multiplier", "key_multiplier", "attention_out_multiplier",
                          "attention_in_multiplier", "ssm_in_multiplier", "ssm_out_multiplier"})
    static_cast<void>(c.number(key, 1.0));
  read_multipliers(c, "mlp_multipliers", 2);
  read_multipliers(c, "ssm_multipliers", 5);
  m.scale_embeddings = true;  // embed_tokens(input_ids) * embedding_multiplier
  m.logits_scale = true;      // lm_head(...) * lm_head_multiplier before the loss
  const std::string act = c.text("hidden_act", "silu");
  if (act != "silu")
    bad_field(error_code::unsupported, "config.hidden_act", act, "must be silu: the Mamba mixer's activation is silu");
  if (c.has("attn_layer_indices") && !c.raw().at("attn_layer_indices").is_null())
    bad_field(error_code::unsupported, c.field("attn_layer_indices"), c.raw().at("attn_layer_indices"),
              "must be null: attention in every layer (FalconH1Config.layers_block_type: all hybrid)");
  if (c.has("mamba_use_mlp") && !c.flag("mamba_use_mlp", true))
    bad_field(error_code::unsupported, "config.mamba_use_mlp", false, "must be true: FalconH1DecoderLayer always has its MLP");
  return m;
}

}  // namespace memscale::json_io::hf
