// Mixture-of-experts steps in the allocator replay (memscale/allocator/step_events.hpp): from
// transformers 5 each layer's experts are one gate_up_proj and one down_proj parameter, so
// parameters, gradients and AdamW's state are a few large tensors per layer (the OLMoE H100
// history: 512 and 256 MiB each); before 5 every expert has its own matrices.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "h100_runs.hpp"
#include "memscale/allocator/replay.hpp"
#include "memscale/device_peak.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace allocator_experts_test {
namespace {

using namespace memscale;
using namespace memscale::allocator;
using memscale_test::h100_run;
using memscale_test::measured_run;
using memscale_test::replayed_training;
using memscale_test::reserved_error;

constexpr std::uint64_t MiB = 1ULL << 20;

// An H100 run of docs/data/gpu_families_h100.json.
measured_run family_run(const std::string& id) { return h100_run("gpu_families_h100.json", id); }

constexpr const char* olmoe = "h100-family-olmoe-l4-b2-s1024-pure_bf16-sdpa";
constexpr const char* qwen3moe = "h100-family-qwen3moe-l4-e32-b2-s1024-pure_bf16-sdpa";
constexpr const char* gpt_oss = "h100-family-gpt_oss-l4-e8-b2-s1024-pure_bf16-eager";
constexpr const char* qwen2moe = "h100-family-qwen2moe-l4-e16-b2-s1024-pure_bf16-sdpa";
constexpr const char* deepseek_v2 = "h100-family-deepseek_v2-lite-l4-e16-b2-s1024-pure_bf16-sdpa";

struct sizes_sink {
  std::vector<std::uint64_t> setup, optimizer_step_1, middle_forward_1;
  std::uint32_t step = 0;
  moment at = moment::setup;
  void alloc(std::uint32_t, std::uint64_t size) {
    if (step == 0) setup.push_back(size);
    if (step == 1 && at == moment::optimizer_step) optimizer_step_1.push_back(size);
    if (step == 1 && at == moment::middle_block_forward) middle_forward_1.push_back(size);
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

std::size_t first_of(const std::vector<std::uint64_t>& sizes, std::uint64_t size) {
  std::size_t i = 0;
  while (i < sizes.size() && sizes[i] != size) ++i;
  return i;
}

double reserved_error(const measured_run& run) { return reserved_error(replayed_training(run), run.reserved); }

// OLMoE (4 layers, 64 experts, hidden 2048, expert ffn 1024, bf16): gate_up_proj 64 x 2048 x 2048
// x 2 B = 512 MiB, down_proj 256 MiB; one expert's matrix 1024 x 2048 x 2 B = 4 MiB.
constexpr std::uint64_t gate_up_bytes = 512 * MiB;
constexpr std::uint64_t down_bytes = 256 * MiB;
constexpr std::uint64_t expert_matrix_bytes = 4 * MiB;

}  // namespace

TEST_CASE("transformers 5 experts: one gate_up and one down parameter per layer, and AdamW state to match",
          "[allocator][stream][experts]") {
  const measured_run run = family_run(olmoe);
  REQUIRE(run.record.at("software").at("transformers") == "5.17.0");
  const sizes_sink s = stream_of(run.record);
  CHECK(count_of(s.setup, gate_up_bytes) == 4);
  CHECK(count_of(s.setup, down_bytes) == 4);
  CHECK(count_of(s.setup, expert_matrix_bytes) == 0);
  // exp_avg and exp_avg_sq per parameter, then _foreach_sqrt's one list over the group.
  CHECK(count_of(s.optimizer_step_1, gate_up_bytes) == 4 * 3);
  CHECK(count_of(s.optimizer_step_1, down_bytes) == 4 * 3);
}

TEST_CASE("transformers 4 experts keep a matrix per expert in the stream", "[allocator][stream][experts]") {
  measured_run run = family_run(olmoe);
  run.record["software"]["transformers"] = "4.57.0";
  const sizes_sink s = stream_of(run.record);
  CHECK(count_of(s.setup, gate_up_bytes) == 0);
  CHECK(count_of(s.setup, down_bytes) == 0);
  // gate, up and down of 64 experts in 4 layers.
  CHECK(count_of(s.setup, expert_matrix_bytes) == 3 * 64 * 4);
}

TEST_CASE("stacked experts on the H100: OLMoE and Qwen3-MoE replayed reserved within 2% of measured",
          "[allocator][replay][experts]") {
  const double olmoe_error = reserved_error(family_run(olmoe));
  CHECK(olmoe_error > -0.02);
  CHECK(olmoe_error < 0.02);
  const double qwen3moe_error = reserved_error(family_run(qwen3moe));
  CHECK(qwen3moe_error > -0.02);
  CHECK(qwen3moe_error < 0.02);
}

// grouped_mm's weighted_out[inv_perm]: a [rows, hidden] tensor made while the weighted rows live
// (without it in the stream gpt-oss replays 6.7% under).
TEST_CASE("stacked experts on the H100: the gather back into token order brings gpt-oss within 2%",
          "[allocator][replay][experts]") {
  const double error = reserved_error(family_run(gpt_oss));
  CHECK(error > -0.02);
  CHECK(error < 0.02);
}

// Qwen2-MoE of the record (hidden 2048, expert ffn 1408, shared expert ffn 5632, top-4, 2 x 1024
// tokens, bf16): 8192 routed rows; gate_up's output 8192 x 2816 x 2 B = 44 MiB, the gathered rows
// 32 MiB, each shared-expert tensor 2048 x 5632 x 2 B = 22 MiB. Its H100 history (with frames)
// shows per layer the shared expert's tensors first, then the gathered rows, then one 44 MiB
// grouped_mm output and the 44 MiB tensor made from it (integrations/moe.py grouped_mm_experts_forward).
TEST_CASE("transformers 5 experts: the gated shared expert first, gate and up one [rows, 2F] output and its copy",
          "[allocator][stream][experts]") {
  const measured_run run = family_run(qwen2moe);
  REQUIRE(run.record.at("software").at("transformers") == "5.17.0");
  const sizes_sink s = stream_of(run.record);
  // Two middle layers, each the grouped_mm output and its copy.
  CHECK(count_of(s.middle_forward_1, 44 * MiB) == 2 * 2);
  CHECK(first_of(s.middle_forward_1, 22 * MiB) < first_of(s.middle_forward_1, 32 * MiB));
}

// Without the one [rows, 2F] output and the grouped_mm copies DeepSeek-V2-Lite replayed 6.2% under.
TEST_CASE("stacked experts on the H100: grouped_mm's one gate_up output brings DeepSeek-V2-Lite within 2%",
          "[allocator][replay][experts]") {
  const double error = reserved_error(h100_run("gpu_layer_kinds_h100.json", deepseek_v2));
  CHECK(error > -0.02);
  CHECK(error < 0.02);
}

TEST_CASE("a replayed mixture of experts takes the replayed band where its experts are stacked",
          "[allocator][band][experts]") {
  measured_run run = family_run(olmoe);
  const model_spec model = json_io::model_for_record(run.record);
  CHECK(replayed_band_of(model, json_io::run_from_record(run.record)).source == replayed_experts_band.source);
  run.record["software"]["transformers"] = "4.57.0";
  CHECK(replayed_band_of(model, json_io::run_from_record(run.record)).source ==
        band_of(run_class::unmeasured, band_quantity::device).source);
}

}  // namespace allocator_experts_test
