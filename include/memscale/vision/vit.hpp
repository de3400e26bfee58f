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
// and the context is copied contiguous before out_proj.
#pragma once

#include <cstdint>

#include "memscale/vision/blocks.hpp"

namespace memscale::vision {

struct vit_spec {
  std::uint64_t patch = 16;
  std::uint64_t layers = 12;
  std::uint64_t hidden = 768;
  std::uint64_t heads = 12;
  std::uint64_t mlp = 3072;
};

constexpr tensor vit_encoder_block(network& net, const tensor& x, std::uint64_t heads, std::uint64_t mlp) {
  const std::uint64_t E = x.channels;
  const std::uint64_t S = x.height;
  const std::int32_t first = net.next_index();
  tensor h = net.layer_norm(x);
  h = net.copy(h);  // (S, B, E) contiguous for the packed in-projection
  const tensor proj = net.linear(h, 3 * E, true);
  const tensor q = net.copy_as(proj, tensor{.channels = E, .height = S});
  const tensor k = net.copy_as(proj, tensor{.channels = E, .height = S});
  const tensor v = net.copy_as(proj, tensor{.channels = E, .height = S});
  const tensor q_scaled = net.copy(q);  // q / sqrt(head_dim)
  tensor scores = net.matmul(q_scaled, k, tensor{.channels = heads * S, .height = S});
  scores = net.act(scores, activation::softmax, false);
  tensor context = net.matmul(scores, v, tensor{.channels = E, .height = S});
  context = net.copy(context);  // transpose(0, 1).contiguous() before out_proj
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

constexpr tensor vit(network& net, const tensor& image, const vit_spec& s, std::uint64_t classes) {
  detail::require(image.height % s.patch == 0 && image.width % s.patch == 0, error_code::invalid_model, "image size",
                  "must be a multiple of the ViT patch size", image.height);
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
