// memscale/graph/layers/vision_tower_llama4.hpp: Llama 4's frozen vision model, pixel-shuffle
// adapter and projector run on a training step's image tiles: the processor's tiles and tokens,
// what the forward holds at its largest moment and what it leaves to the language model.
// Sources: transformers models/llama4/modeling_llama4.py @ 000c33fd (Llama4VisionModel,
// Llama4UnfoldConvolution, Llama4VisionEncoderLayer, Llama4VisionAttention,
// vision_apply_rotary_emb, vision_eager_attention_forward, pixel_shuffle, Llama4VisionMLP2,
// Llama4MultiModalProjector, Llama4ForConditionalGeneration.forward), image_processing_llama4_fast.py
// @ 0331fb36 (find_supported_resolutions, get_best_fit, the global tile) and processing_llama4.py
// @ 01ad83ad (_prompt_split_image).
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

// One image as Llama4ImageProcessorFast cuts it: a canvas of rows x columns tiles of
// vision_config.image_size pixels, a global tile beside them when there is more than one, and the
// image's tokens in the text.
struct llama4_image_tiles {
  std::uint64_t rows = 0;
  std::uint64_t columns = 0;
  std::uint64_t tiles = 0;   // through the tower: rows x columns, plus the global tile
  std::uint64_t tokens = 0;  // the image's tokens in the text sequence, special tokens included
};

// Patch tokens per tile: (image_size / patch)^2 patches, pixel_shuffle_ratio^2 of them kept.
constexpr std::uint64_t llama4_tokens_per_tile(const vision_tower_spec& v) {
  const std::uint64_t side = v.patch == 0 ? 0 : v.image_size / v.patch;
  return v.merge == 0 ? 0 : side * side / (v.merge * v.merge);
}

// get_best_fit over find_supported_resolutions(max_patches, image_size): each canvas's scale is
// min(canvas height / height, canvas width / width); the smallest scale >= 1 wins, else the
// largest below 1, ties going to the smallest area. Scales compare as fractions.
constexpr llama4_image_tiles llama4_tiles(const vision_tower_spec& v, const image_inputs& in) {
  llama4_image_tiles best{};
  if (in.height == 0 || in.width == 0 || v.image_size == 0) return best;
  constexpr memscale::detail::quantity q{"image tile canvas"};
  const auto mul = [&](std::uint64_t x, std::uint64_t y) { return memscale::detail::checked_mul(x, y, q); };
  // A canvas's scale as num / den (the limiting side).
  const auto scale = [&](std::uint64_t rows, std::uint64_t columns, std::uint64_t& num, std::uint64_t& den) {
    const std::uint64_t h = mul(rows, v.image_size);
    const std::uint64_t w = mul(columns, v.image_size);
    if (mul(h, in.width) < mul(w, in.height)) {
      num = h;
      den = in.height;
    } else {
      num = w;
      den = in.width;
    }
  };
  std::uint64_t best_num = 0;
  std::uint64_t best_den = 1;
  for (std::uint64_t n = 1; n <= v.max_tiles; ++n) {
    for (std::uint64_t rows = 1; rows <= n; ++rows) {
      if (n % rows != 0) continue;
      const std::uint64_t columns = n / rows;
      std::uint64_t num = 0;
      std::uint64_t den = 1;
      scale(rows, columns, num, den);
      const bool up = num >= den;
      const bool best_up = best_num >= best_den;
      bool better = false;
      if (best.rows == 0) {
        better = true;
      } else if (up != best_up) {
        better = up;  // any upscale beats every downscale
      } else if (mul(num, best_den) != mul(best_num, den)) {
        // upscales: the smallest; downscales: the largest
        better = up ? mul(num, best_den) < mul(best_num, den) : mul(num, best_den) > mul(best_num, den);
      } else {
        better = n < best.rows * best.columns;
      }
      if (better) {
        best = {.rows = rows, .columns = columns};
        best_num = num;
        best_den = den;
      }
    }
  }
  const std::uint64_t grid = best.rows * best.columns;
  const std::uint64_t per_tile = llama4_tokens_per_tile(v);
  best.tiles = grid > 1 ? grid + 1 : 1;
  // _prompt_split_image: <|image_start|>; with several tiles, each row's tiles with
  // <|tile_x_separator|> between them and <|tile_y_separator|> after the row; <|image|>, the
  // global (or only) tile's patches, <|image_end|>.
  const std::uint64_t grid_tokens =
      grid > 1 ? grid * per_tile + best.rows * (best.columns - 1) + best.rows : 0;
  best.tokens = 1 + grid_tokens + 1 + per_tile + 1;
  return best;
}

