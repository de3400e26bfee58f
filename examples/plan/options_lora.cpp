// memscale-plan: adapter options (LoRA, QLoRA).
#include <CLI/CLI.hpp>
#include <string>

#include "option_groups.hpp"

namespace memscale_plan {
namespace {

void set_adapter(options& o, memscale::training_target target, const char* option, const std::string& value) {
  o.run.target = target;
  o.run.lora_rank = parse_positive(option, value);
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
  // Module names as PEFT or lit-gpt write them (memscale/lora.hpp); default q and v.
  add_value(app, g, "--lora-targets", "NAMES",
            "modules that get adapters: q_proj,v_proj / all-linear / lit-gpt q,k,v,proj,mlp,head (default q,v)",
            [&o](const std::string& v) { o.run.lora_targets = memscale::parse_lora_targets(v); });
  add_value(app, g, "--lora-variant", "KIND", "lora (default), rslora or dora (PEFT)", [&o](const std::string& v) {
    if (v == "lora") o.run.lora_kind = memscale::lora_variant::lora;
    else if (v == "rslora") o.run.lora_kind = memscale::lora_variant::rslora;
    else if (v == "dora") o.run.lora_kind = memscale::lora_variant::dora;
    else throw memscale::error(memscale::error_code::invalid_run, "--lora-variant must be lora, rslora or dora (got \"" + v + "\")");
  });
}

}  // namespace memscale_plan
