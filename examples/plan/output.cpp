// memscale-plan: the text and JSON reports (see output.hpp).
#include "output.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

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
  if (m.arch == memscale::architecture::encoder_decoder) return "encoder-decoder";
  return m.arch == memscale::architecture::encoder ? "encoder" : "decoder";
}

// --units: the unit of the report's sizes (gib, gb or mib).
std::string_view size_unit = "gib";

// "4.65 GiB (4,990,841,312 bytes)", in the --units unit.
std::string gib_and_bytes(memscale::bytes b) {
  if (size_unit == "gb") return fmt::format("{:8.2f} GB   ({} bytes)", memscale::to_gb(b), memscale::format_count(b.value));
  if (size_unit == "mib")
    return fmt::format("{:8.1f} MiB  ({} bytes)", memscale::to_mib(b), memscale::format_count(b.value));
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

void set_size_unit(std::string_view unit) { size_unit = unit == "gb" ? "gb" : unit == "mib" ? "mib" : "gib"; }

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

std::string gpu_list_text() {
  std::string out;
  for (const auto& g : memscale::gpu_catalog)
    out += fmt::format("{:<16} {:<36} {:>7.2f} GiB  bf16 {}\n", g.name, g.label, memscale::to_gib(g.memory),
                       g.bf16 ? "yes" : "no");
  return out;
}

nlohmann::json gpu_list_json() {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& g : memscale::gpu_catalog)
    list.push_back({{"name", std::string(g.name)},
                    {"label", std::string(g.label)},
                    {"memory", g.memory.value},
                    {"bf16", g.bf16}});
  return list;
}

std::string plan_text(const memscale::gpu_spec& gpu, const memscale::plan_result& plan) {
  constexpr std::size_t bar_width = 30;
  std::string out = "\n";
  out += fmt::format("Plan on {} (budget {:.2f} GiB = VRAM {:.2f} GiB x (1 - {:.2f}))\n", gpu.label,
                     memscale::to_gib(plan.budget), memscale::to_gib(plan.vram), plan.headroom);
  out += fmt::format("  memory pressure {:.2f} (unoptimized peak / VRAM)\n", plan.pressure);
  out += fmt::format("  {:<13} {:>10}  {:<{}}  {:<4}  {:<13} {:>12}  {:>12}\n", "mode", "peak GiB", "of VRAM",
                     bar_width, "fits", "recompute", "transfer s", "host RAM GiB");
  for (const auto& m : plan.modes) {
    const double share = memscale::ratio(m.peak, plan.vram);
    const auto filled = static_cast<std::size_t>(std::min(share, 1.0) * static_cast<double>(bar_width) + 0.5);
    const std::string recompute = m.cost.recompute_fraction > 0.0 ? "≈ +1 forward" : "-";
    out += fmt::format("  {:<13} {:>10.2f}  {:<{}}  {:<4}  {:<13} {:>12.2f}  {:>12.2f}\n", memscale::to_string(m.m),
                       memscale::to_gib(m.peak), std::string(filled, '#'), bar_width, m.fits ? "yes" : "no",
                       recompute, m.cost.transfer_seconds, memscale::to_gib(m.cost.host_memory));
  }
  // Components of each mode's peak (tensor bytes) as stacked bars: P parameters,
  // G gradients, O optimizer state, A activations, W workspace.
  out += fmt::format("\n  components at each mode's peak (GiB; bar: P params, G grads, O optimizer, A activations, "
                     "W workspace; full width = VRAM)\n");
  out += fmt::format("  {:<13} {:>7} {:>7} {:>7} {:>7} {:>7}  {:<15} {}\n", "mode", "params", "grads", "optim", "activ",
                     "wkspace", "phase", "bar");
  for (const auto& m : plan.modes) {
    const memscale::memory_breakdown& b = m.breakdown;
    std::string bar;
    const std::pair<char, memscale::bytes> parts[] = {
        {'P', b.parameters}, {'G', b.gradients}, {'O', b.optimizer}, {'A', b.activations}, {'W', b.workspace}};
    for (const auto& [letter, size] : parts) {
      const double share = memscale::ratio(size, plan.vram);
      bar += std::string(static_cast<std::size_t>(share * static_cast<double>(bar_width) + 0.5), letter);
    }
    if (bar.size() > bar_width) bar = bar.substr(0, bar_width - 1) + ">";
    out += fmt::format("  {:<13} {:>7.2f} {:>7.2f} {:>7.2f} {:>7.2f} {:>7.2f}  {:<15} {}\n", memscale::to_string(m.m),
                       memscale::to_gib(b.parameters), memscale::to_gib(b.gradients), memscale::to_gib(b.optimizer),
                       memscale::to_gib(b.activations), memscale::to_gib(b.workspace), memscale::to_string(m.at), bar);
  }
  out += fmt::format("Chosen: {} — {}\n", plan.fits ? memscale::to_string(plan.chosen) : "none", plan.reason);
  if (!plan.fits) {
    if (plan.next_step == memscale::advice::offload_parameters)
      out += fmt::format("  aggressive + parameters streamed from the host: peak {:.2f} GiB, host RAM {:.2f} GiB, "
                         "{:.2f} s of transfers per step\n",
                         memscale::to_gib(plan.parameter_offload.peak),
                         memscale::to_gib(plan.parameter_offload.cost.host_memory),
                         plan.parameter_offload.cost.transfer_seconds);
    else if (plan.max_micro_batch > 0)
      out += fmt::format("  max micro-batch {} with grad accumulation {}\n", plan.max_micro_batch,
                         plan.grad_accumulation);
    else if (plan.max_seq_len > 0)
      out += fmt::format("  max sequence length {} at micro-batch 1\n", plan.max_seq_len);
    out += fmt::format("  next step: {}\n", memscale::to_string(plan.next_step));
  }
  return out;
}

nlohmann::json plan_json(const memscale::plan_result& plan) {
  nlohmann::json modes = nlohmann::json::array();
  for (const auto& m : plan.modes)
    modes.push_back({{"mode", std::string(memscale::to_string(m.m))},
                     {"peak", m.peak.value},
                     {"fits", m.fits},
                     {"phase", std::string(memscale::to_string(m.at))},
                     {"breakdown", memscale::json_io::breakdown_to_json(m.breakdown)},
                     {"recompute_forward_passes", m.cost.recompute_fraction},
                     {"transfer_seconds_per_step", m.cost.transfer_seconds},
                     {"host_memory", m.cost.host_memory.value}});
  return {{"mode", std::string(plan.fits ? memscale::to_string(plan.chosen) : "none")},
          {"fits", plan.fits},
          {"budget", plan.budget.value},
          {"pressure", plan.pressure},
          {"modes", modes},
          {"max_micro_batch", plan.max_micro_batch},
          {"grad_accumulation", plan.grad_accumulation},
          {"max_seq_len", plan.max_seq_len},
          {"next_step", std::string(memscale::to_string(plan.next_step))},
          {"reason", std::string(plan.reason)},
          {"parameter_offload",
           {{"peak", plan.parameter_offload.peak.value},
            {"fits", plan.parameter_offload.fits},
            {"host_memory", plan.parameter_offload.cost.host_memory.value}}}};
}

}  // namespace memscale_plan
