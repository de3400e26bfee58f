// memscale/json/emit_torchtune.hpp: a torchtune v0.6.1 recipe config (YAML) for a planned
// single-device run, or a full fine-tune over N GPUs (full_finetune_distributed): the keys that
// decide its memory, spelled as the stock configs spell them (recipes/configs/llama3_1/
// 8B_lora_single_device.yaml, 8B_full_single_device.yaml, 8B_qlora_single_device.yaml,
// llama3/8B_full.yaml @ a6290a5b). Paths (tokenizer, checkpointer, dataset) stay the stock
// config's: the emitted keys are merged into it or given as `tune run` overrides.
#pragma once

#include <array>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include "memscale/error.hpp"
#include "memscale/json/custom_sharded_layers.hpp"
#include "memscale/json/torchtune_config_keys.hpp"
#include "memscale/lora.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale::json_io {

// A model memscale names and the torchtune builder that builds it (torchtune/models/<module>/
// __init__.py @ a6290a5b): `builder` full, lora_<builder> LoRA, qlora_<builder> QLoRA where it exists.
struct torchtune_builder {
  std::string_view model;     // model_spec::name
  std::string_view module;    // torchtune.models.<module>
  std::string_view builder;   // the full builder's name
  std::string_view stock;     // the stock LoRA config the keys go into (recipes/configs/)
  bool has_qlora = true;
  std::string_view stock_distributed{};  // the stock full_finetune_distributed config, if any
  std::string_view stock_qlora_distributed{};  // the stock qlora config of lora_finetune_distributed, if any
};

inline constexpr std::array<torchtune_builder, 6> torchtune_builders{{
    {"llama-2-7b", "llama2", "llama2_7b", "llama2/7B_lora_single_device.yaml", true, "llama2/7B_full.yaml",
     "llama2/7B_qlora.yaml"},
    {"llama-2-13b", "llama2", "llama2_13b", "llama2/13B_lora.yaml", true, "llama2/13B_full.yaml"},
    {"llama-2-70b", "llama2", "llama2_70b", "llama2/70B_lora.yaml", true, {}, "llama2/70B_qlora.yaml"},
    {"llama-3-8b", "llama3", "llama3_8b", "llama3/8B_lora_single_device.yaml", true, "llama3/8B_full.yaml"},
    {"mistral-7b", "mistral", "mistral_7b", "mistral/7B_lora_single_device.yaml", true, "mistral/7B_full.yaml"},
    // qwen2_5 has no qlora_ builders at v0.6.1.
    {"qwen2.5-7b", "qwen2_5", "qwen2_5_7b_base", "qwen2_5/7B_lora_single_device.yaml", false, "qwen2_5/7B_full.yaml"},
}};

// The torchtune recipe a run's target runs under.
constexpr std::string_view torchtune_recipe(const training_spec& run) {
  if (runs_fsdp2(run)) return run.target == training_target::full ? "full_finetune_distributed" : "lora_finetune_distributed";
  return run.target == training_target::full ? "full_finetune_single_device" : "lora_finetune_single_device";
}

namespace detail {

[[noreturn]] inline void torchtune_refuse(const char* field, const std::string& why) {
  throw error(error_code::unsupported, std::string(field) + " " + why);
}

}  // namespace detail

