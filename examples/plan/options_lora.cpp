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
  // The framework's 4-bit base: bitsandbytes' nf4 unless told (--qlora-double-quant), torchtune's
  // torchao NF4 (double quantized) whichever option came first.
  if (target == memscale::training_target::qlora)
    o.run.quant = memscale::with_framework(memscale::training_spec{}, o.run.framework).quant;
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
            "modules with adapters, comma-separated: PEFT names (q_proj, ..., down_proj, lm_head, c_attn, ...), "
            "all-linear, or lit-gpt names (q, k, v, proj, mlp, head); default q,v",
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
  add_value(app, g, "--lora-dropout", "P",
            "dropout probability on the adapters' input, [0, 1); 0: no dropout module (PEFT's default 0); default on",
            [&o](const std::string& v) {
              double value = -1.0;
              const char* const last = v.data() + v.size();
              const auto [ptr, ec] = std::from_chars(v.data(), last, value);
              if (v.empty() || ec != std::errc{} || ptr != last || !(value >= 0.0 && value < 1.0))
                throw usage_error("--lora-dropout must be a probability in [0, 1) (got " + in_quotes(v) + ")");
              o.run.lora_dropout = value > 0.0;
              o.lora_setting_given = "--lora-dropout";
            });
  add_value(app, g, "--lora-variant", "KIND", "lora (default), rslora or dora (PEFT)", [&o](const std::string& v) {
    if (v == "lora") o.run.lora_kind = memscale::lora_variant::lora;
    else if (v == "rslora") o.run.lora_kind = memscale::lora_variant::rslora;
    else if (v == "dora") o.run.lora_kind = memscale::lora_variant::dora;
    else throw usage_error("--lora-variant must be lora, rslora or dora (got " + in_quotes(v) + ")");
    o.lora_setting_given = "--lora-variant";
  });
  add_value(app, g, "--adapter-dtype", "KIND",
            "the adapters' dtype: base (the base model's), fp32, or autocast (amp_bf16 / amp_fp16 over a model "
            "loaded in that dtype with its adapters there: PEFT autocast_adapter_dtype=False under TRL's --bf16); "
            "default: the framework's (PEFT: fp32 over a 16-bit base)",
            [&o](const std::string& v) {
              if (v == "base") o.adapter_dtype = memscale::adapter_dtype::as_base;
              else if (v == "fp32") o.adapter_dtype = memscale::adapter_dtype::fp32;
              else if (v == "autocast") o.adapter_dtype = memscale::adapter_dtype::autocast_dtype;
              else throw usage_error("--adapter-dtype must be base, fp32 or autocast (got " + in_quotes(v) + ")");
              o.lora_setting_given = "--adapter-dtype";
            });
}

}  // namespace memscale_plan
