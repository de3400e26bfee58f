// memscale-plan: adapter options (LoRA, QLoRA).
#include <CLI/CLI.hpp>
#include <charconv>
#include <string>
#include <system_error>

#include "lora_targets.hpp"
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
  add_value(app, g, "--lora-targets", "NAMES",
            "projections with adapters, comma-separated: q,k,v,o,mlp, PEFT names (q_proj, c_attn, ...), "
            "lit-gpt names (lora_query, ...) or all-linear; default q,v",
            [&o](const std::string& v) {
              o.run.lora_targets = parse_lora_targets(v, "--lora-targets");
              o.lora_targets_given = true;
            });
  add_value(app, g, "--lora-alpha", "ALPHA", "LoRA scaling numerator (alpha / rank); recorded, it holds no memory",
            [&o](const std::string& v) {
              double value = 0.0;
              const char* const last = v.data() + v.size();
              const auto [ptr, ec] = std::from_chars(v.data(), last, value);
              if (v.empty() || ec != std::errc{} || ptr != last || !(value > 0.0 && value < 1e9))
                throw usage_error("--lora-alpha must be a positive number (got " + in_quotes(v) + ")");
              o.lora_alpha = value;
            });
  add_flag(app, g, "--qlora-double-quant", "with --qlora: quantise the NF4 absmax constants too (bitsandbytes)",
           [&o] { o.double_quant = true; });
}

}  // namespace memscale_plan
