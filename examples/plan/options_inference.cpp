// memscale-plan: the inference options (h12-infer): inference estimates and SVG output.
// Register them here with add_value / add_flag (option_groups.hpp) under group::inference;
// their settings go in inference_options (args.hpp).
#include <CLI/CLI.hpp>

#include "option_groups.hpp"

namespace memscale_plan {

void add_inference_options(CLI::App& app, options& o) {
  (void)app;
  (void)o;
}

}  // namespace memscale_plan
