// The cluster planner (memscale/cluster_planner.hpp): the smallest fitting configuration, a
// global batch kept exactly, every candidate listed with its breakdown.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include "memscale/cluster_planner.hpp"
#include "memscale/presets.hpp"

namespace {
using namespace memscale;

cluster_spec a100_nodes(std::uint64_t nodes, bytes host) {
  return {.gpu = *find_gpu("a100-80gb"), .gpus_per_node = 8, .nodes = nodes, .host_memory_per_node = host};
}
}  // namespace

TEST_CASE("Cluster planner: a small model fits one GPU with plain DDP", "[cluster]") {
  const training_spec run{.micro_batch = 4, .seq_len = 512, .prec = precision::amp_bf16};
  const auto plan = plan_cluster(presets::gpt2, run, a100_nodes(1, {}));
  REQUIRE(plan.found);
  CHECK(world_size(plan.best.layout) == 1);
  CHECK(plan.best.layout.engine == strategy::ddp);
  CHECK(plan.best.run.micro_batch * plan.best.run.grad_accum == 4);
}

TEST_CASE("Cluster planner: 70B needs several GPUs; the choice fits, keeps the global batch, is the smallest",
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
