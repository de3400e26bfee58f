// The cluster planner (memscale/cluster_planner.hpp): the smallest fitting configuration, a
// global batch kept exactly, every candidate listed with its breakdown.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <memory>
#include <string>

#include "error_capture.hpp"
#include "memscale/cluster_planner.hpp"
#include "memscale/json/hf_config.hpp"
#include "memscale/presets.hpp"

namespace cluster_planner_test {
namespace {
using namespace memscale;

cluster_spec a100_nodes(std::uint64_t nodes, bytes host) {
  return {.gpu = *find_gpu("a100-80gb"), .gpus_per_node = 8, .nodes = nodes, .host_memory_per_node = host};
}

// Every layout considered is one the per-GPU estimate takes for the model (it would refuse
// the others and stop the search): data parallelism and optimizer-state sharding only.
void check_layer_unit_layouts(const model_spec& model, const training_spec& run) {
  std::unique_ptr<cluster_plan> plan;
  REQUIRE_NOTHROW(plan = std::make_unique<cluster_plan>(plan_cluster(model, run, a100_nodes(2, {}))));
  REQUIRE(plan->count > 0);
  for (std::size_t i = 0; i < plan->count; ++i) {
    const parallel_spec& p = plan->considered[i].layout;
    CHECK(p.tp == 1);
    CHECK(p.pp == 1);
    CHECK(!p.offload_parameters);
    const sharding shard = sharding_of(p.engine);
    CHECK((world_size(p) == 1 || shard == sharding::none || shard == sharding::optimizer_state));
  }
}

std::string config(const std::string& name) {
  return std::string(MEMSCALE_SOURCE_DIR) + "/tests/data/hf_configs/" + name + ".json";
}
}  // namespace

TEST_CASE("Cluster planner: DeepSeek and hybrid stacks are searched over the layouts modelled for them",
          "[cluster]") {
  const training_spec run{.micro_batch = 1, .seq_len = 1024, .prec = precision::amp_bf16};
  check_layer_unit_layouts(json_io::load_hf_model(config("deepseek-ai--DeepSeek-V2-Lite")), run);
  training_spec torch_kernels = run;
  torch_kernels.ssm_kernels = ssm_kernel_choice::torch;
  check_layer_unit_layouts(json_io::load_hf_model(config("ssm-multimodal/tiiuae--Falcon-H1-0.5B-Base")), torch_kernels);
  // A pure Mamba stack's stages split layers: pipeline candidates stay.
  const model_spec mamba = json_io::load_hf_model(config("ssm-multimodal/state-spaces--mamba-130m-hf"));
  const parallel_spec stages{.engine = strategy::ddp, .gpus_per_node = 2, .nodes = 1, .pp = 2};
  CHECK_NOTHROW(estimate_per_gpu(mamba, torch_kernels, stages));
}

TEST_CASE("Cluster planner: a small model fits one GPU with plain DDP", "[cluster]") {
  const training_spec run{.micro_batch = 4, .seq_len = 512, .prec = precision::amp_bf16};
  const auto plan = plan_cluster(presets::gpt2, run, a100_nodes(1, {}));
  REQUIRE(plan.found);
  CHECK(world_size(plan.best.layout) == 1);
  CHECK(plan.best.layout.engine == strategy::ddp);
  CHECK(plan.best.run.micro_batch * plan.best.run.grad_accum == 4);
}

TEST_CASE("Cluster planner: 70B needs several GPUs, the choice fits, keeps the global batch, is the smallest",
          "[cluster]") {
  const training_spec run{.micro_batch = 1, .seq_len = 4096, .prec = precision::amp_bf16};
  const auto plan = plan_cluster(presets::llama_2_70b, run, a100_nodes(4, bytes{1ULL << 40}), {.global_batch = 64});
  REQUIRE(plan.found);
  const auto& best = plan.best;
  CHECK(best.estimate.peak.device <= plan.budget);
  CHECK(best.estimate.host.fits);
  CHECK(best.estimate.host.per_node <= bytes{1ULL << 40});
  CHECK(best.run.micro_batch * best.run.grad_accum * data_parallel_degree(best.layout) == 64);
  CHECK(world_size(best.layout) > 1);
  CHECK(plan.count > 10);
  for (std::size_t i = 0; i < plan.count; ++i) {
    const auto& c = plan.considered[i];
    INFO("candidate " << i << " " << to_string(c.layout.engine));
    CHECK(c.run.micro_batch * c.run.grad_accum * data_parallel_degree(c.layout) == 64);
    if (world_size(c.layout) < world_size(best.layout)) CHECK_FALSE(c.fits());
    if (c.fits()) CHECK(c.estimate.peak.device <= plan.budget);
  }
}

TEST_CASE("Cluster planner: nothing fits when the nodes' RAM cannot hold the offloaded states", "[cluster]") {
  const training_spec run{.micro_batch = 1, .seq_len = 4096, .prec = precision::amp_bf16};
  const auto plan = plan_cluster(presets::llama_2_70b, run, {.gpu = *find_gpu("rtx3090"), .gpus_per_node = 2, .nodes = 1,
                                                             .host_memory_per_node = bytes{64ULL << 30}});
  CHECK_FALSE(plan.found);
  CHECK(plan.count > 0);
}

TEST_CASE("Cluster planner: --tp / --pp given are kept by every candidate, impossible ones refused", "[cluster]") {
  const training_spec run{.micro_batch = 1, .seq_len = 4096, .prec = precision::amp_bf16};
  const auto plan = std::make_unique<cluster_plan>(
      plan_cluster(presets::llama_2_70b, run, a100_nodes(4, bytes{1ULL << 40}), {.global_batch = 64, .tp = 4, .pp = 2}));
  REQUIRE(plan->count > 0);
  for (std::size_t i = 0; i < plan->count; ++i) {
    CHECK(plan->considered[i].layout.tp == 4);
    CHECK(plan->considered[i].layout.pp == 2);
  }
  CHECK(memscale_test::contains(memscale_test::error_message([&] {
    (void)plan_cluster(presets::llama_2_70b, run, a100_nodes(1, {}), {.tp = 64, .pp = 128});
  }), "cluster.tp must be at most the GPUs of one node (got 64)"));
  CHECK(memscale_test::contains(memscale_test::error_message([&] {
    (void)plan_cluster(presets::llama_2_70b, run, a100_nodes(1, {}), {.tp = 8, .pp = 128});
  }), "cluster.tp * cluster.pp must be at most the cluster's GPUs (got 1024)"));
  CHECK(memscale_test::contains(memscale_test::error_message([&] {
    (void)plan_cluster(presets::llama_2_70b, run, a100_nodes(1, {}), {.pp = 3});
  }), "cluster.pp must divide the model's layers (got 3)"));
}

TEST_CASE("Cluster planner: the run's offload is the least every candidate uses", "[cluster]") {
  training_spec run{.micro_batch = 2, .seq_len = 2048, .prec = precision::amp_bf16};
  run.offload_optimizer = true;
  run.offload_activations = true;
  run.ckpt = checkpointing::full;  // what offload_activations moves
  const auto plan = std::make_unique<cluster_plan>(plan_cluster(presets::llama_2_13b, run, a100_nodes(1, {})));
  REQUIRE(plan->count > 0);
  for (std::size_t i = 0; i < plan->count; ++i) {
    CHECK(plan->considered[i].layout.offload_optimizer);
    CHECK(plan->considered[i].layout.offload_activations);
  }
}

TEST_CASE("Cluster planner: a layout too large to estimate is skipped and counted, not the end of the plan",
          "[cluster]") {
  // Every layout overflows at micro-batch 1: nothing found, every one counted.
  const training_spec huge{.micro_batch = 1, .seq_len = 1ULL << 33};
  const auto none = std::make_unique<cluster_plan>(plan_cluster(presets::t5_small, huge, a100_nodes(1, {})));
  CHECK_FALSE(none->found);
  CHECK(none->overflowed > 0);
  CHECK(none->count == 0);
  // Only large micro-batches overflow: the largest one that fits is still found.
  const training_spec run{.micro_batch = 1, .seq_len = 8192, .prec = precision::pure_bf16};
  const auto plan = std::make_unique<cluster_plan>(
      plan_cluster(presets::llama_3_8b, run, a100_nodes(1, {}), {.global_batch = std::uint64_t{1} << 32}));
  REQUIRE(plan->found);
  CHECK(plan->best.run.micro_batch * plan->best.run.grad_accum * data_parallel_degree(plan->best.layout) ==
        std::uint64_t{1} << 32);
  CHECK(memscale_test::contains(memscale_test::error_message([&] {
    (void)plan_cluster(presets::gpt2, run, a100_nodes(1, {}), {.global_batch = (std::uint64_t{1} << 32) + 1});
  }), "cluster.global_batch must be at most 2^32"));
}

TEST_CASE("Cluster planner: no_sync applies to the engines that have it", "[cluster]") {
  training_spec run{.micro_batch = 1, .seq_len = 2048, .prec = precision::amp_bf16};
  run.no_sync = true;
  const auto plan = std::make_unique<cluster_plan>(plan_cluster(presets::llama_2_13b, run, a100_nodes(1, {}),
                                                                {.global_batch = 16}));
  REQUIRE(plan->count > 0);
  for (std::size_t i = 0; i < plan->count; ++i) {
    const auto& c = plan->considered[i];
    const bool partitions = c.layout.engine == strategy::zero2 || c.layout.engine == strategy::zero3;
    CHECK(c.run.no_sync == !partitions);
  }
}

TEST_CASE("Cluster planner: a bf16 run on GPUs without bf16 is refused, naming fp16", "[cluster]") {
  const training_spec run{.micro_batch = 1, .seq_len = 512, .prec = precision::amp_bf16};
  const cluster_spec t4s{.gpu = *find_gpu("t4"), .gpus_per_node = 4, .nodes = 1};
  CHECK(memscale_test::contains(memscale_test::error_message([&] { (void)plan_cluster(presets::gpt2, run, t4s); }),
                                "needs bf16 arithmetic, which the NVIDIA T4 does not have"));
  training_spec fp16 = run;
  fp16.prec = precision::amp_fp16;
  CHECK(plan_cluster(presets::gpt2, fp16, t4s).found);
}

}  // namespace cluster_planner_test
