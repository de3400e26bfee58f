// memscale/graph/layers/vision_tower_mobilenetv5.hpp: Gemma 3n's frozen MobileNetV5 vision tower and
// embed_vision's soft tokens run on a training step's images: what the forward holds at its largest
// moment and what it leaves to the language model. Sources: transformers models/gemma3n/
// modeling_gemma3n.py@00aa0f5d (Gemma3nModel.forward, get_image_features, get_placeholder_mask,
// Gemma3nMultimodalEmbedder, Gemma3nRMSNorm), models/timm_wrapper/modeling_timm_wrapper.py@01273ede
// (TimmWrapperModel.forward casts pixel_values to the tower's dtype), timm/models/mobilenetv5.py,
// timm/models/_efficientnet_blocks.py, timm/layers/attention2d.py and timm/layers/fast_norm.py
// @aa4b5850 (the encoder, its blocks, MultiQueryAttention2d and rms_norm2d, which does not upcast).
#pragma once

#include <cstdint>
#include <initializer_list>

#include "memscale/bytes.hpp"
#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/error.hpp"
#include "memscale/graph/layers/tower_bytes.hpp"
#include "memscale/model.hpp"
#include "memscale/precision_policy.hpp"
#include "memscale/training.hpp"
#include "memscale/vision_tower.hpp"

