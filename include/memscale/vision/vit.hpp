// memscale/vision/vit.hpp: torchvision VisionTransformer (torchvision v0.14
// models/vision_transformer.py) with torch 1.13's nn.MultiheadAttention.
//
// conv_proj (patch x patch, stride patch, bias) -> tokens; cat with the class token;
// + pos_embedding; EncoderBlocks: ln_1, self_attention(need_weights=False), x + input,
// ln_2, MLP (Linear, GELU, Linear; dropout 0), x + y; final LayerNorm; heads on x[:, 0]
// (a view: the head keeps the whole final LayerNorm output alive).
// Inside F.multi_head_attention_forward (torch/nn/functional.py, v1.13) with
// batch_first=True: the in-projection input is the transposed ln_1 output (a copy the
// linear saves); q, k, v are contiguous copies of the chunks of the packed projection; q
// is scaled (a new tensor), scores = bmm(q, k^T), softmax (kept), dropout 0, bmm with v,
// and the context is copied contiguous before out_proj. From torch 2.0 the attention runs
// through F.scaled_dot_product_attention (mha_attention_sdpa).
//
// timm's VisionTransformer (huggingface/pytorch-image-models timm/models/vision_transformer.py
// @94567641) differs in what the step keeps: Attention is one qkv Linear whose output is
// viewed as q, k, v (reshape, permute, unbind: no copies), then F.scaled_dot_product_attention
// when timm's use_fused_attn() holds (torch >= 2.0, TIMM_FUSED_ATTN not 0; it saves the q,
// k, v views, so the qkv output), otherwise `q * scale` (a new tensor, nothing saved),
// q @ k^T and @ v on contiguous copies of q_scaled, k and v (bmm saves the copies), softmax
// (keeps its result), and a transpose-reshape copy proj saves. Blocks may add
// LayerScale (`x * gamma` saves x) and DropPath (`x * mask` saves the (B, 1, 1) mask; the
// rate ramps linearly from 0, so the first block has none); the residual adds are not in
// place. Tokens: an optional class token and `reg_tokens` register tokens concatenated
// before (or, no_embed_class, after) the position embedding; pre_norm (CLIP) normalises the
// embeddings; global_pool 'avg' takes the mean over the patch tokens and fc_norm then
// replaces the final norm.
#pragma once

#include <cstdint>

#include "memscale/vision/blocks.hpp"

