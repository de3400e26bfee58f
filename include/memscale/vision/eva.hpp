// memscale/vision/eva.hpp: timm's Eva with the EVA02 arguments (huggingface/pytorch-image-models
// timm/models/eva.py@0173a139: eva02_{tiny,small}_patch14_{224,336}, eva02_{base,large}_patch14_{224,448}).
//
// qkv_fused=False (base, large): q_proj, k_proj (no bias) and v_proj each read norm1's output;
// qkv_fused=True (tiny, small; vit_spec::qv_bias): one packed qkv whose unbind views q, k, v,
// so v (and what saves it) keeps the whole qkv output. Rotary position embedding
// (use_rot_pos_emb): the patch tokens of q and k are rotated by
// apply_rot_embed_cat (timm/layers/pos_embed_sincos.py: x * cos + rot(x) * sin, rot a
// torch.stack of the negated odd and the even halves; the sin/cos table is a buffer, so the
// products save nothing an activation would) and torch.cat'ed behind the class token's row:
// new contiguous q and k tensors. Then EvaAttention runs SDPA or the eager chain (q * scale
// and k^T are views bmm can take; v, a transposed view of v_proj's output, is copied). The
// MLP is SwiGLU with scale_mlp: fc1_g and fc1_x, SiLU(gate) * x (both saved), a LayerNorm on
// the hidden, fc2; without scale_mlp (tiny, small) GluMlp (timm/layers/mlp.py@0173a139): one
// fc1 of twice the hidden whose chunk views feed SiLU and the product, no norm. Pooling: the
// mean over the patch tokens, then fc_norm, then the head.
// Under autocast, the rotation's products with the fp32 table are fp32 (type promotion) and
// `.type_as(v)` casts the result back.
#pragma once

#include <cstdint>

#include "memscale/vision/vit.hpp"

namespace memscale::vision {

constexpr const vit_spec& validate_eva02(const vit_spec& s) {
  validate(s);
  detail::require(s.code == vit_code::eva02 && s.class_token && s.reg_tokens == 0 && !s.no_embed_class &&
                      s.patch_bias && !s.pre_norm && s.avg_pool && s.fc_norm,
                  error_code::invalid_model, "vit", "EVA02 has a class token, average pooling and fc_norm only",
                  s.reg_tokens);
  return s;
}

// apply_rot_embed_cat on the patch tokens of `t`, then the cat with the class token's row.
constexpr tensor eva_rotate(network& net, const tensor& t) {
  const dtype promoted = net.context().autocast ? dtype::fp32 : t.type;  // * the fp32 sin/cos buffer
  const tensor by_cos = net.convert(t, promoted);
  const tensor rotated = net.copy(t);  // rot(x): torch.stack(...).reshape
  const tensor by_sin = net.convert(rotated, promoted);
  const tensor sum = net.add(by_cos, by_sin, false);
  const tensor joined = net.copy(sum);  // torch.cat([x[:, :, :1], rotated], 2)
  return joined.type == t.type ? joined : net.convert(joined, t.type);  // .type_as(v)
}

constexpr tensor eva02_block(network& net, const tensor& x, const vit_spec& s, bool drop_path) {
  const std::uint64_t E = x.channels;
  const std::uint64_t S = x.height;
  const std::int32_t first = net.next_index();
  const tensor h = net.layer_norm(x);
  tensor q{};
  tensor k{};
  tensor v{};
  if (s.qv_bias) {
    const tensor qkv = timm_qkv(net, h, s);
    v = tensor{.storage = qkv.storage, .channels = E, .height = S, .type = qkv.type};  // unbind: views
    q = eva_rotate(net, v);
    k = eva_rotate(net, v);
  } else {
    q = eva_rotate(net, net.linear(h, E, true));
    k = eva_rotate(net, net.linear(h, E, false));
    v = net.linear(h, E, true);
  }
  const tensor shape{.channels = E, .height = S};
  tensor context{};
  if (net.context().fused_attention) {
    context = net.fused_attention(q, k, v, shape, s.heads);
  } else {
    const tensor q_scaled = net.copy(q);  // q * scale: contiguous, bmm takes it as it is
    tensor scores = net.matmul(q_scaled, k, tensor{.channels = s.heads * S, .height = S});
    scores = net.act(scores, activation::softmax, false);
    const tensor v_bmm = net.copy(v);  // the transposed view of v_proj's output, made contiguous
    context = net.matmul(scores, v_bmm, shape);
  }
  context = net.copy(context);  // transpose(1, 2).reshape(B, N, C)
  const tensor mid = timm_branch_end(net, context, x, first, s, drop_path);
  const std::int32_t second = net.next_index();
  const tensor h2 = net.layer_norm(mid);
  tensor y{};
  if (s.mlp_norm) {
    const tensor gate = net.linear(h2, s.mlp, true);
    const tensor value = net.linear(h2, s.mlp, true);
    y = net.layer_norm(net.mul(net.act(gate, activation::silu, false), value));
  } else {
    // GluMlp(gate_last=False): one fc1 of twice the width, chunk views, SiLU(first) * second.
    const tensor fc1 = net.linear(h2, 2 * s.mlp, true);
    const tensor half{.storage = fc1.storage, .channels = s.mlp, .height = S, .type = fc1.type};
    y = net.mul(net.act(half, activation::silu, false), half);
  }
  return timm_branch_end(net, y, mid, second, s, drop_path);
}

constexpr tensor eva02(network& net, const tensor& image, const vit_spec& s, std::uint64_t classes) {
  validate_eva02(s);
  detail::require(image.height % s.patch == 0 && image.width % s.patch == 0, error_code::invalid_model, "image size",
                  "must be a multiple of the ViT patch size", image.height);
  const std::uint64_t patches = (image.height / s.patch) * (image.width / s.patch);
  const std::uint64_t tokens = patches + 1;
  // RotaryEmbeddingCat's cached table: sin and cos, head_dim each per patch, fp32.
  net.buffer(storage(dtype::fp32, detail::checked_mul(patches, 2 * (s.hidden / s.heads))));
  tensor x = net.conv2d(image, {.out = s.hidden, .kernel = s.patch, .stride = s.patch, .bias = true});
  net.parameter(s.hidden);                                // cls_token
  net.parameter(detail::checked_mul(tokens, s.hidden));  // pos_embed
  x = net.copy_as(x, tensor{.channels = s.hidden, .height = tokens});  // torch.cat((cls_token, x))
  x = net.add(x, x, false);                                            // + pos_embed
  for (std::uint64_t i = 0; i < s.layers; ++i) {
    net.begin_stage(x);
    x = eva02_block(net, x, s, s.drop_path && i > 0);
    net.end_stage();
  }
  x = net.token_mean(x);
  x = net.layer_norm(x);  // fc_norm
  if (classes == 0) return x;
  return net.linear(x, classes, true);
}

}  // namespace memscale::vision
