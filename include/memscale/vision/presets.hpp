// memscale/vision/presets.hpp: torchvision v0.14 classification models at 224x224, and
// lookup by name of those and of the timm models (timm_presets.hpp).
//
// Each preset's parameter count equals torchvision's (sum of p.numel() over
// model.parameters()); tests/static/vision_static.cpp pins every one.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "memscale/vision/model.hpp"
#include "memscale/vision/timm_presets.hpp"

namespace memscale::vision::presets {

inline constexpr vision_spec resnet18{.name = "resnet18", .arch = family::resnet, .resnet = {{2, 2, 2, 2}, false}};
inline constexpr vision_spec resnet34{.name = "resnet34", .arch = family::resnet, .resnet = {{3, 4, 6, 3}, false}};
inline constexpr vision_spec resnet50{.name = "resnet50", .arch = family::resnet, .resnet = {{3, 4, 6, 3}, true}};
inline constexpr vision_spec resnet101{.name = "resnet101", .arch = family::resnet, .resnet = {{3, 4, 23, 3}, true}};
inline constexpr vision_spec resnet152{.name = "resnet152", .arch = family::resnet, .resnet = {{3, 8, 36, 3}, true}};
inline constexpr vision_spec mobilenet_v3_large{
    .name = "mobilenet_v3_large", .arch = family::mobilenet_v3, .mobilenet = mobilenet_v3_size::large};
inline constexpr vision_spec mobilenet_v3_small{
    .name = "mobilenet_v3_small", .arch = family::mobilenet_v3, .mobilenet = mobilenet_v3_size::small};
inline constexpr vision_spec efficientnet_b0{.name = "efficientnet_b0", .arch = family::efficientnet};
inline constexpr vision_spec vit_b_16{.name = "vit_b_16", .arch = family::vit};
inline constexpr vision_spec vit_b_32{.name = "vit_b_32", .arch = family::vit, .vit = {.patch = 32}};
inline constexpr vision_spec vit_l_16{
    .name = "vit_l_16", .arch = family::vit, .vit = {.patch = 16, .layers = 24, .hidden = 1024, .heads = 16, .mlp = 4096}};
inline constexpr vision_spec convnext_tiny{.name = "convnext_tiny", .arch = family::convnext};
inline constexpr vision_spec convnext_small{
    .name = "convnext_small", .arch = family::convnext, .convnext = {{3, 3, 27, 3}, {96, 192, 384, 768}}};
inline constexpr vision_spec convnext_base{
    .name = "convnext_base", .arch = family::convnext, .convnext = {{3, 3, 27, 3}, {128, 256, 512, 1024}}};

inline constexpr std::array all{resnet18,           resnet34,        resnet50, resnet101, resnet152,
                                mobilenet_v3_large, mobilenet_v3_small, efficientnet_b0, vit_b_16, vit_b_32,
                                vit_l_16,           convnext_tiny,   convnext_small, convnext_base};

// A torchvision name keeps meaning torchvision ("convnext_tiny": stochastic depth 0.1); a
// name torchvision does not have, one with a pretrained tag ("convnext_tiny.fb_in1k") or a
// "timm/" prefix is looked up among the timm models (timm_presets.hpp).
constexpr std::optional<vision_spec> find(std::string_view name) {
  for (const auto& m : all)
    if (m.name == name) return m;
  return timm_presets::find(name);
}

// Why a vision model name cannot be estimated (a timm architecture whose mechanism is not
// modelled, a tag without a known head), or empty.
constexpr std::string_view refusal(std::string_view name) { return timm_presets::refusal(name); }

}  // namespace memscale::vision::presets
