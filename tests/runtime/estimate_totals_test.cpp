// The estimate walks its graph once for every per-op total (detail::totals_of) and once for
// the saved activations, where each figure also has a function of its own (parameter_count,
// parameter_bytes, optimizer_state_bytes, large_tensor_count, ...). Property: on many runs
// the one-pass figures are the separate functions' figures, so the fast path cannot drift
// from the definitions the static tests pin down.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <iterator>
#include <random>

#include "memscale/memscale.hpp"

namespace estimate_totals_test {
namespace {

using namespace memscale;

training_spec random_run(std::mt19937_64& rng) {
  auto pick = [&](std::uint64_t n) { return rng() % n; };
  training_spec r{};
  r.micro_batch = 1 + pick(16);
  r.seq_len = 16 * (1 + pick(32));
  r.prec = static_cast<precision>(pick(5));
  r.optimizer = static_cast<optimizer_kind>(pick(7));
  r.optimizer_impl = static_cast<optimizer_implementation>(pick(3));
  r.grad_accum = 1 + pick(3);
  r.ckpt = static_cast<checkpointing>(pick(3));
  r.attention = static_cast<attention_impl>(pick(3));
  switch (pick(3)) {
    case 1:
      r.target = training_target::lora;
      r.lora_rank = 1 + pick(64);
      r.lora_targets = static_cast<lora_modules>(1 + pick(127));
      break;
    case 2:
      r.target = training_target::qlora;
      r.lora_rank = 1 + pick(64);
      break;
    default: break;
  }
  r.offload_optimizer = pick(4) == 0;
  r.offload_activations = pick(4) == 0 && r.ckpt == checkpointing::full;  // needs it (validate)
  r.device = pick(5) == 0 ? device_kind::cpu : device_kind::cuda;
  return r;
}

}  // namespace

TEST_CASE("one-pass totals equal the separate estimators", "[estimate][property]") {
  const model_spec models[] = {presets::gpt2,      presets::bert_base_uncased, presets::llama_2_7b,
                               presets::llama_3_8b, presets::mixtral_8x7b,     presets::qwen2_5_7b};
  std::mt19937_64 rng(20261123);
  int checked = 0;
  for (int i = 0; i < 600; ++i) {
    const model_spec& model = models[static_cast<std::size_t>(i) % std::size(models)];
    const model_graph built = build(model, random_run(rng));
    const training_spec& run = built.run;
    const graph& g = built.stack();
    const estimate_result e = estimate(g, run);
    const detail::graph_totals t = detail::totals_of(g, run);
    INFO(model.name << " run " << i);
    CHECK(e.parameter_count == parameter_count(g));
    CHECK(e.trainable_parameter_count == trainable_parameter_count(g));
    CHECK(e.parameter_bytes == parameter_bytes(g, run));
    CHECK(e.gradient_bytes == gradient_bytes(g, run));
    CHECK(e.optimizer_bytes == optimizer_state_bytes(g, run));
    CHECK(t.step_temporaries == optimizer_step_temporaries(g, run));
    CHECK(t.large_tensors == detail::large_tensor_count(g, run));
    const bool ckpt = run.ckpt == checkpointing::full;
    CHECK(e.saved_activation_bytes == section_saved_bytes(g, prologue_of(g), run, false) +
                                          section_saved_bytes(g, block_of(g), run, ckpt) * g.block_repeats +
                                          section_saved_bytes(g, epilogue_of(g), run, false));
    // The winning moment's breakdown is written once from its activations and gradients:
    // its parts must still add up to the reported tensor total.
    CHECK(e.steady.breakdown.total() == e.steady.tensor);
    CHECK(e.first_step.breakdown.total() == e.first_step.tensor);
    ++checked;
  }
  CHECK(checked == 600);
}

TEST_CASE("a graph built at run time reads back exactly the ops it was given", "[graph]") {
  // op_slots leaves unused slots unwritten: every op the builder starts must come back whole.
  graph g;
  graph_builder b(g);
  const auto first = b.append(op_kind::norm);
  b.at(first).out = bytes{64};
  const auto second = b.push(op{.kind = op_kind::linear, .weight = param_tensor::matrix(3, 4), .out = bytes{12}});
  b.keep(first, second);
  REQUIRE(g.size == 2);
  CHECK(g.ops[0].kind == op_kind::norm);
  CHECK(g.ops[0].weight.rows == 0);
  CHECK(g.ops[0].extra_saved == bytes{});
  CHECK(g.ops[0].released_by == release_point::at(1));
  CHECK(g.ops[1].kind == op_kind::linear);
  CHECK(g.ops[1].weight.elements() == 12);
  CHECK(g.ops[1].released_by == not_kept);
  CHECK(parameter_count(g) == 12);
}

}  // namespace estimate_totals_test
