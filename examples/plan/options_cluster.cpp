// memscale-plan: the cluster options (h10-multi): multi-GPU engines (data / tensor / pipeline parallel, ZeRO, FSDP) and the cluster planner.
// Register them here with add_value / add_flag (option_groups.hpp) under group::cluster;
// their settings go in cluster_options (args.hpp).
#include <CLI/CLI.hpp>

#include "option_groups.hpp"

namespace memscale_plan {

void add_cluster_options(CLI::App& app, options& o) {
  (void)app;
  (void)o;
}

}  // namespace memscale_plan
