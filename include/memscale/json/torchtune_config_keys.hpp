// memscale/json/torchtune_config_keys.hpp: the recipe config keys torchtune v0.6.1 reads
// (pytorch/torchtune @ a6290a5b), so an emitted recipe config can be checked against them.
// Copied by name from the recipes' cfg.<key> / cfg.get("<key>") reads and the builders' arguments.
// IWYU pragma: private, include <memscale/json/emit_torchtune.hpp>
#pragma once

#include <array>
#include <string_view>

namespace memscale::json_io::torchtune_keys {

// recipes/lora_finetune_single_device.py @ a6290a5b: the top-level keys it reads.
inline constexpr std::array<std::string_view, 29> lora_single_device{
    "output_dir",        "model",          "tokenizer",       "checkpointer",
    "resume_from_checkpoint", "save_adapter_weights_only", "dataset", "seed",
    "shuffle",           "batch_size",     "optimizer",       "lr_scheduler",
    "loss",              "epochs",         "max_steps_per_epoch", "gradient_accumulation_steps",
    "clip_grad_norm",    "compile",        "metric_logger",   "log_every_n_steps",
    "log_peak_memory_stats", "device",     "dtype",           "enable_activation_checkpointing",
    "enable_activation_offloading", "profiler", "collate_fn", "cudnn_deterministic_mode",
    "low_cpu_ram"};
// recipes/full_finetune_single_device.py @ a6290a5b: the top-level keys it reads.
inline constexpr std::array<std::string_view, 28> full_single_device{
    "output_dir",        "model",          "tokenizer",       "checkpointer",
    "resume_from_checkpoint", "dataset",   "seed",            "shuffle",
    "batch_size",        "optimizer",      "lr_scheduler",    "loss",
    "epochs",            "max_steps_per_epoch", "gradient_accumulation_steps", "optimizer_in_bwd",
    "clip_grad_norm",    "compile",        "metric_logger",   "log_every_n_steps",
    "log_peak_memory_stats", "device",     "dtype",           "enable_activation_checkpointing",
    "enable_activation_offloading", "profiler", "collate_fn", "cudnn_deterministic_mode"};
// recipes/full_finetune_distributed.py @ a6290a5b: the top-level keys it reads.
inline constexpr std::array<std::string_view, 34> full_distributed{
    "output_dir",        "model",          "tokenizer",       "checkpointer",
    "resume_from_checkpoint", "enable_async_checkpointing", "dataset", "seed",
    "shuffle",           "batch_size",     "optimizer",       "lr_scheduler",
    "loss",              "epochs",         "max_steps_per_epoch", "gradient_accumulation_steps",
    "optimizer_in_bwd",  "clip_grad_norm", "compile",         "metric_logger",
    "log_every_n_steps", "log_peak_memory_stats", "device",   "dtype",
    "enable_activation_checkpointing", "enable_activation_offloading", "custom_sharded_layers",
    "fsdp_cpu_offload",  "fsdp_reshard_after_forward", "tensor_parallel_dim", "tensor_parallel_plan",
    "profiler",          "collate_fn",     "cudnn_deterministic_mode"};
// recipes/lora_finetune_distributed.py @ a6290a5b: the top-level keys it reads (no optimizer_in_bwd,
// no tensor parallelism).
inline constexpr std::array<std::string_view, 31> lora_distributed{
    "output_dir",        "model",          "tokenizer",       "checkpointer",
    "resume_from_checkpoint", "save_adapter_weights_only", "dataset", "seed",
    "shuffle",           "batch_size",     "optimizer",       "lr_scheduler",
    "loss",              "epochs",         "max_steps_per_epoch", "gradient_accumulation_steps",
    "clip_grad_norm",    "compile",        "metric_logger",   "log_every_n_steps",
    "log_peak_memory_stats", "device",     "dtype",           "enable_activation_checkpointing",
    "enable_activation_offloading", "custom_sharded_layers", "fsdp_cpu_offload", "fsdp_reshard_after_forward",
    "profiler",          "collate_fn",     "cudnn_deterministic_mode"};
// torchtune/models/llama3_1/_model_builders.py lora_llama3_1_8b's arguments (the LoRA builders of
// every family take the same), with config.instantiate's _component_.
inline constexpr std::array<std::string_view, 9> lora_model{
    "_component_", "lora_attn_modules", "apply_lora_to_mlp", "apply_lora_to_output", "lora_rank",
    "lora_alpha",  "lora_dropout",      "use_dora",          "quantize_base"};
// The full builders (llama3_1_8b(), mistral_7b(), ...) take no argument.
inline constexpr std::array<std::string_view, 1> full_model{"_component_"};
// torchtune/modules/peft/lora.py LORA_ATTN_MODULES.
inline constexpr std::array<std::string_view, 4> lora_attn_modules{"q_proj", "k_proj", "v_proj", "output_proj"};
// torchtune/modules/loss/ce_chunked_output_loss.py CEWithChunkedOutputLoss(num_output_chunks,
// ignore_index); torch.nn.CrossEntropyLoss takes ignore_index too.
inline constexpr std::array<std::string_view, 3> loss{"_component_", "num_output_chunks", "ignore_index"};
// torch/optim/adamw.py AdamW (torch 2.5) arguments the emitted config sets (lr, foreach, fused);
// bitsandbytes.optim.AdamW8bit and torch.optim.SGD/Adam take lr too.
inline constexpr std::array<std::string_view, 4> optimizer{"_component_", "lr", "foreach", "fused"};
// torchtune/models/llama3/_model_builders.py llama3_tokenizer(path, ..., max_seq_len, ...).
inline constexpr std::array<std::string_view, 3> tokenizer{"_component_", "path", "max_seq_len"};

template <std::size_t N>
constexpr bool contains(const std::array<std::string_view, N>& keys, std::string_view key) {
  for (auto k : keys)
    if (k == key) return true;
  return false;
}

}  // namespace memscale::json_io::torchtune_keys
