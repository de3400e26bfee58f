// Static checks for memscale/vision: every torchvision preset's parameter count equals
// sum(p.numel() for p in torchvision.models.<name>().parameters()) (torchvision 0.14),
// and the vision estimator runs in constant evaluation. Building this TU is the test.
#include "memscale/vision/device.hpp"
#include "memscale/vision/estimate.hpp"
#include "memscale/vision/planner.hpp"
#include "memscale/vision/presets.hpp"

#include <cstdint>

namespace {

using memscale::vision::parameter_count;
namespace presets = memscale::vision::presets;

// resnet18 by hand: stem conv 9,408 + bn 128; layer1 2 x (2 x 36,864 + 2 x 128) = 147,968;
// layer2 230,144 + 295,424 = 525,568; layer3 919,040 + 1,180,672 = 2,099,712;
// layer4 3,673,088 + 4,720,640 = 8,393,728; fc 513,000; total 11,689,512.
static_assert(parameter_count(presets::resnet18) == 11'689'512);
static_assert(parameter_count(presets::resnet34) == 21'797'672);
static_assert(parameter_count(presets::resnet50) == 25'557'032);
static_assert(parameter_count(presets::resnet101) == 44'549'160);
static_assert(parameter_count(presets::resnet152) == 60'192'808);
static_assert(parameter_count(presets::mobilenet_v3_large) == 5'483'032);
static_assert(parameter_count(presets::mobilenet_v3_small) == 2'542'856);
static_assert(parameter_count(presets::efficientnet_b0) == 5'288'548);
static_assert(parameter_count(presets::vit_b_16) == 86'567'656);
static_assert(parameter_count(presets::vit_b_32) == 88'224'232);
static_assert(parameter_count(presets::vit_l_16) == 304'326'632);
static_assert(parameter_count(presets::convnext_tiny) == 28'589'128);
static_assert(parameter_count(presets::convnext_small) == 50'223'688);
static_assert(parameter_count(presets::convnext_base) == 88'591'464);

// ViT's position embedding grows with the image: (384/16)^2 + 1 = 577 tokens instead of
// 197, i.e. 380 x 768 = 291,840 more parameters.
constexpr memscale::vision::vision_spec vit_384 = [] {
  auto m = presets::vit_b_16;
  m.image_height = m.image_width = 384;
  return m;
}();
static_assert(parameter_count(vit_384) == 86'567'656 + 380 * 768);

// The estimator in constant evaluation: batch 16 keeps more than batch 4, and the saved
// activations of resnet18 scale with the batch except the per-channel BN statistics.
constexpr memscale::training_spec cpu_run(std::uint64_t batch) {
  return {.micro_batch = batch, .seq_len = 1, .device = memscale::device_kind::cpu};
}
constexpr auto r4 = memscale::vision::estimate(presets::resnet18, cpu_run(4));
constexpr auto r8 = memscale::vision::estimate(presets::resnet18, cpu_run(8));
constexpr auto r16 = memscale::vision::estimate(presets::resnet18, cpu_run(16));
static_assert(r16.steady.tensor > r8.steady.tensor && r8.steady.tensor > r4.steady.tensor);
static_assert(r16.saved_activation_bytes.value - r4.saved_activation_bytes.value ==
              3 * (r8.saved_activation_bytes.value - r4.saved_activation_bytes.value));
static_assert(r4.parameter_count == 11'689'512);

// The planner's modes in constant evaluation (the whole plan, with its batch search, is
// checked at run time): resnet50 at 224 px, batch 64, fits an RTX 3060 12GB without any
// mode, even at the upper end of the torchvision error band; at 384 px stage checkpointing
// alone is borderline (9.35 GiB, up to 11.48 GiB against a 9.90 GiB budget) and with mixed
// precision as well it fits.
constexpr memscale::training_spec gpu_run{.micro_batch = 64, .seq_len = 1};
constexpr auto rtx3060 = *memscale::find_gpu("rtx3060-12gb");
constexpr auto budget = memscale::budget_of(rtx3060);
static_assert(memscale::vision::plan_mode(presets::resnet50, gpu_run, rtx3060, memscale::mode::none, budget).fits);
constexpr memscale::vision::vision_spec resnet50_384 = [] {
  auto m = presets::resnet50;
  m.image_height = m.image_width = 384;
  return m;
}();
static_assert(!memscale::vision::plan_mode(resnet50_384, gpu_run, rtx3060, memscale::mode::none, budget).fits);
static_assert(memscale::vision::plan_mode(resnet50_384, gpu_run, rtx3060, memscale::mode::conservative, budget).v ==
              memscale::verdict::borderline);
static_assert(memscale::vision::plan_mode(resnet50_384, gpu_run, rtx3060, memscale::mode::balanced, budget).fits);
static_assert(memscale::vision::fits(presets::resnet50, gpu_run, rtx3060));
static_assert(memscale::vision::fits(resnet50_384, gpu_run, rtx3060));
static_assert(memscale::vision::plan_mode(presets::resnet50, gpu_run, rtx3060, memscale::mode::none, budget).band.of ==
              memscale::run_class::torchvision);

// In constant evaluation a vision step keeps the rounding rule (vision/device.hpp), with the GPU's context.
constexpr auto resnet18_on_3060 = memscale::vision::estimate_on_device(presets::resnet18, gpu_run, &rtx3060);
static_assert(resnet18_on_3060.fallback == memscale::replay_fallback::constant_evaluation);
static_assert(resnet18_on_3060.context_from == memscale::context_source::model);
static_assert(resnet18_on_3060.device == resnet18_on_3060.reserved + resnet18_on_3060.context.total());

}  // namespace
