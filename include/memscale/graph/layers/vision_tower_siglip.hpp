// memscale/graph/layers/vision_tower_siglip.hpp: Gemma 3's frozen SigLIP vision tower and
// multimodal projector run on a training step's images: what the forward holds at its largest
// moment and what it leaves to the language model. Sources: transformers models/gemma3/
// modeling_gemma3.py @ 0018aa64 (get_image_features, Gemma3MultiModalProjector,
// get_placeholder_mask, create_causal_mask_mapping), models/siglip/modeling_siglip.py @ 1c51a62f
// (SiglipVisionEmbeddings, SiglipEncoderLayer, SiglipAttention, SiglipMLP) and
// models/gemma3/image_processing_gemma3.py (every image resized to image_size^2, pan and scan off).
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

// The frozen tower's forward (no autograd graph: every temporary goes when its statement ends).
// N images of the micro-batch, P = (image_size / patch)^2 patches each, hidden h, activations of
// the parameters' dtype (a).
constexpr tower_bytes siglip_gemma3_tower_bytes(const model_spec& model, const training_spec& run) {
  const vision_tower_spec& v = model.vision;
  constexpr memscale::detail::quantity q{"vision tower activations"};
  const auto mul = [&](std::uint64_t x, std::uint64_t y) { return memscale::detail::checked_mul(x, y, q); };
  const dtype a = precision_policy_of(run).param;
  const std::uint64_t tokens = v.tokens_per_image;
  memscale::detail::require(v.heads > 0 && v.hidden % v.heads == 0, error_code::invalid_model,
                            "model.vision.heads (vision_config.num_attention_heads)", "must divide the tower's hidden size",
                            v.heads);
  // Gemma3MultiModalProjector pools the patches_per_image side with AvgPool2d(kernel =
  // patches_per_image // tokens_per_side): the pooled side must be tokens_per_side, or
  // get_placeholder_mask refuses the features.
  std::uint64_t per_side = 0;
  while ((per_side + 1) * (per_side + 1) <= tokens) ++per_side;
  const std::uint64_t patches = v.patch == 0 ? 0 : v.image_size / v.patch;
  memscale::detail::require(per_side > 0 && per_side * per_side == tokens && patches >= per_side &&
                                patches / (patches / per_side) == per_side,
                            error_code::invalid_model, "model.vision.tokens_per_image (mm_tokens_per_image)",
                            "must be a square whose side the projector's average pool reaches from "
                            "vision_config.image_size / patch_size",
                            tokens);
  // Gemma3Processor writes each image as boi, mm_tokens_per_image image tokens and eoi.
  memscale::detail::require(run.seq_len >= mul(run.images.per_sample, tokens + 2), error_code::invalid_run,
                            "run.seq_len", "must count every token of a sample, its images' included "
                            "(images_per_sample x (mm_tokens_per_image + the boi and eoi tokens))",
                            run.seq_len);
  const std::uint64_t n = mul(run.micro_batch, run.images.per_sample);
  const std::uint64_t side = v.image_size / v.patch;
  const std::uint64_t np = mul(n, side * side);
  const std::uint64_t text_tokens = mul(run.micro_batch, run.seq_len);
  const bytes nh = storage(a, mul(np, v.hidden));
  const std::uint64_t pixels = mul(mul(n, v.in_channels), mul(v.image_size, v.image_size));

  tower_bytes out{};
  // The processor's fp32 pixel_values (N, C, image_size, image_size) and token_type_ids (B, S).
  out.inputs = storage(dtype::fp32, pixels) + storage(dtype::int64, text_tokens);
  // Alive before the tower runs: Gemma3Model.forward's scaled inputs_embeds.
  const bytes before = storage(a, mul(text_tokens, model.hidden));

  // SiglipVisionEmbeddings: the patch Conv2d on pixel_values.to(the weights' dtype) (a copy when
  // not fp32), then patch_embeds + position_embedding(position_ids) beside patch_embeds.
  const bytes embed_conv = (a != dtype::fp32 ? storage(a, pixels) : bytes{}) + nh;
  const bytes embed_sum = nh + storage(a, mul(side * side, v.hidden)) + nh;
  // Beside the stream (the encoder layer's residual). SiglipAttention: layer_norm1's output, q,
  // k and v. Eager: matmul's scores and their scaled copy, then the fp32 softmax and its cast back
  // (8 bytes per score at most); SDPA's math path: the scores and their softmax; a fused kernel
  // none. After: the weights, matmul's output and its transposed contiguous copy.
  const std::uint64_t score_count = mul(mul(n, v.heads), mul(side * side, side * side));
  const bool eager = run.attention == attention_impl::eager;
  const bool math = run.attention == attention_impl::sdpa_math;
  const bytes qkv = nh + storage(a, mul(3, mul(np, v.hidden)));
  const bytes scores = eager ? (a == dtype::fp32 ? storage(dtype::fp32, mul(2, score_count))
                                                 : storage(a, mul(2, score_count)) + storage(dtype::fp32, score_count))
                       : math ? storage(a, mul(2, score_count))
                              : bytes{};
  const bytes weights = eager || math ? storage(a, score_count) : bytes{};
  const bytes attention = qkv + (scores > weights + nh + nh ? scores : weights + nh + nh);
  // SiglipMLP: layer_norm2's output beside fc1's output and its gelu_pytorch_tanh.
  const bytes mlp = nh + storage(a, mul(mul(2, np), v.intermediate));
  // A residual add: the branch output and the new stream.
  const bytes residual = nh + nh;
  bytes beside = residual;
  for (const bytes b : {attention, mlp})
    if (b > beside) beside = b;
  const bytes layers = nh + beside;
  // Gemma3MultiModalProjector: post_layernorm's output beside the reshaped contiguous copy, the
  // AvgPool2d output (N, h, tokens), Gemma3RMSNorm in fp32 (the upcast, pow, the normalised x
  // and the weighted product) and the projection.
  const std::uint64_t pooled = mul(mul(n, tokens), v.hidden);
  const bytes features = storage(a, mul(mul(n, tokens), v.out_hidden));
  const bytes projector = nh + nh + storage(a, pooled) + storage(dtype::fp32, mul(3, pooled)) + features;
  bytes largest = embed_conv;
  for (const bytes b : {embed_sum, layers, projector})
    if (b > largest) largest = b;
  // After the tower: the features beside get_placeholder_mask's inputs_embeds[mask] copy, then
  // masked_scatter's new inputs_embeds.
  const bytes scatter = storage(a, mul(text_tokens, model.hidden));
  const bytes after = features + (features > scatter ? features : scatter);
  out.forward = before + (largest > after ? largest : after);

  // Gemma3Model.forward's locals through the language model: image_features, special_image_mask
  // (B x S bool; expand_as is a view) and create_causal_mask_mapping's mask per layer type: the
  // token_type_ids or_mask_function keeps masking_utils from skipping it, (B, 1, S, S) of the
  // model's dtype under eager, bool under SDPA; flash attention takes none.
  const std::uint64_t mask_types = (model.sliding_layers > 0 ? 1 : 0) + (model.sliding_layers < model.layers ? 1 : 0);
  const std::uint64_t mask_elements = mul(mask_types, mul(text_tokens, run.seq_len));
  const bytes masks = run.attention == attention_impl::flash ? bytes{}
                      : eager                                 ? storage(a, mask_elements)
                                                              : storage(dtype::boolean, mask_elements);
  out.held = features + storage(dtype::boolean, text_tokens) + masks;
  return out;
}

}  // namespace memscale::graph_layers
