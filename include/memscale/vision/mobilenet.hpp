// memscale/vision/mobilenet.hpp: torchvision MobileNetV3 (torchvision v0.14
// models/mobilenetv3.py: _mobilenet_v3_conf, InvertedResidual, MobileNetV3).
//
// Stem conv 3x3/2 to 16 + BN + Hardswish; inverted residuals with ReLU ("RE") or
// Hardswish ("HS") and squeeze-excitation (squeeze = _make_divisible(expanded // 4, 8),
// ReLU inside, Hardsigmoid gate); last conv 1x1 to 6x the last width + Hardswish;
// pool, Linear, Hardswish(inplace), Dropout(0.2, inplace), Linear.
#pragma once

#include <array>
#include <cstdint>

#include "memscale/vision/blocks.hpp"

namespace memscale::vision {

// torchvision's _make_divisible(v, 8): round to the nearest multiple of 8, never more
// than 10% down.
constexpr std::uint64_t make_divisible(std::uint64_t v, std::uint64_t divisor = 8) {
  std::uint64_t rounded = (v + divisor / 2) / divisor * divisor;
  if (rounded < divisor) rounded = divisor;
  if (10 * rounded < 9 * v) rounded += divisor;
  return rounded;
}

struct bneck {
  std::uint64_t kernel, expanded, out;
  bool se;
  bool hardswish;
  std::uint64_t stride;
};

enum class mobilenet_v3_size : std::uint8_t { large, small };

constexpr tensor mobilenet_v3(network& net, const tensor& image, mobilenet_v3_size size, std::uint64_t classes) {
  // _mobilenet_v3_conf: (kernel, expanded, out, use_se, activation, stride), input 16.
  constexpr std::array<bneck, 15> large{{{3, 16, 16, false, false, 1},   {3, 64, 24, false, false, 2},
                                         {3, 72, 24, false, false, 1},   {5, 72, 40, true, false, 2},
                                         {5, 120, 40, true, false, 1},   {5, 120, 40, true, false, 1},
                                         {3, 240, 80, false, true, 2},   {3, 200, 80, false, true, 1},
                                         {3, 184, 80, false, true, 1},   {3, 184, 80, false, true, 1},
                                         {3, 480, 112, true, true, 1},   {3, 672, 112, true, true, 1},
                                         {5, 672, 160, true, true, 2},   {5, 960, 160, true, true, 1},
                                         {5, 960, 160, true, true, 1}}};
  constexpr std::array<bneck, 11> small{{{3, 16, 16, true, false, 2},   {3, 72, 24, false, false, 2},
                                         {3, 88, 24, false, false, 1},  {5, 96, 40, true, true, 2},
                                         {5, 240, 40, true, true, 1},   {5, 240, 40, true, true, 1},
                                         {5, 120, 48, true, true, 1},   {5, 144, 48, true, true, 1},
                                         {5, 288, 96, true, true, 2},   {5, 576, 96, true, true, 1},
                                         {5, 576, 96, true, true, 1}}};
  const bool is_large = size == mobilenet_v3_size::large;
  const std::uint64_t last_channel = is_large ? 1280 : 1024;
  tensor x = conv_bn_act(net, image, {.out = 16, .kernel = 3, .stride = 2, .padding = 1}, activation::hardswish);
  auto block = [&](const bneck& b) {
    net.begin_stage(x);  // each inverted residual checkpointed on its own
    x = inverted_residual(net, x,
                          {.expanded = b.expanded,
                           .out = b.out,
                           .kernel = b.kernel,
                           .stride = b.stride,
                           .act = b.hardswish ? activation::hardswish : activation::relu,
                           .se_squeeze = b.se ? make_divisible(b.expanded / 4) : 0,
                           .se_inner = activation::relu,
                           .se_gate = activation::hardsigmoid});
    net.end_stage();
  };
  if (is_large) {
    for (const bneck& b : large) block(b);
  } else {
    for (const bneck& b : small) block(b);
  }
  x = conv_bn_act(net, x, {.out = 6 * x.channels, .kernel = 1}, activation::hardswish);
  x = net.global_avg_pool(x);
  x = net.linear(net.view(x, x.channels, 1, 1), last_channel, true);
  x = net.act(x, activation::hardswish, true);
  x = net.dropout(x, true, true);
  return net.linear(x, classes, true);
}

}  // namespace memscale::vision
