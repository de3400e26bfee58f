// Phi-3's and GLM-4's one gate_up_proj (model.fused_gate_up, graph/layers/mlp.hpp
// fused_gate_up_mlp) in the allocator replay: one [2F, H] parameter, gradient and optimizer
// state, and one [rows, 2F] output kept whole for the backward. Its freed segment later holds a
// parameter gradient that two F-wide halves could not (the Phi-3 H100 history: qkv and down
// gradients land in the 128 MiB gate_up output segments).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "error_capture.hpp"
#include "h100_runs.hpp"
#include "memscale/allocator/replay.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace allocator_fused_gate_up_test {
namespace {

using namespace memscale;
using namespace memscale::allocator;
using memscale_test::h100_run;
using memscale_test::measured_run;
using memscale_test::replayed_training;
using memscale_test::reserved_error;

constexpr std::uint64_t MiB = 1ULL << 20;

constexpr const char* phi3 = "h100-family-phi3-l8-b2-s2048-amp_bf16-sdpa";
constexpr const char* glm4 = "h100-family-glm4-l4-b2-s1024-pure_bf16-sdpa";

measured_run family_run(const std::string& id) { return h100_run("gpu_families_h100.json", id); }

struct sizes_sink {
  std::vector<std::uint64_t> setup, forward_1;
  std::uint32_t step = 0;
  moment at = moment::setup;
  void alloc(std::uint32_t, std::uint64_t size) {
    if (step == 0) setup.push_back(size);
    if (step == 1 && at == moment::middle_block_forward) forward_1.push_back(size);
  }
  void free(std::uint32_t) {}
  void enter(std::uint32_t s, moment m) {
    step = s;
    at = m;
  }
};

std::size_t count_of(const std::vector<std::uint64_t>& sizes, std::uint64_t size) {
  std::size_t n = 0;
  for (const std::uint64_t s : sizes) n += s == size ? 1 : 0;
  return n;
}

sizes_sink stream_of(const nlohmann::json& record) {
  const auto built = std::make_unique<model_graph>(
      build(json_io::model_for_record(record), json_io::run_from_record(record)));
  sizes_sink sink;
  emit_training_steps<16384, 16384>(built->stack(), built->run, {}, sink);
  return sink;
}

}  // namespace

// Phi-3 of the record: 8 layers, hidden 3072, intermediate 8192, fp32 parameters under autocast,
// 2 x 2048 tokens: gate_up_proj 16384 x 3072 x 4 B = 192 MiB, its output 4096 x 16384 x 2 B = 128 MiB.
TEST_CASE("Phi-3's gate_up_proj is one parameter and one output in the stream", "[allocator][stream][fused_gate_up]") {
  const measured_run run = family_run(phi3);
  const sizes_sink s = stream_of(run.record);
  CHECK(count_of(s.setup, 192 * MiB) == 8);
  CHECK(count_of(s.setup, 96 * MiB) == 8);  // down_proj only, no separate gate or up
  // Six middle layers, each one 128 MiB gate_up output (no 64 MiB gate and up outputs).
  CHECK(count_of(s.forward_1, 128 * MiB) == 6);
}

TEST_CASE("fused gate_up on the H100: Phi-3 and GLM-4 replayed reserved within 2% of measured",
          "[allocator][replay][fused_gate_up]") {
  const double phi3_error = reserved_error(replayed_training(family_run(phi3)), family_run(phi3).reserved);
  CHECK(phi3_error > -0.02);
  CHECK(phi3_error < 0.02);
  const double glm4_error = reserved_error(replayed_training(family_run(glm4)), family_run(glm4).reserved);
  CHECK(glm4_error > -0.02);
  CHECK(glm4_error < 0.02);
}

TEST_CASE("model.fused_gate_up needs a gated MLP", "[validate][error][fused_gate_up]") {
  model_spec m = presets::gpt2;
  m.fused_gate_up = true;
  const std::string msg = memscale_test::error_message([&] { (void)validate(m); });
  CHECK(msg.find("model.fused_gate_up") != std::string::npos);
  CHECK(msg.find("needs a gated mlp") != std::string::npos);
}

}  // namespace allocator_fused_gate_up_test
