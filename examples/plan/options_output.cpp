// memscale-plan: output options; they combine with any command.
#include <CLI/CLI.hpp>
#include <string>

#include "option_groups.hpp"

namespace memscale_plan {

void add_output_options(CLI::App& app, options& o) {
  add_flag(app, group::output, "--json",
           "print one JSON document instead of the text report (a valid --run input plus the results)",
           [&o] { o.json = true; });
  add_value(app, group::output, "--units", "U", "sizes in the text report: gib | gb | mib; default gib (JSON: bytes)",
            [&o](const std::string& v) {
              if (v != "gib" && v != "gb" && v != "mib")
                throw usage_error("--units must be gib, gb or mib (got " + in_quotes(v) + ")");
              o.units = v;
            });
}

}  // namespace memscale_plan