namespace memscale::vision {

// Which code builds the model: torchvision's VisionTransformer, timm's VisionTransformer, or
// timm's Eva with the EVA02 arguments (eva.hpp).
enum class vit_code : std::uint8_t { torchvision, timm, eva02 };
constexpr std::string_view to_string(vit_code c) noexcept {
  return c == vit_code::torchvision ? "torchvision" : c == vit_code::timm ? "timm" : "eva02";
}

struct vit_spec {
  std::uint64_t patch = 16;
  std::uint64_t layers = 12;
  std::uint64_t hidden = 768;
  std::uint64_t heads = 12;
  std::uint64_t mlp = 3072;
  vit_code code = vit_code::torchvision;
  // timm only (vit_code::timm, eva02); torchvision's model is the defaults.
  bool class_token = true;
  std::uint64_t reg_tokens = 0;
  bool no_embed_class = false;  // the position table covers the patches only
  bool patch_bias = true;       // PatchEmbed conv bias (False with pre_norm: the CLIP towers)
  bool pre_norm = false;        // norm_pre LayerNorm after the position embedding
  bool layer_scale = false;     // init_values set: LayerScale gammas on both branches
  bool drop_path = false;       // drop_path_rate > 0
  bool avg_pool = false;        // global_pool 'avg' over the patch tokens (else the class token)
  bool fc_norm = false;         // the final LayerNorm after pooling instead of before
  bool qv_bias = false;         // timm Eva's fused qkv: no Linear bias, q_bias and v_bias, a zero k_bias buffer
  bool mlp_norm = false;        // eva02 only: scale_mlp's SwiGLU (LayerNorm on the hidden), else GluMlp
};

constexpr std::uint64_t prefix_tokens(const vit_spec& s) { return (s.class_token ? 1 : 0) + s.reg_tokens; }

constexpr const vit_spec& validate(const vit_spec& s) {
  constexpr auto bad = error_code::invalid_model;
  detail::require(s.patch > 0 && s.layers > 0 && s.hidden > 0 && s.heads > 0 && s.mlp > 0, bad, "vit",
                  "needs positive patch, layers, hidden, heads and mlp", s.patch);
  detail::require(s.hidden % s.heads == 0, bad, "vit.heads", "must divide vit.hidden", s.heads);
  const bool torchvision = s.code == vit_code::torchvision;
  detail::require(!torchvision || (s.class_token && s.reg_tokens == 0 && !s.no_embed_class && s.patch_bias &&
                                   !s.pre_norm && !s.layer_scale && !s.drop_path && !s.avg_pool && !s.fc_norm &&
                                   !s.qv_bias),
                  bad, "vit", "timm options need vit_code::timm (torchvision's ViT has none of them)", s.reg_tokens);
  detail::require(s.code == vit_code::eva02 || !s.mlp_norm, bad, "vit.mlp_norm",
                  "is an EVA02 option (timm's ViT MLP has no hidden norm)", s.mlp);
  detail::require(s.avg_pool || s.class_token, bad, "vit.avg_pool",
                  "must be set without a class token (the head reads the class token)", s.reg_tokens);
  return s;
}

// torch 1.13's attention after the packed in-projection: q, k, v are contiguous copies of
// the chunks, q is scaled, and the probabilities are written out and kept.
constexpr tensor mha_attention_113(network& net, const tensor& proj, std::uint64_t heads) {
  const std::uint64_t E = proj.channels / 3;
  const std::uint64_t S = proj.height;
  const tensor q = net.copy_as(proj, tensor{.channels = E, .height = S});
  const tensor k = net.copy_as(proj, tensor{.channels = E, .height = S});
  const tensor v = net.copy_as(proj, tensor{.channels = E, .height = S});
  const tensor q_scaled = net.copy(q);  // q / sqrt(head_dim)
  tensor scores = net.matmul(q_scaled, k, tensor{.channels = heads * S, .height = S});
  scores = net.act(scores, activation::softmax, false);
  const tensor context = net.matmul(scores, v, tensor{.channels = E, .height = S});
  return net.copy(context);  // transpose(0, 1).contiguous() before out_proj
}

// From torch 2.0 (torch/nn/functional.py@v2.0.0 _in_projection_packed and
// multi_head_attention_forward, need_weights=False): the packed projection is reshaped to
// (3, S, B, E) in one contiguous copy whose slices are q, k and v, viewed per head without
// further copies, and F.scaled_dot_product_attention runs on them. Its result is permuted
// to (S, B, H, D) and made contiguous for out_proj: flash allocates its output like q
// (flash_api.cpp mha_fwd: out = empty_like(q_padded)), already laid out that way, so that
// is a view; the other kernels write (B, S, H, D) and it copies.
constexpr tensor mha_attention_sdpa(network& net, const tensor& proj, std::uint64_t heads) {
  const std::uint64_t E = proj.channels / 3;
  const std::uint64_t S = proj.height;
  const tensor packed = net.copy(proj);
  const tensor part{.storage = packed.storage, .channels = E, .height = S, .type = packed.type};
  const attention_kernel kernel = net.context().mha_kernel;
  tensor context{};
  if (is_fused(kernel)) {
    // Flash's backward copies its output and the incoming gradient contiguous (neither is: both
    // are laid out (S, B, H, D)) and accumulates dq in fp32 over rows rounded up to 128 and a
    // head size rounded up to 32 (aten/src/ATen/native/transformers/cuda/attention_backward.cu
    // _flash_attention_backward, flash_attn/flash_api.cpp mha_bwd dq_accum, at v2.3.0).
    bytes backward_temp{};
    if (kernel == attention_kernel::flash && net.context().cuda) {
      const auto round_up = [](std::uint64_t n, std::uint64_t m) { return (n + m - 1) / m * m; };
      const std::uint64_t rows = detail::checked_mul(net.context().batch, round_up(S, 128));
      const std::uint64_t dq_accumulator = detail::checked_mul(rows, heads, round_up(E / heads, 32));
      backward_temp = net.bytes_of(part) + net.bytes_of(part) + storage(dtype::fp32, dq_accumulator);
    }
    context = net.fused_attention(packed, part, heads, backward_temp);
  } else {
    // The math kernel (aten/src/ATen/native/transformers/attention.cpp
    // _scaled_dot_product_attention_math): q and k^T each scaled by sqrt(scale) into new
    // tensors, the probabilities kept by the second matmul.
    const tensor q_scaled = net.copy(part);
    const tensor k_scaled = net.copy(part);
    tensor scores = net.matmul(q_scaled, k_scaled, tensor{.channels = heads * S, .height = S});
    scores = net.act(scores, activation::softmax, false);
    context = net.matmul(scores, part, tensor{.channels = E, .height = S});
  }
  const bool view = kernel == attention_kernel::flash && net.context().cuda;
  return view ? context : net.copy(context);
}

constexpr tensor vit_encoder_block(network& net, const tensor& x, std::uint64_t heads, std::uint64_t mlp) {
  const std::uint64_t E = x.channels;
  const std::int32_t first = net.next_index();
  tensor h = net.layer_norm(x);
  h = net.copy(h);  // (S, B, E) contiguous for the packed in-projection
  const tensor proj = net.linear(h, 3 * E, true);
  const tensor context = net.context().torch_version >= 200 ? mha_attention_sdpa(net, proj, heads)
                                                            : mha_attention_113(net, proj, heads);
  tensor attn = net.linear(context, E, true);
  net.carry(first, x);
  const tensor mid = net.add(attn, x, false);
  const std::int32_t second = net.next_index();
  tensor y = net.layer_norm(mid);
  y = net.linear(y, mlp, true);
  y = net.act(y, activation::gelu, false);
  y = net.linear(y, E, true);
  net.carry(second, mid);
  return net.add(y, mid, false);
}

// The end of a timm residual branch: its last Linear, LayerScale?, DropPath?, then skip + branch.
// add's backward hands its gradient to both inputs as it is (derivatives.yaml add.Tensor: grad,
// maybe_multiply(grad, alpha) with alpha 1): a branch that ends in its Linear receives the skip
// path's gradient itself, so that Linear's backward holds one, not two.
constexpr tensor timm_branch_end(network& net, const tensor& branch, const tensor& skip, std::int32_t skip_index,
                                 const vit_spec& s, bool drop_path) {
  const bool shared_gradient = !s.layer_scale && !drop_path;
  if (shared_gradient) net.carry(skip_index, skip);
  tensor y = net.linear(branch, skip.channels, true);
  if (s.layer_scale) y = net.scale(y);
  y = net.stochastic_depth(y, drop_path);
  if (!shared_gradient) net.carry(skip_index, skip);
  return net.add(y, skip, false);
}

// The packed qkv projection. timm Eva's (qv_bias) is F.linear with the weight and
// torch.cat((q_bias, k_bias, v_bias)), k_bias a zero buffer (eva.py@0173a139 EvaAttention); the
// cat is a 3 * E temporary freed right after the linear.
constexpr tensor timm_qkv(network& net, const tensor& h, const vit_spec& s) {
  const std::uint64_t E = h.channels;
  if (!s.qv_bias) return net.linear(h, 3 * E, true);
  const tensor qkv = net.linear(h, 3 * E, false);
  net.parameter(2 * E);                                                               // q_bias, v_bias
  net.buffer(storage(net.context().autocast ? dtype::fp32 : net.context().act, E));  // k_bias, with the weights
  return qkv;
}

// timm Block: norm1, Attention, LayerScale?, DropPath?, x + ...; norm2, Mlp (fc1, GELU,
// fc2), LayerScale?, DropPath?, x + ....
constexpr tensor timm_vit_block(network& net, const tensor& x, const vit_spec& s, bool drop_path) {
  const std::uint64_t E = x.channels;
  const std::uint64_t S = x.height;
  const std::int32_t first = net.next_index();
  const tensor h = net.layer_norm(x);
  const tensor qkv = timm_qkv(net, h, s);
  const tensor part{.storage = qkv.storage, .channels = E, .height = S, .type = qkv.type};  // q, k or v: a view
  tensor context{};
  if (net.context().fused_attention) {
    context = net.fused_attention(qkv, part, s.heads);
  } else {
    // matmul on the permuted 4-D views folds (B, heads) into bmm's batch with reshape, which
    // cannot view them: q_scaled (laid out like q), k^T and v are copied contiguous and bmm
    // saves the copies, so the qkv output itself is freed after the copies
    // (aten/src/ATen/native/LinearAlgebra.cpp matmul, the batched branch).
    const tensor q_scaled = net.copy(part);  // q * head_dim ** -0.5
    const tensor q_bmm = net.copy(q_scaled);
    const tensor k_bmm = net.copy(part);
    tensor scores = net.matmul(q_bmm, k_bmm, tensor{.channels = s.heads * S, .height = S});
    scores = net.act(scores, activation::softmax, false);
    const tensor v_bmm = net.copy(part);
    context = net.matmul(scores, v_bmm, tensor{.channels = E, .height = S});
  }
  context = net.copy(context);  // transpose(1, 2).reshape(B, N, C)
  const tensor mid = timm_branch_end(net, context, x, first, s, drop_path);
  const std::int32_t second = net.next_index();
  tensor y = net.layer_norm(mid);
  y = net.linear(y, s.mlp, true);
  y = net.act(y, activation::gelu, false);
  return timm_branch_end(net, y, mid, second, s, drop_path);
}

// timm VisionTransformer: PatchEmbed, _pos_embed, norm_pre, blocks, norm, forward_head.
constexpr tensor timm_vit(network& net, const tensor& image, const vit_spec& s, std::uint64_t classes) {
  const std::uint64_t patches = (image.height / s.patch) * (image.width / s.patch);
  const std::uint64_t prefix = prefix_tokens(s);
  const std::uint64_t tokens = patches + prefix;
  tensor x = net.conv2d(image, {.out = s.hidden, .kernel = s.patch, .stride = s.patch, .bias = s.patch_bias});
  x = net.view(x, s.hidden, patches, 1);  // flatten(2).transpose(1, 2)
  if (s.class_token) net.parameter(s.hidden);
  if (s.reg_tokens > 0) net.parameter(detail::checked_mul(s.reg_tokens, s.hidden));
  net.parameter(detail::checked_mul(s.no_embed_class ? patches : tokens, s.hidden));  // pos_embed
  if (s.no_embed_class) x = net.add(x, x, false);  // + pos_embed, then the prefix is concatenated
  if (prefix > 0) x = net.copy_as(x, tensor{.channels = s.hidden, .height = tokens});  // torch.cat
  if (!s.no_embed_class) x = net.add(x, x, false);
  if (s.pre_norm) x = net.layer_norm(x);
  for (std::uint64_t i = 0; i < s.layers; ++i) {
    net.begin_stage(x);  // each block checkpointed on its own (timm set_grad_checkpointing)
    x = timm_vit_block(net, x, s, s.drop_path && i > 0);  // torch.linspace(0, rate, depth)[0] == 0
    net.end_stage();
  }
  if (!s.fc_norm) x = net.layer_norm(x);
  // x[:, prefix:].mean(1), or x[:, 0]: a view that keeps the whole normalised output alive.
  x = s.avg_pool ? net.token_mean(x) : tensor{.storage = x.storage, .channels = s.hidden, .type = x.type};
  if (s.fc_norm) x = net.layer_norm(x);
  if (classes == 0) return x;  // num_classes 0: the head is nn.Identity
  return net.linear(x, classes, true);
}

constexpr tensor vit(network& net, const tensor& image, const vit_spec& s, std::uint64_t classes) {
  validate(s);
  detail::require(s.code != vit_code::eva02, error_code::invalid_model, "vit.code",
                  "eva02 is built by vision::eva02 (eva.hpp), not vision::vit", s.code);
  detail::require(image.height % s.patch == 0 && image.width % s.patch == 0, error_code::invalid_model, "image size",
                  "must be a multiple of the ViT patch size", image.height);
  if (s.code == vit_code::timm) return timm_vit(net, image, s, classes);
  const std::uint64_t tokens = (image.height / s.patch) * (image.width / s.patch) + 1;
  tensor x = net.conv2d(image, {.out = s.hidden, .kernel = s.patch, .stride = s.patch, .bias = true});
  net.parameter(s.hidden);                             // class_token
  net.parameter(detail::checked_mul(tokens, s.hidden));  // pos_embedding
  x = net.copy_as(x, tensor{.channels = s.hidden, .height = tokens});  // torch.cat([class_token, x])
  x = net.add(x, x, false);  // + pos_embedding
  for (std::uint64_t i = 0; i < s.layers; ++i) {
    net.begin_stage(x);  // each encoder block checkpointed on its own
    x = vit_encoder_block(net, x, s.heads, s.mlp);
    net.end_stage();
  }
  x = net.layer_norm(x);
  return net.linear(net.view(x, s.hidden, tokens, 1), classes, true);
}

}  // namespace memscale::vision
