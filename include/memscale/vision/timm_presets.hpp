// memscale/vision/timm_presets.hpp: timm classification models by name.
//
// A timm name is `architecture.pretrained_tag` ("vit_large_patch16_224.augreg_in21k_ft_in1k",
// "resnet50.a1_in1k"). The architecture is the model_args of its registered function in
// huggingface/pytorch-image-models (timm/models/vision_transformer.py@94567641,
// eva.py@0173a139, convnext.py@e4e43190, resnet.py@749856cf); the tag picks weights and never changes the
// architecture, only num_classes: timm.create_model defaults num_classes from the tag's
// pretrained cfg (timm/models/_builder.py _update_default_model_kwargs), and an untagged name
// takes its architecture's default (first-listed) tag. Each preset's parameter count equals
// timm's (sum of p.numel()); tests/static/vision_timm_static.cpp pins them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "memscale/vision/model.hpp"

namespace memscale::vision::timm_presets {

// timm VisionTransformer with model_args (patch_size, embed_dim, depth, num_heads,
// mlp_ratio 4 unless given) at the name's image size; the ViT head is class-token pooling.
constexpr vision_spec timm_vit(std::string_view name, std::uint64_t patch, std::uint64_t dim, std::uint64_t depth,
                               std::uint64_t heads, std::uint64_t mlp, std::uint64_t classes = 1000) {
  return {.name = name,
          .arch = family::vit,
          .source = model_source::timm,
          .vit = {.patch = patch, .layers = depth, .hidden = dim, .heads = heads, .mlp = mlp, .code = vit_code::timm},
          .classes = classes};
}

// The CLIP image towers (vit_*_clip_*): pre_norm=True, which also drops the patch conv's bias
// (vision_transformer.py: PatchEmbed(bias=not pre_norm)).
constexpr vision_spec timm_vit_clip(std::string_view name, std::uint64_t patch, std::uint64_t dim,
                                    std::uint64_t depth, std::uint64_t heads, std::uint64_t mlp) {
  vision_spec v = timm_vit(name, patch, dim, depth, heads, mlp);
  v.vit.pre_norm = true;
  v.vit.patch_bias = false;
  return v;
}

// timm Eva with the EVA02 model_args (eva.py@0173a139): mlp_ratio 4 * 2 / 3 (hidden
// int(dim * 8 / 3)), swiglu_mlp, use_rot_pos_emb, global_pool 'avg'; base and large add
// qkv_fused False and scale_mlp (SwiGLU with the hidden LayerNorm).
constexpr vision_spec timm_eva02(std::string_view name, std::uint64_t dim, std::uint64_t depth, std::uint64_t heads,
                                 std::uint64_t image, std::uint64_t classes) {
  return {.name = name,
          .arch = family::vit,
          .source = model_source::timm,
          .vit = {.patch = 14,
                  .layers = depth,
                  .hidden = dim,
                  .heads = heads,
                  .mlp = dim * 8 / 3,
                  .code = vit_code::eva02,
                  .avg_pool = true,
                  .fc_norm = true,
                  .mlp_norm = true},
          .classes = classes,
          .image_height = image,
          .image_width = image};
}

// eva02_tiny and eva02_small (depth 12) leave qkv_fused and scale_mlp at Eva's defaults: the
// fused qkv with q/v biases and GluMlp.
constexpr vision_spec timm_eva02_small(std::string_view name, std::uint64_t dim, std::uint64_t heads,
                                       std::uint64_t image, std::uint64_t classes) {
  vision_spec v = timm_eva02(name, dim, 12, heads, image, classes);
  v.vit.qv_bias = true;
  v.vit.mlp_norm = false;
  return v;
}

// timm Eva with the EVA-01 giant model_args (eva.py@0173a139 eva_giant_patch14_*): embed 1408,
// depth 40, 16 heads, mlp_ratio 6144 / 1408 (plain GELU Mlp), Eva's defaults otherwise (fused
// qkv with q/v biases, absolute position embedding, no rope). That is timm's ViT block with
// Eva's qkv biases; global_pool 'avg' with fc_norm, or the CLIP tower's 'token' with the norm.
constexpr vision_spec timm_eva01_giant(std::string_view name, std::uint64_t image, std::uint64_t classes,
                                       bool avg_pool = true) {
  vision_spec v = timm_vit(name, 14, 1408, 40, 16, 6144, classes);
  v.vit.avg_pool = v.vit.fc_norm = avg_pool;
  v.vit.qv_bias = true;
  v.image_height = v.image_width = image;
  return v;
}

// timm ConvNeXt: torchvision's block with the timm residual, DropPath rate 0 (create_model's
// default drop_path_rate 0.), and conv_mlp for the smallest models.
constexpr vision_spec timm_convnext(std::string_view name, std::array<std::uint64_t, 4> depths,
                                    std::array<std::uint64_t, 4> dims, bool conv_mlp = false) {
  return {.name = name,
          .arch = family::convnext,
          .source = model_source::timm,
          .convnext = {.blocks = depths, .dims = dims, .timm = true, .drop_path = false, .conv_mlp = conv_mlp}};
}

// timm ResNet with the default stem (resnet.py: stem_width 64, stem_type '', no avg_down) is
// torchvision's ResNet v1.5: the same shapes and the same layers.
constexpr vision_spec timm_resnet(std::string_view name, std::array<std::uint64_t, 4> blocks, bool bottleneck) {
  return {.name = name, .arch = family::resnet, .source = model_source::timm, .resnet = {blocks, bottleneck}};
}

inline constexpr std::array all{
    timm_vit("vit_small_patch16_224", 16, 384, 12, 6, 1536),
    timm_vit("vit_base_patch16_224", 16, 768, 12, 12, 3072),
    timm_vit("vit_base_patch32_224", 32, 768, 12, 12, 3072),
    timm_vit("vit_large_patch16_224", 16, 1024, 24, 16, 4096),
    timm_vit("vit_large_patch14_224", 14, 1024, 24, 16, 4096),
    // Its pretrained tags (orig_in21k, mae) have num_classes=0: the bare name has no head.
    timm_vit("vit_huge_patch14_224", 14, 1280, 32, 16, 5120, 0),
    timm_vit("vit_giant_patch14_224", 14, 1408, 40, 16, 6144),  // mlp_ratio 48/11: int(1408 * 48 / 11)
    timm_vit_clip("vit_large_patch14_clip_224", 14, 1024, 24, 16, 4096),
    // The default tags: mim_in22k (224 px, no head); mim_in22k_ft_in1k (336 px, 1000 classes).
    timm_eva02_small("eva02_tiny_patch14_224", 192, 3, 224, 0),
    timm_eva02_small("eva02_tiny_patch14_336", 192, 3, 336, 1000),
    timm_eva02_small("eva02_small_patch14_224", 384, 6, 224, 0),
    timm_eva02_small("eva02_small_patch14_336", 384, 6, 336, 1000),
    // The default tags: mim_in22k_ft_in22k_in1k (448 px, 1000 classes); mim_in22k (224 px, no head).
    timm_eva02("eva02_base_patch14_224", 768, 12, 12, 224, 0),
    timm_eva02("eva02_base_patch14_448", 768, 12, 12, 448, 1000),
    timm_eva02("eva02_large_patch14_224", 1024, 24, 16, 224, 0),
    timm_eva02("eva02_large_patch14_448", 1024, 24, 16, 448, 1000),
    // The default tags: clip_ft_in1k (224, 336), m30m_ft_in22k_in1k (560); laion400m (1024-wide head).
    timm_eva01_giant("eva_giant_patch14_224", 224, 1000),
    timm_eva01_giant("eva_giant_patch14_336", 336, 1000),
    timm_eva01_giant("eva_giant_patch14_560", 560, 1000),
    timm_eva01_giant("eva_giant_patch14_clip_224", 224, 1024, false),
    timm_convnext("convnext_atto", {2, 2, 6, 2}, {40, 80, 160, 320}, true),
    timm_convnext("convnext_femto", {2, 2, 6, 2}, {48, 96, 192, 384}, true),
    timm_convnext("convnext_pico", {2, 2, 6, 2}, {64, 128, 256, 512}, true),
    timm_convnext("convnext_nano", {2, 2, 8, 2}, {80, 160, 320, 640}, true),
    timm_convnext("convnext_tiny", {3, 3, 9, 3}, {96, 192, 384, 768}),
    timm_convnext("convnext_small", {3, 3, 27, 3}, {96, 192, 384, 768}),
    timm_convnext("convnext_base", {3, 3, 27, 3}, {128, 256, 512, 1024}),
    timm_convnext("convnext_large", {3, 3, 27, 3}, {192, 384, 768, 1536}),
    timm_convnext("convnext_xlarge", {3, 3, 27, 3}, {256, 512, 1024, 2048}),
    timm_resnet("resnet18", {2, 2, 2, 2}, false),
    timm_resnet("resnet34", {3, 4, 6, 3}, false),
    timm_resnet("resnet50", {3, 4, 6, 3}, true),
    timm_resnet("resnet101", {3, 4, 23, 3}, true),
    timm_resnet("resnet152", {3, 8, 36, 3}, true),
};

// timm architectures memscale knows but does not model: the mechanism that is missing.
struct unmodelled {
  std::string_view prefix;
  std::string_view missing;
};
inline constexpr std::array unmodelled_architectures{
    unmodelled{"eva02_base_patch16_clip", "the EVA-CLIP towers' LayerNorm inside attention (scale_attn_inner) and "
                                          "class-token pooling are not modelled"},
    unmodelled{"eva02_large_patch14_clip", "the EVA-CLIP towers' LayerNorm inside attention (scale_attn_inner) and "
                                           "class-token pooling are not modelled"},
    unmodelled{"eva02_enormous", "EVA02-E's post-norm blocks (use_post_norm) are not modelled"},
    unmodelled{"resnet50d", "the deep 3x3 stem and avg_down downsample of the ResNet-D models are not modelled"},
    unmodelled{"resnet26d", "the deep 3x3 stem and avg_down downsample of the ResNet-D models are not modelled"},
    unmodelled{"resnet101d", "the deep 3x3 stem and avg_down downsample of the ResNet-D models are not modelled"},
    unmodelled{"resnet152d", "the deep 3x3 stem and avg_down downsample of the ResNet-D models are not modelled"},
};

// The architecture part of a timm name: an optional "timm/" (Hugging Face Hub) prefix and the
// pretrained tag after the first '.' removed.
constexpr std::string_view architecture_of(std::string_view name) {
  if (name.substr(0, 5) == "timm/") name.remove_prefix(5);
  return name.substr(0, name.find('.'));
}

constexpr std::string_view tag_of(std::string_view name) {
  const auto dot = name.find('.');
  return dot == std::string_view::npos ? std::string_view{} : name.substr(dot + 1);
}

constexpr bool ends_with(std::string_view s, std::string_view end) {
  return s.size() >= end.size() && s.substr(s.size() - end.size()) == end;
}

// num_classes a pretrained tag gives (the default_cfgs of vision_transformer.py@94567641,
// eva.py@0173a139, convnext.py@e4e43190, resnet.py@749856cf): the dataset the weights end on. "orig_in21k":
// the original Google in21k ViT weights load without a head (num_classes=0); other in21k
// tags keep timm's 21843-class head, in12k tags 11821, in1k tags 1000. Other tags (mae,
// dino, laion2b, openai, ...) carry heads memscale does not list: none.
// The tag's image size (eva02 at 448 or 224) is the architecture's: the name carries it.
constexpr std::optional<std::uint64_t> classes_of_tag(std::string_view tag) {
  if (tag == "orig_in21k") return 0;
  // EVA02 (eva.py@0173a139 default_cfgs): MIM pretraining alone (mim_in22k, mim_m38m) has no
  // head; weights ending on in22k (EVA02's ft_in22k, ConvNeXt's fb_in22k) have 21841 classes.
  if (tag.substr(0, 4) == "mim_" && tag.find("_ft_") == std::string_view::npos) return 0;
  if (ends_with(tag, "in22k")) return 21841;
  if (ends_with(tag, "in1k")) return 1000;
  if (ends_with(tag, "in12k")) return 11821;
  if (ends_with(tag, "in21k")) return 21843;
  return std::nullopt;
}

// Why a timm name cannot be estimated, or empty when it can (or is not a timm name at all).
constexpr std::string_view refusal(std::string_view name) {
  const std::string_view arch = architecture_of(name);
  for (const auto& u : unmodelled_architectures)
    if (arch.substr(0, u.prefix.size()) == u.prefix) return u.missing;
  for (const auto& m : all)
    if (m.name == arch && !tag_of(name).empty() && !classes_of_tag(tag_of(name)))
      return "its pretrained tag does not say the head's width (memscale reads tags ending in in1k, in12k, in21k "
             "or in22k, orig_in21k and mim_ pretraining tags; name the architecture alone to get its default head)";
  return {};
}

// The timm model a name describes, the tag's num_classes applied; nullopt when the
// architecture is not in the table or refusal(name) says why not.
constexpr std::optional<vision_spec> find(std::string_view name) {
  if (!refusal(name).empty()) return std::nullopt;
  const std::string_view arch = architecture_of(name);
  for (const auto& m : all) {
    if (m.name != arch) continue;
    vision_spec v = m;
    if (const auto classes = classes_of_tag(tag_of(name))) v.classes = *classes;
    return v;
  }
  return std::nullopt;
}

}  // namespace memscale::vision::timm_presets
