// memscale/vision/blocks.hpp: the building blocks torchvision composes its models from.
//
// Sources: torchvision v0.14 torchvision/ops/misc.py (Conv2dNormActivation: conv without
// bias when a norm follows, activation with inplace=True by default; SqueezeExcitation:
// avgpool, fc1 (1x1 conv), activation, fc2, scale activation, `scale * input`),
// torchvision/ops/stochastic_depth.py.
#pragma once

#include <cstdint>
#include <optional>

#include "memscale/vision/layers.hpp"

namespace memscale::vision {

// Conv2dNormActivation: conv (no bias) + BatchNorm2d + an optional in-place activation.
constexpr tensor conv_bn_act(network& net, const tensor& x, conv2d_spec c, std::optional<activation> a) {
  c.bias = false;
  tensor y = net.batch_norm(net.conv2d(x, c));
  if (a) y = net.act(y, *a, true);
  return y;
}

// "same" padding for odd kernels, as torchvision computes it: (k - 1) / 2 * dilation.
constexpr std::uint64_t same_padding(std::uint64_t kernel, std::uint64_t dilation = 1) {
  return (kernel - 1) / 2 * dilation;
}

// SqueezeExcitation: the pooled tensor and the squeezed one are saved by the 1x1 convs,
// the scale by the final multiplication (which also saves the full input).
constexpr tensor squeeze_excitation(network& net, const tensor& x, std::uint64_t squeeze, activation inner,
                                    activation gate) {
  tensor s = net.global_avg_pool(x);
  s = net.conv2d(s, {.out = squeeze, .kernel = 1, .bias = true});
  s = net.act(s, inner, true);
  s = net.conv2d(s, {.out = x.channels, .kernel = 1, .bias = true});
  s = net.act(s, gate, false);
  return net.mul(x, s);
}

// An inverted residual (MobileNetV2/V3, EfficientNet's MBConv): 1x1 expansion,
// depthwise kxk, optional squeeze-excitation, 1x1 projection without activation, and a
// residual add when stride 1 keeps the channel count.
struct inverted_residual_spec {
  std::uint64_t expanded = 0;
  std::uint64_t out = 0;
  std::uint64_t kernel = 3;
  std::uint64_t stride = 1;
  std::uint64_t dilation = 1;
  activation act = activation::relu;
  std::uint64_t se_squeeze = 0;  // 0: no squeeze-excitation
  activation se_inner = activation::relu;
  activation se_gate = activation::sigmoid;
  bool stochastic_depth = false;  // torchvision StochasticDepth with p > 0 on the residual branch
};

constexpr tensor inverted_residual(network& net, const tensor& x, const inverted_residual_spec& s) {
  const bool residual = s.stride == 1 && x.channels == s.out;
  const std::int32_t first = net.next_index();
  tensor y = x;
  if (s.expanded != x.channels) y = conv_bn_act(net, y, {.out = s.expanded, .kernel = 1}, s.act);
  y = conv_bn_act(net, y,
                  {.out = s.expanded,
                   .kernel = s.kernel,
                   .stride = s.dilation > 1 ? 1 : s.stride,
                   .padding = same_padding(s.kernel, s.dilation),
                   .dilation = s.dilation,
                   .groups = s.expanded},
                  s.act);
  if (s.se_squeeze > 0) y = squeeze_excitation(net, y, s.se_squeeze, s.se_inner, s.se_gate);
  y = conv_bn_act(net, y, {.out = s.out, .kernel = 1}, std::nullopt);
  if (!residual) return y;
  y = net.stochastic_depth(y, s.stochastic_depth);
  net.carry(first, x);
  return net.add(y, x, true);  // `result += input`
}

// A depthwise-separable block (MobileNetV1 style): depthwise kxk + BN + act, pointwise 1x1 + BN + act.
constexpr tensor depthwise_separable(network& net, const tensor& x, std::uint64_t out, std::uint64_t stride,
                                     activation a) {
  tensor y = conv_bn_act(net, x, {.out = x.channels, .kernel = 3, .stride = stride, .padding = 1, .groups = x.channels}, a);
  return conv_bn_act(net, y, {.out = out, .kernel = 1}, a);
}

}  // namespace memscale::vision
