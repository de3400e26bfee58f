// memscale-plan: the multi-GPU commands (see cluster.hpp).
#include "cluster.hpp"

#include <cstdio>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "memscale/cluster_planner.hpp"
#include "memscale/json.hpp"
#include "memscale/json/emit_accelerate.hpp"
#include "memscale/json/emit_deepspeed.hpp"
#include "memscale/json/report.hpp"
#include "memscale/parallel/per_gpu.hpp"
#include "emit_torchtune.hpp"
#include "output.hpp"
#include "units.hpp"

namespace memscale_plan {
namespace {

using memscale::bytes;

// The GPU a layout is judged on: --gpu NAME or --gpu-memory SIZE.
std::optional<memscale::gpu_spec> gpu_of(const options& opt) {
  if (opt.custom_gpu) return opt.custom_gpu;
  if (!opt.gpu.empty()) return memscale::find_gpu(opt.gpu);  // checked by parse_args
  return std::nullopt;
}

// What a layout needs against one GPU's budget (memory x (1 - headroom)).
struct verdict {
  memscale::gpu_spec gpu{};
  bytes budget{};
  bool fits_gpu = false;
  bool fits_host = false;
  [[nodiscard]] bool fits() const { return fits_gpu && fits_host; }
};

verdict verdict_of(const memscale::gpu_spec& gpu, double headroom, const memscale::per_gpu_estimate& e) {
  verdict v{.gpu = gpu, .budget = memscale::budget_of(gpu, {.headroom = headroom})};
  v.fits_gpu = e.peak.device <= v.budget;
  v.fits_host = e.host.fits;
  return v;
}

std::string verdict_text(const verdict& v, const memscale::per_gpu_estimate& e, bytes host_memory) {
  std::string s = "Verdict on " + std::string(v.gpu.label) + " (budget " + size_text(v.budget) + " per GPU = " +
                  size_text(v.gpu.memory) + " x (1 - headroom)): ";
  if (v.fits()) return s + "fits\n";
  s += "does not fit:";
  if (!v.fits_gpu) s += " " + size_text(e.peak.device) + " per GPU is over the budget";
  if (!v.fits_host)
    s += std::string(v.fits_gpu ? "" : ";") + " " + size_text(e.host.per_node) + " of host memory per node is over " +
         size_text(host_memory);
  return s + "\n";
}

// --global-batch with --strategy: the layout's global batch is batch x grad-accum x data-parallel
// ranks; a different figure cannot be kept, so it is refused rather than ignored.
void check_global_batch(const options& opt, const memscale::per_gpu_estimate& e) {
  const auto wanted = opt.cluster.global_batch;
  if (wanted == 0 || wanted == e.global_batch) return;
  throw usage_error("--global-batch " + std::to_string(wanted) + " is not --batch " + std::to_string(opt.run.micro_batch) +
                    " x --grad-accum " + std::to_string(opt.run.grad_accum) + " x " + std::to_string(e.data_parallel) +
                    " data-parallel ranks = " + std::to_string(e.global_batch) +
                    " (with --strategy the layout is given; leave out --strategy to let the planner split " +
                    std::to_string(wanted) + ")");
}

// transformers' block class for FSDP's transformer auto-wrap (the models' _no_split_modules).
std::string_view layer_class_of(const memscale::model_spec& m) {
  const std::string_view n = m.name;
  if (n.rfind("gpt2", 0) == 0) return "GPT2Block";
  if (n.rfind("bert", 0) == 0) return "BertLayer";
  if (n.rfind("llama", 0) == 0) return "LlamaDecoderLayer";
  if (n.rfind("mistral", 0) == 0) return "MistralDecoderLayer";
  if (n.rfind("mixtral", 0) == 0) return "MixtralDecoderLayer";
  if (n.rfind("qwen2", 0) == 0) return "Qwen2DecoderLayer";
  return "TransformerBlock";
}

memscale::parallel_spec layout_of(const options& opt, memscale::strategy engine) {
  const auto& c = opt.cluster;
  if (c.gpus % c.nodes != 0)
    throw usage_error("--gpus " + std::to_string(c.gpus) + " must be a multiple of --nodes " + std::to_string(c.nodes));
  return {.engine = engine, .gpus_per_node = c.gpus / c.nodes, .nodes = c.nodes, .tp = c.tp, .pp = c.pp, .sp = c.sp,
          .offload_optimizer = opt.run.offload_optimizer, .offload_parameters = opt.run.offload_parameters,
          .offload_activations = opt.run.offload_activations, .host_memory_per_node = c.host_memory,
          .deepspeed = {.precision = c.ds_precision}};
}

std::string offload_name(const memscale::parallel_spec& p) {
  std::string s;
  if (p.offload_optimizer) s += "optimizer";
  if (p.offload_parameters) s += s.empty() ? "params" : "+params";
  if (p.offload_activations) s += s.empty() ? "activations" : "+activations";
  return s.empty() ? "none" : s;
}

nlohmann::json layout_json(const memscale::parallel_spec& p, const memscale::training_spec& r,
                           const memscale::per_gpu_estimate& e) {
  using memscale::json_io::breakdown_to_json;
  return {{"gpus", memscale::world_size(p)},
          {"nodes", p.nodes},
          {"strategy", std::string(to_string(p.engine))},
          {"tp", p.tp},
          {"pp", p.pp},
          {"sp", p.sp},
          {"offload", offload_name(p)},
          {"data_parallel", e.data_parallel},
          {"micro_batch", r.micro_batch},
          {"grad_accum", r.grad_accum},
          {"global_batch", e.global_batch},
          {"checkpointing", std::string(memscale::to_string(r.ckpt))},
          {"peak_rank", e.peak_rank},
          {"peak_role", std::string(e.peak_role)},
          {"no_sync", r.no_sync},
          {"per_gpu", {{"tensor", e.peak.tensor.value},
                       {"reserved", e.peak.reserved.value},
                       {"device", e.peak.device.value},
                       {"gathered_parameters", e.gathered.value},
                       {"breakdown", breakdown_to_json(e.peak.breakdown)}}},
          {"host_per_node", {{"bytes", e.host.per_node.value},
                             {"optimizer", e.host.optimizer.value},
                             {"parameters", e.host.parameters.value},
                             {"activations", e.host.activations.value},
                             {"model_load", e.host.model_load.value},
                             {"fits", e.host.fits}}},
          {"traffic_per_gpu_per_step", {{"collectives", e.traffic.collectives.value},
                                        {"host_link", e.traffic.host_link.value}}}};
}

// The layout's JSON with the DeepSpeed engine precision, echoed only where it was given.
nlohmann::json layout_json_of(const memscale::parallel_spec& p, const memscale::training_spec& r,
                              const memscale::per_gpu_estimate& e) {
  nlohmann::json j = layout_json(p, r, e);
  if (p.deepspeed.precision != memscale::engine_precision::none)
    j["deepspeed_precision"] = std::string(to_string(p.deepspeed.precision));
  return j;
}

// Where DeepSpeed's 16-bit engine keeps its fp32 master: ZeRO's partition, or a stage-0 wrapper.
std::string engine_wrapper_text(const memscale::parallel_spec& p) {
  if (p.engine != memscale::strategy::zero0) return "(fp32 master partition)";
  return p.deepspeed.precision == memscale::engine_precision::bf16
             ? "without ZeRO (BF16_Optimizer: fp32 master partition, whole fp32 gradient buffer)"
             : "without ZeRO (FP16_Optimizer: whole fp32 master)";
}

std::string layout_text(const memscale::parallel_spec& p, const memscale::training_spec& r,
                        const memscale::per_gpu_estimate& e, bytes host_memory) {
  std::string s;
  s += "Layout: " + std::to_string(memscale::world_size(p)) + " GPUs (" + std::to_string(p.nodes) + " node" +
       (p.nodes > 1 ? "s" : "") + " x " + std::to_string(p.gpus_per_node) + "), " + std::string(to_string(p.engine)) +
       ", tp " + std::to_string(p.tp) + (p.sp ? " +sp" : "") + ", pp " + std::to_string(p.pp) + ", data-parallel " +
       std::to_string(e.data_parallel) + " (shards over " + std::to_string(e.shard) + "), offload " + offload_name(p) +
       (p.deepspeed.precision == memscale::engine_precision::none
            ? std::string()
            : ", DeepSpeed " + std::string(to_string(p.deepspeed.precision)) + " engine " + engine_wrapper_text(p)) +
       "\n";
  s += "Global batch " + std::to_string(e.global_batch) + " = micro-batch " + std::to_string(r.micro_batch) +
       " x accumulation " + std::to_string(r.grad_accum) + " x " + std::to_string(e.data_parallel) +
       " data-parallel ranks; checkpointing " + std::string(memscale::to_string(r.ckpt)) +
       (r.grad_accum > 1 ? (r.no_sync ? "; micro-steps under no_sync" : "; gradients reduced every micro-step") : "") +
       "\n";
  s += "Peak rank " + std::to_string(e.peak_rank) + " (" + std::string(e.peak_role) + "), per GPU:\n";
  const auto& b = e.peak.breakdown;
  s += "  parameters   " + size_text(b.parameters);
  if (e.gathered.value != 0) s += " (" + size_text(e.gathered) + " of them gathered from the other ranks)";
  s += "\n";
  s += "  gradients    " + size_text(b.gradients) + "\n";
  s += "  optimizer    " + size_text(b.optimizer) + "\n";
  s += "  activations  " + size_text(b.activations) + "\n";
  s += "  workspace    " + size_text(b.workspace) + "\n";
  s += "  tensor " + size_text(e.peak.tensor) + ", reserved " + size_text(e.peak.reserved) + ", device (nvidia-smi) " +
       size_text(e.peak.device) + "\n";
  s += "Host memory per node: " + size_text(e.host.per_node) + " (offloaded optimizer " + size_text(e.host.optimizer) +
       ", parameters " + size_text(e.host.parameters) + ", activations " + size_text(e.host.activations) + "; model load " +
       size_text(e.host.model_load) + ")";
  if (host_memory.value != 0) s += std::string(e.host.fits ? " fits " : " EXCEEDS ") + size_text(host_memory);
  s += "\nTraffic per GPU per step: collectives " + size_text(e.traffic.collectives) + ", host link " +
       size_text(e.traffic.host_link) + "\n";
  return s;
}

std::string emit(const options& opt, const memscale::parallel_spec& p, const memscale::training_spec& r) {
  if (opt.cluster.emit == emit_format::deepspeed) return memscale::json_io::emit_deepspeed_config(r, p).dump(2) + "\n";
  return memscale::json_io::emit_accelerate_fsdp_config(r, p, layer_class_of(opt.model));
}

}  // namespace

void check_multi_gpu_options(const options& opt) {
  const auto& c = opt.cluster;
  check_torchtune_emit(opt);  // emit_torchtune.cpp: one GPU, --framework torchtune
  if (c.gpus == 0) {
    const char* given = c.engine                          ? "--strategy"
                        : c.emit != emit_format::none && c.emit != emit_format::torchtune ? "--emit"
                        : c.tp_given                      ? "--tp"
                        : c.pp_given                      ? "--pp"
                        : c.nodes > 1                     ? "--nodes"
                        : c.sp                            ? "--sp"
                        : c.host_memory.value != 0        ? "--host-memory"
                        : c.global_batch != 0             ? "--global-batch"
                        : c.ds_precision != memscale::engine_precision::none ? "--ds-precision"
                        // lit-gpt's loop always accumulates under no_backward_sync (with_framework)
                        : opt.run.no_sync && opt.run.framework != memscale::framework_kind::litgpt
                            ? "--no-sync (run.no_sync)"
                                                          : nullptr;
    if (given != nullptr)
      throw usage_error(std::string(given) + " needs --gpus N: it describes a multi-GPU run" +
                        (opt.run.no_sync && !c.engine ? " (one GPU reduces no gradients)" : ""));
    return;
  }
  if (opt.vision.model)
    throw usage_error("--gpus estimates transformer models; vision models (" + std::string(opt.vision.model->name) +
                      ") are estimated on one GPU: leave out --gpus");
  if (opt.inference.enabled) throw usage_error("--gpus estimates training steps; --inference covers one GPU");
  if (!opt.inference.svg.empty() || !opt.inference.svg_batch.empty())
    throw usage_error(std::string(opt.inference.svg.empty() ? "--svg-batch" : "--svg") +
                      " draws a single-GPU plan; it cannot be combined with --gpus");
}

std::string run_cluster(const options& opt) {
  const auto& c = opt.cluster;
  const std::optional<memscale::gpu_spec> gpu = gpu_of(opt);
  const double headroom = opt.headroom.value_or(memscale::default_headroom);
  // ds_config.json and Accelerate's FSDP config carry no tensor or pipeline degree (those need
  // Megatron-DeepSpeed / a PipelineModule): a config for such a layout would run another one.
  if (c.emit != emit_format::none && (c.tp > 1 || c.pp > 1))
    throw usage_error("--emit writes a config without tensor or pipeline degrees: --tp and --pp must be 1 with --emit");
  if (c.engine) {
    const memscale::parallel_spec p = layout_of(opt, *c.engine);
    if (gpu) memscale::check_precision_support(opt.run.prec, *gpu);
    const memscale::per_gpu_estimate e = memscale::estimate_per_gpu(opt.model, opt.run, p);
    check_global_batch(opt, e);
    const std::optional<verdict> v = gpu ? std::optional(verdict_of(*gpu, headroom, e)) : std::nullopt;
    if (c.emit != emit_format::none) {
      // A config is written only for a layout that fits the GPU it was planned on.
      if (v && !v->fits())
        throw usage_error("no config written: the layout does not fit " + std::string(v->gpu.label) + " (" +
                          size_text(e.peak.device) + " per GPU against a budget of " + size_text(v->budget) +
                          (v->fits_host ? "" : "; host memory " + size_text(e.host.per_node) + " per node over " +
                                                   size_text(c.host_memory)) +
                          "); add GPUs, offload or checkpointing, or leave out --strategy to let the planner choose");
      return emit(opt, p, opt.run);
    }
    if (opt.json) {
      nlohmann::json j = {{"model", std::string(opt.model.name)}, {"run", run_to_json(opt.run)},
                          {"framework", memscale::json_io::framework_json(opt.run)},
                          {"layout", layout_json_of(p, opt.run, e)}};
      if (v) {
        j["gpu"] = std::string(v->gpu.name);
        j["budget_per_gpu"] = v->budget.value;
        j["fits_gpu"] = v->fits_gpu;
        j["fits_host"] = v->fits_host;
        j["fits"] = v->fits();
      }
      return j.dump(2) + "\n";
    }
    std::string s = layout_text(p, opt.run, e, c.host_memory);
    if (v) s += verdict_text(*v, e, c.host_memory);
    return s;
  }
  if (c.ds_precision != memscale::engine_precision::none)
    throw usage_error("--ds-precision needs --strategy zero0, zero1, zero2 or zero3: the cluster planner does not search "
                      "DeepSpeed's 16-bit engine");
  if (!gpu)
    throw usage_error("--gpus needs --strategy (a per-GPU estimate) or a GPU to plan on: --gpu NAME or --gpu-memory "
                      "SIZE (the cluster planner chooses)");
  if (c.gpus % c.nodes != 0)
    throw usage_error("--gpus " + std::to_string(c.gpus) + " must be a multiple of --nodes " + std::to_string(c.nodes));
  const memscale::cluster_spec cluster{.gpu = *gpu, .gpus_per_node = c.gpus / c.nodes, .nodes = c.nodes,
                                       .host_memory_per_node = c.host_memory};
  const auto plan = std::make_unique<memscale::cluster_plan>(memscale::plan_cluster(
      opt.model, opt.run, cluster,
      {.global_batch = c.global_batch,
       .headroom = headroom,
       // An emitted plan uses neither tensor nor pipeline parallelism (checked above).
       .allow_tensor_parallel = c.emit == emit_format::none,
       .allow_pipeline_parallel = c.emit == emit_format::none,
       // An emitted config must be one the engine runs: only its own strategies are candidates.
       .strategies = c.emit == emit_format::deepspeed         ? memscale::deepspeed_strategies
                     : c.emit == emit_format::accelerate_fsdp ? memscale::fsdp_strategies
                                                              : std::uint8_t{0x7f},
       // --tp / --pp fix the degrees every candidate uses.
       .tp = c.tp_given ? c.tp : 0,
       .pp = c.pp_given ? c.pp : 0}));
  const std::string skipped =
      plan->overflowed == 0 ? std::string()
                            : std::to_string(plan->overflowed) +
                                  " candidate layouts were too large to estimate (64-bit byte counts overflow) and were "
                                  "skipped";
  if (c.emit != emit_format::none) {
    if (!plan->found)
      throw usage_error("nothing fits this cluster, so there is no config to emit" +
                        (skipped.empty() ? std::string() : " (" + skipped + ")"));
    return emit(opt, plan->best.layout, plan->best.run);
  }
  if (opt.json) {
    nlohmann::json considered = nlohmann::json::array();
    for (std::size_t i = 0; i < plan->count; ++i) {
      const auto& k = plan->considered[i];
      auto j = layout_json(k.layout, k.run, k.estimate);
      j["fits_gpu"] = k.fits_gpu;
      j["fits_host"] = k.fits_host;
      j["collective_seconds"] = k.collective_seconds;
      j["host_link_seconds"] = k.host_link_seconds;
      considered.push_back(j);
    }
    nlohmann::json j = {{"model", std::string(opt.model.name)}, {"run", run_to_json(opt.run)},
                        {"framework", memscale::json_io::framework_json(opt.run)},
                        {"gpu", std::string(gpu->name)},      {"budget_per_gpu", plan->budget.value},
                        {"global_batch", plan->global_batch}, {"found", plan->found},
                        {"considered", considered},           {"not_listed", plan->skipped},
                        {"too_large_to_estimate", plan->overflowed}};
    if (plan->found) j["chosen"] = layout_json(plan->best.layout, plan->best.run, plan->best.estimate);
    return j.dump(2) + "\n";
  }
  std::string s = "Cluster plan on " + std::string(gpu->label) + ": up to " + std::to_string(c.gpus) + " GPUs (" +
                  std::to_string(c.nodes) + " x " + std::to_string(c.gpus / c.nodes) + "), budget " + size_text(plan->budget) +
                  " per GPU, global batch " + std::to_string(plan->global_batch) + "\n";
  s += "  gpus strategy      tp pp offload              ckpt micro x accum   per GPU      host/node    fits  comm+offload s\n";
  for (std::size_t i = 0; i < plan->count; ++i) {
    const auto& k = plan->considered[i];
    char line[256];
    std::snprintf(line, sizeof line, "  %4llu %-12s %3llu %2llu %-20s %-4s %5llu x %-5llu %12s %12s  %-5s %.2f\n",
                  static_cast<unsigned long long>(memscale::world_size(k.layout)),
                  std::string(to_string(k.layout.engine)).c_str(), static_cast<unsigned long long>(k.layout.tp),
                  static_cast<unsigned long long>(k.layout.pp), offload_name(k.layout).c_str(),
                  std::string(memscale::to_string(k.run.ckpt)).c_str(),
                  static_cast<unsigned long long>(k.run.micro_batch), static_cast<unsigned long long>(k.run.grad_accum),
                  size_text(k.estimate.peak.device).c_str(), size_text(k.estimate.host.per_node).c_str(),
                  k.fits() ? "yes" : (k.fits_gpu ? "host" : "no"), k.seconds());
    s += line;
  }
  if (plan->skipped > 0) s += "  (" + std::to_string(plan->skipped) + " more candidates not listed)\n";
  if (!skipped.empty()) s += "  (" + skipped + ")\n";
  if (!plan->found) return s + "Nothing fits: add GPUs or nodes, host memory, or shorten the sequence.\n";
  s += "Chosen:\n" + layout_text(plan->best.layout, plan->best.run, plan->best.estimate, c.host_memory);
  return s;
}

}  // namespace memscale_plan
