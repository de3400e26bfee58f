// memscale/graph/layers/layer_pattern.hpp: decoder layers that differ by position (Llama 4: an
// MoE layer every moe_layer_step-th, a NoPE layer every nope_layer_interval-th, as EXAONE 4's
// full-attention layers; Jamba: attention every attention_layer_period-th, Mamba between). The
// repeated block holds one period of layers, the least common multiple of the periods, and each
// layer of the period is the model with that position's MLP and attention.
#pragma once

#include <array>
#include <cstddef>
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

// A model without a pattern has periods of 1: those take no division (detail::ceil_div says why).
constexpr std::uint64_t least_common_multiple(std::uint64_t a, std::uint64_t b) {
  if (a == 1) return b;
  if (b == 1) return a;
  return a / greatest_common_divisor(a, b) * b;
}

// Whether the model's layers differ by position.
constexpr bool has_layer_pattern(const model_spec& m) {
  return m.moe_layer_step > 1 || m.nope_layer_interval > 0 || m.attention_layer_period > 1 || m.single_mixer_blocks;
}

// A stack of single-mixer blocks (Nemotron-H) as a repeated unit and the layers left over,
// written once before it. Its patterns have no period (Nemotron Nano 2: 27 Mamba-2, 25 MLP and
// 4 attention layers in no repeating order; Nemotron 3 Nano: 23 Mamba-2, 23 MoE, 6 attention), and the graph holds one repeated block of at most
// graph_capacity ops, so the layers are grouped by kind: `repeats` copies of a unit holding
// count / repeats layers of each kind, the remainders before it. Every layer is written, so the
// parameters and what the step keeps are the stack's; only the order of the layers differs.
// `repeats` makes the fewest layers to write (unit plus remainders), the largest on a tie.
struct single_mixer_grouping {
  std::array<std::uint64_t, layer_block_kinds> unit{};     // layers of each layer_block_kind in the repeated unit
  std::array<std::uint64_t, layer_block_kinds> leading{};  // layers of each kind written once before it
  std::array<layer_block_kind, layer_block_kinds> order{};  // the first `kinds` entries: the kinds in order of first use
  std::size_t kinds = 0;
  std::uint64_t repeats = 1;
  [[nodiscard]] constexpr std::uint64_t unit_layers() const {
    std::uint64_t n = 0;
    for (const std::uint64_t c : unit) n += c;
    return n;
  }
};

constexpr single_mixer_grouping group_single_mixer_layers(const model_spec& m) {
  std::array<std::uint64_t, layer_block_kinds> count{};
  single_mixer_grouping g{};
  for (std::size_t i = 0; i < static_cast<std::size_t>(m.layers) && i < max_block_pattern_layers; ++i) {
    const layer_block_kind k = m.layer_blocks[i];
    if (count[static_cast<std::size_t>(k)]++ == 0) g.order[g.kinds++] = k;
  }
  std::uint64_t best = ~std::uint64_t{0};
  for (std::uint64_t r = 1; r <= m.layers; ++r) {
    std::uint64_t written = 0;
    for (const std::uint64_t c : count) written += c / r + c % r;
    if (written > best) continue;
    best = written;
    g.repeats = r;
    for (std::size_t k = 0; k < layer_block_kinds; ++k) {
      g.unit[k] = count[k] / r;
      g.leading[k] = count[k] % r;
    }
  }
  return g;
}

// The layers whose MLP is the model's experts: the MoE layers of a single-mixer stack, every
// moe_layer_step-th layer (layer_at), or all but the leading dense ones.
constexpr std::uint64_t moe_layers(const model_spec& m) {
  if (m.experts == 0) return 0;
  std::uint64_t n = 0;
  if (m.single_mixer_blocks) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(m.layers) && i < max_block_pattern_layers; ++i)
      n += m.layer_blocks[i] == layer_block_kind::moe ? 1 : 0;
    return n;
  }
  if (m.moe_layer_step > 1) {
    for (std::uint64_t i = 0; i < m.layers; ++i) n += (i + 1 + m.moe_layer_offset) % m.moe_layer_step == 0 ? 1 : 0;
    return n;
  }
  return m.layers - m.leading_dense_layers;
}

// Whether the layers differ only in that every nope_layer_interval-th one skips the rotation and
// keeps everything else (EXAONE 4's full-attention layers). Writing the rotating layer for all of
// them overstates the NoPE layers by the rotation's transients only, so a run that would otherwise
// write a period of layers as one unit (checkpointed: one input per period, the whole period
// recomputed at once) or refuse it (a forward with a KV cache) writes every layer rotating.
constexpr bool rope_only_layer_pattern(const model_spec& m) {
  return m.nope_layer_interval > 0 && m.nope_keeps_qk_norm && !m.nope_attention_temperature &&
         m.moe_layer_step <= 1 && m.attention_layer_period <= 1 && !m.single_mixer_blocks;
}

// Whether a run writes the model's layers otherwise than declared: a rope-only pattern (above) under
// checkpointing, selective checkpointing or a no-grad forward becomes every layer rotating.
constexpr bool rewrites_layers(const model_spec& m, bool checkpointed_or_no_grad) {
  return checkpointed_or_no_grad && rope_only_layer_pattern(m);
}

// The model as a run writes its layers (rewrites_layers).
constexpr model_spec layers_as_written(const model_spec& m, bool checkpointed_or_no_grad) {
  model_spec written = m;
  if (rewrites_layers(m, checkpointed_or_no_grad)) {
    written.nope_layer_interval = 0;
    written.nope_keeps_qk_norm = false;
  }
  return written;
}

// Decoder layers in one repeat of the block: 1 without a pattern.
constexpr std::uint64_t layers_per_block(const model_spec& m) {
  if (m.single_mixer_blocks) return group_single_mixer_layers(m).unit_layers();
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
  if (m.moe_layer_step > 1 && (i + 1 + m.moe_layer_offset) % m.moe_layer_step != 0)
    layer = with_dense_mlp(layer, m.dense_ffn);
  const bool nope = m.nope_layer_interval > 0 && (i + 1) % m.nope_layer_interval == 0;
  if (nope) {
    layer.positions = position_kind::none;
    if (!m.nope_keeps_qk_norm) layer.qk_norm = qk_norm_kind::none;
  } else {
    layer.nope_attention_temperature = false;
  }
  return layer;
}

}  // namespace memscale::graph_layers
