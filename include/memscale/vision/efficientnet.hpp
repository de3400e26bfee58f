// memscale/vision/efficientnet.hpp: torchvision EfficientNet-B0..B7 (torchvision v0.14
// models/efficientnet.py: _efficientnet_conf, MBConv, EfficientNet).
//
// Stem conv 3x3/2 + BN + SiLU; MBConv blocks (expansion 1x1, depthwise, SE with
// squeeze = max(1, input_channels // 4), SiLU(inplace) inside and Sigmoid gate, 1x1
// projection); StochasticDepth("row") with p = 0.2 * block_id / total_blocks on
// residual blocks (p = 0 for the first block); last conv 1x1 to 4x the last width +
// SiLU; pool, Dropout(inplace), Linear.
#pragma once

#include <array>
#include <cstdint>

#include "memscale/vision/blocks.hpp"
#include "memscale/vision/mobilenet.hpp"

namespace memscale::vision {

struct efficientnet_spec {
  double width_mult = 1.0;  // B0: 1.0, 1.0 (resolution 224)
  double depth_mult = 1.0;
};

// ceil(x) for the small positive values of adjust_depth (no <cmath> in constexpr).
constexpr std::uint64_t ceil_positive(double x) {
  const auto t = static_cast<std::uint64_t>(x);
  return static_cast<double>(t) < x ? t + 1 : t;
}

constexpr tensor efficientnet(network& net, const tensor& image, const efficientnet_spec& s, std::uint64_t classes) {
  struct stage_conf {
    std::uint64_t expand, kernel, stride, in, out, layers;
  };
  // _efficientnet_conf for the B series (MBConvConfig(expand, kernel, stride, in, out, layers)).
  constexpr std::array<stage_conf, 7> stages{{{1, 3, 1, 32, 16, 1},
                                              {6, 3, 2, 16, 24, 2},
                                              {6, 5, 2, 24, 40, 2},
                                              {6, 3, 2, 40, 80, 3},
                                              {6, 5, 1, 80, 112, 3},
                                              {6, 5, 2, 112, 192, 4},
                                              {6, 3, 1, 192, 320, 1}}};
  // adjust_channels: _make_divisible(c * width_mult, 8) on the real product.
  auto channels = [&](std::uint64_t c) {
    const double v = static_cast<double>(c) * s.width_mult;
    std::uint64_t r = static_cast<std::uint64_t>(v + 4.0) / 8 * 8;
    if (r < 8) r = 8;
    if (static_cast<double>(r) < 0.9 * v) r += 8;
    return r;
  };
  auto depth = [&](std::uint64_t n) { return ceil_positive(static_cast<double>(n) * s.depth_mult); };
  std::uint64_t total = 0;
  for (const auto& st : stages) total += depth(st.layers);
  tensor x = conv_bn_act(net, image, {.out = channels(32), .kernel = 3, .stride = 2, .padding = 1}, activation::silu);
  std::uint64_t block_id = 0;
  for (const auto& st : stages) {
    for (std::uint64_t i = 0; i < depth(st.layers); ++i, ++block_id) {
      const std::uint64_t in = x.channels;
      net.begin_stage(x);  // each MBConv checkpointed on its own
      x = inverted_residual(net, x,
                            {.expanded = make_divisible(in * st.expand),
                             .out = channels(st.out),
                             .kernel = st.kernel,
                             .stride = i == 0 ? st.stride : 1,
                             .act = activation::silu,
                             .se_squeeze = in / 4 > 0 ? in / 4 : 1,
                             .se_inner = activation::silu,
                             .se_gate = activation::sigmoid,
                             .stochastic_depth = block_id > 0 && total > 0});
      net.end_stage();
    }
  }
  x = conv_bn_act(net, x, {.out = 4 * x.channels, .kernel = 1}, activation::silu);
  x = net.global_avg_pool(x);
  x = net.dropout(net.view(x, x.channels, 1, 1), true, true);
  return net.linear(x, classes, true);
}

}  // namespace memscale::vision
