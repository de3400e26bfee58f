// memscale-plan: the text and JSON reports (see output.hpp).
#include "output.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "memscale/device_peak.hpp"
#include "memscale/fmt.hpp"
#include "memscale/graph/layers/image_tower.hpp"
#include "memscale/json.hpp"
#include "memscale/levers.hpp"
#include "memscale/presets.hpp"
#include "units.hpp"

namespace memscale_plan {
namespace {

// Names of settings and LoRA targets as the run document spells them (memscale/json/run_settings.hpp).
using memscale::json_io::name_of;

std::string lora_targets_of(memscale::lora_modules set) { return memscale::json_io::lora_target_letters(set); }

std::string_view architecture_of(const memscale::model_spec& m) {
  if (m.arch == memscale::architecture::encoder_decoder) return "encoder-decoder";
  return m.arch == memscale::architecture::encoder ? "encoder" : "decoder";
}

// The breakdown table's size column, in the --units unit.
std::string breakdown_size(memscale::bytes b) { return size_text(b); }

std::string peak_lines(const memscale::peak_estimate& p) {
  std::string out;
  out += fmt::format("  tensor    {}  torch.cuda.max_memory_allocated\n", size_and_bytes(p.tensor));
  out += fmt::format("  reserved  {}  torch.cuda.max_memory_reserved\n", size_and_bytes(p.reserved));
  out += fmt::format("  device    {}  nvidia-smi: reserved + CUDA context\n", size_and_bytes(p.device));
  return out;
}

}  // namespace

nlohmann::json run_to_json(const memscale::training_spec& run) { return memscale::json_io::run_to_json(run); }

nlohmann::json json_report(const memscale::model_spec& model, const memscale::training_spec& run,
                           const memscale::estimate_result& result) {
  return memscale::json_io::estimate_report_json(model, run, result);
}

std::string text_report(const memscale::model_spec& model, const memscale::training_spec& run,
                        const memscale::estimate_result& result) {
  std::string out;
  out += fmt::format("model          {} ({} {})\n", model.name, memscale::to_string(model.impl), architecture_of(model));
  out += fmt::format("parameters     {} (trainable {})\n", memscale::format_count(result.parameter_count),
                     memscale::format_count(result.trainable_parameter_count));
  // Gemma 3n's idle parameters are its vision tower and its audio encoder together.
  const std::string towers =
      model.audio_embedder.width > 0
          ? fmt::format("towers         {} parameters (vision and audio)", memscale::format_count(model.idle_tower_parameters))
          : fmt::format("vision tower   {} parameters", memscale::format_count(model.idle_tower_parameters));
  if (model.idle_tower_parameters > 0 && run.images.per_sample > 0)
    out += fmt::format("{}, frozen (no gradient or optimizer state), run on {} image(s) of "
                       "{}x{} per sample{}: {} tokens each, counted in the sequence\n",
                       towers, run.images.per_sample, run.images.height,
                       run.images.width,
                       // Gemma3ImageProcessor resizes every image to the tower's image_size.
                       model.vision.image_size > 0 ? fmt::format(" (resized to {0}x{0})", model.vision.image_size)
                                                   : std::string(),
                       memscale::graph_layers::image_tokens(model.vision, run.images));
  else if (model.idle_tower_parameters > 0)
    out += fmt::format("{} loaded, idle in a text-only run: weights only, no gradient or optimizer state\n", towers);
  if (model.leading_dense_layers > 0)
    out += fmt::format("dense layers   {} leading (first_k_dense_replace), counted without checkpointing: with checkpointing each "
                       "keeps all it saves, not one input (the upper side)\n",
                       model.leading_dense_layers);
  if (model.unbuilt_mtp_layers > 0)
    out += fmt::format("mtp layers     {} in the checkpoint (num_nextn_predict_layers), not built by transformers: not "
                       "counted\n",
                       model.unbuilt_mtp_layers);
  if (memscale::has_attention(model))
    out += fmt::format("shape          {} layers, hidden {}, {} heads ({} kv), ffn {}, vocab {}\n", model.layers,
                       model.hidden, model.heads, memscale::kv_heads_of(model), model.ffn,
                       memscale::format_count(model.vocab));
  else
    out += fmt::format("shape          {} Mamba layers, hidden {}, inner {}, state {}, conv {}, dt rank {}, vocab {}\n",
                       model.layers, model.hidden, model.ssm_inner, model.ssm_state, model.ssm_conv, model.ssm_dt_rank,
                       memscale::format_count(model.vocab));
  out += "\n";
  out += fmt::format("run            micro-batch {} x seq {}, grad-accum {}\n", run.micro_batch, run.seq_len,
                     run.grad_accum);
  // sdpa: the kernel PyTorch picks for this device, dtype and release (attention_kernel.hpp).
  const std::string attention =
      run.attention == memscale::attention_impl::sdpa
          ? fmt::format("sdpa ({} kernel)", memscale::to_string(memscale::attention_kernel_of(model, run)))
          : std::string(memscale::to_string(run.attention));
  // A state-space or hybrid stack: the line names the mixer code the estimate assumed.
  const std::string ssm_kernels =
      memscale::ssm_kernels_of(run) == memscale::ssm_kernel_choice::fused
          ? std::string("ssm kernels fused (mamba-ssm)")
          : std::string("ssm kernels torch (the modeling file's torch code)");
  const std::string mixer =
      !memscale::has_attention(model) ? ssm_kernels
      : memscale::is_hybrid(model)    ? "attention " + attention + ", " + ssm_kernels
                                      : "attention " + attention;
  // Under full checkpointing, which torch.utils.checkpoint was assumed (training.hpp reentrant_checkpoint).
  const std::string checkpoint =
      run.ckpt != memscale::checkpointing::full
          ? fmt::format("{}", run.ckpt)
          : memscale::reentrant_checkpoint(run) ? "full (reentrant)" : "full (non-reentrant)";
  out += fmt::format("               precision {}, optimizer {} ({}), checkpointing {}, {}\n", run.prec, run.optimizer,
                     name_of(run.optimizer_impl), checkpoint, mixer);
  std::string training = std::string(name_of(run.target));
  if (memscale::is_lora(run)) {
    training += fmt::format(" rank {} on {}", run.lora_rank, lora_targets_of(run.lora_targets));
    if (run.target == memscale::training_target::qlora) training += fmt::format(", base {}", name_of(run.quant));
    if (run.lora_kind != memscale::lora_variant::lora) training += fmt::format(", {}", name_of(run.lora_kind));
    if (!run.lora_dropout) training += ", no LoRA dropout";
    // The one adapter dtype that also changes the base's: say it, the precision line alone reads as fp32 weights.
    if (run.adapters == memscale::adapter_dtype::autocast_dtype)
      training += ", model and adapters in the autocast dtype (no fp32 weights)";
  }
  out += fmt::format("               training {}, dropout {}, device {}\n", training, run.dropout ? "on" : "off",
                     name_of(run.device));
  out += fmt::format("               framework {}{}\n", memscale::json_io::framework_text(run),
                     run.use_cache == memscale::cache_setting::config
                         ? std::string()
                         : fmt::format(", use_cache {}", memscale::to_string(run.use_cache)));
  if (run.packing == memscale::batch_packing::packed)
    out += fmt::format("               packing packed: {} full rows of {} tokens\n", run.micro_batch, run.seq_len);
  if (run.padded)
    out += "               padded rows: the attention_mask has zeros, a (batch, 1, seq, seq) mask reaches every layer\n";
  if (run.packing == memscale::batch_packing::padding_free)
    out += fmt::format("               packing padding_free: {} tokens in one row ({} examples, longest {})\n",
                       memscale::tokens_per_micro_batch(run), run.micro_batch, run.seq_len);
  out += "\n";
  out += fmt::format("breakdown at the steady-state peak ({}):\n", result.steady.at);
  out += memscale::format_breakdown(result, breakdown_size);
  out += "\n";
  out += fmt::format("steady-state peak ({}):\n", result.steady.at);
  out += peak_lines(result.steady);
  out += fmt::format("step-1 peak ({}; optimizer state is created inside the first step):\n", result.first_step.at);
  out += peak_lines(result.first_step);
  const memscale::peak_estimate& peak = memscale::overall_peak(result);
  out += fmt::format("peak           {} device, at step {} (the larger of the two; a plan compares this)\n",
                     size_and_bytes(peak.device), &peak == &result.first_step ? "1" : "2+");
  if (result.paged_optimizer_bytes.value > 0)
    out += fmt::format("paged state    {} in CUDA unified memory (bitsandbytes' paged optimizer): in no peak above; "
                       "nvidia-smi counts its resident pages, which the driver moves to the host when the GPU is full\n",
                       size_and_bytes(result.paged_optimizer_bytes));
  if (result.host_bytes.value > 0)
    out += fmt::format("host memory    {} held by the offloads (shards, gradients, optimizer state, activations): "
                       "in no peak above\n",
                       size_and_bytes(result.host_bytes));
  return out;
}

namespace {

// Why the point estimate fits the budget or not, from the allocator's side.
std::string fit_reason(const memscale::device_fit& f) {
  std::string why;
  switch (f.basis) {
    case memscale::fit_basis::context_over: why = "the context alone exceeds the budget"; break;
    case memscale::fit_basis::tensors_over:
      why = fmt::format("the tensors alone need more than the {} the context leaves", size_text(f.capacity));
      break;
    case memscale::fit_basis::reserved_under:
      why = fmt::format("even the unconstrained reserved peak is within the {} the context leaves", size_text(f.capacity));
      break;
    case memscale::fit_basis::capped_replay:
      why = f.fits ? fmt::format("the replay capped at {} runs through ({} cache flush{})", size_text(f.capacity),
                                 f.capped.alloc_retries, f.capped.alloc_retries == 1 ? "" : "es")
                   : fmt::format("the replay capped at {} runs out of memory: fragmentation, not the tensors, is the "
                                 "risk (try expandable_segments:True or a smaller micro-batch)",
                                 size_text(f.capacity));
      break;
    case memscale::fit_basis::rounding_rule: why = "device total against the budget (no replay)"; break;
  }
  return why;
}

}  // namespace

std::string verdict_words(memscale::verdict v) {
  switch (v) {
    case memscale::verdict::fits: return "fits";
    case memscale::verdict::borderline: return "borderline";
    case memscale::verdict::does_not_fit: return "does not fit";
  }
  return "does not fit";
}

std::string device_figures_text(const device_figures& d, const memscale::gpu_spec* gpu, const std::string& alloc_conf,
                                std::string_view replayed_events, const memscale::device_verdict* v,
                                std::string_view smaller_run) {
  std::string out = fmt::format("caching allocator ({}{}):\n",
                                alloc_conf.empty() ? "default settings" : "PYTORCH_CUDA_ALLOC_CONF=", alloc_conf);
  const bool replayed = d.fallback == memscale::replay_fallback::none;
  if (!replayed) out += fmt::format("  note: {}\n", memscale::explain(d.fallback));
  out += fmt::format("  tensor    {}  max_memory_allocated (the estimate above)\n", size_and_bytes(d.tensor));
  if (replayed)
    out += fmt::format("  reserved  {}  max_memory_reserved: {} replayed through the allocator\n",
                       size_and_bytes(d.reserved), replayed_events);
  else
    out += fmt::format("  reserved  {}  max_memory_reserved by the rounding rule\n", size_and_bytes(d.reserved));
  const memscale::bytes ctx = d.context.total();
  // Eager loading (CUDA < 11.7 or torch < 1.13) brings every kernel of a library with it: a GiB more.
  const std::string_view loading =
      d.context.eager_loading ? "modules loaded eagerly: CUDA < 11.7 or torch < 1.13" : "modules loaded lazily";
  switch (d.context_from) {
    case memscale::context_source::measured:
      out += fmt::format("  context   {}  as given (--context-memory)\n", size_and_bytes(ctx));
      break;
    case memscale::context_source::flat:
      out += fmt::format("  context   {}  CUDA context, flat (no GPU with SM figures named; {})\n", size_and_bytes(ctx),
                         loading);
      break;
    case memscale::context_source::model:
      out += fmt::format("  context   {}  CUDA context {} ({} SMs x {} threads) + kernels {} ({}){}{}\n",
                         size_and_bytes(ctx), size_text(d.context.base), gpu->multiprocessors,
                         gpu->max_threads_per_multiprocessor, size_text(d.context.kernels), loading,
                         d.context.communication.value != 0 ? " + NCCL " + size_text(d.context.communication) : "",
                         d.context.other.value != 0 ? " + cuBLAS workspace " + size_text(d.context.other) : "");
      break;
  }
  out += fmt::format("  device    {}  nvidia-smi: reserved + context\n", size_and_bytes(d.device));
  if (v == nullptr) return out;
  const memscale::device_fit& f = v->point;
  out += fmt::format("  at the budget {}: point estimate {} ({})\n", size_text(f.budget), f.fits ? "fits" : "does not fit",
                     fit_reason(f));
  out += fmt::format("  verdict with the band {:+.1f}% .. {:+.1f}% ({}, {}{}): {}", v->band.low * 100.0, v->band.high * 100.0,
                     memscale::to_string(v->band.of), memscale::to_string(v->band.quantity),
                     v->band.measured ? "" : ", no measurement: policy", memscale::to_string(v->v));
  if (v->v == memscale::verdict::borderline && v->at_budget <= f.budget && f.fits)
    out += fmt::format(" (likely fits: estimate {}{}, could reach {:.2f}; watch max_memory_reserved in the first steps, "
                       "expandable_segments:True, {})",
                       size_text(v->at_budget), f.basis == memscale::fit_basis::capped_replay ? " with the cache released" : "",
                       in_size_unit(v->range.high), smaller_run);
  out += "\n";
  return out;
}

std::string allocator_text(const memscale::model_spec& model, const memscale::training_spec& run,
                           const memscale::gpu_spec* gpu, const std::string& alloc_conf, memscale::bytes context_memory,
                           std::optional<memscale::bytes> budget) {
  std::string out = fmt::format("\nsoftware       {}\n", memscale::json_io::software_text(run));
  if (run.device != memscale::device_kind::cuda) return out;
  const memscale::device_options o = memscale::json_io::device_options_of(alloc_conf, context_memory);
  const memscale::device_estimate d = memscale::estimate_on_device(model, run, gpu, o);
  const device_figures figures{.fallback = d.fallback, .tensor = d.tensor, .reserved = d.reserved, .device = d.device,
                               .context = d.context, .context_from = d.context_from};
  if (!budget) return out + device_figures_text(figures, gpu, alloc_conf, "setup and two steps", nullptr, "");
  const memscale::device_verdict v = memscale::verdict_on_device(model, run, d, *budget, o);
  return out + device_figures_text(figures, gpu, alloc_conf, "setup and two steps", &v,
                                   "a smaller micro-batch with more accumulation");
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

std::string family_list_text() {
  std::string out;
  for (const auto& f : memscale::json_io::hf::families) {
    std::string line = fmt::format("{:<18} {:<12} {}", f.model_type, f.read != nullptr ? "config.json" : "",
                                   f.records.defaults != nullptr ? "records" : "");
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  }
  return out;
}

nlohmann::json family_list_json() {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& f : memscale::json_io::hf::families)
    list.push_back({{"model_type", std::string(f.model_type)},
                    {"config_json", f.read != nullptr},
                    {"records", f.records.defaults != nullptr}});
  return list;
}

std::string gpu_list_text() {
  std::string out;
  for (const auto& g : memscale::gpu_catalog)
    out += fmt::format("{:<16} {:<36} {:>10}  bf16 {:<3}  {:>3} {:<9}  ({})\n", g.name, g.label, size_text(g.memory),
                       g.bf16 ? "yes" : "no", g.multiprocessors,
                       g.vendor == memscale::gpu_vendor::amd     ? "CUs"
                       : g.vendor == memscale::gpu_vendor::apple ? "GPU cores"
                                                                 : "SMs",
                       memscale::to_string(g.memory_from));
  return out;
}

nlohmann::json gpu_list_json() {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& g : memscale::gpu_catalog)
    list.push_back({{"name", std::string(g.name)},
                    {"label", std::string(g.label)},
                    {"memory", g.memory.value},
                    {"memory_from", std::string(memscale::to_string(g.memory_from))},
                    {"bf16", g.bf16},
                    {"vendor", std::string(memscale::to_string(g.vendor))},
                    {"multiprocessors", g.multiprocessors},
                    {"max_threads_per_multiprocessor", g.max_threads_per_multiprocessor}});
  return list;
}

