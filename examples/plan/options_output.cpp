// memscale-plan: output options; they combine with any command.
#include <CLI/CLI.hpp>

#include "option_groups.hpp"

namespace memscale_plan {

void add_output_options(CLI::App& app, options& o) {
  add_flag(app, group::output, "--json", "print one JSON document instead of the text report", [&o] { o.json = true; });
}

}  // namespace memscale_plan
