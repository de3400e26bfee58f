// memscale-plan: adapter options (LoRA, QLoRA).
#include <CLI/CLI.hpp>
#include <string>

#include "option_groups.hpp"

namespace memscale_plan {
namespace {

void set_adapter(options& o, memscale::training_target target, const char* option, const std::string& value) {
  o.run.target = target;
  o.run.lora_rank = parse_positive(option, value);
  o.run.lora_targets = memscale::lora_target::q | memscale::lora_target::v;
  if (target == memscale::training_target::qlora) o.run.quant = memscale::base_quant::nf4;
}

}  // namespace

// --lora and --qlora exclude each other (checked in args.cpp, after parsing).
void add_lora_options(CLI::App& app, options& o) {
  const auto g = group::lora;
  add_value(app, g, "--lora", "RANK", "train LoRA adapters of this rank on q and v; the base is frozen",
            [&o](const std::string& v) { set_adapter(o, memscale::training_target::lora, "--lora", v); });
  add_value(app, g, "--qlora", "RANK", "QLoRA: LoRA on q and v over an NF4-quantised frozen base",
            [&o](const std::string& v) { set_adapter(o, memscale::training_target::qlora, "--qlora", v); });
}

}  // namespace memscale_plan
