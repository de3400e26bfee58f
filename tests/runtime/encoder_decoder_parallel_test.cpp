// Encoder-decoder models (T5) on the multi-GPU paths: the per-GPU estimate walks both stacks
// (memscale/parallel/rank_model.hpp), a path that cannot take the model refuses it, and
// build() never hands half of one to a one-stack path.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <memory>

#include "error_capture.hpp"
#include "memscale/cluster_planner.hpp"
#include "memscale/parallel/per_gpu.hpp"
#include "memscale/planner.hpp"
#include "memscale/presets.hpp"

namespace encoder_decoder_parallel_test {
namespace {
using namespace memscale;

model_spec t5(std::string_view name) { return *presets::find(name); }
}  // namespace

TEST_CASE("Per GPU: DDP on T5 is one rank's single-GPU estimate plus the gradient buckets", "[multi-gpu][t5]") {
  const training_spec r{.micro_batch = 8, .seq_len = 512};
  for (const char* name : {"t5-small", "t5-base", "flan-t5-base"}) {
    INFO(name);
    const model_spec m = t5(name);
    const estimate_result single = estimate(m, r);
    const per_gpu_estimate ddp = estimate_per_gpu(m, r, {.engine = strategy::ddp, .gpus_per_node = 2});
    // Was 2.96 GB for t5-small (the decoder alone) against 7.69 GB on one GPU.
    CHECK(ddp.peak.tensor == single.steady.tensor + single.gradient_bytes);
    CHECK(ddp.peak.breakdown.parameters == single.steady.breakdown.parameters);
    const per_gpu_estimate view =
        estimate_per_gpu(m, r, {.engine = strategy::ddp, .gpus_per_node = 2, .ddp = {.gradient_as_bucket_view = true}});
    CHECK(view.peak.tensor == single.steady.tensor);
  }
}

TEST_CASE("Per GPU: T5 sharding shares both stacks' states", "[multi-gpu][t5]") {
  const training_spec r{.micro_batch = 8, .seq_len = 512, .prec = precision::amp_bf16};
  const model_spec m = t5("t5-base");
  const auto ddp = estimate_per_gpu(m, r, {.engine = strategy::ddp, .gpus_per_node = 8});
  const auto zero1 = estimate_per_gpu(m, r, {.engine = strategy::zero1, .gpus_per_node = 8});
  const auto fsdp = estimate_per_gpu(m, r, {.engine = strategy::fsdp_full, .gpus_per_node = 8});
  CHECK(zero1.peak.breakdown.optimizer * std::uint64_t{8} >= estimate(m, r).optimizer_bytes);
  CHECK(zero1.peak.breakdown.optimizer < ddp.peak.breakdown.optimizer);
  CHECK(fsdp.peak.breakdown.parameters < ddp.peak.breakdown.parameters);
  CHECK(fsdp.gathered.value > 0);
}

TEST_CASE("T5: the paths that cannot take an encoder-decoder refuse it", "[multi-gpu][t5][errors]") {
  const training_spec r{.micro_batch = 2, .seq_len = 128};
  const model_spec m = t5("t5-small");
  CHECK(memscale_test::contains(memscale_test::error_message([&] { (void)build(m, r).stack(); }),
                                "[memscale.unsupported] model.arch is encoder_decoder: this path reads one stack"));
  CHECK(memscale_test::contains(memscale_test::error_message([&] {
    (void)estimate_per_gpu(m, r, {.engine = strategy::zero1, .gpus_per_node = 4, .tp = 2});
  }), "[memscale.unsupported] parallel.tp * parallel.pp must be 1 for an encoder-decoder model"));
  CHECK(memscale_test::contains(memscale_test::error_message([&] {
    (void)plan_cluster(m, r, {.gpu = *find_gpu("a100-80gb"), .gpus_per_node = 8}, {.tp = 2});
  }), "cluster.tp * cluster.pp must be 1 for an encoder-decoder model"));
}

TEST_CASE("T5: the cluster planner and the single-GPU planner take both stacks", "[multi-gpu][t5]") {
  const training_spec r{.micro_batch = 8, .seq_len = 512};
  const model_spec m = t5("t5-base");
  const auto plan = std::make_unique<cluster_plan>(plan_cluster(m, r, {.gpu = *find_gpu("a100-80gb"), .gpus_per_node = 8}));
  REQUIRE(plan->found);
  for (std::size_t i = 0; i < plan->count; ++i) {
    CHECK(plan->considered[i].layout.tp == 1);
    CHECK(plan->considered[i].layout.pp == 1);
  }
  // BALANCED offloads the checkpointed inputs of both stacks: more than the decoder's alone.
  const auto single = make_plan(m, r, *find_gpu("t4"));
  const mode_plan& balanced = single.modes[static_cast<std::size_t>(mode::balanced)];
  const training_spec b = balanced.run;
  const encoder_decoder_graph g = build(m, b).stacks;
  CHECK(checkpointed_block_inputs(g, b) > checkpointed_block_inputs(g.decoder, b));
  CHECK(balanced.cost.host_memory >= checkpointed_block_inputs(g, b));
}

}  // namespace encoder_decoder_parallel_test
