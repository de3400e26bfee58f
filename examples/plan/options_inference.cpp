// memscale-plan: the inference options (--inference and its settings) and the pictures
// (--svg, --svg-batch).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "memscale/json.hpp"
#include "memscale/detail/math.hpp"
#include "memscale/validate.hpp"
#include "option_groups.hpp"

namespace memscale_plan {
namespace {

void note_setting(options& o, const char* name) {
  if (o.inference.setting_option.empty()) o.inference.setting_option = name;
}

}  // namespace

void add_inference_options(CLI::App& app, options& o) {
  const auto g = group::inference;
  add_flag(app, g, "--inference",
           "estimate generate() (prefill + decoding with a KV cache) instead of a training step; uses --batch",
           [&o] { o.inference.enabled = true; });
  add_value(app, g, "--context", "N", "prompt tokens with --inference; default 512",
            [&o](const std::string& v) {
              o.inference.spec.context = parse_positive("--context", v);
              note_setting(o, "--context");
            });
  add_value(app, g, "--new-tokens", "N", "tokens generated with --inference; default 128",
            [&o](const std::string& v) {
              o.inference.spec.new_tokens = parse_positive("--new-tokens", v);
              note_setting(o, "--new-tokens");
            });
  add_value(app, g, "--weights", "W", "fp32 | fp16 | bf16 | bnb-int8 | bnb-nf4 | bnb-fp4 | gptq-4bit | awq-4bit | mxfp4 (gpt-oss's experts) | fp8-block (transformers FP8Linear, 128 x 128 blocks) | gptfast-int8 | gptfast-int4 (with --framework gpt-fast); default fp16",
            [&o](const std::string& v) {
              memscale::dtype native = memscale::dtype::fp16;
              o.inference.spec.weights = memscale::json_io::parse_weight_format(v, "--weights", native);
              o.inference.spec.compute = native;
              o.inference.weights_given = true;
              note_setting(o, "--weights");
            });
  add_value(app, g, "--group-size", "N", "gptfast-int4: input columns per scale and zero point (32, 64, 128 or 256); default 128",
            [&o](const std::string& v) {
              o.inference.spec.group_size = parse_positive("--group-size", v);
              o.inference.group_size_given = true;
              note_setting(o, "--group-size");
            });
  add_value(app, g, "--kv-dtype", "D",
            "KV-cache dtype: fp32 | fp16 | bf16 | fp8 | int8; with --kv-cache quantized its packed width int2 | int4 "
            "(default int4); default the weights' dtype",
            [&o](const std::string& v) {
              o.inference.kv_dtype = v;  // read once the cache kind is known (inference_command)
              o.inference.kv_dtype_given = true;
              note_setting(o, "--kv-dtype");
            });
  add_value(app, g, "--kv-quant-backend", "B", "quantized cache backend: quanto (hqq is refused); default quanto",
            [&o](const std::string& v) {
              o.inference.spec.kv_backend = memscale::json_io::parse_kv_quant_backend(v, "--kv-quant-backend");
              note_setting(o, "--kv-quant-backend");
            });
  add_value(app, g, "--kv-group-size", "N", "quantized cache: values per scale and zero point (q_group_size); default 64",
            [&o](const std::string& v) {
              o.inference.spec.kv_group = parse_positive("--kv-group-size", v);
              note_setting(o, "--kv-group-size");
            });
  add_value(app, g, "--kv-residual-length", "N",
            "quantized cache: tokens kept in the compute dtype before re-quantising (residual_length); default 128",
            [&o](const std::string& v) {
              o.inference.spec.kv_residual = parse_positive("--kv-residual-length", v);
              note_setting(o, "--kv-residual-length");
            });
  add_value(app, g, "--kv-cache", "C", "dynamic | static | sliding_window | quantized; default dynamic (gpt-fast: static)",
            [&o](const std::string& v) {
              o.inference.spec.cache = memscale::json_io::parse_kv_cache(v, "--kv-cache");
              note_setting(o, "--kv-cache");
            });
  add_value(app, g, "--svg", "FILE", "write the plan as an SVG: one stacked bar per mode against VRAM and the budget",
            [&o](const std::string& v) { o.inference.svg = v; });
  add_value(app, g, "--svg-batch", "FILE",
            "write the OOM cliff as an SVG: peak vs micro-batch and vs sequence length per mode (needs --gpu)",
            [&o](const std::string& v) { o.inference.svg_batch = v; });
}

}  // namespace memscale_plan

namespace memscale_plan {

void check_inference_options(const options& o) {
  const inference_options& inf = o.inference;
  if (!inf.enabled && !inf.setting_option.empty()) throw usage_error(inf.setting_option + " needs --inference");
  const bool has_gpu = !o.gpu.empty() || o.custom_gpu.has_value();
  if (!inf.svg_batch.empty() && !has_gpu) throw usage_error("--svg-batch needs --gpu (or --gpu-memory)");
  if (!inf.svg.empty() && !has_gpu && !inf.enabled) throw usage_error("--svg needs --gpu or --gpu-memory (or --inference)");
  if (inf.gpt_fast && !inf.enabled)
    throw usage_error("--framework gpt-fast is modelled for --inference only: gpt-fast's training is not modelled");
  if (!inf.enabled) return;
  // The same rule as --seq (memscale/validate.hpp): the model's max_position_embeddings
  // and, with learned positions, its table bound the prompt and the tokens generated.
  try {
    memscale::check_sequence(o.model, inf.spec.context, inf.spec.new_tokens, "--context + --new-tokens");
  } catch (const memscale::error& e) {
    throw usage_error(e.what());
  }
}

}  // namespace memscale_plan
