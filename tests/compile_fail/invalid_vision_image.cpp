// EXPECT: non-[^ ]*constexpr[^ ]* function.*fail.*require\(.*"image size"|require\(.*"image size".*non-[^ ]*constexpr[^ ]* function.*fail
// A 16x16 image is smaller than the vision models accept: validate(vision_spec)
// (memscale/vision/model.hpp) reaches the non-constexpr memscale::detail::fail through
// require(..., "image size", ...), so the constant evaluation of estimate() fails.
#include <memscale/vision/estimate.hpp>
#include <memscale/vision/presets.hpp>

constexpr memscale::vision::vision_spec tiny = [] {
  memscale::vision::vision_spec m = memscale::vision::presets::resnet18;
  m.image_height = m.image_width = 16;
  return m;
}();

static_assert(memscale::vision::estimate(tiny, memscale::training_spec{}).parameter_count > 0);
