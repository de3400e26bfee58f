// memscale-plan: estimate the GPU memory of a training run from the command line.
//
//   memscale-plan                                   # gpt2, micro-batch 4, seq 512, fp32, adamw, flash
//   memscale-plan --model gpt2-xl --batch 1 --seq 512 --precision fp32 --optimizer adamw --json
//   memscale-plan --list-models
//   memscale-plan --model gpt2-xl --batch 1 --seq 512 --gpu rtx3090 --headroom 0.10
//   memscale-plan --cases tests/data/ground-truth/cpu_traced_dev.json
//
// Files: args.* parse the command line (CLI11; each option group registers itself in
// options_<group>.cpp, see option_groups.hpp), output.* print reports, cases.* answer a
// ground-truth file, this file dispatches and turns every failure into exit status 2
// with one line on stderr. Everything is computed before anything is printed, so a
// failure never leaves half a report on stdout.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "cases.hpp"
#include "cluster.hpp"
#include "emit_torchtune.hpp"
#include "generic.hpp"
#include "memscale/detail/printable.hpp"
#include "memscale/error.hpp"
#include "memscale/error_band.hpp"
#include "memscale/estimate.hpp"
#include "memscale/json/emit_torchtitan.hpp"
#include "memscale/json/run_report.hpp"
#include "memscale/plan_result.hpp"
#include "inference.hpp"
#include "output.hpp"
#include "run_file.hpp"
#include "units.hpp"
#include "pictures.hpp"
#include "vision.hpp"

