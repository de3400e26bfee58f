// memscale-plan: the vision options (h11-vision): CNN and ViT models.
// Register them here with add_value / add_flag (option_groups.hpp) under group::vision;
// their settings go in vision_options (args.hpp).
#include <CLI/CLI.hpp>

#include "option_groups.hpp"

namespace memscale_plan {

void add_vision_options(CLI::App& app, options& o) {
  (void)app;
  (void)o;
}

}  // namespace memscale_plan
