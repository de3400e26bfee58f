// Two rules of the training step's event stream (memscale/allocator/step_events.hpp) that decide
// where the steady step's logits and the head's gradient land, and so how many segments its
// backward takes: a Python frame's locals are blocks of their own until the frame closes
// (follow_frame), and under autocast a linear's weight gradient comes out in 16 bits before the
// fp32 one is made from it (gradients_of). Without them Falcon-H1-0.5B's H100 step replays 14.4%
// under and the DeepSeek-V3 shape 8.5% under.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <string>

#include "h100_runs.hpp"

namespace replay_frame_and_cast_test {
namespace {

using memscale_test::h100_run;
using memscale_test::measured_run;
using memscale_test::replayed_training;
using memscale_test::reserved_error;

double layer_kind_error(const std::string& id) {
  const measured_run run = h100_run("gpu_layer_kinds_h100.json", id);
  return reserved_error(replayed_training(run), run.reserved);
}

TEST_CASE("Falcon-H1 on the H100: the step-2 backward's three new segments are replayed (reserved within 2%)",
          "[allocator][replay][ssm]") {
  const double error = layer_kind_error("h100-family-falcon_h1-0.5b-b2-s1024-amp_bf16-sdpa-torchpath");
  CHECK(error > -0.02);
  CHECK(error < 0.02);
}

TEST_CASE("the DeepSeek-V3 shape on the H100: the step-2 logits' segments are replayed (reserved within 2%)",
          "[allocator][replay][experts]") {
  const double error = layer_kind_error("h100-family-deepseek_v3-h1024-l4-e16-b2-s1024-amp_bf16-sdpa");
  CHECK(error > -0.02);
  CHECK(error < 0.02);
}

}  // namespace
}  // namespace replay_frame_and_cast_test
