// memscale/json/engine_config_keys.hpp: the configuration keys the engines themselves define,
// so emitted configs can be checked against them. Copied by name from the engines' source.
// IWYU pragma: private, include <memscale/json/emit_deepspeed.hpp>
#pragma once

#include <array>
#include <string_view>

namespace memscale::json_io::engine_keys {

// deepspeed/runtime/constants.py (v0.16.5, commit 38327e07): TRAIN_BATCH_SIZE,
// TRAIN_MICRO_BATCH_SIZE_PER_GPU, GRADIENT_ACCUMULATION_STEPS, BFLOAT16, FP16 (zero/config.py: ZERO_OPTIMIZATION),
// GRADIENT_CLIPPING, STEPS_PER_PRINT, WALL_CLOCK_BREAKDOWN, ZERO_ALLOW_UNTESTED_OPTIMIZER,
// ZERO_FORCE_DS_CPU_OPTIMIZER, OPTIMIZER; activation_checkpointing/config.py ACT_CHKPT.
inline constexpr std::array<std::string_view, 13> deepspeed_top{
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "bf16", "fp16",
    "zero_optimization", "activation_checkpointing", "gradient_clipping", "steps_per_print", "wall_clock_breakdown",
    "zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer", "optimizer"};
// constants.py OPTIMIZER's TYPE and OPTIMIZER_PARAMS ("type", "params").
inline constexpr std::array<std::string_view, 2> deepspeed_optimizer{"type", "params"};
// runtime/config.py DEEPSPEED_OPTIMIZERS whose engine.py _configure_basic_optimizer builds a CPU
// kernel under offload_optimizer (adam, adamw: DeepSpeedCPUAdam; lion: DeepSpeedCPULion), as
// config.py lower-cases them.
inline constexpr std::array<std::string_view, 3> deepspeed_cpu_optimizers{"adam", "adamw", "lion"};
// constants.py BFLOAT16_ENABLED / FP16_ENABLED ("enabled").
inline constexpr std::array<std::string_view, 1> deepspeed_precision{"enabled"};
// deepspeed/runtime/zero/config.py DeepSpeedZeroConfig fields and their aliases (v0.16.5).
inline constexpr std::array<std::string_view, 17> deepspeed_zero{
    "stage", "contiguous_gradients", "reduce_scatter", "reduce_bucket_size", "allgather_partitions",
    "allgather_bucket_size", "overlap_comm", "offload_param", "offload_optimizer", "sub_group_size",
    "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold", "stage3_max_live_parameters",
    "stage3_max_reuse_distance", "stage3_gather_16bit_weights_on_model_save", "round_robin_gradients",
    "load_from_fp32_weights"};
// deepspeed/runtime/zero/offload_config.py DeepSpeedZeroOffloadParamConfig fields.
inline constexpr std::array<std::string_view, 6> deepspeed_offload_param{"device",      "nvme_path", "buffer_count",
                                                                          "buffer_size", "max_in_cpu", "pin_memory"};
// offload_config.py DeepSpeedZeroOffloadOptimizerConfig fields.
inline constexpr std::array<std::string_view, 8> deepspeed_offload_optimizer{
    "device", "nvme_path", "buffer_count", "pin_memory", "pipeline_read", "pipeline_write", "fast_init", "ratio"};
// offload_config.py OffloadDeviceEnum values.
inline constexpr std::array<std::string_view, 3> deepspeed_offload_devices{"none", "cpu", "nvme"};
// activation_checkpointing/config.py ACT_CHKPT_* keys.
inline constexpr std::array<std::string_view, 6> deepspeed_activation_checkpointing{
    "partition_activations", "number_checkpoints", "contiguous_memory_optimization", "synchronize_checkpoint_boundary",
    "profile", "cpu_checkpointing"};

// accelerate src/accelerate/commands/config/config_args.py (commit 16cb6eb8, 1.15.0.dev0):
// BaseConfig and ClusterConfig fields written by `accelerate config` for a local cluster.
inline constexpr std::array<std::string_view, 16> accelerate_top{
    "compute_environment", "distributed_type", "mixed_precision", "use_cpu", "debug", "downcast_bf16",
    "num_processes", "machine_rank", "num_machines", "gpu_ids", "main_process_ip", "main_process_port",
    "rdzv_backend", "same_network", "main_training_function", "fsdp_config"};
// accelerate commands/config/cluster.py (same commit): the fsdp_config keys it asks for.
inline constexpr std::array<std::string_view, 13> accelerate_fsdp{
    "fsdp_version", "fsdp_reshard_after_forward", "fsdp_offload_params", "fsdp_auto_wrap_policy",
    "fsdp_transformer_layer_cls_to_wrap", "fsdp_min_num_params", "fsdp_backward_prefetch", "fsdp_state_dict_type",
    "fsdp_forward_prefetch", "fsdp_use_orig_params", "fsdp_cpu_ram_efficient_loading", "fsdp_sync_module_states",
    "fsdp_activation_checkpointing"};
// accelerate utils/constants.py FSDP_SHARDING_STRATEGY (FSDP1's fsdp_reshard_after_forward values).
inline constexpr std::array<std::string_view, 5> accelerate_sharding_strategies{
    "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"};
// accelerate commands/config/cluster.py _convert_mixed_precision choices.
inline constexpr std::array<std::string_view, 4> accelerate_mixed_precision{"no", "fp16", "bf16", "fp8"};

template <std::size_t N>
constexpr bool contains(const std::array<std::string_view, N>& keys, std::string_view key) {
  for (auto k : keys)
    if (k == key) return true;
  return false;
}

}  // namespace memscale::json_io::engine_keys
