// memscale/vision/model.hpp: a vision model (architecture + input size) and its graph
// for one training run.
#pragma once

#include <cstdint>
#include <string_view>

#include "memscale/attention_kernel.hpp"
#include "memscale/error.hpp"
#include "memscale/precision_policy.hpp"
#include "memscale/training.hpp"
#include "memscale/vision/convnext.hpp"
#include "memscale/vision/efficientnet.hpp"
#include "memscale/vision/eva.hpp"
#include "memscale/vision/mobilenet.hpp"
#include "memscale/vision/resnet.hpp"
#include "memscale/vision/vit.hpp"

namespace memscale::vision {

enum class family : std::uint8_t { resnet, mobilenet_v3, efficientnet, vit, convnext };

// The library whose model code the spec describes (its presets: presets.hpp, timm_presets.hpp).
enum class model_source : std::uint8_t { torchvision, timm };

struct vision_spec {
  std::string_view name = "custom";
  family arch = family::resnet;
  model_source source = model_source::torchvision;
  resnet_spec resnet{};
  mobilenet_v3_size mobilenet = mobilenet_v3_size::large;
  efficientnet_spec efficientnet{};
  vit_spec vit{};
  convnext_spec convnext{};
  std::uint64_t classes = 1000;
  std::uint64_t image_height = 224;
  std::uint64_t image_width = 224;
  std::uint64_t in_channels = 3;
  bool channels_last = false;  // model.to(memory_format=torch.channels_last)
};

constexpr const vision_spec& validate(const vision_spec& v) {
  constexpr auto bad = error_code::invalid_model;
  // timm's num_classes 0 (a tag without a head) makes the head nn.Identity.
  detail::require(v.classes > 0 || v.source == model_source::timm, bad, "model.classes", "must be > 0", v.classes);
  detail::require(v.image_height >= 32 && v.image_width >= 32, bad, "image size", "must be at least 32x32 pixels",
                  v.image_height < v.image_width ? v.image_height : v.image_width);
  detail::require(v.image_height <= 8192 && v.image_width <= 8192, bad, "image size", "must be at most 8192x8192 pixels",
                  v.image_height > v.image_width ? v.image_height : v.image_width);
  detail::require(v.in_channels > 0, bad, "model.in_channels", "must be > 0", v.in_channels);
  return v;
}

// Whether timm's Attention runs a fused SDPA kernel. timm calls F.scaled_dot_product_attention
// when use_fused_attn() (timm/layers/config.py: torch >= 2.0 and TIMM_FUSED_ATTN not 0; an
// eager request stands for TIMM_FUSED_ATTN=0), with no mask and attn_drop 0; the kernel SDPA
// then picks is attention_kernel.hpp's (flash and sdpa requests alike: timm has no other
// fused path), and its math kernel writes the scores out as the eager code does.
constexpr bool timm_attention_fused(const vision_spec& spec, const training_spec& run) {
  const bool timm_vit = spec.arch == family::vit && spec.vit.code != vit_code::torchvision && spec.vit.heads > 0;
  if (!timm_vit || run.torch_version < 200) return false;
  if (run.attention == attention_impl::eager || run.attention == attention_impl::sdpa_math) return false;
  return is_fused(sdpa_kernel(sdpa_call{.device = run.device,
                                        .type = precision_policy_of(run).matmul,
                                        .head_dim = spec.vit.hidden / spec.vit.heads,
                                        .torch_version = run.torch_version}));
}

// The kernel torchvision's nn.MultiheadAttention runs. From torch 2.0
// F.multi_head_attention_forward calls F.scaled_dot_product_attention whenever need_weights
// is False (torch/nn/functional.py@v2.0.0), which torchvision's EncoderBlock passes; before
// 2.0 it wrote the probabilities out (math). MultiheadAttention has no eager switch of its
// own: eager and sdpa_math requests both stand for SDPA's math kernel.
constexpr attention_kernel torchvision_mha_kernel(const vision_spec& spec, const training_spec& run) {
  const bool torchvision_vit = spec.arch == family::vit && spec.vit.code == vit_code::torchvision && spec.vit.heads > 0;
  if (!torchvision_vit || run.torch_version < 200) return attention_kernel::math;
  if (run.attention == attention_impl::eager || run.attention == attention_impl::sdpa_math) return attention_kernel::math;
  return sdpa_kernel(sdpa_call{.device = run.device,
                               .type = precision_policy_of(run).matmul,
                               .head_dim = spec.vit.hidden / spec.vit.heads,
                               .torch_version = run.torch_version});
}

// The dtypes and device one run gives the layers.
constexpr build_context context_of(const vision_spec& spec, const training_spec& run) {
  const auto p = precision_policy_of(run);
  const bool cpu = run.device == device_kind::cpu;
  // CPU autocast (torch 1.13 autocast_mode.cpp, KernelCPU lower_precision_fp list)
  // casts convolutions and matmuls; batch_norm runs in the input's dtype. CUDA autocast
  // runs batch_norm in fp32 only through cudnn with fp32 statistics: its output keeps the
  // input dtype as well.
  return {.batch = run.micro_batch,
          .act = p.matmul,
          .norm_act = p.matmul,
          .cuda = !cpu,
          .autocast = p.autocast,
          .channels_last = spec.channels_last,
          .torch_version = run.torch_version,
          .fused_attention = timm_attention_fused(spec, run),
          .mha_kernel = torchvision_mha_kernel(spec, run)};
}

constexpr layer_graph build_graph(const vision_spec& spec, const training_spec& run) {
  validate(spec);
  network net(context_of(spec, run));
  const dtype input_type = precision_policy_of(run).param;  // the batch is cast with the model
  const tensor image = net.image(spec.in_channels, spec.image_height, spec.image_width, input_type);
  tensor logits{};
  switch (spec.arch) {
    case family::resnet: logits = resnet(net, image, spec.resnet, spec.classes); break;
    case family::mobilenet_v3: logits = mobilenet_v3(net, image, spec.mobilenet, spec.classes); break;
    case family::efficientnet: logits = efficientnet(net, image, spec.efficientnet, spec.classes); break;
    case family::vit:
      logits = spec.vit.code == vit_code::eva02 ? eva02(net, image, spec.vit, spec.classes)
                                                : vit(net, image, spec.vit, spec.classes);
      break;
    case family::convnext: logits = convnext(net, image, spec.convnext, spec.classes); break;
  }
  net.cross_entropy(logits);
  return net.graph();
}

}  // namespace memscale::vision
