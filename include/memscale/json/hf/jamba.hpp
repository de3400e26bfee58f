// memscale/json/hf/jamba.hpp: Jamba (transformers models/jamba/configuration_jamba.py@008f5c8c and
// modeling_jamba.py@97bb61d0): LLaMA-style pre-norm layers without positions, each an attention
// or a Mamba-1 mixer (JambaMambaMixer: weighted RMSNorms on dt, B and C) followed by a SwiGLU MLP
// or a sparse MoE block of num_experts SwiGLU experts (a bias-free router, softmax, top-k). The
// repeated block is one period of layers (graph/layers/layer_pattern.hpp, graph/layers/hybrid.hpp).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstdint>
#include <string>

#include "memscale/graph/layers/layer_pattern.hpp"
#include "memscale/json/hf/config.hpp"
#include "memscale/json/hf/llama.hpp"
#include "memscale/model.hpp"

namespace memscale::json_io::hf {

// `mamba_dt_rank`: "auto" (JambaConfig: math.ceil(hidden_size / 16)) or a count.
inline std::uint64_t jamba_dt_rank(const config& c, std::uint64_t hidden) {
  if (c.has("mamba_dt_rank") && c.raw().at("mamba_dt_rank").is_string()) {
    const std::string rank = c.text("mamba_dt_rank", "auto");
    if (rank != "auto") bad_field(error_code::invalid_model, "config.mamba_dt_rank", rank, "must be \"auto\" or a count");
    return (hidden + 15) / 16;
  }
  return c.has("mamba_dt_rank") ? c.count("mamba_dt_rank", 0) : (hidden + 15) / 16;
}

// A period and its offset (JambaConfig._check_supported_offset: offset < period).
inline std::uint64_t jamba_period(const config& c, const char* period_key, const char* offset_key,
                                  std::uint64_t period_default, std::uint64_t offset_default, std::uint64_t& offset) {
  const std::uint64_t period = c.count(period_key, period_default);
  offset = c.count(offset_key, offset_default);
  if (period == 0) bad_field(error_code::invalid_model, c.field(period_key), period, "must be > 0");
  if (offset >= period)
    bad_field(error_code::invalid_model, c.field(offset_key), offset,
              "must be below config." + std::string(period_key) + " (" + std::to_string(period) + ")");
  return period;
}

// JambaConfig's keys and defaults (configuration_jamba.py@008f5c8c JambaConfig.__init__).
inline model_spec jamba(const config& c) {
  model_spec m = llama_like(c, {.shape = {.layers = 32, .hidden = 4096, .heads = 32, .ffn = 14336, .vocab = 65536}});
  // JambaConfig(num_key_value_heads=8); None: num_attention_heads.
  const bool kv_none = c.raw().contains("num_key_value_heads") && c.raw().at("num_key_value_heads").is_null();
  m.kv_heads = kv_none ? m.heads : c.count("num_key_value_heads", 8);
  m.head_dim = 0;
  m.positions = position_kind::none;  // JambaAttention applies no positional encoding
  // q/k/v/o_proj(bias=False), JambaMLP bias=False, head_dim hidden // heads: JambaConfig has no
  // key for them, so llama_like's keys of those names are not read.
  m.qkv_bias = false;
  m.attn_out_bias = false;
  m.mlp_bias = false;
  m.rotary_fraction = 1.0;
  // Mamba layers: attention on i % attn_layer_period == attn_layer_offset.
  std::uint64_t attention_offset = 0;
  m.attention_layer_period = jamba_period(c, "attn_layer_period", "attn_layer_offset", 8, 4, attention_offset);
  m.attention_layer_offset = attention_offset;
  m.hybrid_mixer = mixer_kind::mamba1;
  const std::uint64_t expand = c.count("mamba_expand", 2);
  m.ssm_inner = expand * m.hidden;  // JambaMambaMixer: intermediate_size = mamba_expand * hidden_size
  m.ssm_state = c.count("mamba_d_state", 16);
  m.ssm_conv = c.count("mamba_d_conv", 4);
  m.ssm_dt_rank = jamba_dt_rank(c, m.hidden);
  m.ssm_proj_bias = c.flag("mamba_proj_bias", false);
  m.ssm_conv_bias = c.flag("mamba_conv_bias", true);
  m.ssm_dt_norms = ssm_dt_norm_kind::weighted;
  // Experts on i % expert_layer_period == expert_layer_offset when num_experts > 1
  // (JambaMambaDecoderLayer / JambaAttentionDecoderLayer: JambaSparseMoeBlock if num_experts > 1).
  std::uint64_t expert_offset = 0;
  const std::uint64_t expert_period = jamba_period(c, "expert_layer_period", "expert_layer_offset", 2, 1, expert_offset);
  const std::uint64_t experts = c.count("num_experts", 16);
  if (experts == 0) bad_field(error_code::invalid_model, c.field("num_experts"), experts, "must be > 0");
  if (experts > 1) {
    m.experts = experts;
    m.experts_per_token = c.count("num_experts_per_tok", 2);
    if (m.experts_per_token == 0 || m.experts_per_token > experts)
      bad_field(error_code::invalid_model, c.field("num_experts_per_tok"), m.experts_per_token,
                "must be in 1..num_experts (" + std::to_string(experts) + ")");
    if (expert_period > 1) {
      m.moe_layer_step = expert_period;
      m.moe_layer_offset = expert_period - 1 - expert_offset;
      m.dense_ffn = m.ffn;  // JambaMLP(config): intermediate_size, as each expert
    }
  }
  const std::uint64_t period = graph_layers::layers_per_block(m);
  if (m.layers % period != 0)
    bad_field(error_code::unsupported, c.field("num_hidden_layers"), m.layers,
              "must be a multiple of the layer period, lcm(attn_layer_period, expert_layer_period) = " +
                  std::to_string(period) + ": the stack repeats whole periods");
  if (c.flag("output_router_logits", false))
    bad_field(error_code::unsupported, "config.output_router_logits", true,
              "must be false: the load-balancing loss over every layer's router logits is not modelled");
  if (c.has("sliding_window") && !c.raw().at("sliding_window").is_null())
    bad_field(error_code::unsupported, c.field("sliding_window"), c.raw().at("sliding_window"),
              "must be null: sliding-window attention masks only with flash-attention 2 and is not modelled");
  const std::string act = c.text("hidden_act", "silu");
  if (act != "silu")
    bad_field(error_code::unsupported, "config.hidden_act", act, "must be silu: the Mamba mixer's activation is silu");
  static_cast<void>(c.flag("use_mamba_kernels", true));  // the path is the run's (run.ssm_kernels)
  return m;
}

}  // namespace memscale::json_io::hf