// The recipe config YAML for `run` of `model` on one device, or over run.data_parallel GPUs with
// FSDP2 (runs_fsdp2); `lora_alpha` 0 writes the stock configs' 2 x rank (it scales the update and
// holds no memory).
inline std::string emit_torchtune_config(const model_spec& model, const training_spec& run, double lora_alpha = 0.0) {
  validate(run);
  using detail::torchtune_refuse;
  if (run.framework != framework_kind::torchtune)
    torchtune_refuse("run.framework", "is not torchtune: a torchtune recipe config describes a run with --framework torchtune");
  const torchtune_builder* b = nullptr;
  for (const auto& entry : torchtune_builders)
    if (entry.model == model.name) b = &entry;
  if (b == nullptr) {
    std::string known;
    for (const auto& entry : torchtune_builders) known += (known.empty() ? "" : ", ") + std::string(entry.model);
    torchtune_refuse("model", "\"" + std::string(model.name) + "\" has no torchtune builder memscale knows (" + known + ")");
  }
  // recipes/*_single_device.py: no autocast; the model is built in cfg.dtype (fp16 is refused).
  if (run.prec != precision::pure_bf16 && run.prec != precision::fp32)
    torchtune_refuse("run.precision", "must be pure_bf16 or fp32: torchtune's recipes build the model in cfg.dtype "
                                      "(bf16 or fp32) with no autocast");
  if (run.ckpt == checkpointing::selective)
    torchtune_refuse("run.checkpointing", "selective has no key in the single-device recipes "
                                          "(enable_activation_checkpointing wraps every layer)");
  if (run.offload_activations && run.ckpt != checkpointing::full)
    torchtune_refuse("run.offload_activations", "needs full checkpointing: the recipes refuse "
                                                "enable_activation_offloading without enable_activation_checkpointing");
  const bool distributed = runs_fsdp2(run);
  if (distributed && run.target == training_target::lora)
    torchtune_refuse("run.target", "lora over several GPUs is not written: --emit torchtune over several GPUs writes "
                                   "full_finetune_distributed's config, and lora_finetune_distributed's for qlora");
  const std::string_view stock_distributed =
      run.target == training_target::qlora ? b->stock_qlora_distributed : b->stock_distributed;
  if (distributed && stock_distributed.empty())
    torchtune_refuse("model", "\"" + std::string(model.name) + "\" has no stock " + std::string(torchtune_recipe(run)) +
                                  (run.target == training_target::qlora ? " qlora" : "") + " config at v0.6.1");
  if (!distributed && (run.offload_optimizer || run.offload_parameters))
    torchtune_refuse("run.offload", "has no single-device recipe key (fsdp_cpu_offload is the distributed recipes')");
  // fsdp_cpu_offload is one switch (CPUOffloadPolicy): parameters, gradients and optimizer state together.
  if (distributed && run.offload_optimizer != run.offload_parameters)
    torchtune_refuse("run.offload", "must be optimizer+parameters or none: fsdp_cpu_offload moves both");
  if (run.target != training_target::full && run.optimizer_in_backward)
    torchtune_refuse("run.optimizer_in_backward", "is read by the full recipes only (lora_finetune_single_device has "
                                                  "no optimizer_in_bwd)");
  if (run.target == training_target::qlora && !b->has_qlora)
    torchtune_refuse("run.target", "qlora needs a qlora_ builder (torchao NF4): " + std::string(b->module) + " has none");
  if (run.target == training_target::qlora && run.quant != base_quant::nf4_double_quant)
    torchtune_refuse("run.quant", "torchtune's NF4 (torchao to_nf4) always quantizes its scalers again: nf4_double_quant");
  if (run.target != training_target::full && run.lora_kind == lora_variant::rslora)
    torchtune_refuse("run.lora_variant", "rslora has no torchtune builder argument");
  if (run.loss == loss_impl::fused_linear)
    torchtune_refuse("run.loss", "fused_linear_ce is Liger's; torchtune's losses are CEWithChunkedOutputLoss or "
                                 "torch.nn.CrossEntropyLoss");

  const auto yes_no = [](bool v) { return std::string(v ? "True" : "False"); };
  std::string y;
  const std::string launch =
      distributed ? "tune run --nproc_per_node " + std::to_string(run.data_parallel) + " " : std::string("tune run ");
  y += "# torchtune 0.6.1, recipe " + std::string(torchtune_recipe(run)) + " (" + launch +
       std::string(torchtune_recipe(run)) + " --config THIS_FILE)\n";
  y += "# Merge into the stock config (e.g. " + std::string(distributed ? stock_distributed : b->stock) +
       ") for the tokenizer, checkpointer and dataset paths; set tokenizer.max_seq_len: " + std::to_string(run.seq_len) +
       " (the planned sequence length).\n";
  y += "model:\n";
  const std::string prefix = run.target == training_target::full    ? ""
                             : run.target == training_target::qlora ? "qlora_"
                                                                    : "lora_";
  y += "  _component_: torchtune.models." + std::string(b->module) + "." + prefix + std::string(b->builder) + "\n";
  if (run.target != training_target::full) {
    std::string attn;
    const std::array<std::pair<lora_target, std::string_view>, 4> attn_names{
        {{lora_target::q, "q_proj"}, {lora_target::k, "k_proj"}, {lora_target::v, "v_proj"}, {lora_target::o, "output_proj"}}};
    for (const auto& [t, name] : attn_names)
      if (has(run.lora_targets, t)) attn += (attn.empty() ? "'" : ", '") + std::string(name) + "'";
    // torchtune's apply_lora_to_mlp adapts w1, w2 and w3 together (models/llama3/_component_builders.py).
    const bool mlp_any = has(run.lora_targets, lora_target::gate) || has(run.lora_targets, lora_target::up) ||
                         has(run.lora_targets, lora_target::down);
    const bool mlp_all = has(run.lora_targets, lora_target::gate) && has(run.lora_targets, lora_target::up) &&
                         has(run.lora_targets, lora_target::down);
    if (mlp_any && !mlp_all)
      torchtune_refuse("run.lora_targets", "names some MLP projections: torchtune's apply_lora_to_mlp adapts all "
                                           "three (w1, w2, w3) or none");
    if (attn.empty()) torchtune_refuse("run.lora_targets", "names no attention projection: lora_attn_modules must not be empty");
    y += "  lora_attn_modules: [" + attn + "]\n";
    y += "  apply_lora_to_mlp: " + yes_no(mlp_all) + "\n";
    y += "  apply_lora_to_output: " + yes_no(has(run.lora_targets, lora_target::head)) + "\n";
    y += "  lora_rank: " + std::to_string(run.lora_rank) + "\n";
    std::ostringstream alpha;
    alpha << (lora_alpha > 0.0 ? lora_alpha : static_cast<double>(2 * run.lora_rank));
    y += "  lora_alpha: " + alpha.str() + "\n";
    // LoRALinear: nn.Dropout(p) if p > 0 else nn.Identity (modules/peft/lora.py): any p keeps one mask.
    y += std::string("  lora_dropout: ") + (run.lora_dropout ? "0.05" : "0.0") + "\n";
    if (run.lora_kind == lora_variant::dora) y += "  use_dora: True\n";
  }
  y += "batch_size: " + std::to_string(run.micro_batch) + "\n";
  y += "gradient_accumulation_steps: " + std::to_string(run.grad_accum) + "\n";
  if (run.target == training_target::full) y += "optimizer_in_bwd: " + yes_no(run.optimizer_in_backward) + "\n";
  y += "optimizer:\n";
  switch (run.optimizer) {
    case optimizer_kind::adamw: y += "  _component_: torch.optim.AdamW\n"; break;
    case optimizer_kind::adam: y += "  _component_: torch.optim.Adam\n"; break;
    case optimizer_kind::sgd: y += "  _component_: torch.optim.SGD\n"; break;
    case optimizer_kind::adamw_8bit: y += "  _component_: bitsandbytes.optim.AdamW8bit\n"; break;
    default: torchtune_refuse("run.optimizer", "has no torchtune config component memscale writes (adamw, adam, sgd, adamw_8bit)");
  }
  const bool torch_optimizer = run.optimizer != optimizer_kind::adamw_8bit;
  if (torch_optimizer && run.optimizer_impl == optimizer_implementation::fused) y += "  fused: True\n";
  if (torch_optimizer && run.optimizer_impl == optimizer_implementation::foreach) y += "  foreach: True\n";
  if (torch_optimizer && run.optimizer_impl == optimizer_implementation::for_loop) y += "  foreach: False\n";
  y += "loss:\n";
  if (run.loss == loss_impl::chunked) {
    if (run.loss_chunks == 0)
      torchtune_refuse("run.loss_chunks", "is 0: CEWithChunkedOutputLoss splits the sequence into a number of chunks");
    y += "  _component_: torchtune.modules.loss.CEWithChunkedOutputLoss\n";
    y += "  num_output_chunks: " + std::to_string(run.loss_chunks) + "\n";
  } else {
    y += "  _component_: torch.nn.CrossEntropyLoss\n";
  }
  y += "device: cuda\n";
  y += std::string("dtype: ") + (run.prec == precision::pure_bf16 ? "bf16" : "fp32") + "\n";
  y += "enable_activation_checkpointing: " + yes_no(run.ckpt == checkpointing::full) + "\n";
  y += "enable_activation_offloading: " + yes_no(run.offload_activations) + "\n";
  if (distributed) {
    // training/_distributed.py shard_model @ a6290a5b: fully_shard per layer, the planned
    // custom_sharded_layers (units of their own), then the root; null is the recipe's default.
    y += "custom_sharded_layers: " + detail::custom_sharded_layers_yaml(run.custom_sharded) + "\n";
    y += "fsdp_reshard_after_forward: True\n";
    y += "fsdp_cpu_offload: " + yes_no(run.offload_parameters) + "\n";
    // lora_finetune_distributed has no tensor parallelism (no tensor_parallel_dim read).
    if (run.target == training_target::full) y += "tensor_parallel_dim: 1\n";
  }
  return y;
}

}  // namespace memscale::json_io
