// memscale-plan: command-line parsing (see args.hpp).
#include "args.hpp"

#include <array>
#include <charconv>
#include <limits>
#include <string>
#include <system_error>
#include <utility>

#include "memscale/gpus.hpp"
#include "memscale/json.hpp"

namespace memscale_plan {
namespace {

std::string in_quotes(std::string_view text) { return "\"" + std::string(text) + "\""; }

// How an option combines with the others: run options describe the estimated run and
// are rejected together with a command; commands exclude each other.
enum class group : std::uint8_t { run, output, command };

struct option_def {
  std::string_view name;         // "--batch"
  std::string_view placeholder;  // "N"; empty for a flag
  std::string_view help;
  group kind;
  void (*apply)(options& o, std::string_view value);
};

void set_command(options& o, command c) { o.cmd = c; }

void set_lora(options& o, memscale::training_target target, std::string_view option, std::string_view value) {
  o.run.target = target;
  o.run.lora_rank = parse_positive(option, value);
  o.run.lora_targets = memscale::lora_target::q | memscale::lora_target::v;
  if (target == memscale::training_target::qlora) o.run.quant = memscale::base_quant::nf4;
}

std::string preset_names() {
  std::string names;
  for (const auto& m : memscale::presets::all) {
    if (!names.empty()) names += ", ";
    names += m.name;
  }
  return names;
}

// The option table. Handlers get the value (empty for flags); the parser has already
// checked that a value is present exactly when `placeholder` is non-empty.
const std::array<option_def, 19> option_table{{
    {"--model", "NAME", "a preset (see --list-models); default gpt2", group::run,
     [](options& o, std::string_view v) {
       const auto found = memscale::presets::find(v);
       if (!found) throw usage_error("--model must be one of " + preset_names() + " (got " + in_quotes(v) + ")");
       o.model = *found;
     }},
    {"--batch", "N", "micro-batch size, sequences per step; default 4", group::run,
     [](options& o, std::string_view v) { o.run.micro_batch = parse_positive("--batch", v); }},
    {"--seq", "N", "sequence length in tokens; default 512", group::run,
     [](options& o, std::string_view v) { o.run.seq_len = parse_positive("--seq", v); }},
    {"--precision", "P", "fp32 | amp_fp16 | amp_bf16 | pure_bf16 | pure_fp16; default fp32", group::run,
     [](options& o, std::string_view v) {
       o.run.prec = memscale::json_io::parse_precision(std::string(v), "--precision");
     }},
    {"--optimizer", "O", "sgd | sgd_momentum | adam | adamw | adamw_8bit | adafactor | lion; default adamw",
     group::run,
     [](options& o, std::string_view v) {
       o.run.optimizer = memscale::json_io::parse_optimizer(std::string(v), "--optimizer");
     }},
    {"--optimizer-impl", "I", "for_loop | foreach | fused; default foreach", group::run,
     [](options& o, std::string_view v) {
       o.run.optimizer_impl = memscale::json_io::parse_optimizer_impl(std::string(v), "--optimizer-impl");
     }},
    {"--grad-accum", "N", "gradient-accumulation steps; default 1", group::run,
     [](options& o, std::string_view v) { o.run.grad_accum = parse_positive("--grad-accum", v); }},
    {"--checkpointing", "C", "none | full | selective; default none", group::run,
     [](options& o, std::string_view v) {
       o.run.ckpt = memscale::json_io::parse_checkpointing(std::string(v), "--checkpointing");
     }},
    {"--attention", "A", "eager | sdpa_math | flash (sdpa); default flash", group::run,
     [](options& o, std::string_view v) {
       o.run.attention = memscale::json_io::parse_attention(std::string(v), "--attention");
     }},
    {"--lora", "RANK", "train LoRA adapters of this rank on q and v; the base is frozen", group::run,
     [](options& o, std::string_view v) { set_lora(o, memscale::training_target::lora, "--lora", v); }},
    {"--qlora", "RANK", "QLoRA: LoRA on q and v over an NF4-quantised frozen base", group::run,
     [](options& o, std::string_view v) { set_lora(o, memscale::training_target::qlora, "--qlora", v); }},
    {"--no-dropout", "", "the model's dropout layers are off (p = 0)", group::run,
     [](options& o, std::string_view) { o.run.dropout = false; }},
    {"--gpu", "NAME", "plan the run on this GPU (see --list-gpus)", group::run,
     [](options& o, std::string_view v) {
       if (!memscale::find_gpu(v)) throw usage_error("--gpu must be a GPU from --list-gpus (got " + in_quotes(v) + ")");
       o.gpu = std::string(v);
     }},
    {"--headroom", "FRACTION", "share of VRAM kept free with --gpu, 0.10-0.15; default 0.15", group::run,
     [](options& o, std::string_view v) {
       double value = 0.0;
       const char* const last = v.data() + v.size();
       const auto [ptr, ec] = std::from_chars(v.data(), last, value);
       if (v.empty() || ec != std::errc{} || ptr != last)
         throw usage_error("--headroom must be a decimal fraction such as 0.15 (got " + in_quotes(v) + ")");
       o.headroom = value;
     }},
    {"--json", "", "print one JSON document instead of the text report", group::output,
     [](options& o, std::string_view) { o.json = true; }},
    {"--list-models", "", "list the presets: name, parameters, layers, hidden, heads", group::command,
     [](options& o, std::string_view) { set_command(o, command::list_models); }},
    {"--list-gpus", "", "list the GPUs: name, label, memory (GiB), bf16", group::command,
     [](options& o, std::string_view) { set_command(o, command::list_gpus); }},
    {"--cases", "FILE", "estimate each ground-truth record of a JSON array; prints a JSON array", group::command,
     [](options& o, std::string_view v) {
       set_command(o, command::cases);
       o.cases_path = std::string(v);
     }},
    {"--help", "", "show this help and exit", group::command,
     [](options& o, std::string_view) { set_command(o, command::help); }},
}};

const option_def* find_option(std::string_view name) {
  if (name == "-h") name = "--help";
  for (const auto& def : option_table)
    if (def.name == name) return &def;
  return nullptr;
}

bool looks_like_option(std::string_view arg) { return arg.size() > 2 && arg.substr(0, 2) == "--"; }

// Checks that need every option: commands against run options, adapters against each
// other, the run against the model.
void check_combination(const options& o) {
  if (o.cmd != command::run && !o.first_run_option.empty())
    throw usage_error(std::string(o.first_run_option) + " cannot be combined with " + std::string(o.command_option));
  if (o.cmd != command::run) return;
  if (o.headroom && o.gpu.empty()) throw usage_error("--headroom needs --gpu");
  if (o.model.positions == memscale::position_kind::learned && o.model.max_positions > 0 &&
      o.run.seq_len > o.model.max_positions)
    throw usage_error("--seq must be <= " + std::to_string(o.model.max_positions) + " for " + std::string(o.model.name) +
                      " (its learned position table) (got " + in_quotes(std::to_string(o.run.seq_len)) + ")");
  memscale::validate(o.run);
}

}  // namespace

std::uint64_t parse_positive(std::string_view option, std::string_view text) {
  std::uint64_t value = 0;
  const char* const first = text.data();
  const char* const last = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec == std::errc::result_out_of_range)
    throw usage_error(std::string(option) + " must be at most " +
                      std::to_string(std::numeric_limits<std::uint64_t>::max()) + " (got " + in_quotes(text) + ")");
  if (text.empty() || ec != std::errc{} || ptr != last || value == 0)
    throw usage_error(std::string(option) + " must be a positive integer (got " + in_quotes(text) + ")");
  return value;
}

