// memscale-plan: the vision options: the input of a CNN or ViT model.
#include <CLI/CLI.hpp>
#include <string>

#include "option_groups.hpp"

namespace memscale_plan {
namespace {

// "224" or "384x320" (height x width), each side > 0.
void parse_image(const std::string& v, options& o) {
  const auto x = v.find('x');
  if (x == std::string::npos) {
    o.vision.image_height = o.vision.image_width = parse_positive("--image", v);
    return;
  }
  if (v.find('x', x + 1) != std::string::npos)
    throw usage_error("--image must be N or HxW, e.g. 224 or 384x320 (got " + in_quotes(v) + ")");
  o.vision.image_height = parse_positive("--image", std::string_view(v).substr(0, x));
  o.vision.image_width = parse_positive("--image", std::string_view(v).substr(x + 1));
}

}  // namespace

void add_vision_options(CLI::App& app, options& o) {
  const auto g = group::vision;
  add_value(app, g, "--image", "SIZE", "input size of a vision model: N or HxW pixels; default 224",
            [&o](const std::string& v) { parse_image(v, o); });
  add_flag(app, g, "--channels-last", "the vision model and batch use torch.channels_last",
           [&o] { o.vision.channels_last = true; });
}

}  // namespace memscale_plan
