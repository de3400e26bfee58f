// memscale/json/hf/qwen2_vl.hpp: Qwen2-VL (model_type qwen2_vl, Qwen2VLForConditionalGeneration)
// in a text-only run, and the text decoder Qwen2.5-VL shares with it (transformers
// models/qwen2_vl/modeling_qwen2_vl.py and configuration_qwen2_vl.py @ 00b676f8): the Qwen2
// decoder (its keys at the top level, as the published checkpoints write them, or in text_config)
// with multimodal RoPE, and the vision tower and merger loaded beside it and never run. Each
// attention layer cuts its own cos and sin out of the 3-D tables (apply_multimodal_rotary_pos_emb:
// rotary_rows_per_layer) and owns a rotary embedding whose inv_freq buffer (head_dim / 2, fp32) is
// per layer; the loss is self.loss_function (loss_utils).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstdint>

#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/json/hf/qwen2.hpp"

namespace memscale::json_io::hf {

// The text decoder of Qwen2-VL and Qwen2.5-VL. Their Config classes move top-level text keys into
// text_config; newer files nest them.
inline model_spec qwen_vl_text_decoder(const config& c) {
  const config text = c.has("text_config") ? c.nested("text_config") : c;
  // Qwen2VLTextConfig / Qwen2_5_VLTextConfig defaults: vocab 152064, hidden 8192, intermediate
  // 29568, 80 layers, 64 heads (8 kv), 32768 positions; head_dim is hidden / heads.
  model_spec m = llama_like(text, {.shape = {.layers = 80, .hidden = 8192, .heads = 64, .ffn = 29568,
                                             .vocab = 152064, .context = 32768}});
  m.kv_heads = text.count("num_key_value_heads", 8);
  m.head_dim = 0;
  m.qkv_bias = true;  // Qwen2VLAttention: q/k/v_proj(bias=True), o_proj(bias=False)
  m.attn_out_bias = false;
  m.rotary_rows_per_layer = true;
  m.buffer_bytes_per_layer = storage(dtype::fp32, head_dim_of(m) / 2).value;  // each layer's inv_freq
  if (!text.has("tie_word_embeddings")) m.tied_embeddings = c.flag("tie_word_embeddings", false);
  return m;
}

// Parameters of Qwen2VisionTransformerPretrainedModel (Qwen2VLVisionConfig defaults: depth 32,
// embed_dim 1280, mlp_ratio 4, 3 channels, patch 14, temporal patch 2, spatial merge 2, hidden
// (the merger's output) 3584): a Conv3d patch embedding without bias, per block two LayerNorms, a
// fused qkv and proj with biases and an fc1/fc2 MLP with biases (embed_dim x mlp_ratio), and the
// PatchMerger (LayerNorm over embed_dim, then Linear(4e, 4e), GELU, Linear(4e, hidden)).
inline std::uint64_t qwen2_vl_vision_parameters(const config& v) {
  constexpr memscale::detail::quantity q{"vision tower parameters"};
  const auto mul = [&](std::uint64_t a, std::uint64_t b) { return memscale::detail::checked_mul(a, b, q); };
  const auto add = [&](std::uint64_t a, std::uint64_t b) { return memscale::detail::checked_add(a, b, q); };
  const auto linear = [&](std::uint64_t in, std::uint64_t out) { return add(mul(in, out), out); };  // with bias
  const std::uint64_t e = v.count("embed_dim", 1280);
  const std::uint64_t ratio = v.count("mlp_ratio", 4);
  const std::uint64_t f = mul(e, ratio);  // int(embed_dim * mlp_ratio)
  const std::uint64_t patch = v.count("patch_size", 14);
  const std::uint64_t merge = v.count("spatial_merge_size", 2);
  const std::uint64_t out = v.count("hidden_size", 3584);
  const std::uint64_t kernel = mul(mul(mul(v.count("in_channels", 3), v.count("temporal_patch_size", 2)), patch), patch);
  std::uint64_t n = mul(kernel, e);  // patch_embed.proj (Conv3d, no bias)
  const std::uint64_t block = add(add(mul(4, e), linear(e, mul(3, e))), add(linear(e, e), add(linear(e, f), linear(f, e))));
  n = add(n, mul(v.count("depth", 32), block));
  const std::uint64_t merged = mul(e, mul(merge, merge));
  return add(n, add(mul(2, e), add(linear(merged, merged), linear(merged, out))));  // merger: ln_q + MLP
}

// The tower's shape as image inputs run it (graph/layers/vision_tower.hpp), with
// Qwen2VLVisionConfig's defaults (num_heads 16): every block attends over a whole image.
inline vision_tower_spec qwen2_vl_vision(const config& v) {
  const std::uint64_t e = v.count("embed_dim", 1280);
  vision_tower_spec t{.kind = vision_tower_kind::qwen2_vl,
                      .depth = v.count("depth", 32),
                      .hidden = e,
                      .intermediate = memscale::detail::checked_mul(e, v.count("mlp_ratio", 4),
                                                                    memscale::detail::quantity{"vision MLP width"}),
                      .heads = v.count("num_heads", 16),
                      .in_channels = v.count("in_channels", 3),
                      .patch = v.count("patch_size", 14),
                      .temporal_patch = v.count("temporal_patch_size", 2),
                      .merge = v.count("spatial_merge_size", 2),
                      .out_hidden = v.count("hidden_size", 3584)};
  if (t.heads == 0 || t.hidden % t.heads != 0)
    bad_field(error_code::invalid_model, "vision_config.num_heads", json(t.heads), "must divide vision_config.embed_dim");
  if (t.patch == 0 || t.merge == 0)
    bad_field(error_code::invalid_model, "vision_config.patch_size", json(t.patch),
              "and spatial_merge_size must be > 0");
  return t;
}

inline model_spec qwen2_vl(const config& c) {
  model_spec m = qwen_vl_text_decoder(c);
  m.idle_tower_parameters = qwen2_vl_vision_parameters(c.nested_or_defaults("vision_config"));
  m.vision = qwen2_vl_vision(c.nested_or_defaults("vision_config"));
  return m;
}

}  // namespace memscale::json_io::hf
