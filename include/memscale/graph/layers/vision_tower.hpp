// memscale/graph/layers/vision_tower.hpp: a frozen Qwen2.5-VL or Qwen2-VL vision tower run on a
// training step's images: how many tokens each image becomes, what its forward holds at its largest
// moment, and what it leaves to the language model. Sources: transformers models/qwen2_5_vl/
// modeling_qwen2_5_vl.py and models/qwen2_vl/modeling_qwen2_vl.py @ 00b676f8 (the forwards) and
// models/qwen2_vl/image_processing_qwen2_vl.py @ 009f6376 (smart_resize; newer releases also refuse
// a side under the factor). Qwen3-VL's tower: vision_tower_qwen3.hpp.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "memscale/bytes.hpp"
#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/error.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/tower_bytes.hpp"
#include "memscale/model.hpp"
#include "memscale/precision_policy.hpp"
#include "memscale/training.hpp"
#include "memscale/vision_tower.hpp"

namespace memscale::graph_layers {

// One image after the processor's resize, in patches.
struct image_grid {
  std::uint64_t rows = 0;
  std::uint64_t cols = 0;
  std::uint64_t tokens = 0;  // rows x cols / merge^2: the image's tokens in the text sequence
};

namespace detail_tower {

// Python's round(n / f) (half to even) for positive integers.
constexpr std::uint64_t round_half_even(std::uint64_t n, std::uint64_t f) {
  const std::uint64_t q = n / f;
  const std::uint64_t r2 = 2 * (n % f);
  return r2 > f || (r2 == f && q % 2 == 1) ? q + 1 : q;
}

// smart_resize's rescale of a side `side` (the other `other`) to about sqrt(side * bound / other):
// floor(side / beta / f) (bound = max_pixels, largest k with (k f)^2 other <= side bound) or
// ceil(side * beta / f) (bound = min_pixels, smallest k with (k f)^2 other >= side bound).
constexpr std::uint64_t rescaled(std::uint64_t side, std::uint64_t other, std::uint64_t bound, std::uint64_t f,
                                 bool down) {
  constexpr memscale::detail::quantity q{"resized image side"};
  const std::uint64_t target = memscale::detail::checked_mul(side, bound, q);
  const auto fits = [&](std::uint64_t k) {
    const std::uint64_t s = memscale::detail::checked_mul(k, f, q);
    return memscale::detail::checked_mul(s, s, other, q) <= target;
  };
  std::uint64_t lo = 0;  // fits(lo)
  std::uint64_t hi = 1;
  while (fits(hi)) hi *= 2;
  while (hi - lo > 1) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  if (down) return lo;
  const std::uint64_t s = lo * f;
  return memscale::detail::checked_mul(s, s, other, q) == target ? lo : lo + 1;
}

}  // namespace detail_tower

// The pixel bounds smart_resize applies: the run's, else the model's image processor's.
constexpr std::uint64_t image_min_pixels(const vision_tower_spec& v, const image_inputs& in) {
  return in.min_pixels != 0 ? in.min_pixels : v.min_pixels;
}
constexpr std::uint64_t image_max_pixels(const vision_tower_spec& v, const image_inputs& in) {
  return in.max_pixels != 0 ? in.max_pixels : v.max_pixels;
}

// Qwen2VLImageProcessor's smart_resize (factor = patch x merge; Qwen2-VL, Qwen2.5-VL and Qwen3-VL,
// whose checkpoints name Qwen2VLImageProcessorFast): each side rounded to a multiple of the factor,
// then scaled down (up) to fit max_pixels (min_pixels), in patches.
constexpr image_grid qwen2_5_vl_image_grid(const vision_tower_spec& v, const image_inputs& in) {
  const std::uint64_t f = v.patch * v.merge;
  const std::uint64_t h = in.height;
  const std::uint64_t w = in.width;
  const std::uint64_t min_pixels = image_min_pixels(v, in);
  const std::uint64_t max_pixels = image_max_pixels(v, in);
  memscale::detail::require(h >= f && w >= f, error_code::invalid_run, "run.images.height x width",
                            "must be at least patch_size x spatial_merge_size pixels on each side (smart_resize)",
                            h < w ? h : w);
  memscale::detail::require((h > w ? h : w) <= 200 * (h < w ? h : w), error_code::invalid_run,
                            "run.images.height x width", "must have an aspect ratio of at most 200 (smart_resize)",
                            h > w ? h : w);
  std::uint64_t hb = detail_tower::round_half_even(h, f) * f;
  std::uint64_t wb = detail_tower::round_half_even(w, f) * f;
  if (hb * wb > max_pixels) {
    hb = detail_tower::rescaled(h, w, max_pixels, f, true) * f;
    wb = detail_tower::rescaled(w, h, max_pixels, f, true) * f;
    if (hb < f) hb = f;
    if (wb < f) wb = f;
  } else if (hb * wb < min_pixels) {
    hb = detail_tower::rescaled(h, w, min_pixels, f, false) * f;
    wb = detail_tower::rescaled(w, h, min_pixels, f, false) * f;
  }
  const image_grid g{.rows = hb / v.patch, .cols = wb / v.patch, .tokens = (hb / v.patch) * (wb / v.patch) / (v.merge * v.merge)};
  return g;
}

// A micro-batch's images as the tower sees them: N patches in all, the text tokens they become.
struct image_batch {
  image_grid grid{};
  std::uint64_t images = 0;
  std::uint64_t patches = 0;         // N: the tower's sequence over all images
  std::uint64_t per_image = 0;       // patches of one image
  std::uint64_t tokens = 0;          // merged tokens of all images
  std::uint64_t patch_elements = 0;  // C x T x patch^2: one row of pixel_values
  dtype act = dtype::fp32;           // the tower's activations: its parameters' dtype
};

constexpr image_batch image_batch_of(const model_spec& model, const training_spec& run) {
  const vision_tower_spec& v = model.vision;
  constexpr memscale::detail::quantity q{"vision tower activations"};
  const auto mul = [&](std::uint64_t a, std::uint64_t b) { return memscale::detail::checked_mul(a, b, q); };
  image_batch b{.grid = qwen2_5_vl_image_grid(v, run.images), .act = precision_policy_of(run).param};
  b.images = mul(run.micro_batch, run.images.per_sample);
  b.per_image = mul(b.grid.rows, b.grid.cols);
  b.patches = mul(b.images, b.per_image);
  b.tokens = mul(b.images, b.grid.tokens);
  b.patch_elements = mul(mul(v.in_channels, v.temporal_patch), mul(v.patch, v.patch));
  // The text sequence holds every image's tokens (the processor expands each image placeholder
  // to grid.tokens image_token_id entries; masked_scatter fills them with the features).
  memscale::detail::require(run.seq_len >= mul(run.images.per_sample, b.grid.tokens), error_code::invalid_run,
                            "run.seq_len", "must count every token of a sample, its images' tokens included "
                            "(images_per_sample x the tokens of one image after smart_resize)",
                            run.seq_len);
  return b;
}

// The processor's fp32 pixel_values (one row of C x T x patch^2 per patch) and the (images, 3)
// grid, passed with the batch.
constexpr bytes pixel_inputs(const image_batch& b) {
  constexpr memscale::detail::quantity q{"vision tower inputs"};
  return storage(dtype::fp32, memscale::detail::checked_mul(b.patches, b.patch_elements, q)) +
         storage(dtype::int64, memscale::detail::checked_mul(b.images, 3, q));
}

// Alive before the tower runs: the model forward's inputs_embeds, and get_image_features'
// pixel_values.type(self.visual.dtype) copy when the tower is not fp32.
constexpr bytes before_tower(const model_spec& model, const training_spec& run, const image_batch& b) {
  constexpr memscale::detail::quantity q{"vision tower activations"};
  bytes before = storage(b.act, memscale::detail::checked_mul(run.micro_batch, run.seq_len, model.hidden, q));
  if (b.act != dtype::fp32) before += storage(b.act, memscale::detail::checked_mul(b.patches, b.patch_elements, q));
  return before;
}

// The model forward's locals through the language model: image_embeds (cast to the embeddings'
// dtype: the same here), image_mask (input_ids == image_token_id: B x S bool; its expand_as is a
// view) and get_rope_index's (3, B, S) int64 position_ids.
constexpr bytes held_for_text(const training_spec& run, bytes features) {
  constexpr memscale::detail::quantity q{"vision tower activations"};
  const std::uint64_t text_tokens = memscale::detail::checked_mul(run.micro_batch, run.seq_len, q);
  return features + storage(dtype::boolean, text_tokens) +
         storage(dtype::int64, memscale::detail::checked_mul(3, text_tokens, q));
}

// The frozen tower's forward (no autograd graph: nothing is saved, every temporary goes when its
// statement ends). N patches of all images in the micro-batch, hidden h, head dim d, activations
// of the parameters' dtype (a), rotary tables fp32. Qwen2-VL's is Qwen2.5-VL's without windows
// (every block attends over a whole image), with LayerNorm and a fc1/fc2 MLP.
constexpr tower_bytes qwen2_5_vl_tower_bytes(const model_spec& model, const training_spec& run) {
  const vision_tower_spec& v = model.vision;
  const image_batch b = image_batch_of(model, run);
  constexpr memscale::detail::quantity q{"vision tower activations"};
  const auto mul = [&](std::uint64_t x, std::uint64_t y) { return memscale::detail::checked_mul(x, y, q); };
  const dtype a = b.act;
  const bool windows = v.kind == vision_tower_kind::qwen2_5_vl;
  const std::uint64_t n = b.patches;
  const std::uint64_t per_image = b.per_image;
  const std::uint64_t h = v.hidden;
  const std::uint64_t d = h / v.heads;
  const bytes nh = storage(a, mul(n, h));
  const bytes nh32 = storage(dtype::fp32, mul(n, h));

  tower_bytes out{};
  out.inputs = pixel_inputs(b);
  const bytes before = before_tower(model, run, b);
  // Through the blocks (forward's locals): the stream, rotary_pos_emb (N x d/2), emb and its cos
  // and sin (N x d each) and, with windows, window_index (one int64 per merged token).
  const bytes stream = nh;
  const bytes tables = storage(dtype::fp32, mul(n, d / 2)) + storage(dtype::fp32, mul(mul(n, d), 3)) +
                       (windows ? storage(dtype::int64, b.tokens) : bytes{});

  // Qwen2RMSNorm: an fp32 x * rsqrt(var) beside x.pow(2) (fp32 input) or the fp32 upcast, then
  // the cast and the weight's product: 8 bytes per element either way. Qwen2-VL's nn.LayerNorm:
  // its output and the fp32 mean and rstd per row.
  const bytes norm = windows ? storage(dtype::fp32, mul(mul(n, h), 2)) : nh + storage(dtype::fp32, mul(n, 2));
  // The attention (Qwen2_5_VLVisionAttention, Qwen2-VL's VisionAttention): the norm's output (the
  // call's argument), qkv (3 N h), the rotated q and k; apply_rotary_pos_emb_vision rotates in
  // fp32 (q * cos, rotate_half's cat, * sin, sum).
  const bytes attn_in = nh + storage(a, mul(3 * n, h));
  const bytes rotary = attn_in + (a != dtype::fp32 ? nh32 + nh32 : bytes{}) + nh32 + storage(dtype::fp32, mul(3 * n, h));
  const bytes rotated = attn_in + nh + nh;
  // Attention per cu_seqlens chunk (one image in a full-attention block, one window otherwise):
  // the outputs of earlier chunks wait in a list for torch.cat. Eager: matmul's scores and their
  // scaled copy, then the fp32 softmax (and its cast back): 8 bytes per score at most. SDPA or
  // flash: no scores (flash_attention_2 runs all chunks in one varlen call).
  const std::uint64_t window_side = windows ? v.window_size / v.merge / v.patch : 0;  // merged tokens
  const std::uint64_t window_rows = (b.grid.rows / v.merge < window_side ? b.grid.rows / v.merge : window_side) * v.merge;
  const std::uint64_t window_cols = (b.grid.cols / v.merge < window_side ? b.grid.cols / v.merge : window_side) * v.merge;
  const std::uint64_t chunk = !windows || v.full_attention_blocks > 0 ? per_image : mul(window_rows, window_cols);
  const bool eager = run.attention == attention_impl::eager;
  const bytes scores = eager ? storage(dtype::fp32, mul(mul(v.heads, 2), mul(chunk, chunk)))
                             : storage(a, mul(mul(chunk, h), 2));
  const bytes chunks = rotated + storage(a, mul(n - chunk, h)) + scores;
  // torch.cat of the chunks' outputs beside the list, then proj's output.
  const bytes joined = rotated + nh + nh + nh;
  // The MLP (with biases), beside the norm's output: Qwen2_5_VLMLP's act(gate) beside up and their
  // product; Qwen2-VL's fc1, QuickGELU's 1.702 x and its sigmoid, then their product (3 N f either way).
  const bytes mlp = nh + storage(a, mul(mul(n, v.intermediate), 3));
  // The PatchMerger: ln_q's output (the argument) beside the first Linear's output and its GELU.
  const bytes merger = nh + nh + nh;
  // A block's residual add: the old stream, the branch output and the new stream.
  const bytes residual = nh + nh;

  bytes largest = norm;
  for (const bytes m : {rotary, chunks, joined, mlp, merger, residual, norm})
    if (m > largest) largest = m;
  // After the tower: torch.cat of the per-image splits beside the merger's (reordered) output.
  const bytes features = storage(a, mul(b.tokens, v.out_hidden));
  const bytes after = features + features;
  const bytes during = stream + tables + largest;
  out.forward = before + (during > after ? during : after);
  out.held = held_for_text(run, features);
  return out;
}

}  // namespace memscale::graph_layers
