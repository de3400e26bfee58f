// memscale/vision/resnet.hpp: torchvision ResNets (torchvision v0.14 models/resnet.py).
//
// Stem conv 7x7/2 (64, no bias) + BN + ReLU(inplace) + maxpool 3x3/2; four stages of
// BasicBlock (expansion 1) or Bottleneck (expansion 4, stride on the 3x3 conv: "ResNet
// V1.5"); a 1x1 conv + BN downsample where stride or width changes; `out += identity`
// then ReLU(inplace); adaptive average pool, flatten, fc.
#pragma once

#include <array>
#include <cstdint>

#include "memscale/vision/blocks.hpp"

namespace memscale::vision {

struct resnet_spec {
  std::array<std::uint64_t, 4> blocks{2, 2, 2, 2};
  bool bottleneck = false;
};

constexpr tensor resnet_block(network& net, const tensor& x, std::uint64_t planes, std::uint64_t stride,
                              bool bottleneck) {
  const std::uint64_t out_channels = bottleneck ? planes * 4 : planes;
  const std::int32_t first = net.next_index();
  tensor y = x;
  if (bottleneck) {
    y = conv_bn_act(net, y, {.out = planes, .kernel = 1}, activation::relu);
    y = conv_bn_act(net, y, {.out = planes, .kernel = 3, .stride = stride, .padding = 1}, activation::relu);
    y = conv_bn_act(net, y, {.out = out_channels, .kernel = 1}, std::nullopt);
  } else {
    y = conv_bn_act(net, y, {.out = planes, .kernel = 3, .stride = stride, .padding = 1}, activation::relu);
    y = conv_bn_act(net, y, {.out = planes, .kernel = 3, .padding = 1}, std::nullopt);
  }
  tensor identity = x;
  if (stride != 1 || x.channels != out_channels)
    identity = conv_bn_act(net, x, {.out = out_channels, .kernel = 1, .stride = stride}, std::nullopt);
  net.carry(first, x);  // the identity path's gradient waits while the main path runs backward
  y = net.add(y, identity, true);
  return net.act(y, activation::relu, true);
}

constexpr tensor resnet(network& net, const tensor& image, const resnet_spec& s, std::uint64_t classes) {
  tensor x = conv_bn_act(net, image, {.out = 64, .kernel = 7, .stride = 2, .padding = 3}, activation::relu);
  x = net.max_pool(x, 3, 2, 1);
  constexpr std::array<std::uint64_t, 4> planes{64, 128, 256, 512};
  for (std::size_t stage = 0; stage < 4; ++stage) {
    net.begin_stage(x);
    for (std::uint64_t b = 0; b < s.blocks[stage]; ++b)
      x = resnet_block(net, x, planes[stage], (b == 0 && stage > 0) ? 2 : 1, s.bottleneck);
    net.end_stage();
  }
  x = net.global_avg_pool(x);
  return net.linear(net.view(x, x.channels, 1, 1), classes, true);
}

}  // namespace memscale::vision
