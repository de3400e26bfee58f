// memscale-plan --inference (see inference.hpp).
#include "inference.hpp"

#include <fmt/format.h>

#include "memscale/fmt.hpp"
#include "memscale/json.hpp"

namespace memscale_plan {
namespace {

std::string gib_and_bytes(memscale::bytes b) {
  return fmt::format("{:8.2f} GiB  ({} bytes)", memscale::to_gib(b), memscale::format_count(b.value));
}

std::string peak_block(const memscale::inference_peak& p) {
  const memscale::inference_breakdown& b = p.breakdown;
  std::string out;
  out += fmt::format("  weights     {}\n", gib_and_bytes(b.weights));
  out += fmt::format("  KV cache    {}\n", gib_and_bytes(b.kv_cache));
  out += fmt::format("  activations {}\n", gib_and_bytes(b.activations));
  out += fmt::format("  logits      {}\n", gib_and_bytes(b.logits));
  out += fmt::format("  workspace   {}\n", gib_and_bytes(b.workspace));
  out += fmt::format("  tensor      {}  torch.cuda.max_memory_allocated\n", gib_and_bytes(p.tensor));
  out += fmt::format("  reserved    {}  torch.cuda.max_memory_reserved\n", gib_and_bytes(p.reserved));
  out += fmt::format("  device      {}  nvidia-smi: reserved + CUDA context\n", gib_and_bytes(p.device));
  return out;
}

nlohmann::json spec_json(const memscale::inference_spec& s) {
  return {{"batch", s.batch},
          {"context", s.context},
          {"new_tokens", s.new_tokens},
          {"dtype", std::string(memscale::to_string(s.compute))},
          {"weights", std::string(memscale::to_string(s.weights))},
          {"kv_dtype", std::string(memscale::to_string(s.kv))},
          {"kv_cache", std::string(memscale::to_string(s.cache))},
          {"attention", std::string(memscale::to_string(s.attention))}};
}

}  // namespace

std::string inference_text(const memscale::model_spec& model, const memscale::inference_spec& spec,
                           const memscale::inference_result& result, const memscale::gpu_spec* gpu,
                           const memscale::inference_plan* plan) {
  std::string out;
  out += fmt::format("model          {} ({} parameters)\n", model.name, memscale::format_count(result.parameter_count));
  out += fmt::format("inference      batch {} x context {} + {} new tokens, dtype {}, weights {}, attention {}\n",
                     spec.batch, spec.context, spec.new_tokens, memscale::to_string(spec.compute),
                     memscale::to_string(spec.weights), memscale::to_string(spec.attention));
  out += fmt::format("KV cache       {} cache in {}: {} bytes per token, {} after the last token\n",
                     memscale::to_string(spec.cache), memscale::to_string(spec.kv),
                     memscale::format_count(result.kv_bytes_per_token.value),
                     fmt::format("{:.2f} GiB", memscale::to_gib(result.kv_cache_bytes)));
  out += fmt::format("weights        {}\n\n", gib_and_bytes(result.weight_bytes));
  out += "prefill peak (the prompt's forward pass):\n" + peak_block(result.prefill);
  if (spec.new_tokens > 1) out += "decode peak (one new token per step):\n" + peak_block(result.decode);
  out += fmt::format("peak: {}\n", memscale::to_string(result.peak.at));
  if (gpu != nullptr && plan != nullptr) {
    out += fmt::format("\nInference on {} (budget {:.2f} GiB = VRAM {:.2f} GiB x (1 - {:.2f}))\n", gpu->label,
                       memscale::to_gib(plan->budget), memscale::to_gib(plan->vram), plan->headroom);
    out += fmt::format("  device peak {:.2f} GiB, memory pressure {:.2f}: {}\n", memscale::to_gib(result.peak.device),
                       plan->pressure, plan->fits ? "fits" : "does not fit");
    out += fmt::format("  largest batch at context {}: {}\n", spec.context, plan->max_batch);
    out += fmt::format("  largest context at batch {}: {}\n", spec.batch, plan->max_context);
  }
  return out;
}

nlohmann::json inference_json(const memscale::model_spec& model, const memscale::inference_spec& spec,
                              const memscale::inference_result& result, const memscale::inference_plan* plan) {
  nlohmann::json j = memscale::json_io::inference_to_json(result);
  j["model"] = std::string(model.name);
  j["inference"] = spec_json(spec);
  if (plan != nullptr)
    j["plan"] = {{"fits", plan->fits},         {"budget", plan->budget.value},     {"vram", plan->vram.value},
                 {"pressure", plan->pressure}, {"max_batch", plan->max_batch},     {"max_context", plan->max_context}};
  return j;
}

}  // namespace memscale_plan
