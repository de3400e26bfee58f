// memscale/json/emit_deepspeed.hpp: the ds_config.json of a planned run. train_batch_size is
// always computed as micro-batch x accumulation x data-parallel ranks, the equality DeepSpeed
// asserts (deepspeed/runtime/config.py v0.16.5 _batch_assertion), so a config it would reject
// for its batch sizes cannot come out of here.
#pragma once

#include <nlohmann/json.hpp>

#include "memscale/error.hpp"
#include "memscale/json/engine_config_keys.hpp"
#include "memscale/parallel/strategy.hpp"
#include "memscale/training.hpp"

namespace memscale::json_io {

// Under ZeRO-Offload the optimizer steps on the host. A client torch optimizer then stops the
// engine (ZeRORuntimeException) unless zero_force_ds_cpu_optimizer is false, so the optimizer
// is named in the config and the engine builds its CPU kernel: DeepSpeedCPUAdam for Adam and
// AdamW, DeepSpeedCPULion for Lion (deepspeed/runtime/engine.py v0.16.5 _configure_optimizer,
// _configure_basic_optimizer). Other torch optimizers step the host partition as they are,
// which the engine allows with zero_force_ds_cpu_optimizer false. The training script then
// passes no optimizer to deepspeed.initialize (a client optimizer overrides the config's).
inline void add_offload_optimizer(nlohmann::json& cfg, optimizer_kind o) {
  switch (o) {
    // "Adam" runs AdamW unless adam_w_mode is false (engine.py: ADAM_W_MODE_DEFAULT = True).
    case optimizer_kind::adam: cfg["optimizer"] = {{"type", "Adam"}, {"params", {{"adam_w_mode", false}}}}; break;
    case optimizer_kind::adamw: cfg["optimizer"] = {{"type", "AdamW"}}; break;
    case optimizer_kind::lion: cfg["optimizer"] = {{"type", "Lion"}}; break;
    case optimizer_kind::adamw_8bit:
      memscale::detail::fail(error_code::unsupported, "run.optimizer",
                             "adamw_8bit (bitsandbytes) keeps its state on the GPU; ZeRO-Offload steps the optimizer "
                             "on the host: use adamw, or no optimizer offload");
    case optimizer_kind::sgd:
    case optimizer_kind::sgd_momentum:
    case optimizer_kind::adafactor: cfg["zero_force_ds_cpu_optimizer"] = false; break;
  }
}

inline nlohmann::json emit_deepspeed_config(const training_spec& run, const parallel_spec& p) {
  validate(run);
  validate(p);
  memscale::detail::require(is_deepspeed(p.engine) || p.engine == strategy::zero0 || p.engine == strategy::ddp, error_code::unsupported, "parallel.engine",
                  "has no DeepSpeed config (FSDP strategies: emit accelerate-fsdp)", p.engine);
  // ZeRO offload is a ZeRO feature: parameters only with stage 3 (zero/config.py offload_param docs).
  memscale::detail::require(!p.offload_optimizer || is_deepspeed(p.engine), error_code::invalid_run, "parallel.offload_optimizer",
                  "needs a ZeRO stage in DeepSpeed", 1);
  // The data-parallel world DeepSpeed divides by (config.py: mpu.get_data_parallel_world_size()).
  const std::uint64_t dp = data_parallel_degree(p);
  const std::uint64_t train_batch = memscale::detail::checked_mul(run.micro_batch, run.grad_accum, dp);
  const int stage = p.engine == strategy::zero1 ? 1 : p.engine == strategy::zero2 ? 2 : p.engine == strategy::zero3 ? 3 : 0;
  nlohmann::json zero = {{"stage", stage}};
  if (stage > 0) {
    zero["contiguous_gradients"] = p.deepspeed.contiguous_gradients;
    zero["overlap_comm"] = overlap_comm(p);
    zero["reduce_bucket_size"] = p.deepspeed.reduce_bucket_size;
    zero["allgather_bucket_size"] = p.deepspeed.allgather_bucket_size;
    zero["offload_optimizer"] = {{"device", p.offload_optimizer ? "cpu" : "none"}, {"pin_memory", p.offload_optimizer}};
  }
  if (stage == 3) {
    zero["offload_param"] = {{"device", p.offload_parameters ? "cpu" : "none"}, {"pin_memory", p.offload_parameters}};
    zero["stage3_prefetch_bucket_size"] = p.deepspeed.prefetch_bucket_size;
    zero["stage3_max_live_parameters"] = p.deepspeed.max_live_parameters;
    zero["stage3_param_persistence_threshold"] = p.deepspeed.param_persistence_threshold;
  }
  // With the engine's own 16-bit mode the block is the one it was planned with (its fp32
  // master partition is in the estimate); the estimate refuses a mismatched run.precision.
  const engine_precision e = p.deepspeed.precision;
  const bool bf16 = e == engine_precision::bf16 ||
                    (e == engine_precision::none && (run.prec == precision::amp_bf16 || run.prec == precision::pure_bf16));
  const bool fp16 = e == engine_precision::fp16 ||
                    (e == engine_precision::none && (run.prec == precision::amp_fp16 || run.prec == precision::pure_fp16));
  nlohmann::json cfg = {
      {"train_batch_size", train_batch},
      {"train_micro_batch_size_per_gpu", run.micro_batch},
      {"gradient_accumulation_steps", run.grad_accum},
      {"bf16", {{"enabled", bf16}}},
      {"fp16", {{"enabled", fp16}}},
      {"zero_optimization", zero},
  };
  if (p.offload_optimizer) add_offload_optimizer(cfg, run.optimizer);
  if (run.ckpt == checkpointing::full)
    cfg["activation_checkpointing"] = {{"partition_activations", p.sp},
                                       {"cpu_checkpointing", p.offload_activations},
                                       {"contiguous_memory_optimization", false},
                                       {"synchronize_checkpoint_boundary", false}};
  return cfg;
}

}  // namespace memscale::json_io
