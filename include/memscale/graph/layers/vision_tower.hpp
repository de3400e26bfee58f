// memscale/graph/layers/vision_tower.hpp: a frozen Qwen2.5-VL vision tower run on a training
// step's images: how many tokens each image becomes, what its forward holds at its largest moment,
// and what it leaves to the language model. Sources: transformers models/qwen2_5_vl/
// modeling_qwen2_5_vl.py @ 00b676f8 (the forward) and models/qwen2_vl/image_processing_qwen2_vl.py
// @ 009f6376 (smart_resize; newer releases also refuse a side under the factor).
#pragma once

#include <cstdint>
#include <initializer_list>

#include "memscale/bytes.hpp"
#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/error.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/tower_bytes.hpp"
#include "memscale/graph/layers/vision_tower_siglip.hpp"
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

// Qwen2VLImageProcessor's smart_resize (factor = patch x merge): each side rounded to a multiple
// of the factor, then scaled down (up) to fit max_pixels (min_pixels), in patches.
constexpr image_grid qwen2_5_vl_image_grid(const vision_tower_spec& v, const image_inputs& in) {
  const std::uint64_t f = v.patch * v.merge;
  const std::uint64_t h = in.height;
  const std::uint64_t w = in.width;
  memscale::detail::require(h >= f && w >= f, error_code::invalid_run, "run.images.height x width",
                            "must be at least patch_size x spatial_merge_size pixels on each side (smart_resize)",
                            h < w ? h : w);
  memscale::detail::require((h > w ? h : w) <= 200 * (h < w ? h : w), error_code::invalid_run,
                            "run.images.height x width", "must have an aspect ratio of at most 200 (smart_resize)",
                            h > w ? h : w);
  std::uint64_t hb = detail_tower::round_half_even(h, f) * f;
  std::uint64_t wb = detail_tower::round_half_even(w, f) * f;
  if (hb * wb > in.max_pixels) {
    hb = detail_tower::rescaled(h, w, in.max_pixels, f, true) * f;
    wb = detail_tower::rescaled(w, h, in.max_pixels, f, true) * f;
    if (hb < f) hb = f;
    if (wb < f) wb = f;
  } else if (hb * wb < in.min_pixels) {
    hb = detail_tower::rescaled(h, w, in.min_pixels, f, false) * f;
    wb = detail_tower::rescaled(w, h, in.min_pixels, f, false) * f;
  }
  const image_grid g{.rows = hb / v.patch, .cols = wb / v.patch, .tokens = (hb / v.patch) * (wb / v.patch) / (v.merge * v.merge)};
  return g;
}

