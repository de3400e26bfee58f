// memscale-plan --inference (see inference.hpp).
#include "inference.hpp"

#include <fmt/format.h>

#include "memscale/fmt.hpp"
#include "memscale/json.hpp"
#include "output.hpp"
#include "units.hpp"

namespace memscale_plan {
namespace {

// The phase's figures; its reserved and device by the rounding rule only when no caching-allocator
// section follows (`with_rounding`).
std::string peak_block(const memscale::inference_peak& p, bool with_rounding) {
  const memscale::inference_breakdown& b = p.breakdown;
  std::string out;
  out += fmt::format("  weights     {}\n", size_and_bytes(b.weights));
  out += fmt::format("  KV cache    {}\n", size_and_bytes(b.kv_cache));
  out += fmt::format("  activations {}\n", size_and_bytes(b.activations));
  out += fmt::format("  logits      {}\n", size_and_bytes(b.logits));
  out += fmt::format("  workspace   {}\n", size_and_bytes(b.workspace));
  out += fmt::format("  tensor      {}  torch.cuda.max_memory_allocated\n", size_and_bytes(p.tensor));
  if (!with_rounding) return out;
  out += fmt::format("  reserved    {}  torch.cuda.max_memory_reserved\n", size_and_bytes(p.reserved));
  out += fmt::format("  device      {}  nvidia-smi: reserved + CUDA context\n", size_and_bytes(p.device));
  return out;
}

nlohmann::json spec_json(const memscale::inference_spec& s) {
  const bool quantized = s.cache == memscale::kv_cache_kind::quantized;
  nlohmann::json j{{"batch", s.batch},
          {"context", s.context},
          {"new_tokens", s.new_tokens},
          {"dtype", std::string(memscale::to_string(s.compute))},
          {"weights", std::string(memscale::to_string(s.weights))},
          {"kv_dtype", quantized ? "int" + std::to_string(s.kv_bits) : std::string(memscale::to_string(s.kv))},
          {"kv_cache", std::string(memscale::to_string(s.cache))},
          {"attention", std::string(memscale::to_string(s.attention))}};
  if (s.loop == memscale::generate_loop::gpt_fast) j["loop"] = std::string(memscale::to_string(s.loop));
  if (quantized) {
    j["kv_quant_backend"] = std::string(memscale::to_string(s.kv_backend));
    j["kv_group_size"] = s.kv_group;
    j["kv_residual_length"] = s.kv_residual;
  }
  return j;
}

// What the KV-cache line says about the cache's storage: its dtype, or a quantized cache's packing.
std::string cache_storage_text(const memscale::inference_spec& s) {
  if (s.cache == memscale::kv_cache_kind::quantized)
    return fmt::format("int{} ({}, groups of {}, the last tokens up to {} in {})", s.kv_bits,
                       memscale::to_string(s.kv_backend), s.kv_group, s.kv_residual, memscale::to_string(s.compute));
  return std::string(memscale::to_string(s.kv));
}

}  // namespace

std::string inference_text(const memscale::model_spec& model, const memscale::inference_spec& spec,
                           const memscale::inference_result& result, const memscale::inference_device_estimate* device,
                           const memscale::gpu_spec* gpu, const memscale::inference_plan* plan,
                           const std::string& alloc_conf) {
  std::string out;
  out += fmt::format("model          {} ({} parameters)\n", model.name, memscale::format_count(result.parameter_count));
  const std::string attention =
      spec.attention == memscale::attention_impl::sdpa
          ? fmt::format("sdpa ({} kernel)", memscale::to_string(memscale::attention_kernel_of(model, spec)))
          : std::string(memscale::to_string(spec.attention));
  out += fmt::format("inference      batch {} x context {} + {} new tokens, dtype {}, weights {}, attention {}\n",
                     spec.batch, spec.context, spec.new_tokens, memscale::to_string(spec.compute),
                     memscale::to_string(spec.weights), attention);
  if (spec.loop == memscale::generate_loop::gpt_fast)
    out += "generate()     gpt-fast generate.py (pytorch-labs/gpt-fast @ 32971d31), eager\n";
  out += fmt::format("KV cache       {} cache in {}: {} bytes per token, {} after the last token\n",
                     memscale::to_string(spec.cache), cache_storage_text(spec),
                     memscale::format_count(result.kv_bytes_per_token.value),
                     size_text(result.kv_cache_bytes));
  out += fmt::format("weights        {}\n", size_and_bytes(result.weight_bytes));
  out += fmt::format("software       {}\n\n", memscale::json_io::inference_software_text(model, spec));
  out += "prefill peak (the prompt's forward pass):\n" + peak_block(result.prefill, device == nullptr);
  if (spec.new_tokens > 1) out += "decode peak (one new token per step):\n" + peak_block(result.decode, device == nullptr);
  out += fmt::format("peak: {}\n", memscale::to_string(result.peak.at));
  if (device != nullptr)
    out += "\n" + device_figures_text({.fallback = device->fallback, .tensor = device->tensor,
                                        .reserved = device->reserved, .device = device->device,
                                        .context = device->context, .context_from = device->context_from},
                                       gpu, alloc_conf, "setup, the prefill and every decoding step",
                                       plan != nullptr ? &plan->verdict : nullptr, "a smaller batch");
  if (gpu != nullptr && plan != nullptr) {
    out += fmt::format("\nInference on {} (budget {} = VRAM {} x (1 - {:.2f}))\n", gpu->label, size_text(plan->budget),
                       size_text(plan->vram), plan->headroom);
    out += fmt::format("  device peak {}, memory pressure {:.2f}: {}\n", size_text(plan->device.device), plan->pressure,
                       verdict_words(plan->verdict.v));
    out += fmt::format("  largest batch at context {} (the band's upper end within the budget): {}\n", spec.context,
                       plan->max_batch);
    out += fmt::format("  largest context at batch {}: {}\n", spec.batch, plan->max_context);
  }
  return out;
}

nlohmann::json inference_json(const memscale::model_spec& model, const memscale::inference_spec& spec,
                              const memscale::inference_result& result,
                              const memscale::inference_device_estimate* device, const memscale::inference_plan* plan,
                              const std::string& alloc_conf) {
  nlohmann::json j = memscale::json_io::inference_to_json(result);
  j["model"] = std::string(model.name);
  j["inference"] = spec_json(spec);
  j["inference"]["software"] = memscale::json_io::inference_software_json(model, spec);
  if (plan != nullptr) {
    j["plan"] = {{"fits", plan->fits},         {"verdict", std::string(memscale::to_string(plan->verdict.v))},
                 {"budget", plan->budget.value}, {"vram", plan->vram.value},
                 {"pressure", plan->pressure}, {"max_batch", plan->max_batch},
                 {"max_context", plan->max_context}};
  }
  if (device != nullptr)
    j["allocator"] = memscale::json_io::allocator_json(*device, alloc_conf, plan != nullptr ? &plan->verdict : nullptr);
  return j;
}

}  // namespace memscale_plan

