// Two rules of the training step's event stream (memscale/allocator/step_events.hpp) around
// Hugging Face's apply_rotary_pos_emb: it makes q * cos, rotate_half's -x2 and cat,
// rotate_half(q) * sin and their sum one by one, the products dying after the sum
// (rotary_half_products); the unrotated q and k are its arguments, alive until k is rotated
// (free_after_readers). Without them StarCoder2's H100 step replays 6.1% under and Qwen2-MoE's
// 7.7% over (its first step's BLAS workspace then takes a head-gradient segment for good).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <string>

#include "h100_runs.hpp"

namespace replay_rotary_products_test {
namespace {

using memscale_test::h100_run;
using memscale_test::measured_run;
using memscale_test::replayed_training;
using memscale_test::reserved_error;

double family_error(const std::string& id) {
  const measured_run run = h100_run("gpu_families_h100.json", id);
  return reserved_error(replayed_training(run), run.reserved);
}

TEST_CASE("StarCoder2 on the H100: the rotation's products are replayed (reserved within 3%)",
          "[allocator][replay][rotary]") {
  const double error = family_error("h100-family-starcoder2-l8-b2-s2048-amp_bf16-sdpa");
  CHECK(error > -0.03);
  CHECK(error < 0.03);
}

TEST_CASE("Qwen2-MoE on the H100: the unrotated q and k live until k is rotated (reserved within 3%)",
          "[allocator][replay][rotary][experts]") {
  const double error = family_error("h100-family-qwen2moe-l4-e16-b2-s1024-pure_bf16-sdpa");
  CHECK(error > -0.03);
  CHECK(error < 0.03);
}

}  // namespace
}  // namespace replay_rotary_products_test
