// memscale-plan: the multi-GPU commands (see cluster.hpp).
#include "cluster.hpp"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "memscale/cluster_planner.hpp"
#include "memscale/json/emit_accelerate.hpp"
#include "memscale/json/emit_deepspeed.hpp"
#include "memscale/json/report.hpp"
#include "memscale/parallel/per_gpu.hpp"
#include "output.hpp"
#include "units.hpp"

namespace memscale_plan {
namespace {

using memscale::bytes;

// A size in the --units unit (units.hpp).
std::string gib(bytes b) { return size_text(b); }

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
          .offload_activations = opt.run.offload_activations, .host_memory_per_node = c.host_memory};
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
          {"per_gpu", {{"tensor", e.peak.tensor.value},
                       {"reserved", e.peak.reserved.value},
                       {"device", e.peak.device.value},
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

std::string layout_text(const memscale::parallel_spec& p, const memscale::training_spec& r,
                        const memscale::per_gpu_estimate& e, bytes host_memory) {
  std::string s;
  s += "Layout: " + std::to_string(memscale::world_size(p)) + " GPUs (" + std::to_string(p.nodes) + " node" +
       (p.nodes > 1 ? "s" : "") + " x " + std::to_string(p.gpus_per_node) + "), " + std::string(to_string(p.engine)) +
       ", tp " + std::to_string(p.tp) + (p.sp ? " +sp" : "") + ", pp " + std::to_string(p.pp) + ", data-parallel " +
       std::to_string(e.data_parallel) + " (shards over " + std::to_string(e.shard) + "), offload " + offload_name(p) +
       "\n";
  s += "Global batch " + std::to_string(e.global_batch) + " = micro-batch " + std::to_string(r.micro_batch) +
       " x accumulation " + std::to_string(r.grad_accum) + " x " + std::to_string(e.data_parallel) +
       " data-parallel ranks; checkpointing " + std::string(memscale::to_string(r.ckpt)) + "\n";
  s += "Peak rank " + std::to_string(e.peak_rank) + " (" + std::string(e.peak_role) + "), per GPU:\n";
  const auto& b = e.peak.breakdown;
  s += "  parameters   " + gib(b.parameters) + "\n";
  s += "  gradients    " + gib(b.gradients) + "\n";
  s += "  optimizer    " + gib(b.optimizer) + "\n";
  s += "  activations  " + gib(b.activations) + "\n";
  s += "  workspace    " + gib(b.workspace) + "\n";
  s += "  tensor " + gib(e.peak.tensor) + ", reserved " + gib(e.peak.reserved) + ", device (nvidia-smi) " +
       gib(e.peak.device) + "\n";
  s += "Host memory per node: " + gib(e.host.per_node) + " (offloaded optimizer " + gib(e.host.optimizer) +
       ", parameters " + gib(e.host.parameters) + ", activations " + gib(e.host.activations) + "; model load " +
       gib(e.host.model_load) + ")";
  if (host_memory.value != 0) s += std::string(e.host.fits ? " fits " : " EXCEEDS ") + gib(host_memory);
  s += "\nTraffic per GPU per step: collectives " + gib(e.traffic.collectives) + ", host link " +
       gib(e.traffic.host_link) + "\n";
  return s;
}

std::string emit(const options& opt, const memscale::parallel_spec& p, const memscale::training_spec& r) {
  if (opt.cluster.emit == emit_format::deepspeed) return memscale::json_io::emit_deepspeed_config(r, p).dump(2) + "\n";
  return memscale::json_io::emit_accelerate_fsdp_config(r, p, layer_class_of(opt.model));
}

}  // namespace

std::string run_cluster(const options& opt) {
  const auto& c = opt.cluster;
  if (c.engine) {
    const memscale::parallel_spec p = layout_of(opt, *c.engine);
    const memscale::per_gpu_estimate e = memscale::estimate_per_gpu(opt.model, opt.run, p);
    if (c.emit != emit_format::none) return emit(opt, p, opt.run);
    if (opt.json) {
      nlohmann::json j = {{"model", std::string(opt.model.name)}, {"run", run_to_json(opt.run)},
                          {"layout", layout_json(p, opt.run, e)}};
      if (!opt.gpu.empty()) {
        const auto gpu = *memscale::find_gpu(opt.gpu);
        j["gpu"] = std::string(gpu.name);
        j["fits"] = e.peak.device <= memscale::budget_of(gpu, {.headroom = opt.headroom.value_or(memscale::default_headroom)}) &&
                    e.host.fits;
      }
      return j.dump(2) + "\n";
    }
    return layout_text(p, opt.run, e, c.host_memory);
  }
  if (opt.gpu.empty())
    throw usage_error("--gpus needs --strategy (a per-GPU estimate) or --gpu NAME (the cluster planner chooses)");
  const auto gpu = *memscale::find_gpu(opt.gpu);
  if (c.gpus % c.nodes != 0)
    throw usage_error("--gpus " + std::to_string(c.gpus) + " must be a multiple of --nodes " + std::to_string(c.nodes));
  const memscale::cluster_spec cluster{.gpu = gpu, .gpus_per_node = c.gpus / c.nodes, .nodes = c.nodes,
                                       .host_memory_per_node = c.host_memory};
  const double headroom = opt.headroom.value_or(memscale::default_headroom);
  const auto plan = std::make_unique<memscale::cluster_plan>(memscale::plan_cluster(
      opt.model, opt.run, cluster,
      {.global_batch = c.global_batch,
       .headroom = headroom,
       // ds_config.json and Accelerate's FSDP config carry no tensor or pipeline degree
       // (those need Megatron-DeepSpeed / a PipelineModule): an emitted plan uses neither.
       .allow_tensor_parallel = c.emit == emit_format::none,
       .allow_pipeline_parallel = c.emit == emit_format::none,
       // An emitted config must be one the engine runs: only its own strategies are candidates.
       .strategies = c.emit == emit_format::deepspeed         ? memscale::deepspeed_strategies
                     : c.emit == emit_format::accelerate_fsdp ? memscale::fsdp_strategies
                                                              : std::uint8_t{0x7f}}));
  if (c.emit != emit_format::none) {
    if (!plan->found) throw usage_error("nothing fits this cluster, so there is no config to emit");
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
                        {"gpu", std::string(gpu.name)},       {"budget_per_gpu", plan->budget.value},
                        {"global_batch", plan->global_batch}, {"found", plan->found},
                        {"considered", considered},           {"not_listed", plan->skipped}};
    if (plan->found) j["chosen"] = layout_json(plan->best.layout, plan->best.run, plan->best.estimate);
    return j.dump(2) + "\n";
  }
  std::string s = "Cluster plan on " + std::string(gpu.label) + ": up to " + std::to_string(c.gpus) + " GPUs (" +
                  std::to_string(c.nodes) + " x " + std::to_string(c.gpus / c.nodes) + "), budget " + gib(plan->budget) +
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
                  gib(k.estimate.peak.device).c_str(), gib(k.estimate.host.per_node).c_str(),
                  k.fits() ? "yes" : (k.fits_gpu ? "host" : "no"), k.seconds());
    s += line;
  }
  if (plan->skipped > 0) s += "  (" + std::to_string(plan->skipped) + " more candidates not listed)\n";
  if (!plan->found) return s + "Nothing fits: add GPUs or nodes, host memory, or shorten the sequence.\n";
  s += "Chosen:\n" + layout_text(plan->best.layout, plan->best.run, plan->best.estimate, c.host_memory);
  return s;
}

}  // namespace memscale_plan