#include <optional>

#include "args.hpp"
#include "option_groups.hpp"
#include "pictures.hpp"

namespace memscale_plan {

std::string inference_command(const options& opt) {
  memscale::inference_spec spec = opt.inference.spec;
  spec.batch = opt.run.micro_batch;
  spec.attention = opt.run.attention;
  if (opt.inference.gpt_fast) {
    // gpt-fast's model.py KVCache is static (setup_caches); nothing else to choose.
    if (spec.cache != memscale::kv_cache_kind::dynamic && spec.cache != memscale::kv_cache_kind::static_preallocated)
      throw usage_error("--kv-cache " + std::string(memscale::to_string(spec.cache)) +
                        " does not apply to --framework gpt-fast: its cache is static");
    spec.cache = memscale::kv_cache_kind::static_preallocated;
    spec.loop = memscale::generate_loop::gpt_fast;
  }
  spec.kv = spec.compute;
  if (opt.inference.kv_dtype_given) {
    if (spec.cache == memscale::kv_cache_kind::quantized)
      spec.kv_bits = memscale::json_io::parse_kv_bits(opt.inference.kv_dtype, "--kv-dtype");
    else
      spec.kv = memscale::json_io::parse_dtype(opt.inference.kv_dtype, "--kv-dtype");
  }
  if (!opt.stack.empty()) memscale::json_io::read_inference_stack(opt.stack, spec, "--stack");
  if (spec.cache == memscale::kv_cache_kind::sliding_window && spec.sliding_window == 0)
    throw usage_error("--kv-cache sliding_window needs a model with a sliding window (got " +
                      in_quotes(std::string(opt.model.name)) + ")");
  std::optional<memscale::gpu_spec> gpu = opt.custom_gpu;  // --gpu-memory
  std::optional<memscale::inference_plan> plan;
  if (!gpu && !opt.gpu.empty()) gpu = *memscale::find_gpu(opt.gpu);  // checked by parse_args
  if (gpu) {
    spec.blas_workspace = gpu->cublas_workspace;
    plan = memscale::plan_inference(opt.model, spec, *gpu,
                                    memscale::plan_options{.headroom = opt.headroom.value_or(memscale::default_headroom)},
                                    memscale::json_io::device_options_of(opt.alloc_conf, opt.context_memory));
  }
  // On a CUDA device the caching allocator's figures: the plan's, or without a GPU with the flat context.
  std::optional<memscale::inference_device_estimate> device;
  if (plan)
    device = plan->device;
  else if (spec.device == memscale::device_kind::cuda)
    device = memscale::estimate_inference_on_device(opt.model, spec, nullptr,
                                                    memscale::json_io::device_options_of(opt.alloc_conf, opt.context_memory));
  const memscale::inference_result result = device ? device->tensors : memscale::estimate_inference(opt.model, spec);
  const memscale::inference_plan* p = plan ? &*plan : nullptr;
  const memscale::inference_device_estimate* d = device ? &*device : nullptr;
  if (!opt.inference.svg.empty())
    write_text_file("--svg", opt.inference.svg, inference_svg(opt.model, spec, result, p));
  if (!opt.inference.svg_batch.empty())
    write_text_file("--svg-batch", opt.inference.svg_batch, inference_cliff_svg(opt.model, spec, *gpu, *plan,
                                        memscale::json_io::device_options_of(opt.alloc_conf, opt.context_memory)));
  if (opt.json) return inference_json(opt.model, spec, result, d, p, opt.alloc_conf).dump(2) + "\n";
  return inference_text(opt.model, spec, result, d, gpu ? &*gpu : nullptr, p, opt.alloc_conf);
}

}  // namespace memscale_plan