// The frozen tower's forward (no autograd graph: nothing is saved, every temporary goes when its
// statement ends). N patches of all images in the micro-batch, hidden h, head dim d, activations
// of the parameters' dtype (a), rotary tables fp32.
constexpr tower_bytes qwen2_5_vl_tower_bytes(const model_spec& model, const training_spec& run) {
  const vision_tower_spec& v = model.vision;
  const image_grid grid = qwen2_5_vl_image_grid(v, run.images);
  constexpr memscale::detail::quantity q{"vision tower activations"};
  const auto mul = [&](std::uint64_t a, std::uint64_t b) { return memscale::detail::checked_mul(a, b, q); };
  const dtype a = precision_policy_of(run).param;
  const std::uint64_t images = mul(run.micro_batch, run.images.per_sample);
  const std::uint64_t per_image = mul(grid.rows, grid.cols);
  const std::uint64_t n = mul(images, per_image);
  const std::uint64_t tokens = mul(images, grid.tokens);
  // The text sequence holds every image's tokens (the processor expands each image placeholder
  // to grid.tokens image_token_id entries; masked_scatter fills them with the features).
  memscale::detail::require(run.seq_len >= mul(run.images.per_sample, grid.tokens), error_code::invalid_run,
                            "run.seq_len", "must count every token of a sample, its images' tokens included "
                            "(images_per_sample x the tokens of one image after smart_resize)",
                            run.seq_len);
  const std::uint64_t h = v.hidden;
  const std::uint64_t d = h / v.heads;
  const bytes nh = storage(a, mul(n, h));
  const bytes nh32 = storage(dtype::fp32, mul(n, h));
  const std::uint64_t patch_elements = mul(mul(v.in_channels, v.temporal_patch), mul(v.patch, v.patch));

  tower_bytes out{};
  // The processor's fp32 pixel_values (one row of C x T x patch^2 per patch) and the (images, 3)
  // grid, passed with the batch.
  out.inputs = storage(dtype::fp32, mul(n, patch_elements)) + storage(dtype::int64, mul(images, 3));

  // Alive before the tower runs: Qwen2_5_VLModel.forward's inputs_embeds, and get_image_features'
  // pixel_values.type(self.visual.dtype) copy when the tower is not fp32.
  bytes before = storage(a, mul(mul(run.micro_batch, run.seq_len), model.hidden));
  if (a != dtype::fp32) before += storage(a, mul(n, patch_elements));
  // Through the blocks (forward's locals): the stream, rotary_pos_emb (N x d/2), emb and its cos
  // and sin (N x d each), window_index (one int64 per merged token).
  const bytes stream = nh;
  const bytes tables = storage(dtype::fp32, mul(n, d / 2)) + storage(dtype::fp32, mul(mul(n, d), 3)) +
                       storage(dtype::int64, tokens);

  // Qwen2RMSNorm: an fp32 x * rsqrt(var) beside x.pow(2) (fp32 input) or the fp32 upcast, then
  // the cast and the weight's product: 8 bytes per element either way.
  const bytes norm = storage(dtype::fp32, mul(mul(n, h), 2));
  // Qwen2_5_VLVisionAttention: the norm's output (the call's argument), qkv (3 N h), the rotated
  // q and k; apply_rotary_pos_emb_vision rotates in fp32 (q * cos, rotate_half's cat, * sin, sum).
  const bytes attn_in = nh + storage(a, mul(3 * n, h));
  const bytes rotary = attn_in + (a != dtype::fp32 ? nh32 + nh32 : bytes{}) + nh32 + storage(dtype::fp32, mul(3 * n, h));
  const bytes rotated = attn_in + nh + nh;
  // Attention per cu_seqlens chunk (one image in a full-attention block, one window otherwise):
  // the outputs of earlier chunks wait in a list for torch.cat. Eager: matmul's scores and their
  // scaled copy, then the fp32 softmax (and its cast back): 8 bytes per score at most. SDPA or
  // flash: no scores (flash_attention_2 runs all chunks in one varlen call).
  const std::uint64_t window_side = v.window_size / v.merge / v.patch;  // merged tokens
  const std::uint64_t window_rows = (grid.rows / v.merge < window_side ? grid.rows / v.merge : window_side) * v.merge;
  const std::uint64_t window_cols = (grid.cols / v.merge < window_side ? grid.cols / v.merge : window_side) * v.merge;
  const std::uint64_t chunk = v.full_attention_blocks > 0 ? per_image : mul(window_rows, window_cols);
  const bool eager = run.attention == attention_impl::eager;
  const bytes scores = eager ? storage(dtype::fp32, mul(mul(v.heads, 2), mul(chunk, chunk)))
                             : storage(a, mul(mul(chunk, h), 2));
  const bytes chunks = rotated + storage(a, mul(n - chunk, h)) + scores;
  // torch.cat of the chunks' outputs beside the list, then proj's output.
  const bytes joined = rotated + nh + nh + nh;
  // Qwen2_5_VLMLP (with biases): the norm's output, then act(gate) beside up and their product.
  const bytes mlp = nh + storage(a, mul(mul(n, v.intermediate), 3));
  // Qwen2_5_VLPatchMerger: ln_q's output (the argument) beside the first Linear's output and its GELU.
  const bytes merger = nh + nh + nh;
  // A block's residual add: the old stream, the branch output and the new stream.
  const bytes residual = nh + nh;

  bytes largest = norm;
  for (const bytes b : {rotary, chunks, joined, mlp, merger, residual, norm})
    if (b > largest) largest = b;
  // After the tower: torch.cat of the per-image splits beside the merger's (reordered) output.
  const bytes features = storage(a, mul(tokens, v.out_hidden));
  const bytes after = features + features;
  const bytes during = stream + tables + largest;
  out.forward = before + (during > after ? during : after);

  // Qwen2_5_VLModel.forward's locals through the language model: image_embeds (cast to the
  // embeddings' dtype: the same here), image_mask (input_ids == image_token_id: B x S bool; its
  // expand_as is a view) and get_rope_index's (3, B, S) int64 position_ids.
  const std::uint64_t text_tokens = mul(run.micro_batch, run.seq_len);
  out.held = features + storage(dtype::boolean, text_tokens) + storage(dtype::int64, mul(3, text_tokens));
  return out;
}

// One image's tokens in the text sequence, by tower.
constexpr std::uint64_t image_tokens(const vision_tower_spec& v, const image_inputs& in) {
  return v.kind == vision_tower_kind::siglip_gemma3 ? v.tokens_per_image : qwen2_5_vl_image_grid(v, in).tokens;
}

// Writes a step's images into the language model's graph: the tower's forward moment, what the
// model keeps through its blocks and the pixel inputs. Nothing of the frozen tower is saved for
// backward; its weights are the idle tower op's (idle_tower.hpp).
constexpr void add_image_tower(const model_spec& model, const training_spec& run, graph& g) {
  if (run.images.per_sample == 0) return;
  const tower_bytes t = model.vision.kind == vision_tower_kind::siglip_gemma3 ? siglip_gemma3_tower_bytes(model, run)
                                                                             : qwen2_5_vl_tower_bytes(model, run);
  g.tower_forward = t.forward;
  g.held += t.held;
  g.inputs += t.inputs;
}

}  // namespace memscale::graph_layers
