// What is alive inside optimizer.step(): the for-loop Adam's previous denom beside the current
// tensor's two temporaries, in the optimizer's parameter order, and litgpt's bound logits
// (estimate/optimizer.hpp adam_loop_live, for_each_op_in_parameter_order; estimate/single_graph.hpp).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <array>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include "memscale/allocator/step_events.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace optimizer_step_live_test {
namespace {

using namespace memscale;
using nlohmann::json;

constexpr std::uint64_t loop_peak_of(std::initializer_list<std::uint64_t> sizes) {
  adam_loop_live live{};
  for (const std::uint64_t n : sizes) live.next(n);
  return live.peak;
}
// The first tensor alone holds two of its size; later ones add the denom before them.
static_assert(loop_peak_of({8}) == 16);
static_assert(loop_peak_of({8, 4}) == 16);
static_assert(loop_peak_of({4, 8, 2}) == 4 + 2 * 8);
static_assert(loop_peak_of({8, 8}) == 3 * 8);

json record(const std::string& id) {
  const json all =
      json::parse(std::ifstream(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_frameworks.json"));
  for (const json& r : all)
    if (r.at("id") == id) return r;
  FAIL("no record " << id);
  return {};
}

// The most live bytes during moment::optimizer_step of step `step`.
struct step_moment_peak {
  std::uint32_t step = 0;
  std::uint32_t at_step = 0;
  bool in_step = false;
  std::uint64_t live = 0;
  std::uint64_t peak = 0;
  std::array<std::uint64_t, 32768> size_of{};
  void alloc(std::uint32_t id, std::uint64_t size) {
    size_of[id] = size;
    live += size;
    if (in_step && at_step == step && live > peak) peak = live;
  }
  void free(std::uint32_t id) { live -= size_of[id]; }
  void enter(std::uint32_t s, allocator::moment m) {
    at_step = s;
    in_step = m == allocator::moment::optimizer_step;
  }
};

constexpr allocator::step_stream_options estimate_like{.blas_handles = 1, .tie_weights_copy = false,
                                                       .cast_weight_grads = false};

// The record `id`'s graph and run as estimate() builds them.
struct built_record {
  model_graph built;
  estimate_result estimate;
};
std::unique_ptr<built_record> built_of(const json& r) {
  const model_spec model = json_io::model_for_record(r);
  const training_spec run = json_io::run_from_record(r);
  auto b = std::make_unique<built_record>(built_record{build(model, run), {}});
  b->estimate = estimate(model, run);
  return b;
}

}  // namespace

TEST_CASE("step 1 of a for-loop AdamW that peaks inside optimizer.step() is estimated within 1%") {
  // litgpt 0.4.9 and 2023 full fine-tunes (lm_head, then wte: the head's denom beside the
  // embedding's two temporaries; a wide MLP: fc_1's beside fc_2's) and an HF-LLaMA step (gate_proj's
  // beside up_proj's), all with the step's peak inside optimizer.step().
  for (const char* id : {"cpu-litgpt-0.4.9-full-llama-gqa-v4k-b1-s256", "cpu-litgpt-full-llama-gqa-v4k-b1-s256",
                         "cpu-litgpt-0.4.9-full-llama-wide-v1k-b1-s64", "cpu-litgpt-full-llama-wide-v1k-b1-s64",
                         "cpu-hf-llama-wide-v1k-b1-s64"}) {
    INFO(id);
    const json r = record(id);
    const json& d = r.at("detail");
    REQUIRE(d.at("s1_peak_opt").get<double>() > d.at("s1_peak_bwd").get<double>());
    const auto b = built_of(r);
    CHECK(b->estimate.first_step.at == phase::optimizer_step);
    const double first = r.at("first_step_peak_bytes").get<double>();
    CHECK(std::abs(static_cast<double>(b->estimate.first_step.tensor.value) / first - 1.0) < 0.01);
  }
}

TEST_CASE("the wide-MLP steps' steady peak is inside optimizer.step() too, within 1%") {
  for (const char* id : {"cpu-litgpt-0.4.9-full-llama-wide-v1k-b1-s64", "cpu-hf-llama-wide-v1k-b1-s64"}) {
    INFO(id);
    const json r = record(id);
    const auto b = built_of(r);
    CHECK(b->estimate.steady.at == phase::optimizer_step);
    const double measured = r.at("measured_bytes").get<double>();
    CHECK(std::abs(static_cast<double>(b->estimate.steady.tensor.value) / measured - 1.0) < 0.01);
  }
}

TEST_CASE("the for-loop's temporaries follow the parameter order: litgpt steps its head first") {
  json r = record("cpu-litgpt-0.4.9-full-llama-gqa-v4k-b1-s256");
  const std::uint64_t head = 4000 * 256;  // lm_head and wte, bf16
  {
    const auto b = built_of(r);
    const graph& g = b->built.stack();
    // lm_head's denom, then wte's sqrt and quotient; measured alone on torch 1.13: one such
    // tensor 4,096,010 B above the step's start, two in a row 6,144,010 B.
    CHECK(optimizer_step_temporaries(g, b->built.run) == storage(dtype::bf16, 3 * head));
    // The step's fp32 logits, bound in fit(), are in the step's moment.
    CHECK(g.carried == storage(dtype::fp32, 256 * 4000));
    CHECK(b->estimate.first_step.breakdown.activations == g.inputs + g.carried);
  }
  // HF modules register the head last, after the final norm: twice the head, plus the norm's denom.
  r["model"]["impl"] = "hf-transformers";
  r["framework"] = json{{"name", "hf"}, {"version", "4.51 (re-implemented)"}};
  r["train"]["output_cast"] = "none";
  const auto hf = built_of(r);
  CHECK(optimizer_step_temporaries(hf->built.stack(), hf->built.run) == storage(dtype::bf16, 2 * head + 256));
  CHECK(hf->built.stack().carried.value == 0);
}

TEST_CASE("only the for-loop Adam keeps the previous denom") {
  training_spec base{.micro_batch = 1, .seq_len = 64, .prec = precision::pure_bf16};
  base.optimizer = optimizer_kind::adamw;
  base.device = device_kind::cpu;
  training_spec loop = base;
  loop.optimizer_impl = optimizer_implementation::for_loop;
  CHECK(step_temporaries_of(100, 1000, 250, loop) == storage(dtype::bf16, 250));
  CHECK(step_temporaries_of(100, 1000, loop) == storage(dtype::bf16, 200));  // one tensor at a time
  training_spec foreach = base;
  foreach.optimizer_impl = optimizer_implementation::foreach;
  foreach.torch_version = 201;
  CHECK(step_temporaries_of(100, 1000, 250, foreach) == storage(dtype::bf16, 1000));
  training_spec lion = loop;
  lion.optimizer = optimizer_kind::lion;
  CHECK(step_temporaries_of(100, 1000, 250, lion) == storage(dtype::bf16, 200));
}

TEST_CASE("the allocator's optimizer step holds what the estimate's step candidate holds") {
  for (const char* id : {"cpu-litgpt-0.4.9-full-llama-gqa-v4k-b1-s256", "cpu-litgpt-0.4.9-full-llama-wide-v1k-b1-s64",
                         "cpu-hf-llama-wide-v1k-b1-s64"}) {
    INFO(id);
    const auto b = built_of(json(record(id)));
    for (const std::uint32_t step : {1U, 2U}) {
      const peak_estimate& e = step == 1 ? b->estimate.first_step : b->estimate.steady;
      if (step == 1) REQUIRE(e.at == phase::optimizer_step);
      if (e.at != phase::optimizer_step) continue;  // the gqa record's steady peak is in backward
      auto sink = std::make_unique<step_moment_peak>();
      sink->step = step;
      allocator::emit_training_steps<32768, 8192>(b->built.stack(), b->built.run, estimate_like, *sink);
      CHECK(sink->peak == e.tensor.value);
    }
  }
}

}  // namespace optimizer_step_live_test
