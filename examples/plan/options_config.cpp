// memscale-plan: the config options (h9-config): --config PATH|HUB_ID: a Hugging Face config.json, a model directory or a Hub id in the local cache.
// Register them here with add_value / add_flag (option_groups.hpp) under group::config;
// their settings go in config_options (args.hpp).
#include <CLI/CLI.hpp>

#include "option_groups.hpp"

namespace memscale_plan {

void add_config_options(CLI::App& app, options& o) {
  (void)app;
  (void)o;
}

}  // namespace memscale_plan