namespace {

constexpr int exit_ok = 0;
constexpr int exit_bad_input = 2;

// Pretty JSON; invalid UTF-8 (never produced by memscale itself) is replaced, not thrown.
std::string dump(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// The longest stderr line written: every echoed value is already cut to 80 characters
// (detail::quoted), so only a message that strings many of them together gets near it.
constexpr std::size_t max_error_line = 2000;

// The one stderr line: "memscale-plan: <message>". A last guard for whatever reaches it:
// line breaks, control characters and bytes that are not UTF-8 are escaped (the messages
// were built that way already; this keeps a slip from reaching the terminal), and the line
// is cut to max_error_line bytes.
int fail(std::string_view message) {
  std::string line = memscale::printable(message);
  if (line.size() > max_error_line) {
    std::size_t cut = max_error_line;
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;  // a character boundary
    line = line.substr(0, cut) + "...(" + std::to_string(line.size()) + " bytes)";
  }
  std::fprintf(stderr, "memscale-plan: %s\n", line.c_str());
  return exit_bad_input;
}

// A count of the run that an option sets, and a value of it that cannot cause an overflow:
// used to find which options make a run too large to estimate.
struct size_setting {
  const char* option;
  std::uint64_t memscale::training_spec::*field;
  std::uint64_t smallest;
};

constexpr size_setting size_settings[] = {
    {"--batch", &memscale::training_spec::micro_batch, 1},
    {"--seq", &memscale::training_spec::seq_len, 1},
    {"--target-len", &memscale::training_spec::target_len, 0},
    {"--grad-accum", &memscale::training_spec::grad_accum, 1},
    {"--lora", &memscale::training_spec::lora_rank, 1},  // --qlora for a QLoRA run
};

// memscale::estimate, with an overflow (a run too large for 64-bit counts) reported against
// the options that cause it: each count in turn is set to its smallest value, and those
// whose change lets the estimate through are named with their values.
memscale::estimate_result estimate_or_explain(const memscale_plan::options& opt) {
  try {
    return memscale::estimate(opt.model, opt.run);
  } catch (const memscale::error& e) {
    if (e.code() != memscale::error_code::overflow) throw;
    std::string causes;
    for (const size_setting& s : size_settings) {
      if (opt.run.*s.field <= s.smallest) continue;
      memscale::training_spec smaller = opt.run;
      smaller.*s.field = s.smallest;
      try {
        (void)memscale::estimate(opt.model, smaller);
      } catch (const memscale::error&) {
        continue;  // still too large (or invalid) without it: not this option alone
      }
      const bool qlora_rank = s.field == &memscale::training_spec::lora_rank &&
                              opt.run.target == memscale::training_target::qlora;
      causes += (causes.empty() ? "" : " and ") + std::string(qlora_rank ? "--qlora" : s.option) + " " +
                std::to_string(opt.run.*s.field);
    }
    const std::string where = opt.run_source.empty() ? "" : " (after " + opt.run_source + ")";
    if (causes.empty())
      throw memscale_plan::usage_error("the run of " + std::string(opt.model.name) + where +
                                       " is too large to estimate: " + e.what());
    throw memscale_plan::usage_error(causes + " on " + std::string(opt.model.name) + where +
                                     " makes the run too large to estimate: " + e.what());
  }
}

std::string run(const memscale_plan::options& opt) {
  using memscale_plan::command;
  memscale_plan::set_size_unit(opt.units);  // every text report, --list-gpus included
  switch (opt.cmd) {
    case command::help: return memscale_plan::help_text();
    case command::list_models: {
      if (!opt.json) return memscale_plan::model_list_text() + memscale_plan::vision_model_list_text();
      nlohmann::json list = memscale_plan::model_list_json();
      for (const auto& m : memscale_plan::vision_model_list_json()) list.push_back(m);
      return dump(list);
    }
    case command::list_families:
      return opt.json ? dump(memscale_plan::family_list_json()) : memscale_plan::family_list_text();
    case command::list_gpus: return opt.json ? dump(memscale_plan::gpu_list_json()) : memscale_plan::gpu_list_text();
    case command::cases: return dump(memscale_plan::run_cases(opt.cases_path, opt.cases_stack_path));
    case command::run: {
      memscale_plan::check_multi_gpu_options(opt);  // cluster.cpp
      if (const auto vision = memscale_plan::vision_model_of(opt)) return memscale_plan::vision_report(opt, *vision);
      if (const auto* generic = memscale_plan::generic_model_in_use(opt)) return memscale_plan::generic_report(opt, *generic);
      if (opt.cluster.emit == memscale_plan::emit_format::torchtune) return memscale_plan::torchtune_config(opt);
      if (opt.cluster.gpus > 0) return memscale_plan::run_cluster(opt);
      if (opt.inference.enabled) return memscale_plan::inference_command(opt);  // inference.cpp
      if (opt.emit_torchtitan)
        return memscale::json_io::emit_torchtitan_job(opt.model, opt.run,
                                                      std::string(opt.model.name) + ", FSDP2 over " +
                                                          std::to_string(opt.run.data_parallel) + " GPUs");
      std::optional<memscale::gpu_spec> gpu = opt.custom_gpu;
      if (!gpu && !opt.gpu.empty()) gpu = memscale::find_gpu(opt.gpu);  // checked by parse_args
      // With a GPU the report estimates the run on it (its BLAS workspace), as the plan does.
      memscale_plan::options on_device = opt;
      if (gpu) on_device.run = memscale::on_gpu(opt.run, *gpu);
      const memscale::estimate_result result = estimate_or_explain(on_device);
      // The JSON report is the library's (memscale/json/run_report.hpp), as the web calculator's.
      const memscale::json_io::run_input input = memscale_plan::run_input_of(opt);
      // The text report's peaks carry the allocator section's reserved and device figures, as the JSON's do.
      const memscale::estimate_result shown =
          opt.run.device == memscale::device_kind::cuda
              ? memscale::json_io::with_device_figures(result, memscale::json_io::device_estimate_of(input))
              : result;
      // torchtitan's run (and torchtune's distributed one) is its FSDP2 layout and policy: the
      // planner's levers (checkpointing, offload, one GPU's strategies) are not its options, so
      // the report has no plan, only the device estimate against the GPU's budget.
      if (memscale::runs_fsdp2(opt.run) && gpu) {
        if (opt.json) return dump(memscale::json_io::run_report_json(input, result, nullptr));
        const memscale::bytes budget =
            memscale::budget_of(*gpu, {.headroom = opt.headroom.value_or(memscale::default_headroom)});
        // The same device estimate and verdict as the allocator section and the JSON report.
        const memscale::device_options o = memscale::json_io::device_options_of(opt.alloc_conf, opt.context_memory);
        const memscale::device_estimate d = memscale::estimate_on_device(opt.model, on_device.run, &*gpu, o);
        const memscale::device_verdict v = memscale::verdict_on_device(opt.model, on_device.run, d, budget, o);
        return memscale_plan::text_report(opt.model, opt.run, shown) +
               memscale_plan::allocator_text(opt.model, on_device.run, &*gpu, opt.alloc_conf, opt.context_memory,
                                             budget) +
               "Verdict on " + std::string(gpu->label) + " (budget " + memscale_plan::size_text(budget) +
               " per GPU, device " + memscale_plan::size_text(d.device) + ", band " +
               std::string(memscale::to_string(v.band.of)) + "): " + std::string(memscale::to_string(v.v)) + "\n";
      }
      if (!gpu)
        return opt.json ? dump(memscale::json_io::run_report_json(input, result, nullptr))
                        : memscale_plan::text_report(opt.model, opt.run, shown) +
                              memscale_plan::allocator_text(opt.model, opt.run, nullptr, opt.alloc_conf,
                                                            opt.context_memory, std::nullopt);
      const memscale::plan_result plan = memscale::json_io::plan_run(input, *gpu);
      memscale_plan::write_plan_pictures(opt, *gpu, plan);  // --svg, --svg-batch (pictures.cpp)
      if (opt.json) return dump(memscale::json_io::run_report_json(input, result, &plan));
      return memscale_plan::text_report(opt.model, opt.run, shown) +
             memscale_plan::allocator_text(opt.model, on_device.run, &*gpu, opt.alloc_conf, opt.context_memory, plan.budget) +
             memscale_plan::plan_text(*gpu, plan) + memscale_plan::levers_text(opt.model, *gpu, opt.alloc_conf, opt.context_memory, plan) +
             memscale_plan::cliff_text(memscale_plan::transformer_cliff(opt.model, opt.run, *gpu, plan), opt.run, plan);
    }
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::vector<std::string_view> args(argc > 1 ? argv + 1 : argv, argc > 1 ? argv + argc : argv);
    const std::string out = run(memscale_plan::parse_args(args));
    std::fwrite(out.data(), 1, out.size(), stdout);
    return std::fflush(stdout) == 0 ? exit_ok : fail("cannot write to stdout");
  } catch (const memscale_plan::usage_error& e) {
    return fail(e.what());
  } catch (const memscale::error& e) {
    return fail(e.what());
  } catch (const nlohmann::json::exception& e) {
    return fail(e.what());
  } catch (const std::exception& e) {
    return fail(std::string("internal error: ") + e.what());
  } catch (...) {
    return fail("internal error: unknown exception");
  }
}
