// memscale/json/emit_accelerate.hpp: the Accelerate config YAML (`accelerate launch
// --config_file`) for an FSDP run, with the keys `accelerate config` writes (accelerate
// commands/config/cluster.py, commit 16cb6eb8).
#pragma once

#include <string>

#include "memscale/error.hpp"
#include "memscale/parallel/strategy.hpp"
#include "memscale/training.hpp"

namespace memscale::json_io {

// FSDP1's ShardingStrategy name for fsdp_reshard_after_forward (accelerate >= 1.6 reads the
// FSDP1 strategy from that key; FSDP2 takes a bool).
constexpr std::string_view fsdp1_strategy_name(strategy s) {
  return s == strategy::fsdp_grad_op ? "SHARD_GRAD_OP" : s == strategy::hsdp ? "HYBRID_SHARD" : "FULL_SHARD";
}

// `layer_class` is the block class to wrap (transformers' _no_split_modules, e.g. LlamaDecoderLayer).
inline std::string emit_accelerate_fsdp_config(const training_spec& run, const parallel_spec& p,
                                               std::string_view layer_class) {
  validate(run);
  validate(p);
  memscale::detail::require(is_fsdp(p.engine), error_code::unsupported, "parallel.engine",
                  "has no Accelerate FSDP config (DeepSpeed strategies: emit deepspeed)",
                  p.engine);
  memscale::detail::require(p.tp == 1 && p.pp == 1, error_code::unsupported, "parallel.tp * parallel.pp",
                  "must be 1 for an Accelerate FSDP config", memscale::detail::checked_mul(p.tp, p.pp));
  // FSDP2 has no hybrid strategy in accelerate's config questions: HSDP is written as FSDP1.
  const bool v2 = p.fsdp == fsdp_api::fsdp2 && p.engine != strategy::hsdp;
  const std::string_view mixed = (run.prec == precision::amp_bf16 || run.prec == precision::pure_bf16) ? "bf16"
                                 : (run.prec == precision::amp_fp16 || run.prec == precision::pure_fp16) ? "fp16"
                                                                                                         : "no";
  auto yes_no = [](bool b) { return std::string(b ? "true" : "false"); };
  std::string y;
  y += "compute_environment: LOCAL_MACHINE\n";
  y += "debug: false\n";
  y += "distributed_type: FSDP\n";
  y += "downcast_bf16: 'no'\n";
  y += "fsdp_config:\n";
  y += "  fsdp_activation_checkpointing: " + yes_no(run.ckpt == checkpointing::full) + "\n";
  y += "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n";
  if (!v2) y += "  fsdp_backward_prefetch: BACKWARD_PRE\n";
  y += "  fsdp_cpu_ram_efficient_loading: true\n";
  if (!v2) y += "  fsdp_forward_prefetch: false\n";
  y += "  fsdp_offload_params: " + yes_no(p.offload_parameters || p.offload_optimizer) + "\n";
  y += "  fsdp_reshard_after_forward: " +
       (v2 ? yes_no(p.engine == strategy::fsdp_full) : std::string(fsdp1_strategy_name(p.engine))) + "\n";
  y += "  fsdp_state_dict_type: SHARDED_STATE_DICT\n";
  y += "  fsdp_sync_module_states: true\n";
  y += "  fsdp_transformer_layer_cls_to_wrap: " + std::string(layer_class) + "\n";
  if (!v2) y += "  fsdp_use_orig_params: " + yes_no(run.fsdp_use_orig_params) + "\n";
  y += "  fsdp_version: " + std::string(v2 ? "2" : "1") + "\n";
  y += "machine_rank: 0\n";
  y += "main_training_function: main\n";
  y += "mixed_precision: " + std::string(mixed) + "\n";
  y += "num_machines: " + std::to_string(p.nodes) + "\n";
  y += "num_processes: " + std::to_string(world_size(p)) + "\n";
  y += "rdzv_backend: static\n";
  y += "same_network: true\n";
  y += "use_cpu: false\n";
  return y;
}

}  // namespace memscale::json_io
