// Per-GPU estimates of multi-GPU runs (memscale/parallel/per_gpu.hpp): engine rules and the
// invariants every strategy must keep.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <array>
#include <cstdint>

#include "error_capture.hpp"
#include "memscale/parallel/per_gpu.hpp"
#include "memscale/presets.hpp"

namespace parallel_test {
namespace {
using namespace memscale;

// A run longer than the model takes (GPT-2's 1024-row position table) is refused by
// memscale::validate(model, run), so the properties cover only the pairs that exist.
constexpr bool check_sequence_ok(const model_spec& m, const training_spec& r) {
  const auto limit = sequence_limit_of(m).tokens;
  return limit == 0 || r.seq_len <= limit;
}

constexpr std::array models{presets::gpt2_xl, presets::llama_2_7b, presets::llama_2_13b, presets::mistral_7b};
constexpr std::array runs{
    training_spec{.micro_batch = 1, .seq_len = 1024, .prec = precision::amp_bf16},
    training_spec{.micro_batch = 2, .seq_len = 2048, .prec = precision::pure_bf16, .ckpt = checkpointing::full},
    training_spec{.micro_batch = 4, .seq_len = 512, .prec = precision::amp_fp16, .grad_accum = 4},
};

bytes device_of(const model_spec& m, const training_spec& r, parallel_spec p) {
  return estimate_per_gpu(m, r, p).peak.device;
}
}  // namespace

TEST_CASE("Per GPU: ZeRO-3 <= ZeRO-2 <= ZeRO-1 <= DDP", "[parallel][property]") {
  for (const auto& m : models)
    for (const auto& r : runs)
      if (check_sequence_ok(m, r))
      for (std::uint64_t gpus : {2UL, 4UL, 8UL, 16UL}) {
        INFO(m.name << " gpus " << gpus << " prec " << to_string(r.prec));
        const parallel_spec base{.gpus_per_node = gpus};
        auto with = [&](strategy s) {
          parallel_spec p = base;
          p.engine = s;
          return device_of(m, r, p);
        };
        // ZeRO-3 keeps its gradient partition allocated from start-up (stage3.py
        // grad_partitions_flat_buffer); ZeRO-2 fills its partition only as backward reduces. On two
        // ranks that half of the gradients can outweigh the half of the parameters ZeRO-3 saves
        // while the loss backward runs, before ZeRO-2's first reduction.
        const bytes partition = gpus == 2 ? ceil_div(estimate(m, r).gradient_bytes, gpus) : bytes{};
        CHECK(with(strategy::zero3) <= with(strategy::zero2) + partition);
        CHECK(with(strategy::zero2) <= with(strategy::zero1));
        CHECK(with(strategy::zero1) <= with(strategy::ddp));
        CHECK(with(strategy::fsdp_full) <= with(strategy::fsdp_grad_op));
        CHECK(with(strategy::fsdp_grad_op) <= with(strategy::ddp));
      }
}

TEST_CASE("Per GPU: more GPUs never need more memory per GPU under sharding", "[parallel][property]") {
  for (const auto& m : models)
    for (const auto& r : runs)
      if (check_sequence_ok(m, r))
      for (strategy s : {strategy::zero1, strategy::zero2, strategy::zero3, strategy::fsdp_full,
                         strategy::fsdp_grad_op, strategy::hsdp}) {
        bytes previous = device_of(m, r, {.engine = s, .gpus_per_node = 2});
        for (std::uint64_t gpus : {4UL, 8UL, 16UL, 32UL, 64UL}) {
          INFO(m.name << " " << to_string(s) << " gpus " << gpus);
          const parallel_spec p{.engine = s, .gpus_per_node = gpus < 8 ? gpus : 8, .nodes = gpus < 8 ? 1 : gpus / 8};
          const bytes now = device_of(m, r, p);
          CHECK(now <= previous);
          previous = now;
        }
      }
}

TEST_CASE("Per GPU: offload never needs more GPU memory", "[parallel][property]") {
  for (const auto& m : models)
    for (const auto& r : runs)
      if (check_sequence_ok(m, r))
      for (strategy s : all_strategies) {
        INFO(m.name << " " << to_string(s));
        const parallel_spec p{.engine = s, .gpus_per_node = 8};
        parallel_spec opt = p;
        opt.offload_optimizer = true;
        CHECK(device_of(m, r, opt) <= device_of(m, r, p));
        if (sharding_of(s) == sharding::full) {
          parallel_spec both = opt;
          both.offload_parameters = true;
          CHECK(device_of(m, r, both) < device_of(m, r, opt));
        }
      }
}

TEST_CASE("DDP adds a persistent copy of every gradient in its buckets", "[parallel][ddp]") {
  const training_spec r = runs[0];
  const auto single = estimate(presets::llama_2_7b, r);
  const auto ddp = estimate_per_gpu(presets::llama_2_7b, r, {.gpus_per_node = 4});
  CHECK(ddp.peak.breakdown.gradients == single.steady.breakdown.gradients + single.gradient_bytes);
  const auto view = estimate_per_gpu(presets::llama_2_7b, r, {.gpus_per_node = 4, .ddp = {.gradient_as_bucket_view = true}});
  CHECK(view.peak.tensor == single.steady.tensor);
  CHECK(view.global_batch == 4);
}

TEST_CASE("Foreach optimizer temporaries are divided across shards", "[parallel][zero]") {
  // Llama-2-13B pure fp16 ZeRO-3 on 4 GPUs: the 56 GB (foreach) vs 30 GB (fused).
  training_spec r{.micro_batch = 1, .seq_len = 512, .prec = precision::pure_fp16};
  r.data_parallel = 4;
  r.shard = sharding::full;
  const auto foreach_run = estimate(presets::llama_2_13b, r);
  r.optimizer_impl = optimizer_implementation::fused;
  const auto fused_run = estimate(presets::llama_2_13b, r);
  CHECK(to_gb(foreach_run.steady.tensor) - to_gb(fused_run.steady.tensor) < 8.0);
}

TEST_CASE("offload_parameters under ZeRO-3 leaves only the gathered working set", "[parallel][zero]") {
  training_spec r{.micro_batch = 1, .seq_len = 512, .prec = precision::pure_bf16};
  r.data_parallel = 4;
  r.shard = sharding::full;
  const auto resident = estimate(presets::llama_2_13b, r);
  r.offload_parameters = true;
  const auto offloaded = estimate(presets::llama_2_13b, r);
  CHECK(offloaded.steady.breakdown.parameters < resident.steady.breakdown.parameters);
}

TEST_CASE("Pipeline: the first 1F1B stage holds p micro-batches, and is named as the peak rank", "[parallel][pp]") {
  const training_spec r{.micro_batch = 1, .seq_len = 2048, .prec = precision::pure_bf16, .grad_accum = 8};
  const auto e = estimate_per_gpu(presets::llama_2_13b, r, {.engine = strategy::zero1, .gpus_per_node = 8, .pp = 4});
  CHECK(e.peak_stage == 0);
  CHECK(e.peak_role == "first pipeline stage");
  const auto interleaved = estimate_per_gpu(
      presets::llama_2_13b, r,
      {.engine = strategy::zero1, .gpus_per_node = 8, .pp = 4, .schedule = pipeline_schedule::interleaved,
       .virtual_stages = 2});
  CHECK(interleaved.peak.breakdown.activations > e.peak.breakdown.activations);
}

TEST_CASE("Tensor parallelism: sequence parallelism and more ranks shrink activations", "[parallel][tp]") {
  const training_spec r{.micro_batch = 1, .seq_len = 4096, .prec = precision::pure_bf16, .grad_accum = 4};
  auto act = [&](std::uint64_t tp, bool sp) {
    return estimate_per_gpu(presets::llama_2_13b, r, {.engine = strategy::zero1, .gpus_per_node = 8, .tp = tp, .sp = sp})
        .peak.breakdown.activations;
  };
  CHECK(act(2, false) < act(1, false));
  CHECK(act(4, false) < act(2, false));
  CHECK(act(4, true) < act(4, false));
  CHECK(memscale_test::contains(memscale_test::error_message([&] {
    (void)estimate_per_gpu(presets::llama_2_13b, r, {.engine = strategy::zero1, .gpus_per_node = 6, .tp = 3});
  }), "parallel.tp must divide the model's attention heads (got 3)"));
}

TEST_CASE("Host memory per node is checked against the node's RAM", "[parallel][host]") {
  const training_spec r{.micro_batch = 1, .seq_len = 1024, .prec = precision::pure_bf16};
  parallel_spec p{.engine = strategy::zero3, .gpus_per_node = 8, .offload_optimizer = true,
                  .offload_parameters = true, .host_memory_per_node = bytes{64ULL << 30}};
  const auto small = estimate_per_gpu(presets::llama_2_13b, r, p);
  CHECK_FALSE(small.host.fits);  // 13B x 16 B/param x 1.5 > 64 GiB
  CHECK(small.host.per_node > bytes{200ULL << 30});
  p.host_memory_per_node = bytes{1ULL << 40};
  CHECK(estimate_per_gpu(presets::llama_2_13b, r, p).host.fits);
  CHECK(estimate_per_gpu(presets::llama_2_13b, r, p).traffic.host_link.value > 0);
}

TEST_CASE("Invalid layouts name the field", "[parallel][errors]") {
  const training_spec r{};
  CHECK(memscale_test::contains(memscale_test::error_message([&] {
    (void)estimate_per_gpu(presets::gpt2, r, {.gpus_per_node = 8, .tp = 3});
  }), "parallel.tp * parallel.pp must divide the number of GPUs"));
  CHECK(memscale_test::contains(memscale_test::error_message([&] {
    (void)estimate_per_gpu(presets::gpt2, r, {.engine = strategy::zero2, .gpus_per_node = 4, .offload_parameters = true});
  }), "parallel.offload_parameters needs a strategy that shards parameters"));
  CHECK(memscale_test::contains(memscale_test::error_message([&] {
    (void)estimate_per_gpu(presets::gpt2, r, {.gpus_per_node = 4, .pp = 4, .virtual_stages = 2});
  }), "parallel.virtual_stages must be 1 unless"));
}

}  // namespace parallel_test
