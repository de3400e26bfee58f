// memscale/graph/layers/vision_tower_qwen3.hpp: a frozen Qwen3-VL vision tower run on a training
// step's images, and the DeepStack features it hands the language model. Source: transformers
// models/qwen3_vl/modeling_qwen3_vl.py @ 00709b86 (Qwen3VLVisionModel.forward, Qwen3VLModel.forward,
// Qwen3VLTextModel._deepstack_process).
#pragma once

#include <cstdint>
#include <initializer_list>

#include "memscale/bytes.hpp"
#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/graph/layers/vision_tower.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"
#include "memscale/vision_tower.hpp"

namespace memscale::graph_layers {

// The frozen tower's forward (no autograd graph: every temporary goes when its statement ends).
// N patches, hidden h, head dim d, activations of the parameters' dtype (a), rotary tables fp32.
constexpr tower_bytes qwen3_vl_tower_bytes(const model_spec& model, const training_spec& run) {
  const vision_tower_spec& v = model.vision;
  const image_batch b = image_batch_of(model, run);
  constexpr memscale::detail::quantity q{"vision tower activations"};
  const auto mul = [&](std::uint64_t x, std::uint64_t y) { return memscale::detail::checked_mul(x, y, q); };
  const dtype a = b.act;
  const std::uint64_t n = b.patches;
  const std::uint64_t h = v.hidden;
  const std::uint64_t d = h / v.heads;
  const bytes nh = storage(a, mul(n, h));
  const bytes nh32 = storage(dtype::fp32, mul(n, h));

  tower_bytes out{};
  out.inputs = pixel_inputs(b);
  const bytes before = before_tower(model, run, b);

  // fast_pos_embed_interpolate beside the Conv3d's output: pos_embed looked up at the four corner
  // indexes of each patch ((4, N) int64) and its product with the bilinear weights ((4, N), a).
  const bytes corners = storage(a, mul(mul(4, n), h));
  const bytes interpolate = nh + corners + corners + storage(dtype::int64, mul(4, n)) + storage(a, mul(4, n));
  // Through the blocks (forward's locals): the stream, pos_embeds (N x h: a local of forward),
  // rotary_pos_emb (N x d/2), emb and its cos and sin (N x d each).
  const bytes stream = nh + nh;
  const bytes tables = storage(dtype::fp32, mul(n, d / 2)) + storage(dtype::fp32, mul(mul(n, d), 3));
  // The merged features: one per deepstack index (deepstack_merger_list), taken after its block
  // and kept in deepstack_feature_lists, and the merger's.
  const bytes features = storage(a, mul(b.tokens, v.out_hidden));
  const bytes deepstack = features * v.deepstack_features;

  // A block: nn.LayerNorm's output and fp32 mean and rstd; Qwen3VLVisionAttention as Qwen2.5-VL's
  // (fp32 rotary, eager per image chunk); Qwen3VLVisionMLP: fc1 and its GELU (tanh) beside the norm's output.
  const bytes norm = nh + storage(dtype::fp32, mul(n, 2));
  const bytes attn_in = nh + storage(a, mul(3 * n, h));
  const bytes rotary = attn_in + (a != dtype::fp32 ? nh32 + nh32 : bytes{}) + nh32 + storage(dtype::fp32, mul(3 * n, h));
  const bytes rotated = attn_in + nh + nh;
  const std::uint64_t chunk = b.per_image;
  const bool eager = run.attention == attention_impl::eager;
  const bytes scores = eager ? storage(dtype::fp32, mul(mul(v.heads, 2), mul(chunk, chunk)))
                             : storage(a, mul(mul(chunk, h), 2));
  const bytes chunks = rotated + storage(a, mul(n - chunk, h)) + scores;
  const bytes joined = rotated + nh + nh + nh;
  const bytes mlp = nh + storage(a, mul(mul(n, v.intermediate), 2));
  const bytes residual = nh + nh;
  bytes largest = norm;
  for (const bytes m : {rotary, chunks, joined, mlp, residual})
    if (m > largest) largest = m;
  const bytes blocks = stream + tables + features * v.deepstack_before_last + largest;
  // Qwen3VLVisionPatchMerger (deepstack or final): its norm's output, fc1 and the GELU.
  const bytes merge = stream + tables + deepstack + nh + nh + nh;
  // After the tower: torch.cat of the per-image splits beside the merger's output, the deepstack features kept.
  const bytes after = features + features + deepstack;
  bytes largest_moment = interpolate;
  for (const bytes m : {blocks, merge, after})
    if (m > largest_moment) largest_moment = m;
  out.forward = before + largest_moment;

  // Qwen3VLModel.forward keeps deepstack_visual_embeds through the language model, whose first
  // len(deepstack_visual_indexes) layers add them at the image positions (_deepstack_process: a
  // clone that replaces the layer's output, so nothing more is saved; visual_pos_masks is a view
  // of image_mask).
  out.held = held_for_text(run, features) + deepstack;
  return out;
}

}  // namespace memscale::graph_layers
