// memscale/json/hf/qwen3_vl.hpp: Qwen3-VL (model_type qwen3_vl, Qwen3VLForConditionalGeneration)
// in a text-only run: the Qwen3 decoder of text_config, with the vision tower and its mergers
// loaded beside it and never run (transformers models/qwen3_vl/modeling_qwen3_vl.py @ 00709b86,
// configuration_qwen3_vl.py). The text model is Qwen3's layer for layer (q_norm and k_norm over
// head_dim); its interleaved multimodal RoPE is applied once to the frequencies in
// Qwen3VLTextRotaryEmbedding, so every layer reads the same cos and sin, as LLaMA's do; without
// images no deepstack features are added; the loss is self.loss_function (loss_utils).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstdint>
#include <vector>

#include "memscale/detail/math.hpp"
#include "memscale/json/hf/llama.hpp"

namespace memscale::json_io::hf {

// Parameters of Qwen3VLVisionModel (Qwen3VLVisionConfig defaults: depth 27, hidden 1152,
// intermediate 4304, 3 channels, patch 16, temporal patch 2, spatial merge 2, out 3584, 2304
// position embeddings, deepstack indexes [8, 16, 24]): a Conv3d patch embedding with bias, a
// learned position table, per block two LayerNorms, a fused qkv and proj with biases and an fc1/fc2
// MLP with biases, the merger (LayerNorm over hidden, then Linear(4h, 4h), GELU, Linear(4h, out))
// and one deepstack merger per index (the same with a LayerNorm over 4h).
inline std::uint64_t qwen3_vl_vision_parameters(const config& v) {
  constexpr memscale::detail::quantity q{"vision tower parameters"};
  const auto mul = [&](std::uint64_t a, std::uint64_t b) { return memscale::detail::checked_mul(a, b, q); };
  const auto add = [&](std::uint64_t a, std::uint64_t b) { return memscale::detail::checked_add(a, b, q); };
  const auto linear = [&](std::uint64_t in, std::uint64_t out) { return add(mul(in, out), out); };  // with bias
  const std::uint64_t h = v.count("hidden_size", 1152);
  const std::uint64_t f = v.count("intermediate_size", 4304);
  const std::uint64_t patch = v.count("patch_size", 16);
  const std::uint64_t merge = v.count("spatial_merge_size", 2);
  const std::uint64_t out = v.count("out_hidden_size", 3584);
  std::uint64_t deepstack = 3;  // deepstack_visual_indexes [8, 16, 24]
  if (v.has("deepstack_visual_indexes")) {
    const json& indexes = v.raw().at("deepstack_visual_indexes");
    if (!indexes.is_array()) bad_field(error_code::invalid_model, v.field("deepstack_visual_indexes"), indexes, "must be an array");
    deepstack = indexes.size();
  }
  const std::uint64_t kernel = mul(mul(mul(v.count("in_channels", 3), v.count("temporal_patch_size", 2)), patch), patch);
  std::uint64_t n = add(mul(kernel, h), h);                          // patch_embed.proj (Conv3d, bias)
  n = add(n, mul(v.count("num_position_embeddings", 2304), h));      // pos_embed
  const std::uint64_t block = add(add(mul(4, h), linear(h, mul(3, h))), add(linear(h, h), add(linear(h, f), linear(f, h))));
  n = add(n, mul(v.count("depth", 27), block));
  const std::uint64_t merged = mul(h, mul(merge, merge));
  const std::uint64_t fcs = add(linear(merged, merged), linear(merged, out));
  n = add(n, add(mul(2, h), fcs));                                   // merger (norm over hidden)
  n = add(n, mul(deepstack, add(mul(2, merged), fcs)));              // deepstack_merger_list (norm over 4h)
  return n;
}

// The tower's shape as image inputs run it (graph/layers/vision_tower_qwen3.hpp), with
// Qwen3VLVisionConfig's defaults (num_heads 16); the pixel bounds are the Qwen3-VL checkpoints'
// preprocessor_config.json (Qwen2VLImageProcessorFast with size shortest_edge 65536, longest_edge
// 16777216: 64 and 16384 tokens of 32 x 32 pixels).
inline vision_tower_spec qwen3_vl_vision(const config& v) {
  std::vector<std::uint64_t> indexes{8, 16, 24};
  if (v.has("deepstack_visual_indexes")) {
    const json& list = v.raw().at("deepstack_visual_indexes");
    if (!list.is_array())
      bad_field(error_code::invalid_model, v.field("deepstack_visual_indexes"), list, "must be an array");
    indexes.clear();
    for (const json& i : list) {
      if (!i.is_number_unsigned())
        bad_field(error_code::invalid_model, v.field("deepstack_visual_indexes"), list, "must hold block indexes");
      indexes.push_back(i.get<std::uint64_t>());
    }
  }
  vision_tower_spec t{.kind = vision_tower_kind::qwen3_vl,
                      .depth = v.count("depth", 27),
                      .hidden = v.count("hidden_size", 1152),
                      .intermediate = v.count("intermediate_size", 4304),
                      .heads = v.count("num_heads", 16),
                      .in_channels = v.count("in_channels", 3),
                      .patch = v.count("patch_size", 16),
                      .temporal_patch = v.count("temporal_patch_size", 2),
                      .merge = v.count("spatial_merge_size", 2),
                      .out_hidden = v.count("out_hidden_size", 3584),
                      .position_embeddings = v.count("num_position_embeddings", 2304),
                      .deepstack_features = indexes.size(),
                      .min_pixels = 65536,
                      .max_pixels = 16777216};
  for (const std::uint64_t i : indexes) {
    if (i >= t.depth)
      bad_field(error_code::invalid_model, v.field("deepstack_visual_indexes"), json(i), "must name blocks below depth");
    if (i + 1 < t.depth) ++t.deepstack_before_last;
  }
  if (t.heads == 0 || t.hidden % t.heads != 0)
    bad_field(error_code::invalid_model, v.field("num_heads"), json(t.heads), "must divide vision_config.hidden_size");
  if (t.patch == 0 || t.merge == 0)
    bad_field(error_code::invalid_model, v.field("patch_size"), json(t.patch), "and spatial_merge_size must be > 0");
  return t;
}

inline model_spec qwen3_vl(const config& c) {
  const config text = c.nested("text_config");
  // Qwen3VLTextConfig defaults: vocab 151936, hidden 4096, intermediate 22016, 32 layers, 32 heads
  // (32 kv), head_dim 128, 128000 positions, attention_bias False.
  model_spec m = llama_like(text, {.head_dim = 128,
                                   .shape = {.layers = 32, .hidden = 4096, .heads = 32, .ffn = 22016,
                                             .vocab = 151936, .context = 128000}});
  m.qk_norm = qk_norm_kind::per_head;
  // The head is tied as text_config says, else as the top-level Qwen3VLConfig says (default False).
  if (!text.has("tie_word_embeddings")) m.tied_embeddings = c.flag("tie_word_embeddings", false);
  const config vision = c.nested_or_defaults("vision_config");
  m.idle_tower_parameters = qwen3_vl_vision_parameters(vision);
  m.vision = qwen3_vl_vision(vision);
  return m;
}

}  // namespace memscale::json_io::hf
