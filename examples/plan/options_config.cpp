// memscale-plan: the config options: --config PATH|HUB_ID: a Hugging Face
// config.json, a model directory or a Hub id in the local cache (memscale/json/hf_config.hpp).
#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "memscale/json.hpp"
#include "option_groups.hpp"

namespace memscale_plan {

void add_config_options(CLI::App& app, options& o) {
  add_value(app, group::config, "--config", "PATH|HUB_ID",
            "the model from a Hugging Face config.json: a file, a model directory holding one, or a Hub id "
            "(ORG/NAME) found in the local Hub cache ($HF_HUB_CACHE, else $HF_HOME/hub, else "
            "~/.cache/huggingface/hub); nothing is downloaded",
            [&o](const std::string& v) {
              // Every error names the config it came from, then the field (tests/malformed/configs).
              try {
                auto loaded = memscale::json_io::load_model_or_checkpoint(v);  // an unknown model_type: its checkpoint
                o.model = loaded.model;
                o.config.generic = loaded.generic ? std::make_shared<const memscale::json_io::generic_checkpoint>(std::move(*loaded.generic))
                                                  : nullptr;
                o.config.quantization = std::move(loaded.quantization);
              } catch (const memscale::error& e) {
                throw usage_error("--config " + path_in_quotes(v) + ": " + e.what());
              }
              o.config.source = v;
              o.vision.model.reset();  // the config's model replaces a vision --model given before it
            });
}

// A family's quantization_config is how the checkpoint stores its linear layers, so it
// decides the run: generate() reads the stored format (json/hf/quantization.hpp
// apply_quantization); training updates adapters over a frozen bitsandbytes 4-bit base
// (QLoRA, qlora_base_of), and other stored formats are refused, never estimated as 16-bit.
void apply_config_quantization(options& o) {
  if (!o.config.quantization) return;
  const memscale::json_io::hf::quantization& q = *o.config.quantization;
  const std::string config = "--config " + path_in_quotes(o.config.source);
  const std::string stored = config + ": config.quantization_config (" + in_quotes(q.method) + ")";
  if (q.format.method == memscale::quant_method::mxfp4) {
    // generate() reads the stored format: MXFP4 experts (0.53125 B per expert weight), or bf16
    // ones when the config dequantizes at load; --weights bf16 states the experts dequantized, as
    // transformers loads them without triton >= 3.4 and the kernels package (quantizer_mxfp4.py).
    if (o.inference.enabled) {
      if (o.inference.weights_given) {
        if (o.inference.spec.weights == memscale::weight_format::native && o.inference.spec.compute == memscale::dtype::bf16)
          return;
        // --weights mxfp4 states what the config stores, unless the config dequantizes at load.
        if (o.inference.spec.weights != memscale::weight_format::mxfp4 || q.dequantize_at_load)
          throw usage_error("--weights and " + stored + " disagree: the MXFP4 experts load as MXFP4 (--weights mxfp4, "
                            "without dequantize) or, dequantized, as bf16 (--weights bf16)");
      }
      memscale::json_io::hf::apply_quantization(q, o.inference.spec);
      return;
    }
    // Mxfp4Config(dequantize=True) (transformers utils/quantization_config.py, quantizer_mxfp4.py)
    // loads the experts as bf16, the way gpt-oss is fine-tuned: the model is then held as its
    // unquantised self. Training over the MXFP4 storage itself is not modelled.
    if (q.dequantize_at_load) return;
    throw usage_error(stored + " stores the experts in MXFP4, which memscale does not model for training: "
                      "training dequantizes them to bf16 at load, so state it with "
                      "config.quantization_config.dequantize true (Mxfp4Config(dequantize=True))");
  }
  memscale::unquantized_modules kept{};
  try {
    kept = memscale::json_io::hf::unquantized_of(q, o.model);
  } catch (const memscale::error& e) {
    throw usage_error(config + ": " + e.what());
  }
  if (o.inference.enabled) {
    if (o.inference.weights_given)
      throw usage_error("--weights and " + stored + " both say how the weights are stored: leave out --weights");
    try {
      memscale::json_io::hf::apply_quantization(q, o.inference.spec);
      memscale::json_io::hf::apply_unquantized(kept, o.inference.spec);
    } catch (const memscale::error& e) {
      throw usage_error(config + ": " + e.what());
    }
    return;
  }
  const std::optional<memscale::base_quant> base = memscale::json_io::hf::qlora_base_of(q);
  if (!base)
    throw usage_error(stored + " stores the linear layers quantised; training over that format is not modelled yet "
                      "(a bitsandbytes 4-bit checkpoint trains with --qlora)");
  if (kept.vision_tower || kept.vision_projector)
    throw usage_error(stored + " keeps the vision tower unquantised; a QLoRA run of a model with a vision tower is not "
                      "modelled yet");
  // The quantizer of a pre-quantised bitsandbytes checkpoint swaps Llama 4's Llama4TextExperts for
  // per-expert Linear4bit MLPs, in 5.x too (graph/layers/mlp.hpp experts_swapped_for_prequantized):
  // a base and an expert loop the QLoRA graph does not build (it holds the 16-bit parameters a
  // BitsAndBytesConfig load keeps).
  if (memscale::graph_layers::experts_swapped_for_prequantized(o.model))
    throw usage_error(stored + " is a pre-quantised Llama 4 checkpoint, whose experts load as per-expert 4-bit Linears "
                      "(SequentialLlama4TextExperts): not modelled for training; --qlora over the bf16 checkpoint "
                      "(BitsAndBytesConfig at load) keeps them 16-bit and is");
  // A checkpoint saved before 5.0 holds per-expert 4-bit Linears, which 5.x's expert converters
  // merge as 16-bit weights (inference/generate_peak.hpp check_quantized_parameter_experts).
  if (q.saved_by < 500 &&
      memscale::graph_layers::experts_merged_at_load(o.model, memscale::json_io::with_current_transformers(o.run)))
    throw usage_error(stored + " was saved by transformers " +
                      (q.saved_by == 0 ? std::string("(config.transformers_version not stated)")
                                       : memscale::release_text(q.saved_by)) +
                      ": its experts are per-expert 4-bit Linears, whose packed codes transformers 5.x's expert "
                      "converters merge as 16-bit weights of another shape (the model does not load); --stack "
                      "transformers=4.57 trains it as it was saved");
  o.run.unquantized = kept.roles;
  if (o.run.target != memscale::training_target::qlora)
    throw usage_error(stored + " stores the linear layers in bitsandbytes 4-bit, which do not train: add --qlora RANK "
                      "(adapters over the 4-bit base)");
  if (o.double_quant && *base != memscale::base_quant::nf4_double_quant)
    throw usage_error("--qlora-double-quant and " + stored +
                      " (bnb_4bit_use_double_quant false) disagree: leave out --qlora-double-quant");
  o.run.quant = *base;
}

}  // namespace memscale_plan