// The frozen tower's forward (no autograd graph: a temporary goes when its statement ends, a
// local when its function returns). N tiles of the micro-batch, P1 = (image_size / patch)^2 + 1
// positions each (the class token last), hidden h, activations of the parameters' dtype (a).
constexpr tower_bytes llama4_tower_bytes(const model_spec& model, const training_spec& run) {
  const vision_tower_spec& v = model.vision;
  constexpr memscale::detail::quantity q{"vision tower activations"};
  const auto mul = [&](std::uint64_t x, std::uint64_t y) { return memscale::detail::checked_mul(x, y, q); };
  const dtype a = precision_policy_of(run).param;
  memscale::detail::require(v.heads > 0 && v.hidden % v.heads == 0, error_code::invalid_model,
                            "model.vision.heads (vision_config.num_attention_heads)", "must divide the tower's hidden size",
                            v.heads);
  // The shapes the forward needs (json/hf/llama4.hpp reads them unchecked for text-only runs).
  memscale::detail::require(v.merge > 0 && v.patch > 0 && (v.image_size / v.patch) % v.merge == 0,
                            error_code::unsupported, "model.vision.merge (vision_config.pixel_shuffle_ratio)",
                            "must be 1 / n for a whole n dividing image_size / patch_size", v.merge);
  memscale::detail::require(v.hidden * v.merge * v.merge == v.intermediate, error_code::invalid_model,
                            "model.vision.intermediate (vision_config.intermediate_size)",
                            "must be hidden_size / pixel_shuffle_ratio^2: Llama4VisionMLP2.fc1 reads the shuffled patches",
                            v.intermediate);
  memscale::detail::require(v.adapter_out > 0 && v.adapter_hidden == v.adapter_out, error_code::invalid_model,
                            "model.vision.adapter_out (vision_config.projector_output_dim)",
                            "must equal projector_input_dim and vision_output_dim: the adapter's fc2 and the projector "
                            "read it",
                            v.adapter_out);
  const llama4_image_tiles image = llama4_tiles(v, run.images);
  memscale::detail::require(run.seq_len >= mul(run.images.per_sample, image.tokens), error_code::invalid_run,
                            "run.seq_len", "must count every token of a sample, its images' included "
                            "(images_per_sample x the processor's tokens per image: each tile's patch tokens, "
                            "the separators, <|image_start|>, <|image|> and <|image_end|>)",
                            run.seq_len);
  const std::uint64_t n = mul(mul(run.micro_batch, run.images.per_sample), image.tiles);
  const std::uint64_t side = v.image_size / v.patch;
  const std::uint64_t patches = side * side;
  const std::uint64_t positions = patches + 1;
  const std::uint64_t text_tokens = mul(run.micro_batch, run.seq_len);
  const std::uint64_t tokens = mul(n, llama4_tokens_per_tile(v));
  const std::uint64_t e = mul(mul(n, positions), v.hidden);
  const bytes ne = storage(a, e);
  const std::uint64_t unfolded = mul(mul(n, patches), mul(mul(v.in_channels, v.patch), v.patch));

  tower_bytes out{};
  // pixel_values (N, C, image_size, image_size), of the weights' dtype for the unfold's Linear.
  out.inputs = storage(a, mul(mul(n, v.in_channels), mul(v.image_size, v.image_size)));
  // Alive before the tower runs: the text embeddings.
  const bytes before = storage(a, mul(text_tokens, model.hidden));

  // Llama4UnfoldConvolution: the unfold and the patch embeddings (matmul takes the permuted view
  // as a strided batch, no copy); then the class token's cat beside them, and the positional sum.
  const bytes embed = storage(a, unfolded) + storage(a, mul(mul(n, patches), v.hidden));
  const bytes embed_sum = ne + ne;
  // A CUDA run copies the rotary table (a plain attribute, not a buffer) to the device once per
  // forward: P1 x head_dim / 2 complex64.
  const bytes freqs = run.device == device_kind::cuda ? storage(dtype::fp32, mul(positions, v.hidden / v.heads))
                                                      : bytes{};
  // An encoder layer. Beside the stream (the layer's input, the encoder's local): the
  // input_layernorm output, q, k and v; vision_apply_rotary_emb's complex products (fp32,
  // after an fp32 copy and before a cast back when the weights are 16-bit) while its caller still
  // holds q and k.
  const bytes e32 = storage(dtype::fp32, e);
  const bytes rotary = ne * 5u + e32 * 2u + (a == dtype::fp32 ? bytes{} : e32 * 2u + ne * 2u);
  // Then the layer's input, the norm's output, v and the rotated q and k.
  const bytes base = ne * 5u;
  const std::uint64_t score_count = mul(mul(n, v.heads), mul(positions, positions));
  const bytes scores = storage(a, score_count);
  const bool eager = run.attention == attention_impl::eager;
  const bool math = run.attention == attention_impl::sdpa_math;
  // vision_eager_attention_forward: matmul copies the transposed q and k, then the scores, their
  // scaled copy and their softmax (in the input dtype); the weights stay the layer's local to
  // its end. matmul with v copies v; the output and its transposed contiguous copy, o_proj's.
  // SDPA's math path: the scores and their softmax, freed with the call; a fused kernel, the
  // output and its contiguous copy only.
  const bytes weights = eager ? scores : bytes{};
  bytes attention = base + ne * 2u;  // the kernel's output, then its contiguous copy
  if (eager || math) {
    const bytes qk = ne * 2u + scores;
    const bytes softmax = scores * 2u;
    const bytes av = scores + ne * 2u;
    for (const bytes b : {qk, softmax, av})
      if (base + b > attention) attention = base + b;
  }
  // Llama4VisionMLP beside the layer's input, the attention residual and the weights: the
  // post_attention_layernorm output, fc1's output and its GELU, then the GELU and fc2's output;
  // the residual add.
  const bytes wide = storage(a, mul(mul(n, positions), v.intermediate));
  const bytes mlp = ne * 3u + weights + (wide * 2u > wide + ne ? wide * 2u : wide + ne);
  const bytes residual = ne * 4u + weights;
  bytes layer = rotary;
  for (const bytes b : {attention, mlp, residual})
    if (b > layer) layer = b;
  // After the encoder: its last_hidden_state (kept by the encoder's output to the end of forward)
  // and layernorm_post's output; pixel_shuffle's two permuted contiguous copies of the patches;
  // Llama4VisionMLP2's fc1 and its GELU, then fc2 and its GELU beside the first GELU.
  const bytes shuffled = storage(a, mul(mul(n, patches), v.hidden));
  const bytes adapter_in = storage(a, mul(tokens, v.adapter_hidden));
  const bytes features = storage(a, mul(tokens, v.adapter_out));
  const bytes shuffle = ne * 2u + shuffled * 2u;
  const bytes adapter =
      ne * 2u + shuffled + (adapter_in > features * 2u ? adapter_in * 2u : adapter_in + features * 2u);
  bytes largest = embed;
  for (const bytes b : {embed_sum, freqs + layer, freqs + shuffle, freqs + adapter})
    if (b > largest) largest = b;
  // After the tower: image_features, Llama4MultiModalProjector's output and the image mask, then
  // get_placeholder_mask's inputs_embeds[mask] copy and masked_scatter's new inputs_embeds.
  const bytes projected = storage(a, mul(tokens, model.hidden));
  const bytes scatter = storage(a, mul(text_tokens, model.hidden));
  const bytes mask = storage(dtype::boolean, text_tokens);
  const bytes after = features + projected + mask + (projected > scatter ? projected : scatter);
  out.forward = before + (largest > after ? largest : after);
  // Llama4ForConditionalGeneration.forward's locals through the language model: image_features,
  // projected_vision_flat and special_image_mask (B x S bool; expand_as is a view).
  out.held = features + projected + mask;
  return out;
}

}  // namespace memscale::graph_layers
