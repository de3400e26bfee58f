// memscale-plan: the vision options: the input of a CNN or ViT model.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "option_groups.hpp"

namespace memscale_plan {
namespace {

// "224" or "384x320" (height x width) for `flag`, each side > 0.
void parse_size(const char* flag, const std::string& v, std::uint64_t& height, std::uint64_t& width) {
  const auto x = v.find('x');
  if (x == std::string::npos) {
    height = width = parse_positive(flag, v);
    return;
  }
  if (v.find('x', x + 1) != std::string::npos)
    throw usage_error(std::string(flag) + " must be N or HxW, e.g. 224 or 384x320 (got " + in_quotes(v) + ")");
  height = parse_positive(flag, std::string_view(v).substr(0, x));
  width = parse_positive(flag, std::string_view(v).substr(x + 1));
}

}  // namespace

void add_vision_options(CLI::App& app, options& o) {
  const auto g = group::vision;
  add_value(app, g, "--image", "SIZE", "input size of a vision model: N or HxW pixels; default 224",
            [&o](const std::string& v) { parse_size("--image", v, o.vision.image_height, o.vision.image_width); });
  // A multimodal language model's images (Qwen2-VL, Qwen2.5-VL, Qwen3-VL): they run through its frozen vision tower.
  add_value(app, g, "--images", "N", "images per sample through a multimodal model's vision tower (Qwen2-VL, "
            "Qwen2.5-VL, Qwen3-VL); "
            "--seq counts their tokens; default 0",
            [&o](const std::string& v) { o.run.images.per_sample = parse_positive("--images", v); });
  add_value(app, g, "--image-size", "HxW", "pixels of each --images image before the processor's resize: N or HxW",
            [&o](const std::string& v) { parse_size("--image-size", v, o.run.images.height, o.run.images.width); });
  add_flag(app, g, "--frozen-tower", "the vision tower is frozen (freeze_vision_tower): needed with --images "
           "and full fine-tuning",
           [&o] { o.run.images.tower_frozen = true; });
  add_flag(app, g, "--channels-last", "the vision model and batch use torch.channels_last",
           [&o] { o.vision.channels_last = true; });
}

}  // namespace memscale_plan
