// memscale/graph/layers/layer_pattern.hpp: decoder layers that differ by position (Llama 4: an
// MoE layer every moe_layer_step-th, a NoPE layer every nope_layer_interval-th; Jamba: attention
// every attention_layer_period-th, Mamba between). The repeated block holds one period of
// layers, the least common multiple of the periods, and each layer of the
// period is the model with that position's MLP and attention.
#pragma once

#include <cstdint>

#include "memscale/model.hpp"

namespace memscale::graph_layers {

constexpr std::uint64_t greatest_common_divisor(std::uint64_t a, std::uint64_t b) {
  while (b != 0) {
    const std::uint64_t r = a % b;
    a = b;
    b = r;
  }
  return a;
}

constexpr std::uint64_t least_common_multiple(std::uint64_t a, std::uint64_t b) {
  return a / greatest_common_divisor(a, b) * b;
}

// Whether the model's layers differ by position.
constexpr bool has_layer_pattern(const model_spec& m) {
  return m.moe_layer_step > 1 || m.nope_layer_interval > 0 || m.attention_layer_period > 1;
}

// Decoder layers in one repeat of the block: 1 without a pattern.
constexpr std::uint64_t layers_per_block(const model_spec& m) {
  const std::uint64_t moe = m.moe_layer_step > 1 ? m.moe_layer_step : 1;
  const std::uint64_t nope = m.nope_layer_interval > 0 ? m.nope_layer_interval : 1;
  const std::uint64_t attention = m.attention_layer_period > 0 ? m.attention_layer_period : 1;
  return least_common_multiple(least_common_multiple(moe, nope), attention);
}

// Layer `i` (0-based; the pattern repeats every layers_per_block layers) as a model of its own.
// Llama4TextConfig: moe_layers = range(step - 1, layers, step), the others a dense MLP of
// intermediate_size_mlp; no_rope_layers[i] = int((i + 1) % interval != 0), a NoPE layer having
// neither qk-norm (Llama4TextAttention: use_qk_norm and use_rope) nor RoPE, and the only one
// that takes the query temperature (attn_temperature_tuning and not use_rope). JambaConfig
// (configuration_jamba.py@008f5c8c layers_block_type, layers_num_experts): attention when
// i % attn_layer_period == attn_layer_offset, else the Mamba mixer; experts when
// i % expert_layer_period == expert_layer_offset (model_spec::moe_layer_offset).
constexpr model_spec layer_at(const model_spec& m, std::uint64_t i) {
  model_spec layer = m;
  if (m.attention_layer_period > 0 && i % m.attention_layer_period != m.attention_layer_offset)
    layer.mixer = m.hybrid_mixer;
  if (m.moe_layer_step > 1 && (i + 1 + m.moe_layer_offset) % m.moe_layer_step != 0) {
    layer.ffn = m.dense_ffn;
    layer.experts = 0;
    layer.experts_per_token = 0;
    layer.shared_expert_ffn = 0;
    layer.experts_on_every_token = false;
  }
  const bool nope = m.nope_layer_interval > 0 && (i + 1) % m.nope_layer_interval == 0;
  if (nope) {
    layer.positions = position_kind::none;
    layer.qk_norm = qk_norm_kind::none;
  } else {
    layer.nope_attention_temperature = false;
  }
  return layer;
}

}  // namespace memscale::graph_layers