namespace {

std::string techniques_text(memscale::technique_set set) {
  std::string out;
  for (const auto t : memscale::all_techniques) {
    if (!set.has(t)) continue;
    if (!out.empty()) out += ", ";
    out += memscale::to_string(t);
  }
  return out.empty() ? "-" : out;
}

// "-20.5% .. +12.5% (gpu_published, device)": the class and the quantity it bounds.
std::string band_text(const memscale::error_band& b) {
  return fmt::format("{:+.1f}% .. {:+.1f}% ({}, {}{})", b.low * 100.0, b.high * 100.0, memscale::to_string(b.of),
                     memscale::to_string(b.quantity), b.measured ? "" : ", no measurement");
}

// What the answer changes in the run: one line, or empty when nothing changes.
std::string changes_text(const memscale::plan_result& plan) { return memscale::json_io::plan_changes_text(plan); }

}  // namespace

std::string plan_text(const memscale::gpu_spec& gpu, const memscale::plan_result& plan) {
  constexpr std::size_t bar_width = 30;
  std::string out = "\n";
  const std::string_view unit = size_unit_label();
  out += fmt::format("Plan on {} (budget {} = VRAM {} x (1 - {:.2f}))\n", gpu.label, size_text(plan.budget),
                     size_text(plan.vram), plan.headroom);
  out += fmt::format("  memory pressure {:.2f} (unoptimized peak {} / VRAM; the allocator section's device figure)\n",
                     plan.pressure, size_text(plan.unoptimized_peak));
  out += fmt::format("  {:<13} {:>10}  {:<{}}  {:>10}  {:<12}  {:<13} {:>10}  {:>12}\n", "mode", fmt::format("peak {}", unit),
                     "of VRAM", bar_width, fmt::format("up to {}", unit), "verdict", "recompute", "transfer s",
                     fmt::format("host RAM {}", unit));
  for (const auto& m : plan.modes) {
    const double share = memscale::ratio(m.peak, plan.vram);
    const auto filled = static_cast<std::size_t>(std::min(share, 1.0) * static_cast<double>(bar_width) + 0.5);
    const std::string recompute = m.cost.recompute_fraction > 0.0 ? "≈ +1 forward" : "-";
    out += fmt::format("  {:<13} {:>10.2f}  {:<{}}  {:>10.2f}  {:<12}  {:<13} {:>10.2f}  {:>12.2f}\n",
                       memscale::to_string(m.m), in_size_unit(m.peak), std::string(filled, '#'), bar_width,
                       in_size_unit(m.range.high), memscale::to_string(m.v), recompute, m.cost.transfer_seconds,
                       in_size_unit(m.cost.host_memory));
  }
  out += "\n  what each mode switches on (and the error band of its class of run):\n";
  for (const auto& m : plan.modes)
    out += fmt::format("  {:<13} {}; precision {}, optimizer {}; band {}\n", memscale::to_string(m.m),
                       techniques_text(m.switched_on), m.run.prec, m.run.optimizer, band_text(m.band));
  if (!gpu.bf16)
    out += fmt::format("  the {} has no bf16 arithmetic: modes that switch to 16-bit precision use fp16\n", gpu.label);
  if (plan.mode_order_inverted)
    out += fmt::format("  note: a more aggressive mode needs more memory than a gentler one here ({})\n",
                       plan.why_order_inverts);
  // Components of each mode's peak (tensor bytes) as stacked bars: P parameters,
  // G gradients, O optimizer state, A activations, W workspace.
  out += fmt::format("\n  components at each mode's peak ({}; bar: P params, G grads, O optimizer, A activations, "
                     "W workspace; full width = VRAM)\n", unit);
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
                       in_size_unit(b.parameters), in_size_unit(b.gradients), in_size_unit(b.optimizer),
                       in_size_unit(b.activations), in_size_unit(b.workspace), memscale::to_string(m.at), bar);
  }
  out += fmt::format("Verdict: {} (the request as given, in its best mode; \"fits\" only when the band's upper end is within the budget)\n",
                     memscale::to_string(plan.v));
  out += fmt::format("Chosen: {} — {} [{}]\n",
                     plan.has_chosen_mode() ? std::string(memscale::to_string(plan.chosen)) : "nothing",
                     plan.reason, memscale::to_string(plan.status));
  out += switch_on_text(plan);
  out += fmt::format("  largest micro-batch in any mode: {}{}\n", plan.max_micro_batch,
                     plan.max_micro_batch > 0 ? fmt::format(" ({})", memscale::to_string(plan.max_micro_batch_mode))
                                              : std::string());
  const std::string changes = changes_text(plan);
  if (!changes.empty()) out += fmt::format("  changes: {}\n", changes);
  if (plan.status == memscale::plan_status::parameter_offload)
    out += fmt::format("  aggressive + parameters streamed from the host: peak {} (up to {:.2f}), host RAM "
                       "{}, {:.2f} s of transfers per step\n",
                       size_text(plan.parameter_offload.peak), in_size_unit(plan.parameter_offload.range.high),
                       size_text(plan.parameter_offload.cost.host_memory), plan.parameter_offload.cost.transfer_seconds);
  if (plan.status == memscale::plan_status::cheaper_levers)
    out += fmt::format("  with the levers: peak {} (up to {:.2f}), {}; {:.0f} more forward per step, no host traffic\n",
                       size_text(plan.lever_plan.peak), in_size_unit(plan.lever_plan.range.high),
                       plan.lever_plan.fits ? "fits" : "likely fits", plan.lever_plan.cost.recompute_fraction);
  if (plan.next_step != memscale::advice::none)
    out += fmt::format("  next step: {}\n", memscale::to_string(plan.next_step));
  return out;
}

