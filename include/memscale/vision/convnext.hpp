// memscale/vision/convnext.hpp: torchvision ConvNeXt (torchvision v0.14 models/convnext.py).
//
// Stem conv 4x4/4 (bias) + LayerNorm2d; stages of CNBlocks: depthwise 7x7 (bias),
// permute, LayerNorm, Linear(4x), GELU, Linear, permute, layer_scale * x, StochasticDepth
// ("row", p = 0.1 * block_id / (blocks - 1)), `result += input`; between stages
// LayerNorm2d + conv 2x2/2; pool, LayerNorm2d, flatten, Linear.
// LayerNorm2d and the CNBlock's LayerNorm run on an NHWC permute: native_layer_norm saves
// that (non-contiguous) view and works on a contiguous copy (aten/src/ATen/native/
// layer_norm.cpp: input.expect_contiguous()), a forward temporary.
//
// timm's ConvNeXt (huggingface/pytorch-image-models timm/models/convnext.py@e4e43190) has the
// same block, stem, downsampling and head, but its residual is `x = drop_path(x) + shortcut`
// (a new tensor, not in place), DropPath defaults to rate 0 (timm.create_model without
// drop_path_rate), and the conv_mlp models (atto ... nano) run LayerNorm2d and two 1x1
// convolutions on NCHW instead of the NHWC Linears.
#pragma once

#include <array>
#include <cstdint>

#include "memscale/vision/blocks.hpp"

namespace memscale::vision {

struct convnext_spec {
  std::array<std::uint64_t, 4> blocks{3, 3, 9, 3};
  std::array<std::uint64_t, 4> dims{96, 192, 384, 768};
  bool timm = false;       // timm's block: residual add not in place
  bool drop_path = true;   // stochastic depth / DropPath rate > 0 (torchvision: 0.1; timm: 0 by default)
  bool conv_mlp = false;   // timm conv_mlp: LayerNorm2d + 1x1 convs on NCHW
};

constexpr tensor convnext_block(network& net, const tensor& x, const convnext_spec& s, bool drop_path) {
  const std::int32_t first = net.next_index();
  tensor y = net.conv2d(x, {.out = x.channels, .kernel = 7, .padding = 3, .groups = x.channels, .bias = true});
  y = net.layer_norm(y, true);
  if (s.conv_mlp) {
    y = net.conv2d(y, {.out = 4 * x.channels, .kernel = 1, .bias = true});
    y = net.act(y, activation::gelu, false);
    y = net.conv2d(y, {.out = x.channels, .kernel = 1, .bias = true});
  } else {
    y = net.linear(y, 4 * x.channels, true);
    y = net.act(y, activation::gelu, false);
    y = net.linear(y, x.channels, true, true);
  }
  y = net.scale(y);
  y = net.stochastic_depth(y, drop_path);
  net.carry(first, x);
  return net.add(y, x, !s.timm);
}

constexpr tensor convnext(network& net, const tensor& image, const convnext_spec& s, std::uint64_t classes) {
  tensor x = net.conv2d(image, {.out = s.dims[0], .kernel = 4, .stride = 4, .bias = true});
  x = net.layer_norm(x, true);
  std::uint64_t block_id = 0;
  for (std::size_t stage = 0; stage < 4; ++stage) {
    net.begin_stage(x);
    for (std::uint64_t b = 0; b < s.blocks[stage]; ++b, ++block_id)
      x = convnext_block(net, x, s, s.drop_path && block_id > 0);  // the rate ramps from 0 at block 0
    net.end_stage();
    if (stage < 3) {
      x = net.layer_norm(x, true);
      x = net.conv2d(x, {.out = s.dims[stage + 1], .kernel = 2, .stride = 2, .bias = true});
    }
  }
  x = net.global_avg_pool(x);
  x = net.layer_norm(x, true);
  return net.linear(net.view(x, x.channels, 1, 1), classes, true);
}

}  // namespace memscale::vision
