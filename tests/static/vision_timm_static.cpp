// Static checks for the timm models by name (memscale/vision/timm_presets.hpp): each count
// equals sum(p.numel()) of timm.create_model(name) (tools/families/ssm_vision_params.py gives
// the same formulas; the published figures are timm's model cards and results tables), and a
// tag changes only num_classes. Building this TU is the test.
#include "memscale/vision/estimate.hpp"
#include "memscale/vision/presets.hpp"

#include <cstdint>
#include <string_view>

namespace {

using memscale::vision::parameter_count;
using memscale::vision::presets::find;

constexpr std::uint64_t count_of(std::string_view name) { return parameter_count(*find(name)); }

// ViT: card figures 22.1M / 86.6M / 88.2M / 304.3M; ViT-H/14 632.0M with an in1k head and
// 630.8M without (its orig_in21k tag); ViT-g/14 1012.6M; CLIP ViT-L/14 304.2M.
static_assert(count_of("vit_small_patch16_224") == 22'050'664);
static_assert(count_of("vit_base_patch16_224.augreg2_in21k_ft_in1k") == 86'567'656);  // = torchvision vit_b_16
static_assert(count_of("vit_base_patch32_224") == 88'224'232);                        // = torchvision vit_b_32
static_assert(count_of("vit_large_patch16_224.augreg_in21k_ft_in1k") == 304'326'632); // = torchvision vit_l_16
static_assert(count_of("vit_large_patch14_224") == 304'203'752);
static_assert(count_of("vit_huge_patch14_224.orig_in21k") == 630'764'800);
static_assert(count_of("vit_huge_patch14_224") == 630'764'800);  // the default tag's num_classes 0
constexpr auto vit_huge_in1k = [] {
  auto m = *find("vit_huge_patch14_224");
  m.classes = 1000;
  return m;
}();
static_assert(parameter_count(vit_huge_in1k) == 632'045'800);
static_assert(count_of("vit_giant_patch14_224") == 1'012'611'432);
static_assert(count_of("vit_large_patch14_clip_224.openai_ft_in12k_in1k") == 304'204'776);

// The tag sets num_classes only: in21k heads are 21843 wide, in12k 11821.
static_assert(count_of("vit_large_patch16_224.augreg_in21k") == 304'326'632 + 1024 * (21843 - 1000) + (21843 - 1000));
static_assert(count_of("vit_large_patch14_clip_224.openai_ft_in12k") ==
              304'204'776 + 1024 * (11821 - 1000) + (11821 - 1000));
static_assert(find("timm/vit_base_patch16_224.augreg_in21k")->classes == 21843);
static_assert(find("convnext_base.fb_in22k")->classes == 21841);

// EVA02 (q/k/v separate with k unbiased, SwiGLU with a LayerNorm on the 2730-wide hidden):
// cards 305.1M (L/14 448), 303.3M (L/14 224 MIM, no head), 87.1M (B/14 448).
static_assert(count_of("eva02_large_patch14_448.mim_m38m_ft_in22k_in1k") == 305'080'232);
static_assert(count_of("eva02_large_patch14_224.mim_in22k") == 303'268'800);
static_assert(count_of("eva02_base_patch14_448.mim_in22k_ft_in22k_in1k") == 87'117'544);
static_assert(count_of("eva02_base_patch14_224.mim_in22k") == 85'758'720);
static_assert(find("eva02_large_patch14_448.mim_m38m_ft_in22k")->classes == 21841);
static_assert(find("eva02_large_patch14_448")->image_height == 448);

// EVA02 tiny and small (one qkv Linear without bias, q_bias and v_bias; GluMlp's fc1 twice the
// 512 / 1024 hidden): per block 2E (norm1) + 3E^2 + 2E (qkv, q/v biases) + E^2 + E (proj) + 2E
// (norm2) + 2hE + 2h (fc1) + hE + E (fc2); cards 5.8M / 22.1M at 336 px.
constexpr std::uint64_t eva_block(std::uint64_t E, std::uint64_t h, bool glu) {
  const std::uint64_t fc1 = glu ? 2 * h : h;
  return 2 * E + 3 * E * E + 2 * E + E * E + E + 2 * E + fc1 * E + fc1 + h * E + E;
}
// conv 3 * 14 * 14 * E + E, cls_token, pos_embed, blocks, fc_norm (or norm), head.
constexpr std::uint64_t eva_count(std::uint64_t E, std::uint64_t depth, std::uint64_t h, bool glu,
                                  std::uint64_t image, std::uint64_t classes) {
  const std::uint64_t tokens = (image / 14) * (image / 14) + 1;
  return 588 * E + E + E + tokens * E + depth * eva_block(E, h, glu) + 2 * E + classes * E + classes;
}
static_assert(count_of("eva02_tiny_patch14_224.mim_in22k") == eva_count(192, 12, 512, true, 224, 0));
static_assert(count_of("eva02_tiny_patch14_224.mim_in22k") == 5'502'144);
static_assert(count_of("eva02_tiny_patch14_336") == 5'756'584);
static_assert(count_of("eva02_small_patch14_224") == 21'621'120);
static_assert(count_of("eva02_small_patch14_336.mim_in22k_ft_in1k") == eva_count(384, 12, 1024, true, 336, 1000));
static_assert(count_of("eva02_small_patch14_336.mim_in22k_ft_in1k") == 22'129'000);
static_assert(find("eva02_small_patch14_336")->image_height == 336);

// EVA-01 giant (plain GELU Mlp 6144 wide, the same q/v biases): cards 1012.6M (224), 1013.0M
// (336), 1014.4M (560); the CLIP tower pools the class token and has a 1024-wide head.
static_assert(count_of("eva_giant_patch14_224.clip_ft_in1k") == eva_count(1408, 40, 6144, false, 224, 1000));
static_assert(count_of("eva_giant_patch14_224.clip_ft_in1k") == 1'012'555'112);
static_assert(count_of("eva_giant_patch14_336.m30m_ft_in22k_in1k") == 1'013'005'672);
static_assert(count_of("timm/eva_giant_patch14_560") == 1'014'447'464);
static_assert(count_of("eva_giant_patch14_clip_224") == 1'012'588'928);
static_assert(!find("eva_giant_patch14_clip_224")->vit.avg_pool);

// ConvNeXt: card figures 3.7 / 5.2 / 9.1 / 15.6 / 28.6 / 50.2 / 88.6 / 197.8 / 350.2M.
static_assert(count_of("convnext_atto.d2_in1k") == 3'695'520);
static_assert(count_of("convnext_femto") == 5'217'784);
static_assert(count_of("convnext_pico") == 9'045'672);
static_assert(count_of("convnext_nano") == 15'593'560);
static_assert(count_of("convnext_tiny.fb_in1k") == 28'589'128);  // = torchvision convnext_tiny
static_assert(count_of("convnext_small.fb_in1k") == 50'223'688);
static_assert(count_of("convnext_base.fb_in1k") == 88'591'464);
static_assert(count_of("convnext_large") == 197'767'336);
static_assert(count_of("convnext_xlarge.fb_in22k_ft_in1k") == 350'196'968);

// ResNet: the torchvision counts (11.7 / 21.8 / 25.6 / 44.5 / 60.2M on timm's cards).
static_assert(count_of("resnet18.a1_in1k") == 11'689'512);
static_assert(count_of("resnet34.a1_in1k") == 21'797'672);
static_assert(count_of("resnet50.a1_in1k") == 25'557'032);
static_assert(count_of("resnet101.a1h_in1k") == 44'549'160);
static_assert(count_of("resnet152.a1h_in1k") == 60'192'808);

// A torchvision name keeps meaning torchvision; a tag or the timm/ prefix means timm.
static_assert(find("convnext_tiny")->source == memscale::vision::model_source::torchvision);
static_assert(find("convnext_tiny")->convnext.drop_path);
static_assert(find("timm/convnext_tiny")->source == memscale::vision::model_source::timm);
static_assert(!find("convnext_tiny.fb_in1k")->convnext.drop_path);

// Not modelled: refused with the missing mechanism, never estimated as something else.
static_assert(!find("eva02_large_patch14_clip_224.merged2b"));
static_assert(!memscale::vision::presets::refusal("eva02_enormous_patch14_clip_224").empty());
static_assert(!find("resnet50d.ra2_in1k"));
static_assert(!find("vit_base_patch16_224.mae"));  // a tag whose head memscale does not know
static_assert(!memscale::vision::presets::refusal("vit_base_patch16_224.mae").empty());
static_assert(memscale::vision::presets::refusal("vit_base_patch16_224.augreg_in1k").empty());

}  // namespace
