// Multi-GPU engine rules evaluate at compile time (memscale/parallel/*.hpp).
#include "memscale/parallel/per_gpu.hpp"
#include "memscale/presets.hpp"

namespace {
using namespace memscale;
using engines::korthikanti_layer_activations;
using engines::layer_shape;

// Korthikanti et al. 2022 Table 2 with s = 2048, b = 1, h = 12288, a = 96 (GPT-3 175B), t = 8.
constexpr layer_shape gpt3{.seq = 2048, .batch = 1, .hidden = 12288, .heads = 96};
constexpr std::uint64_t sbh = 2048ULL * 12288;
constexpr std::uint64_t scores = 5ULL * 96 * 2048 * 2048;  // 5as^2b
static_assert(korthikanti_layer_activations(gpt3, 1, false, checkpointing::none, true).value == 34 * sbh + scores);
static_assert(korthikanti_layer_activations(gpt3, 8, false, checkpointing::none, true).value == 10 * sbh + 3 * sbh + scores / 8);
static_assert(korthikanti_layer_activations(gpt3, 8, true, checkpointing::none, true).value == 34 * sbh / 8 + scores / 8);
static_assert(korthikanti_layer_activations(gpt3, 8, false, checkpointing::selective, true).value == 13 * sbh);
static_assert(korthikanti_layer_activations(gpt3, 8, true, checkpointing::selective, true).value == 34 * sbh / 8);
static_assert(korthikanti_layer_activations(gpt3, 8, false, checkpointing::full, true).value == 2 * sbh);
static_assert(korthikanti_layer_activations(gpt3, 8, true, checkpointing::full, true).value == 2 * sbh / 8);

// 1F1B: the first of 4 stages holds 4 micro-batches, the last 1; never more than the step has.
static_assert(engines::micro_batches_in_flight(0, 4, 16) == 4);
static_assert(engines::micro_batches_in_flight(3, 4, 16) == 1);
static_assert(engines::micro_batches_in_flight(0, 4, 2) == 2);

// DDP buckets: a second copy of every gradient unless the gradients are views into them.
static_assert(engines::ddp_bucket_bytes(bytes{1000}, {}).value == 1000);
static_assert(engines::ddp_bucket_bytes(bytes{1000}, {.gradient_as_bucket_view = true}).value == 0);
static_assert(engines::ddp_bucket_count(bytes{(1ULL << 20) + (50ULL << 20)}, {}) == 3);

// DeepSpeed's reduce bucket: 5e8 16-bit elements, doubled by overlap_comm in stages 1-2.
static_assert(engines::zero_reduce_bucket_bytes({.engine = strategy::zero2}, 2).value == 1'000'000'000);
static_assert(engines::zero_reduce_bucket_bytes({.engine = strategy::zero2, .deepspeed = {.overlap_comm = true}}, 2)
                  .value == 2'000'000'000);
static_assert(engines::zero_reduce_bucket_bytes({.engine = strategy::zero3}, 2).value == 1'000'000'000);
static_assert(engines::zero_reduce_bucket_bytes({.engine = strategy::fsdp_full}, 2).value == 0);

// HYBRID_SHARD shards inside a node only.
static_assert(shard_degree({.engine = strategy::hsdp, .gpus_per_node = 8, .nodes = 4}) == 8);
static_assert(shard_degree({.engine = strategy::fsdp_full, .gpus_per_node = 8, .nodes = 4}) == 32);

// The whole per-GPU estimate is a constant expression.
constexpr training_spec run{.micro_batch = 1, .seq_len = 128, .prec = precision::amp_bf16};
static_assert(estimate_per_gpu(presets::gpt2, run, {.engine = strategy::fsdp_full, .gpus_per_node = 4}).peak.tensor <
              estimate_per_gpu(presets::gpt2, run, {.engine = strategy::ddp, .gpus_per_node = 4}).peak.tensor);
}  // namespace
