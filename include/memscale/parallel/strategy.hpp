// memscale/parallel/strategy.hpp: how a run is spread over GPUs and nodes: the data-parallel
// engine (DDP, DeepSpeed ZeRO stage, FSDP sharding strategy), tensor / sequence / pipeline
// parallel degrees, CPU offload and the engines' buffer settings.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "memscale/bytes.hpp"
#include "memscale/error.hpp"
#include "memscale/training.hpp"

namespace memscale {

// ddp: torch DistributedDataParallel. zero1-3: DeepSpeed ZeRO stages. fsdp_full / fsdp_grad_op:
// FSDP ShardingStrategy FULL_SHARD / SHARD_GRAD_OP; hsdp: HYBRID_SHARD (shard inside a node,
// replicate across nodes). zero0: DeepSpeed's engine without ZeRO (zero_optimization.stage 0), its
// 16-bit optimizer wrapper (BF16_Optimizer, FP16_Optimizer) reducing the gradients; not searched
// by the cluster planner (all_strategies), as it needs parallel.deepspeed.precision.
enum class strategy : std::uint8_t { ddp, zero1, zero2, zero3, fsdp_full, fsdp_grad_op, hsdp, zero0 };
// fsdp1: FullyShardedDataParallel (flat parameters per wrapped unit); fsdp2: fully_shard
// (per-parameter DTensor shards, torch >= 2.4).
enum class fsdp_api : std::uint8_t { fsdp1, fsdp2 };
// one_f_one_b: PipeDream-Flush / Megatron 1F1B; interleaved: Megatron's virtual stages.
enum class pipeline_schedule : std::uint8_t { one_f_one_b, interleaved };

inline constexpr std::array<strategy, 7> all_strategies{strategy::ddp,       strategy::zero1,        strategy::zero2,
                                                        strategy::zero3,     strategy::fsdp_full,    strategy::fsdp_grad_op,
                                                        strategy::hsdp};

constexpr std::string_view to_string(strategy s) noexcept {
  switch (s) {
    case strategy::ddp: return "ddp";
    case strategy::zero1: return "zero1";
    case strategy::zero2: return "zero2";
    case strategy::zero3: return "zero3";
    case strategy::fsdp_full: return "fsdp-full";
    case strategy::fsdp_grad_op: return "fsdp-grad-op";
    case strategy::hsdp: return "hsdp";
    case strategy::zero0: return "zero0";
  }
  return "ddp";
}

constexpr std::optional<strategy> strategy_from_string(std::string_view name) {
  for (strategy s : all_strategies)
    if (to_string(s) == name) return s;
  if (name == to_string(strategy::zero0)) return strategy::zero0;
  return std::nullopt;
}

constexpr bool is_deepspeed(strategy s) { return s == strategy::zero1 || s == strategy::zero2 || s == strategy::zero3; }
constexpr bool is_fsdp(strategy s) {
  return s == strategy::fsdp_full || s == strategy::fsdp_grad_op || s == strategy::hsdp;
}
// Which of ZeRO's partitions the strategy applies (FSDP FULL_SHARD = stage 3, SHARD_GRAD_OP = 2).
constexpr sharding sharding_of(strategy s) {
  switch (s) {
    case strategy::ddp: return sharding::none;
    // BF16_Optimizer partitions the fp32 master and the optimizer state over the ranks
    // (bf16_optimizer.py v0.16.5 fp32_groups_flat_partition); FP16_Optimizer's rank run overrides it.
    case strategy::zero0:
    case strategy::zero1: return sharding::optimizer_state;
    case strategy::zero2:
    case strategy::fsdp_grad_op: return sharding::gradients;
    case strategy::zero3:
    case strategy::fsdp_full:
    case strategy::hsdp: return sharding::full;
  }
  return sharding::none;
}

// torch/csrc/distributed/c10d/reducer.hpp (v2.5.0): kDefaultFirstBucketBytes = 1 MiB,
// kDefaultBucketBytesCap = 25 MiB (torch/nn/parallel/distributed.py bucket_cap_mb=25).
struct ddp_settings {
  bytes bucket_cap = bytes{25ULL << 20};
  bytes first_bucket = bytes{1ULL << 20};
  bool gradient_as_bucket_view = false;  // DistributedDataParallel default
};

// DeepSpeed's own 16-bit engine (ds_config "fp16" / "bf16" enabled): it casts the module to
// 16 bits and its optimizer wrapper steps an fp32 master partition (deepspeed/runtime/engine.py
// v0.16.5 _configure_distributed_model: module.half() / module.bfloat16()). none: the engine
// runs the module as the training loop built it (torch autocast or a model cast by the user).
enum class engine_precision : std::uint8_t { none, fp16, bf16 };

constexpr std::string_view to_string(engine_precision e) noexcept {
  return e == engine_precision::fp16 ? "fp16" : e == engine_precision::bf16 ? "bf16" : "none";
}

constexpr std::optional<engine_precision> engine_precision_from_string(std::string_view name) {
  for (engine_precision e : {engine_precision::none, engine_precision::fp16, engine_precision::bf16})
    if (to_string(e) == name) return e;
  return std::nullopt;
}

// deepspeed/runtime/zero/config.py (v0.16.5, commit 38327e07) defaults; sizes in elements.
struct deepspeed_settings {
  std::uint64_t reduce_bucket_size = 500'000'000;
  std::uint64_t allgather_bucket_size = 500'000'000;
  std::uint64_t prefetch_bucket_size = 50'000'000;       // stage3_prefetch_bucket_size
  std::uint64_t max_live_parameters = 1'000'000'000;     // stage3_max_live_parameters
  std::uint64_t param_persistence_threshold = 100'000;  // stage3_param_persistence_threshold
  bool contiguous_gradients = true;
  // overlap_comm: None -> True for stage 3 only (config.py overlap_comm_valid).
  std::optional<bool> overlap_comm{};
  engine_precision precision = engine_precision::none;
};

struct parallel_spec {
  strategy engine = strategy::ddp;
  std::uint64_t gpus_per_node = 1;
  std::uint64_t nodes = 1;
  std::uint64_t tp = 1;  // tensor-parallel degree (Megatron column/row-parallel linears)
  std::uint64_t pp = 1;  // pipeline stages
  bool sp = false;       // sequence parallelism (Korthikanti et al. 2022): needs tp > 1
  pipeline_schedule schedule = pipeline_schedule::one_f_one_b;
  std::uint64_t virtual_stages = 1;  // model chunks per pipeline rank with the interleaved schedule
  bool offload_optimizer = false;    // optimizer state and step on the host (ZeRO-Offload, FSDP CPUOffload)
  bool offload_parameters = false;   // parameter shards on the host (ZeRO-3 offload_param, FSDP offload_params)
  bool offload_activations = false;  // checkpointed block inputs on the host
  bytes host_memory_per_node{};      // RAM of one node; zero: not checked
  bool zero_init = true;             // model built partitioned (deepspeed.zero.Init / meta-device init)
  fsdp_api fsdp = fsdp_api::fsdp1;
  ddp_settings ddp{};
  deepspeed_settings deepspeed{};
};

constexpr std::uint64_t world_size(const parallel_spec& p) { return detail::checked_mul(p.gpus_per_node, p.nodes); }
constexpr std::uint64_t data_parallel_degree(const parallel_spec& p) { return world_size(p) / (p.tp * p.pp); }
// Ranks one parameter is sharded over: the data-parallel group, or (HYBRID_SHARD) its part on one node.
constexpr std::uint64_t shard_degree(const parallel_spec& p) {
  const std::uint64_t dp = data_parallel_degree(p);
  if (p.engine != strategy::hsdp) return dp;
  const std::uint64_t in_node = p.gpus_per_node / (p.tp * p.pp);
  return in_node == 0 ? 1 : (in_node < dp ? in_node : dp);
}
constexpr bool overlap_comm(const parallel_spec& p) {
  return p.deepspeed.overlap_comm.value_or(p.engine == strategy::zero3);
}

constexpr const parallel_spec& validate(const parallel_spec& p) {
  using detail::require;
  constexpr auto bad = error_code::invalid_run;
  require(p.gpus_per_node > 0, bad, "parallel.gpus_per_node", "must be > 0", p.gpus_per_node);
  require(p.nodes > 0, bad, "parallel.nodes", "must be > 0", p.nodes);
  require(p.tp > 0, bad, "parallel.tp", "must be > 0", p.tp);
  require(p.pp > 0, bad, "parallel.pp", "must be > 0", p.pp);
  require(world_size(p) % detail::checked_mul(p.tp, p.pp) == 0, bad, "parallel.tp * parallel.pp",
          "must divide the number of GPUs (gpus_per_node * nodes)", detail::checked_mul(p.tp, p.pp));
  require(!p.sp || p.tp > 1, bad, "parallel.sp", "needs parallel.tp > 1", p.tp);
  require(p.virtual_stages > 0, bad, "parallel.virtual_stages", "must be > 0", p.virtual_stages);
  require(p.virtual_stages == 1 || (p.schedule == pipeline_schedule::interleaved && p.pp > 1), bad,
          "parallel.virtual_stages", "must be 1 unless the interleaved schedule runs with pp > 1", p.virtual_stages);
  require(!p.offload_parameters || sharding_of(p.engine) == sharding::full, bad, "parallel.offload_parameters",
          "needs a strategy that shards parameters (zero3, fsdp-full, hsdp)", 1);
  require(p.engine == strategy::ddp || data_parallel_degree(p) > 1 || p.offload_optimizer, bad, "parallel.engine",
          "shards over data-parallel ranks: needs GPUs / (tp * pp) > 1 (or offload)", data_parallel_degree(p));
  require(p.ddp.bucket_cap.value > 0, bad, "parallel.ddp.bucket_cap", "must be > 0", 0);
  return p;
}

}  // namespace memscale
