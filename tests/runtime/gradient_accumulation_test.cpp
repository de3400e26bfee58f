// What each data-parallel engine keeps of the gradients between micro-steps
// (memscale/estimate.hpp gradient_residency_of, memscale/parallel/per_gpu.hpp): DeepSpeed
// ZeRO-2/3 and FSDP reduce-scatter every micro-step into a partitioned accumulation buffer;
// only FSDP under no_sync() keeps unsharded gradients; ZeRO-2/3 refuse no_sync.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>

#include "error_capture.hpp"
#include "memscale/parallel/per_gpu.hpp"
#include "memscale/presets.hpp"

namespace gradient_accumulation_test {
namespace {
using namespace memscale;

// Llama-2-7B, sequence 4096, bf16 autocast, full checkpointing, 8 GPUs.
training_spec llama_run(std::uint64_t accumulation) {
  return {.micro_batch = 1, .seq_len = 4096, .prec = precision::amp_bf16, .grad_accum = accumulation,
          .ckpt = checkpointing::full};
}

per_gpu_estimate on_eight(strategy s, const training_spec& r) {
  return estimate_per_gpu(presets::llama_2_7b, r, {.engine = s, .gpus_per_node = 8});
}

// 1/8 of Llama-2-7B's gradients in fp32 (amp keeps fp32 parameters and gradients).
const bytes eighth_of_gradients = ceil_div(estimate(presets::llama_2_7b, llama_run(1)).gradient_bytes, std::uint64_t{8});
}  // namespace

TEST_CASE("ZeRO-2/3 keep a partitioned gradient buffer through accumulation, not unsharded gradients",
          "[multi-gpu][zero][accumulation]") {
  for (strategy s : {strategy::zero2, strategy::zero3}) {
    INFO(to_string(s));
    const auto one = on_eight(s, llama_run(1));
    const auto two = on_eight(s, llama_run(2));
    const auto eight = on_eight(s, llama_run(8));
    // Was 25.10 GiB per GPU at accumulation 2: every gradient kept whole.
    CHECK(two.peak.breakdown.gradients < eighth_of_gradients * std::uint64_t{2});
    // At most the partition beyond one micro-step (allocated from the first one on).
    CHECK(two.peak.tensor <= one.peak.tensor + eighth_of_gradients);
    CHECK(eight.peak.device == two.peak.device);  // nothing grows with more micro-steps
  }
}

TEST_CASE("ZeRO-3's partitioned gradient buffer is allocated whatever the accumulation", "[multi-gpu][zero]") {
  // deepspeed/runtime/zero/stage3.py: grad_partitions_flat_buffer is made once, on the device
  // unless the optimizer is offloaded; accumulation 1 and 2 need the same.
  const auto one = on_eight(strategy::zero3, llama_run(1));
  const auto two = on_eight(strategy::zero3, llama_run(2));
  CHECK(one.peak.breakdown.gradients >= eighth_of_gradients);
  CHECK(one.peak.device == two.peak.device);
}

TEST_CASE("FSDP reduce-scatters every micro-step unless the loop uses no_sync", "[multi-gpu][fsdp][accumulation]") {
  training_spec r = llama_run(4);
  const auto sharded = on_eight(strategy::fsdp_full, r);
  r.no_sync = true;
  const auto unsharded = on_eight(strategy::fsdp_full, r);
  CHECK(sharded.peak.breakdown.gradients < eighth_of_gradients * std::uint64_t{2});
  CHECK(unsharded.peak.breakdown.gradients >= eighth_of_gradients * std::uint64_t{8});
  CHECK(unsharded.peak.device > sharded.peak.device);
  // no_sync reduces once per step instead of once per micro-step.
  CHECK(unsharded.traffic.collectives < sharded.traffic.collectives);
  // HYBRID_SHARD and SHARD_GRAD_OP follow the same rule.
  for (strategy s : {strategy::fsdp_grad_op, strategy::hsdp}) {
    INFO(to_string(s));
    training_spec plain = llama_run(4);
    training_spec skipping = plain;
    skipping.no_sync = true;
    CHECK(on_eight(s, plain).peak.breakdown.gradients < on_eight(s, skipping).peak.breakdown.gradients);
  }
}

TEST_CASE("no_sync changes no memory without sharded gradients", "[multi-gpu][ddp][accumulation]") {
  training_spec r = llama_run(4);
  r.seq_len = 1024;  // GPT-2 XL's position table
  for (strategy s : {strategy::ddp, strategy::zero1}) {
    INFO(to_string(s));
    training_spec skipping = r;
    skipping.no_sync = true;
    const auto plain = estimate_per_gpu(presets::gpt2_xl, r, {.engine = s, .gpus_per_node = 4});
    const auto under = estimate_per_gpu(presets::gpt2_xl, skipping, {.engine = s, .gpus_per_node = 4});
    CHECK(plain.peak.device == under.peak.device);
    if (s == strategy::ddp) CHECK(under.traffic.collectives * std::uint64_t{4} == plain.traffic.collectives);
  }
}

TEST_CASE("DeepSpeed ZeRO-2/3 cannot run a loop that skips reduction (engine.no_sync asserts)", "[multi-gpu][zero]") {
  training_spec r = llama_run(2);
  r.no_sync = true;
  for (strategy s : {strategy::zero2, strategy::zero3})
    CHECK(memscale_test::contains(memscale_test::error_message([&] { (void)on_eight(s, r); }),
                                  "run.no_sync cannot be used with DeepSpeed ZeRO-2/3"));
  CHECK_NOTHROW(on_eight(strategy::zero1, r));
}

TEST_CASE("Single-GPU estimate: sharded accumulation keeps 1/N, no_sync keeps every gradient", "[multi-gpu][estimate]") {
  training_spec r{.micro_batch = 1, .seq_len = 512, .prec = precision::amp_bf16, .grad_accum = 4};
  r.data_parallel = 4;
  r.shard = sharding::full;
  const auto partitioned = estimate(presets::gpt2_xl, r);
  r.no_sync = true;
  const auto whole = estimate(presets::gpt2_xl, r);
  CHECK(partitioned.steady.breakdown.gradients < whole.steady.breakdown.gradients);
  CHECK(whole.steady.breakdown.gradients >= partitioned.gradient_bytes);
}

}  // namespace gradient_accumulation_test
