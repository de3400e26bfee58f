// memscale/json/hf/qwen2_5_vl.hpp: Qwen2.5-VL (model_type qwen2_5_vl,
// Qwen2_5_VLForConditionalGeneration) in a text-only run: Qwen2-VL's text decoder
// (qwen_vl_text_decoder; transformers models/qwen2_5_vl/modeling_qwen2_5_vl.py @ 00b676f8,
// configuration_qwen2_5_vl.py) with its own vision tower and merger, loaded beside it and never run.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstdint>

#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/json/hf/qwen2_vl.hpp"

namespace memscale::json_io::hf {

// Parameters of Qwen2_5_VisionTransformerPretrainedModel (Qwen2_5_VLVisionConfig defaults: depth
// 32, hidden 3584, intermediate 3420, 3 channels, patch 14, temporal patch 2, spatial merge 2, out
// 3584): a Conv3d patch embedding without bias, per block two RMSNorms, a fused qkv and proj with
// biases and a gated MLP (gate, up, down) with biases, and the merger (an RMSNorm over hidden, then
// Linear(4h, 4h), GELU, Linear(4h, out)).
inline std::uint64_t qwen2_5_vl_vision_parameters(const config& v) {
  constexpr memscale::detail::quantity q{"vision tower parameters"};
  const auto mul = [&](std::uint64_t a, std::uint64_t b) { return memscale::detail::checked_mul(a, b, q); };
  const auto add = [&](std::uint64_t a, std::uint64_t b) { return memscale::detail::checked_add(a, b, q); };
  const auto linear = [&](std::uint64_t in, std::uint64_t out) { return add(mul(in, out), out); };  // with bias
  const std::uint64_t h = v.count("hidden_size", 3584);
  const std::uint64_t f = v.count("intermediate_size", 3420);
  const std::uint64_t patch = v.count("patch_size", 14);
  const std::uint64_t merge = v.count("spatial_merge_size", 2);
  const std::uint64_t out = v.count("out_hidden_size", 3584);
  const std::uint64_t kernel = mul(mul(mul(v.count("in_channels", 3), v.count("temporal_patch_size", 2)), patch), patch);
  std::uint64_t n = mul(kernel, h);  // patch_embed.proj (Conv3d, no bias)
  const std::uint64_t mlp = add(mul(2, linear(h, f)), linear(f, h));
  const std::uint64_t block = add(add(mul(2, h), linear(h, mul(3, h))), add(linear(h, h), mlp));
  n = add(n, mul(v.count("depth", 32), block));
  const std::uint64_t merged = mul(h, mul(merge, merge));
  return add(n, add(h, add(linear(merged, merged), linear(merged, out))));  // merger: ln_q + MLP
}

// The tower's shape as image inputs run it (vision_tower.hpp), with Qwen2_5_VLVisionConfig's
// defaults (window_size 112, fullatt_block_indexes [7, 15, 23, 31], num_heads 16).
inline vision_tower_spec qwen2_5_vl_vision(const config& v) {
  std::uint64_t full_blocks = 4;
  if (v.has("fullatt_block_indexes")) {
    const json& list = v.raw().at("fullatt_block_indexes");
    if (!list.is_array())
      bad_field(error_code::invalid_model, "vision_config.fullatt_block_indexes", list, "must be a list of block indexes");
    full_blocks = list.size();
  }
  vision_tower_spec t{.kind = vision_tower_kind::qwen2_5_vl,
                      .depth = v.count("depth", 32),
                      .hidden = v.count("hidden_size", 3584),
                      .intermediate = v.count("intermediate_size", 3420),
                      .heads = v.count("num_heads", 16),
                      .in_channels = v.count("in_channels", 3),
                      .patch = v.count("patch_size", 14),
                      .temporal_patch = v.count("temporal_patch_size", 2),
                      .merge = v.count("spatial_merge_size", 2),
                      .out_hidden = v.count("out_hidden_size", 3584),
                      .window_size = v.count("window_size", 112),
                      .full_attention_blocks = full_blocks};
  if (t.heads == 0 || t.hidden % t.heads != 0)
    bad_field(error_code::invalid_model, "vision_config.num_heads", json(t.heads), "must divide vision_config.hidden_size");
  if (t.patch == 0 || t.merge == 0)
    bad_field(error_code::invalid_model, "vision_config.patch_size", json(t.patch),
              "and spatial_merge_size must be > 0");
  return t;
}

inline model_spec qwen2_5_vl(const config& c) {
  model_spec m = qwen_vl_text_decoder(c);
  m.idle_tower_parameters = qwen2_5_vl_vision_parameters(c.nested_or_defaults("vision_config"));
  m.vision = qwen2_5_vl_vision(c.nested_or_defaults("vision_config"));
  return m;
}

}  // namespace memscale::json_io::hf