std::string levers_text(const memscale::model_spec& model, const memscale::gpu_spec& gpu, const std::string& alloc_conf,
                        memscale::bytes context_memory, const memscale::plan_result& plan) {
  const memscale::lever_list& levers = plan.levers;
  if (levers.count == 0) return {};
  std::string out = "  cheaper levers before streaming parameters (each on top of the ones above; no host traffic):\n";
  for (std::size_t i = 0; i < levers.count; ++i) {
    const memscale::lever_option& l = levers.items[i];
    out += fmt::format("    + {:<20} peak {:>9} (up to {:.2f})  {}\n", memscale::to_string(l.what), size_text(l.peak),
                       in_size_unit(l.range.high), memscale::to_string(l.v));
  }
  if (!levers.any_likely()) return out;
  // What the levers save the run from: the planner's fallback without them.
  const std::string instead =
      plan.parameter_offload.fits
          ? fmt::format("streaming parameters ({:.2f} s of transfers per step)", plan.parameter_offload.cost.transfer_seconds)
      : plan.max_seq_len > 0 ? fmt::format("a sequence of {} tokens", plan.max_seq_len)
                             : std::string("a smaller model or more GPUs");
  const memscale::lever_option& advised = levers.advised();
  if (advised.v == memscale::verdict::fits) {
    out += fmt::format("  advice: switch on the levers up to {} (fits: peak {}, up to {:.2f}) rather than {}\n",
                       memscale::to_string(advised.what), size_text(advised.peak), in_size_unit(advised.range.high),
                       instead);
    return out;
  }
  out += fmt::format("  advice: switch on the levers up to {}: likely fits, estimate {}, could reach {:.2f} ({}); "
                     "watch the first steps' max_memory_reserved and set expandable_segments:True",
                     memscale::to_string(advised.what), size_text(advised.peak), in_size_unit(advised.range.high),
                     advised.band.measured ? "the measured band of its class" : "an unmeasured path: the policy band");
  if (advised.run.micro_batch > 1) out += ", and keep a smaller micro-batch with more accumulation at hand";
  if (levers.any_fits()) {
    const memscale::lever_option& safe = levers.items[levers.first_fitting];
    out += fmt::format("; if it runs close, the levers up to {} fit even at the band's upper end (peak {}, up to {:.2f})",
                       memscale::to_string(safe.what), size_text(safe.peak), in_size_unit(safe.range.high));
  }
  out += fmt::format("; rather than {}\n", instead);
  // Whether the tensors or the allocator's fragmentation is the risk: the advised run replayed
  // through the caching allocator with the budget as the cap.
  if (advised.run.device == memscale::device_kind::cuda) {
    const memscale::device_options o = memscale::json_io::device_options_of(alloc_conf, context_memory);
    const memscale::device_estimate d = memscale::estimate_on_device(model, advised.run, &gpu, o);
    const memscale::device_verdict v = memscale::verdict_on_device(model, advised.run, d, plan.budget, o);
    out += fmt::format("  that run through the caching allocator: device {}, at the budget {} ({}); with the band "
                       "{:+.1f}% .. {:+.1f}% ({}): {}\n",
                       size_text(d.device), v.point.fits ? "fits" : "does not fit", fit_reason(v.point),
                       v.band.low * 100.0, v.band.high * 100.0, memscale::to_string(v.band.of), memscale::to_string(v.v));
  }
  return out;
}

nlohmann::json plan_json(const memscale::plan_result& plan) { return memscale::json_io::plan_report_json(plan); }

}  // namespace memscale_plan
