// memscale-plan: commands (what the program does instead of estimating a run). A command
// excludes the other commands and every run option (args.cpp checks after parsing).
#include <CLI/CLI.hpp>
#include <string>

#include "option_groups.hpp"

namespace memscale_plan {

void add_command_options(CLI::App& app, options& o) {
  const auto g = group::commands;
  add_flag(app, g, "--list-models", "list the presets: name, parameters, layers, hidden, heads",
           [&o] { o.cmd = command::list_models; });
  add_flag(app, g, "--list-families", "list the families: each config.json model_type --config reads, and the families ground-truth records may name",
           [&o] { o.cmd = command::list_families; });
  add_flag(app, g, "--list-gpus", "list the GPUs: name, label, memory (GiB), bf16", [&o] { o.cmd = command::list_gpus; });
  add_value(app, g, "--cases", "FILE", "estimate each ground-truth record of a JSON array; prints a JSON array",
            [&o](const std::string& v) {
              o.cmd = command::cases;
              o.cases_path = v;
            });
  // Goes with --cases (args.cpp check_groups lets the two meet).
  add_value(app, g, "--cases-stack", "FILE",
            "with --cases: merge each record's entry of a stack file (docs/data/gpu_published_stack.json: the "
            "torch / CUDA versions its source states) before estimating it, as the accuracy report does",
            [&o](const std::string& v) { o.cases_stack_path = v; });
  // Never reaches CLI11's parser: parse_args answers --help / -h before parsing.
  add_flag(app, g, "-h,--help", "show this help and exit", [&o] { o.cmd = command::help; });
}

}  // namespace memscale_plan
