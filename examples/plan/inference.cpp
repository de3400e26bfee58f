// memscale-plan --inference (see inference.hpp).
#include "inference.hpp"

#include <fmt/format.h>

#include "memscale/fmt.hpp"
#include "memscale/json.hpp"
#include "memscale/json/inference_report.hpp"
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
          : spec.flash_attention_2 ? std::string("flash_attention_2")
                                   : std::string(memscale::to_string(spec.attention));
  out += fmt::format("inference      batch {} x context {} + {} new tokens, dtype {}, weights {}, attention {}\n",
                     spec.batch, spec.context, spec.new_tokens, memscale::to_string(spec.compute),
                     memscale::to_string(spec.weights), attention);
  if (spec.loop == memscale::generate_loop::gpt_fast)
    out += "generate()     gpt-fast generate.py (pytorch-labs/gpt-fast @ 32971d31), eager\n";
  if (spec.padded) out += "prompts        left-padded: every forward builds a (batch, 1, rows, keys) attention mask\n";
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
  spec.flash_attention_2 = opt.run.flash_attention_2;
  if (opt.inference.gpt_fast) {
    // gpt-fast's model.py KVCache is static (setup_caches); nothing else to choose.
    if (spec.cache != memscale::kv_cache_kind::dynamic && spec.cache != memscale::kv_cache_kind::static_preallocated)
      throw usage_error("--kv-cache " + std::string(memscale::to_string(spec.cache)) +
                        " does not apply to --framework gpt-fast: its cache is static");
    spec.cache = memscale::kv_cache_kind::static_preallocated;
    spec.loop = memscale::generate_loop::gpt_fast;
  }
  if (opt.inference.group_size_given && spec.weights != memscale::weight_format::gptfast_int4)
    throw usage_error("--group-size applies to --weights gptfast-int4 (got --weights " +
                      std::string(memscale::to_string(spec.weights)) + ")");
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
  if (!gpu && !opt.gpu.empty()) gpu = *memscale::find_gpu(opt.gpu);  // checked by parse_args
  // The library's report, as the web calculator's (memscale/json/inference_report.hpp).
  const memscale::json_io::inference_report report =
      memscale::json_io::report_inference(opt.model, spec, gpu, opt.headroom, opt.alloc_conf, opt.context_memory);
  spec = report.spec;
  const memscale::inference_result& result = report.result;
  const memscale::inference_plan* p = report.plan ? &*report.plan : nullptr;
  const memscale::inference_device_estimate* d = report.device ? &*report.device : nullptr;
  if (!opt.inference.svg.empty())
    write_text_file("--svg", opt.inference.svg, inference_svg(opt.model, spec, result, p));
  if (!opt.inference.svg_batch.empty())
    write_text_file("--svg-batch", opt.inference.svg_batch, inference_cliff_svg(opt.model, spec, *gpu, *report.plan,
                                        memscale::json_io::device_options_of(opt.alloc_conf, opt.context_memory)));
  if (opt.json) return memscale::json_io::inference_report_json(opt.model, report, opt.alloc_conf).dump(2) + "\n";
  return inference_text(opt.model, spec, result, d, gpu ? &*gpu : nullptr, p, opt.alloc_conf);
}

}  // namespace memscale_plan
