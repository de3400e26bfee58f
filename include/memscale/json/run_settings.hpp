// memscale/json/run_settings.hpp: a run's settings as text, read and written the way
// memscale-plan and the run document (memscale/json/run_document.hpp) spell them: sizes
// ("24GiB"), offload lists, LoRA target lists, and the settings as a JSON object.
// Shared by memscale-plan and the web calculator (web/), so both read and write one way.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <array>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "memscale/detail/nearest_name.hpp"
#include "memscale/detail/math.hpp"
#include "memscale/detail/printable.hpp"
#include "memscale/current_releases.hpp"
#include "memscale/error.hpp"
#include "memscale/gpus.hpp"
#include "memscale/json/custom_sharded_layers.hpp"
#include "memscale/estimate/workspace.hpp"
#include "memscale/lora.hpp"
#include "memscale/training.hpp"

namespace memscale::json_io {

// Invalid input as typed by a person (an option's value, a name in a run document): what()
// is one line naming the option or field and the value, without memscale::error's
// "[memscale.code]" prefix. memscale-plan reports it as is (its usage_error). Like
// memscale::error it stores the message with control characters and bytes that are not
// UTF-8 escaped (detail::printable), so what() is safe to print.
class input_error : public std::runtime_error {
 public:
  explicit input_error(std::string_view message) : std::runtime_error(memscale::detail::printable(message)) {}
};

// How messages quote a value as typed: "text", with control characters and bytes that are
// not UTF-8 escaped, cut after 80 characters ("...(N bytes)" follows).
inline std::string in_quotes(std::string_view text) { return memscale::detail::quoted(text); }

// How messages quote a file path: as in_quotes, but a long path keeps its end (the file
// name) after "...".
inline std::string path_in_quotes(std::string_view path) { return memscale::detail::quoted_path(path); }

// The run estimated when a run document (or the command line) sets nothing: GPT-2 small's
// default in memscale-plan, 4 x 512 tokens, fp32, AdamW (foreach), flash attention, under the
// current torch (a Hugging Face run's transformers release: with_current_transformers).
constexpr training_spec default_run() {
  return training_spec{.micro_batch = 4,
                       .seq_len = 512,
                       .prec = precision::fp32,
                       .optimizer = optimizer_kind::adamw,
                       .optimizer_impl = optimizer_implementation::foreach,
                       .grad_accum = 1,
                       .ckpt = checkpointing::none,
                       .attention = attention_impl::flash,
                       .torch_version = current_torch_release};
}

// "SIZE" as bytes: a number with a unit, 24GiB, 80GB, 23.5GiB, 512MiB (binary for ...iB,
// decimal for ...B, as nvidia-smi and spec sheets use them); errors name `field`.
inline std::uint64_t parse_size(std::string_view text, const std::string& field) {
  const auto bad = [&](const char* why) {
    return input_error(field + " must be " + why + ", such as 24GiB or 80GB (got " + in_quotes(text) + ")");
  };
  std::size_t digits = 0;
  while (digits < text.size() && ((text[digits] >= '0' && text[digits] <= '9') || text[digits] == '.')) ++digits;
  std::string_view unit = text.substr(digits);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  constexpr std::array<std::pair<std::string_view, std::uint64_t>, 9> units{{{"B", 1},
                                                                            {"KB", 1000},
                                                                            {"MB", 1000'000},
                                                                            {"GB", 1000'000'000},
                                                                            {"TB", 1000'000'000'000},
                                                                            {"KiB", 1ULL << 10},
                                                                            {"MiB", 1ULL << 20},
                                                                            {"GiB", 1ULL << 30},
                                                                            {"TiB", 1ULL << 40}}};
  std::uint64_t scale = 0;
  for (const auto& [name, factor] : units)  // any case: "24gb" is 24 GB (no size here is in bits)
    if (memscale::detail::iequals(unit, name)) scale = factor;
  if (scale == 0) throw bad("a size with a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB; any case)");
  // Digits and dots only (checked above), so strtod reads a plain decimal, correctly rounded
  // like std::from_chars; emscripten's libc++ has no floating-point from_chars.
  const std::string number(text.substr(0, digits));
  char* end = nullptr;
  const double value = number.empty() ? 0.0 : std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size()) throw bad("a number with a unit");
  const double size = value * static_cast<double>(scale);
  if (!(size >= 1.0 && size < 18446744073709551616.0)) throw bad("a positive size below 16 EiB");
  // Whole numbers are exact (24GiB = 24 x 2^30); fractions round down to whole bytes.
  std::uint64_t whole = 0;
  const auto [wptr, wec] = std::from_chars(number.data(), number.data() + number.size(), whole);
  if (wec == std::errc{} && wptr == number.data() + number.size() && whole <= UINT64_MAX / scale) return whole * scale;
  return memscale::detail::floor_to_u64(size);
}

// Sets the offload flags of a comma- or plus-separated list (optimizer, parameters,
// activations, none); errors name `field`.
inline void set_offload(training_spec& run, std::string_view list, const std::string& field) {
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t comma = list.find_first_of(",+", start);
    const std::string_view part = list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    start = comma == std::string_view::npos ? list.size() + 1 : comma + 1;
    if (part == "optimizer") run.offload_optimizer = true;
    else if (part == "parameters" || part == "params") run.offload_parameters = true;
    else if (part == "activations") run.offload_activations = true;
    else if (part == "none") run.offload_optimizer = run.offload_parameters = run.offload_activations = false;
    else {
      memscale::detail::nearest_name nearest(part);
      for (const char* known : {"optimizer", "parameters", "activations"}) nearest.offer(known);
      throw input_error(field + " must be optimizer, parameters or activations (got " + in_quotes(part) + ")" +
                        nearest.hint());
    }
  }
}

// A comma-separated list of LoRA target names (memscale/lora.hpp parse_lora_targets: PEFT,
// lit-gpt and family module names). An error names `field` and the name as typed.
inline lora_modules parse_lora_target_list(std::string_view text, const std::string& field) {
  try {
    return parse_lora_targets(text);
  } catch (const error& e) {
    // An unknown name: offer the nearest known one.
    std::string_view rest = text;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string_view name = memscale::detail::trim(rest.substr(0, comma));
      if (!name.empty()) {
        try {
          (void)lora_module(name);
        } catch (const error&) {
          memscale::detail::nearest_name nearest(name);
          for (const auto known : lora_module_names) nearest.offer(known);
          throw input_error(field + " names an unknown LoRA target " + in_quotes(name) + nearest.hint() +
                            " (PEFT, lit-gpt or the family's module names; see docs/estimators.md)");
        }
      }
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    // The core says "lora_targets names an unknown module ...": name the option or field instead.
    const std::string message = e.what();
    const auto at = message.find("lora_targets");
    throw input_error(field + message.substr(at == std::string::npos ? 0 : at + std::string("lora_targets").size()) +
                      " (got " + in_quotes(text) + ")");
  }
}

// The set as names parse_lora_target_list reads back: "q,v", "all-linear", "q,v,mlp,lm_head".
inline std::string lora_targets_text(lora_modules set) {
  if (set == lora_all_linear) return "all-linear";
  std::string out;
  const auto add = [&](bool on, const char* name) {
    if (on) out += std::string(out.empty() ? "" : ",") + name;
  };
  add(has(set, lora_target::q), "q");
  add(has(set, lora_target::k), "k");
  add(has(set, lora_target::v), "v");
  add(has(set, lora_target::o), "o_proj");
  const bool whole_mlp = (set & lora_mlp) == lora_mlp;
  add(whole_mlp, "mlp");
  add(!whole_mlp && has(set, lora_target::gate), "gate_proj");
  add(!whole_mlp && has(set, lora_target::up), "up_proj");
  add(!whole_mlp && has(set, lora_target::down), "down_proj");
  add(has(set, lora_target::head), "lm_head");
  add(has(set, lora_target::router), "gate");
  add(has(set, lora_target::q_a), "q_a_proj");
  add(has(set, lora_target::q_b), "q_b_proj");
  add(has(set, lora_target::kv_a), "kv_a_proj_with_mqa");
  add(has(set, lora_target::kv_b), "kv_b_proj");
  return out;
}

// The least GPU memory a plan takes: a GPU holds at least its own CUDA context (about
// 400 MiB with lazy module loading, estimate/workspace.hpp cuda_context_bytes), so a
// smaller device cannot run any step, and "24B" or "1KiB" is a slip for GB or GiB.
inline constexpr std::uint64_t min_gpu_memory = cuda_context_bytes(true).value;

// `memory` bytes of a GPU given as `field` (--gpu-memory, gpu.memory), `as_given` the value
// as typed: refused below min_gpu_memory, naming the field and the value.
inline std::uint64_t checked_gpu_memory(std::uint64_t memory, const std::string& field, std::string_view as_given) {
  if (memory < min_gpu_memory)
    throw input_error(field + " must be at least 400 MiB, what the CUDA context alone takes (got " +
                      in_quotes(as_given) + ")");
  return memory;
}

namespace detail {

// Names for the settings the library has no to_string for; the spellings are the ones
// the parsers (json_io::parse_*) accept.
inline std::string_view name_of(optimizer_implementation i) {
  switch (i) {
    case optimizer_implementation::for_loop: return "for_loop";
    case optimizer_implementation::foreach: return "foreach";
    case optimizer_implementation::fused: return "fused";
  }
  return "foreach";
}

inline std::string_view name_of(training_target t) {
  switch (t) {
    case training_target::full: return "full";
    case training_target::lora: return "lora";
    case training_target::qlora: return "qlora";
  }
  return "full";
}

inline std::string_view name_of(lora_variant v) {
  return v == lora_variant::dora ? "dora" : v == lora_variant::rslora ? "rslora" : "lora";
}

inline std::string_view name_of(base_quant q) { return q == base_quant::nf4_double_quant ? "nf4_double_quant" : "nf4"; }

inline std::string_view name_of(device_kind d) { return d == device_kind::cpu ? "cpu" : "cuda"; }

// The target set by lora_target names ("q,v,o,gate"), as the reports print it.
inline std::string lora_target_letters(lora_modules set) {
  if (set == lora_all_linear) return "all-linear";
  std::string out;
  const auto add = [&](lora_target t, std::string_view name) {
    if (!has(set, t)) return;
    if (!out.empty()) out += ',';
    out += name;
  };
  add(lora_target::q, "q");
  add(lora_target::k, "k");
  add(lora_target::v, "v");
  add(lora_target::o, "o");
  add(lora_target::gate, "gate");
  add(lora_target::up, "up");
  add(lora_target::down, "down");
  add(lora_target::head, "head");
  add(lora_target::router, "router");
  add(lora_target::q_a, "q_a");
  add(lora_target::q_b, "q_b");
  add(lora_target::kv_a, "kv_a");
  add(lora_target::kv_b, "kv_b");
  return out;
}

}  // namespace detail

// Public: the spellings the parsers accept, and the LoRA target set as reports print it.
using detail::lora_target_letters;
using detail::name_of;

namespace detail {
// torchtitan's activation checkpointing policy as a run document writes it ("none" without one).
inline std::string sac_policy_text(const training_spec& run) {
  if (run.sac == selective_ac::op_save_list) return "op";
  if (run.sac == selective_ac::every_kth_block) return "layer:" + std::to_string(run.sac_every);
  return run.ckpt == checkpointing::full ? "full" : "none";
}
}  // namespace detail

// The training settings as JSON, with the spellings the run document accepts.
inline nlohmann::json run_to_json(const training_spec& run) {
  nlohmann::json j = {{"micro_batch", run.micro_batch},
                      {"seq_len", run.seq_len},
                      {"grad_accum", run.grad_accum},
                      {"precision", std::string(to_string(run.prec))},
                      {"optimizer", std::string(to_string(run.optimizer))},
                      {"optimizer_impl", std::string(detail::name_of(run.optimizer_impl))},
                      {"checkpointing", std::string(to_string(run.ckpt))},
                      {"attention", run.flash_attention_2 ? std::string("flash_attention_2")
                                                          : std::string(to_string(run.attention))},
                      {"target", std::string(detail::name_of(run.target))},
                      {"dropout", run.dropout},
                      {"device", std::string(detail::name_of(run.device))}};
  if (is_lora(run)) {
    j["lora_rank"] = run.lora_rank;
    j["lora_targets"] = detail::lora_target_letters(run.lora_targets);
    if (run.lora_kind != lora_variant::lora) j["lora_variant"] = std::string(detail::name_of(run.lora_kind));
    if (!run.lora_dropout) j["lora_dropout"] = 0;  // on is the default; its probability holds no memory
    // Written where it is not what the framework sets (torchtune's base dtype is its default).
    if (run.adapters != with_framework(training_spec{}, run.framework).adapters)
      j["adapter_dtype"] = std::string(to_string(run.adapters));
  }
  if (run.target == training_target::qlora) j["quant"] = std::string(detail::name_of(run.quant));
  if (run.no_sync) j["no_sync"] = true;
  if (run.use_cache != cache_setting::config) j["use_cache"] = run.use_cache == cache_setting::on;
  // Which checkpoint wraps each block, as resolved: the release's default shows what was assumed.
  if (run.ckpt == checkpointing::full) j["use_reentrant"] = reentrant_checkpoint(run);
  if (run.packing != batch_packing::none) j["packing"] = std::string(to_string(run.packing));
  if (run.example_tokens != 0) j["example_tokens"] = run.example_tokens;
  if (run.padded) j["padded"] = true;
  if (run.output_cast != output_cast_kind::framework_default)
    j["output_cast"] = run.output_cast == output_cast_kind::fp32 ? "fp32" : "none";
  // The loss is written where it is not the library's plain default (a framework's chunked
  // loss, or a framework default turned off), so it reads back over the run's framework.
  if (run.loss != loss_impl::standard || with_framework(training_spec{}, run.framework).loss != run.loss)
    j["loss"] = run.loss == loss_impl::chunked        ? "chunked"
                : run.loss == loss_impl::fused_linear ? "fused_linear_ce"
                                                      : "standard";
  if (run.liger_rms_norm) j["fused_rmsnorm"] = true;
  if (run.liger_rms_norm && run.liger_norm_patching == liger_patching::instance) j["liger_patching"] = "instance";
  if (run.liger_swiglu) j["fused_swiglu"] = true;
  if (run.liger_geglu) j["fused_geglu"] = true;
  if (run.liger_rope) j["fused_rope"] = true;
  if (run.liger_layer_norm) j["fused_layernorm"] = true;
  if (run.loss == loss_impl::chunked && run.loss_chunks > 0) j["loss_chunks"] = run.loss_chunks;
  else if (run.loss == loss_impl::chunked) j["loss_chunk"] = run.loss_chunk;
  if (run.optimizer_in_backward) j["optimizer_in_backward"] = true;
  if (run.paged_optimizer) j["paged_optimizer"] = true;
  if (run.ssm_kernels != ssm_kernel_choice::framework_default) j["ssm_kernels"] = std::string(to_string(run.ssm_kernels));
  if (runs_fsdp2(run)) {  // FSDP2's ranks and torchtitan's checkpointing policy
    j["data_parallel"] = run.data_parallel;
    if (run.tensor_parallel > 1) j["tensor_parallel"] = run.tensor_parallel;
    if (run.context_parallel > 1) j["context_parallel"] = run.context_parallel;
    if (run.custom_sharded.any()) j["custom_sharded_layers"] = detail::custom_sharded_layers_json(run.custom_sharded);
    if (run.sac != selective_ac::none) {
      j["checkpointing"] = "selective";
      j["sac_policy"] = detail::sac_policy_text(run);
    }
  }
  return j;
}

}  // namespace memscale::json_io
