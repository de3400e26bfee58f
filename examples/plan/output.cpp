// memscale-plan: the text and JSON reports (see output.hpp).
#include "output.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "memscale/fmt.hpp"
#include "memscale/json.hpp"
#include "memscale/presets.hpp"

namespace memscale_plan {
namespace {

// Names for the settings the library has no to_string for; the spellings are the ones
// the command line (json_io::parse_*) accepts.
std::string_view name_of(memscale::optimizer_implementation i) {
  switch (i) {
    case memscale::optimizer_implementation::for_loop: return "for_loop";
    case memscale::optimizer_implementation::foreach: return "foreach";
    case memscale::optimizer_implementation::fused: return "fused";
  }
  return "foreach";
}

std::string_view name_of(memscale::training_target t) {
  switch (t) {
    case memscale::training_target::full: return "full";
    case memscale::training_target::lora: return "lora";
    case memscale::training_target::qlora: return "qlora";
  }
  return "full";
}

std::string_view name_of(memscale::base_quant q) {
  return q == memscale::base_quant::nf4_double_quant ? "nf4_double_quant" : "nf4";
}

std::string_view name_of(memscale::device_kind d) { return d == memscale::device_kind::cpu ? "cpu" : "cuda"; }

std::string lora_targets_of(std::uint8_t set) {
  std::string out;
  const auto add = [&](memscale::lora_target t, std::string_view name) {
    if (!memscale::has(set, t)) return;
    if (!out.empty()) out += ',';
    out += name;
  };
  add(memscale::lora_target::q, "q");
  add(memscale::lora_target::k, "k");
  add(memscale::lora_target::v, "v");
  add(memscale::lora_target::o, "o");
  add(memscale::lora_target::mlp, "mlp");
  return out;
}

std::string_view architecture_of(const memscale::model_spec& m) {
  return m.arch == memscale::architecture::encoder ? "encoder" : "decoder";
}

// "4.65 GiB (4,990,841,312 bytes)"
std::string gib_and_bytes(memscale::bytes b) {
  return fmt::format("{:8.2f} GiB  ({} bytes)", memscale::to_gib(b), memscale::format_count(b.value));
}

std::string peak_lines(const memscale::peak_estimate& p) {
  std::string out;
  out += fmt::format("  tensor    {}  torch.cuda.max_memory_allocated\n", gib_and_bytes(p.tensor));
  out += fmt::format("  reserved  {}  torch.cuda.max_memory_reserved\n", gib_and_bytes(p.reserved));
  out += fmt::format("  device    {}  nvidia-smi: reserved + CUDA context\n", gib_and_bytes(p.device));
  return out;
}

}  // namespace

nlohmann::json run_to_json(const memscale::training_spec& run) {
  nlohmann::json j = {{"micro_batch", run.micro_batch},
                      {"seq_len", run.seq_len},
                      {"grad_accum", run.grad_accum},
                      {"precision", std::string(memscale::to_string(run.prec))},
                      {"optimizer", std::string(memscale::to_string(run.optimizer))},
                      {"optimizer_impl", std::string(name_of(run.optimizer_impl))},
                      {"checkpointing", std::string(memscale::to_string(run.ckpt))},
                      {"attention", std::string(memscale::to_string(run.attention))},
                      {"target", std::string(name_of(run.target))},
                      {"dropout", run.dropout},
                      {"device", std::string(name_of(run.device))}};
  if (memscale::is_lora(run)) {
    j["lora_rank"] = run.lora_rank;
    j["lora_targets"] = lora_targets_of(run.lora_targets);
  }
  if (run.target == memscale::training_target::qlora) j["quant"] = std::string(name_of(run.quant));
  return j;
}

nlohmann::json json_report(const memscale::model_spec& model, const memscale::training_spec& run,
                           const memscale::estimate_result& result) {
  nlohmann::json j = memscale::json_io::estimate_to_json(result);
  j["model"] = std::string(model.name);
  j["run"] = run_to_json(run);
  // EXTENSION POINT (planner): j["plan"] = plan_json(...) when --gpu is given.
  return j;
}

std::string text_report(const memscale::model_spec& model, const memscale::training_spec& run,
                        const memscale::estimate_result& result) {
  std::string out;
  out += fmt::format("model          {} ({} {})\n", model.name, memscale::to_string(model.impl), architecture_of(model));
  out += fmt::format("parameters     {} (trainable {})\n", memscale::format_count(result.parameter_count),
                     memscale::format_count(result.trainable_parameter_count));
  out += fmt::format("shape          {} layers, hidden {}, {} heads ({} kv), ffn {}, vocab {}\n", model.layers,
                     model.hidden, model.heads, memscale::kv_heads_of(model), model.ffn,
                     memscale::format_count(model.vocab));
  out += "\n";
  out += fmt::format("run            micro-batch {} x seq {}, grad-accum {}\n", run.micro_batch, run.seq_len,
                     run.grad_accum);
  out += fmt::format("               precision {}, optimizer {} ({}), checkpointing {}, attention {}\n", run.prec,
                     run.optimizer, name_of(run.optimizer_impl), run.ckpt, run.attention);
  std::string training = std::string(name_of(run.target));
  if (memscale::is_lora(run)) {
    training += fmt::format(" rank {} on {}", run.lora_rank, lora_targets_of(run.lora_targets));
    if (run.target == memscale::training_target::qlora) training += fmt::format(", base {}", name_of(run.quant));
  }
  out += fmt::format("               training {}, dropout {}, device {}\n", training, run.dropout ? "on" : "off",
                     name_of(run.device));
  out += "\n";
  out += fmt::format("breakdown at the steady-state peak ({}):\n", result.steady.at);
  out += memscale::format_breakdown(result);
  out += "\n";
  out += fmt::format("steady-state peak ({}):\n", result.steady.at);
  out += peak_lines(result.steady);
  out += fmt::format("step-1 peak ({}; optimizer state is created inside the first step):\n", result.first_step.at);
  out += peak_lines(result.first_step);
  // EXTENSION POINT (planner): the "fit on <gpu> with <headroom>" section goes here.
  return out;
}

std::string model_list_text() {
  std::string out;
  for (const auto& m : memscale::presets::all)
    out += fmt::format("{:<20} {:>15} parameters  {:>3} layers  hidden {:>5}  heads {:>3}\n", m.name,
                       memscale::parameter_count(m), m.layers, m.hidden, m.heads);
  return out;
}

nlohmann::json model_list_json() {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& m : memscale::presets::all)
    list.push_back({{"name", std::string(m.name)},
                    {"parameters", memscale::parameter_count(m)},
                    {"layers", m.layers},
                    {"hidden", m.hidden},
                    {"heads", m.heads}});
  return list;
}

}  // namespace memscale_plan
