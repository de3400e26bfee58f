// memscale/json/hf/gemma3.hpp: Gemma 3's multimodal checkpoints (model_type gemma3,
// Gemma3ForConditionalGeneration: gemma-3-4b/12b/27b) in a text-only run: the Gemma 3 text
// decoder of text_config, with the SigLIP vision tower and the projector loaded beside it and
// never run (transformers models/gemma3/modular_gemma3.py Gemma3Model, Gemma3MultiModalProjector;
// models/siglip/modeling_siglip.py SiglipVisionTransformer, v4.51 and 5.x alike).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstdint>

#include "memscale/detail/math.hpp"
#include "memscale/json/hf/gemma.hpp"
#include "memscale/vision_tower.hpp"

namespace memscale::json_io::hf {

// Parameters of a SigLIP vision tower (SiglipVisionConfig defaults: hidden 768, intermediate
// 3072, 12 layers, 3 channels, image 224, patch 16): the patch Conv2d with its bias, a position
// table of (image / patch)^2 rows, per layer two LayerNorms and the q, k, v, out, fc1 and fc2
// Linears with biases, the post LayerNorm, and unless vision_use_head is false the attention-
// pooling head (a probe, nn.MultiheadAttention's in_proj and out_proj, a LayerNorm, an MLP).
inline std::uint64_t siglip_vision_parameters(const config& v) {
  constexpr memscale::detail::quantity q{"vision tower parameters"};
  const auto checked_mul = [&](std::uint64_t a, std::uint64_t b) { return memscale::detail::checked_mul(a, b, q); };
  const auto checked_add = [&](std::uint64_t a, std::uint64_t b) { return memscale::detail::checked_add(a, b, q); };
  const std::uint64_t h = v.count("hidden_size", 768);
  const std::uint64_t f = v.count("intermediate_size", 3072);
  const std::uint64_t layers = v.count("num_hidden_layers", 12);
  const std::uint64_t channels = v.count("num_channels", 3);
  const std::uint64_t image = v.count("image_size", 224);
  const std::uint64_t patch = v.count("patch_size", 16);
  if (patch == 0 || image < patch)
    bad_field(error_code::invalid_model, v.field("patch_size"), patch, "must be > 0 and at most image_size");
  const std::uint64_t side = image / patch;
  const std::uint64_t layer_norm = checked_mul(2, h);
  const std::uint64_t attention = checked_mul(4, checked_add(checked_mul(h, h), h));
  const std::uint64_t mlp = checked_add(checked_add(checked_mul(h, f), f), checked_add(checked_mul(f, h), h));
  const std::uint64_t layer = checked_add(checked_add(checked_mul(2, layer_norm), attention), mlp);
  std::uint64_t n = checked_add(checked_mul(checked_mul(checked_mul(channels, patch), patch), h), h);  // patch_embedding
  n = checked_add(n, checked_mul(checked_mul(side, side), h));                              // position_embedding
  n = checked_add(n, checked_add(checked_mul(layers, layer), layer_norm));                 // encoder, post_layernorm
  // SiglipVisionTransformer: use_head = True unless the config says vision_use_head.
  if (v.flag("vision_use_head", true))
    n = checked_add(n, checked_add(checked_add(h, attention), checked_add(layer_norm, mlp)));
  return n;
}

// The tower's shape as image inputs run it (vision_tower.hpp): SiglipVisionConfig's defaults and
// Gemma3Config's mm_tokens_per_image (256).
inline vision_tower_spec gemma3_vision(const config& c, const config& v, std::uint64_t text_hidden) {
  vision_tower_spec t{.kind = vision_tower_kind::siglip_gemma3,
                      .depth = v.count("num_hidden_layers", 12),
                      .hidden = v.count("hidden_size", 768),
                      .intermediate = v.count("intermediate_size", 3072),
                      .heads = v.count("num_attention_heads", 12),
                      .in_channels = v.count("num_channels", 3),
                      .patch = v.count("patch_size", 16),
                      .out_hidden = text_hidden,
                      .image_size = v.count("image_size", 224),
                      .tokens_per_image = c.count("mm_tokens_per_image", 256)};
  // Checked where images run it (vision_tower_siglip.hpp): a text-only run never reads the shape.
  return t;
}

inline model_spec gemma3(const config& c) {
  model_spec m = gemma3_text(c.nested("text_config"));
  // Gemma3Config: a vision_config left out is SiglipVisionConfig()'s defaults.
  const config vision = c.nested_or_defaults("vision_config");
  // Gemma3MultiModalProjector: mm_input_projection_weight (vision hidden x text hidden) and
  // mm_soft_emb_norm, an RMSNorm over the vision hidden size; its average pool has no parameters.
  const std::uint64_t vision_hidden = vision.count("hidden_size", 768);
  constexpr memscale::detail::quantity q{"vision tower parameters"};
  const std::uint64_t projector =
      memscale::detail::checked_add(memscale::detail::checked_mul(vision_hidden, m.hidden, q), vision_hidden, q);
  m.idle_tower_parameters = memscale::detail::checked_add(siglip_vision_parameters(vision), projector, q);
  m.vision = gemma3_vision(c, vision, m.hidden);
  // Gemma3ForConditionalGeneration computes its own loss at every version read: logits.float(),
  // then a contiguous copy of the shifted logits for nn.CrossEntropyLoss (not loss_utils' label shift).
  m.upcast_logits = true;
  m.shift_labels = false;
  return m;
}

}  // namespace memscale::json_io::hf