namespace memscale::graph_layers {

// What the images' soft tokens save for backward in full training (under LoRA embed_vision is frozen
// and inputs_embeds takes no gradient: nothing). get_image_features views the tower's (N, hidden,
// 16, 16) output as (N, 256, hidden), scales it in place and runs embed_vision's soft path:
// soft_embedding_norm, embedding_projection and embedding_post_projection_norm (Gemma3nRMSNorm:
// x.float(), x / sqrt(mean(x^2) + eps), times the weight, type_as(x)). The tower's output takes no
// gradient, so the first norm records nothing until its weight's mul, which saves the fp32
// normalised x; the projection saves the product cast back; the post-projection norm (with_scale=
// False: its weight is a buffer) saves its fp32 input and root per row; masked_scatter its mask
// (B x S bool).
constexpr bytes soft_tokens_saved(const model_spec& model, const training_spec& run) {
  if (run.images.per_sample == 0 || is_lora(run)) return {};
  const vision_tower_spec& v = model.vision;
  constexpr memscale::detail::quantity q{"vision tower activations"};
  const auto mul = [&](std::uint64_t x, std::uint64_t y) { return memscale::detail::checked_mul(x, y, q); };
  const std::uint64_t rows = mul(mul(run.micro_batch, run.images.per_sample), v.tokens_per_image);
  return storage(dtype::fp32, mul(rows, v.hidden + v.out_hidden + 1)) +
         storage(precision_policy_of(run).param, mul(rows, v.hidden)) +
         storage(dtype::boolean, mul(run.micro_batch, run.seq_len));
}

// The frozen tower's forward (no parameter requires grad, the pixels neither: no autograd graph,
// every temporary goes when its statement ends) on N images of H x W pixels in the parameters'
// dtype (a); every level of the encoder scales with H x W.
constexpr tower_bytes mobilenetv5_tower_bytes(const model_spec& model, const training_spec& run) {
  const vision_tower_spec& v = model.vision;
  const mobilenet_moments& mm = v.mobilenet;
  constexpr memscale::detail::quantity q{"vision tower activations"};
  const auto mul = [&](std::uint64_t x, std::uint64_t y) { return memscale::detail::checked_mul(x, y, q); };
  const dtype a = precision_policy_of(run).param;
  const std::uint64_t n = mul(run.micro_batch, run.images.per_sample);
  const std::uint64_t height = run.images.height;
  const std::uint64_t width = run.images.width;
  // Gemma3nProcessor writes each image as boi, vision_soft_tokens_per_image image tokens and eoi
  // (processing_gemma3n.py@8fcd1112 full_image_sequence).
  memscale::detail::require(run.seq_len >= mul(run.images.per_sample, v.tokens_per_image + 2), error_code::invalid_run,
                            "run.seq_len", "must count every token of a sample, its images' included "
                            "(images_per_sample x (vision_soft_tokens_per_image + the boi and eoi tokens))",
                            run.seq_len);
  const std::uint64_t text_tokens = mul(run.micro_batch, run.seq_len);
  const std::uint64_t pixels = mul(mul(n, v.in_channels), mul(height, width));
  // Positions of all N images at a level whose side is the image's / reduction.
  const auto positions = [&](std::uint64_t reduction) { return mul(n, mul(height / reduction, width / reduction)); };

  tower_bytes out{};
  // The processor's fp32 pixel_values (N, 3, H, W).
  out.inputs = storage(dtype::fp32, pixels);
  // Alive before the tower runs: Gemma3nModel.forward's inputs_embeds (after the hard embedders'
  // torch.where) and per_layer_inputs (B, S, layers, hidden_size_per_layer_input).
  const bytes before = storage(a, mul(text_tokens, model.hidden)) +
                       storage(a, mul(text_tokens, mul(model.layers, model.per_layer_input_width)));
  // TimmWrapperModel's pixel_values.to(self.dtype): a copy when the tower is not fp32.
  const bytes cast = a != dtype::fp32 ? storage(a, pixels) : bytes{};

  // The widest UniversalInvertedResidual (stage 1's first block in mobilenetv5_300m_enc, 128 ->
  // make_divisible(128 x 6) = 768 channels at H/4 x W/4) inside pw_exp's RmsNormAct2d at
  // `x * weight`: the block input (bound as shortcut), dw_start's output, the 1x1 conv's output,
  // x * rsqrt(v), its product by the weight, and v (one channel).
  const std::uint64_t expansion_channels = memscale::detail::checked_add(
      mul(mm.expansion_dw_start ? 2 : 1, mm.expansion_in), mul(3, mm.expansion_mid) + 1, q);
  const bytes expansion = storage(a, mul(positions(mm.expansion_reduction), expansion_channels));
  // MultiQueryAttention2d unfused (timm's fused_attn off: torch without scaled_dot_product_attention,
  // as the CPU traces' torch 1.13; memscale reads run.attention eager as that case): at the softmax
  // the block input and its norm (in channels), q (heads x key_dim), k and v (key_dim over the
  // kv_stride-strided keys), the scores and their softmax. Fused (F.scaled_dot_product_attention,
  // timm's default from torch 2.0, so on CUDA): no scores, below the expansion moment.
  bytes attention{};
  if (run.attention == attention_impl::eager && mm.attention_heads > 0) {
    const std::uint64_t queries = positions(mm.attention_reduction);
    const std::uint64_t keys_per_image = (height / mm.attention_reduction / mm.attention_kv_stride) *
                                         (width / mm.attention_reduction / mm.attention_kv_stride);
    const std::uint64_t keys = mul(n, keys_per_image);
    const std::uint64_t scores = mul(mul(queries, mm.attention_heads), keys_per_image);
    attention = storage(a, mul(2, mul(queries, mm.attention_in))) +
                storage(a, mul(queries, mul(mm.attention_heads, mm.attention_key_dim))) +
                storage(a, mul(2, mul(keys, mm.attention_key_dim))) + storage(a, mul(2, scores));
  }
  const bytes tower = cast + (expansion > attention ? expansion : attention);

  const std::uint64_t rows = mul(n, v.tokens_per_image);
  const bytes features = storage(a, mul(rows, v.out_hidden));
  // After the tower: the features beside get_placeholder_mask's inputs_embeds[mask] copy (a
  // check), then masked_scatter's new inputs_embeds.
  const bytes scatter = storage(a, mul(text_tokens, model.hidden));
  const bytes after = soft_tokens_saved(model, run) + features + (features > scatter ? features : scatter);
  out.forward = before + (tower > after ? tower : after);
  // Through the language model: the features (image_hidden_states of the output) and, when
  // masked_scatter does not save it (LoRA), the special_image_mask (B x S bool; unsqueeze and
  // expand_as are views).
  out.held = features + (is_lora(run) ? storage(dtype::boolean, text_tokens) : bytes{});
  return out;
}

}  // namespace memscale::graph_layers
