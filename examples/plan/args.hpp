// memscale-plan: the command line, parsed into one `options` value.
//
// Every option is a row of the table in args.cpp (name, value placeholder, help text,
// group, handler); the --help text is generated from the same table, so an option added
// there is parsed, documented and conflict-checked in one place.
//
// --gpu NAME and --headroom FRACTION are run options (rows in the table, fields in `options`
// below); --list-gpus is a command (a `command` enumerator, a row, and a case in main.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "memscale/model.hpp"
#include "memscale/presets.hpp"
#include "memscale/training.hpp"

namespace memscale_plan {

// Invalid command-line input; what() is one line naming the option and the value.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What the program does; `run` (estimate one training run) is the default.
enum class command : std::uint8_t {
  run,
  list_models,
  cases,
  help,
  list_gpus,
};

// The run estimated when no run option is given: GPT-2 small, 4 x 512 tokens, fp32,
// AdamW (foreach), flash attention, no checkpointing.
constexpr memscale::training_spec default_run() {
  return memscale::training_spec{.micro_batch = 4,
                                 .seq_len = 512,
                                 .prec = memscale::precision::fp32,
                                 .optimizer = memscale::optimizer_kind::adamw,
                                 .optimizer_impl = memscale::optimizer_implementation::foreach,
                                 .grad_accum = 1,
                                 .ckpt = memscale::checkpointing::none,
                                 .attention = memscale::attention_impl::flash};
}

struct options {
  command cmd = command::run;
  memscale::model_spec model = memscale::presets::gpt2;  // --model NAME; default gpt2
  memscale::training_spec run = default_run();
  bool json = false;          // --json: one JSON document on stdout
  std::string cases_path;     // --cases FILE
  std::string gpu;                 // --gpu NAME (a gpu_catalog slug); empty: no plan
  std::optional<double> headroom;  // --headroom FRACTION

  // Bookkeeping for conflict checks; each names a table row (static storage).
  std::string_view command_option;    // the option that chose `cmd` ("--cases", ...)
  std::string_view first_run_option;  // the first run option given, if any
  std::string_view adapter_option;    // "--lora" or "--qlora", if given
};

// Parses argv[1..]. Throws usage_error (bad syntax, unknown option or model, bad number)
// or memscale::error (an enum string json_io::parse_* rejects, an invalid run).
options parse_args(const std::vector<std::string_view>& args);

// A count for `option`: decimal digits only (std::from_chars), > 0, fits in 64 bits.
std::uint64_t parse_positive(std::string_view option, std::string_view text);

// The --help text (usage, the option table, exit codes), ending in a newline.
std::string help_text();

}  // namespace memscale_plan