options parse_args(const std::vector<std::string_view>& args) {
  options o{};
  // --help wins over everything else on the line, even over errors before it.
  for (const auto arg : args)
    if (arg == "--help" || arg == "-h") {
      o.cmd = command::help;
      return o;
    }

  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    std::string_view name = arg;
    std::string_view value;
    bool inline_value = false;
    if (looks_like_option(arg)) {
      if (const auto eq = arg.find('='); eq != std::string_view::npos) {  // --batch=4
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
        inline_value = true;
      }
    }
    const option_def* def = find_option(name);
    if (def == nullptr) {
      if (!arg.empty() && arg.front() == '-') throw usage_error("unknown option " + in_quotes(name) + " (see --help)");
      throw usage_error("unexpected argument " + in_quotes(arg) + " (options start with --; see --help)");
    }
    if (def->placeholder.empty()) {
      if (inline_value) throw usage_error(std::string(def->name) + " takes no value (got " + in_quotes(value) + ")");
    } else if (!inline_value) {
      if (i + 1 >= args.size() || looks_like_option(args[i + 1]))
        throw usage_error(std::string(def->name) + " needs a value (" + std::string(def->placeholder) + ")");
      value = args[++i];
    }

    switch (def->kind) {
      case group::run:
        if (o.first_run_option.empty()) o.first_run_option = def->name;
        if (def->name == "--lora" || def->name == "--qlora") {
          if (!o.adapter_option.empty() && o.adapter_option != def->name)
            throw usage_error(std::string(def->name) + " cannot be combined with " + std::string(o.adapter_option));
          o.adapter_option = def->name;
        }
        break;
      case group::command:
        if (!o.command_option.empty() && o.command_option != def->name)
          throw usage_error(std::string(def->name) + " cannot be combined with " + std::string(o.command_option));
        o.command_option = def->name;
        break;
      case group::output: break;
    }
    def->apply(o, value);
  }
  check_combination(o);
  return o;
}

std::string help_text() {
  std::string out =
      "usage: memscale-plan [run options] [--json]\n"
      "       memscale-plan --list-models [--json]\n"
      "       memscale-plan --list-gpus [--json]\n"
      "       memscale-plan --cases FILE.json\n"
      "       memscale-plan --help\n"
      "\n"
      "Estimates the GPU memory of one training step before it runs: the breakdown at the\n"
      "steady-state peak, the peak itself (tensor / reserved / device) and the step-1 peak.\n"
      "With no run options: gpt2, micro-batch 4, seq 512, fp32, adamw (foreach), flash attention.\n";
  const std::array<std::pair<group, std::string_view>, 3> sections{
      {{group::run, "run options"}, {group::output, "output"}, {group::command, "commands"}}};
  for (const auto& [kind, title] : sections) {
    out += "\n";
    out += title;
    out += ":\n";
    for (const auto& def : option_table) {
      if (def.kind != kind) continue;
      std::string left = "  " + std::string(def.name);
      if (!def.placeholder.empty()) left += " " + std::string(def.placeholder);
      if (left.size() < 24) left.resize(24, ' ');
      else left += "  ";
      out += left + std::string(def.help) + "\n";
    }
  }
  out +=
      "\n"
      "Values may also be given as --option=value. Counts are positive decimal integers; --headroom is a decimal fraction.\n"
      "exit status: 0 success, 2 invalid input (one line on stderr starting with \"memscale-plan: \").\n";
  return out;
}

}  // namespace memscale_plan
