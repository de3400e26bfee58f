// The estimate's walks add without overflow checks when one bound on the graph proves their sums
// fit (estimate/walk_bound.hpp walk_sums_fit), and checked otherwise. Properties: on many runs the
// bound holds and the unchecked walks give every figure of the checked ones; a term at the bound
// fails it; a graph whose sums overflow still gets the overflow error from the checked walk.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <iterator>
#include <random>
#include <string>

#include "memscale/memscale.hpp"

namespace unchecked_walks_test {
namespace {

using namespace memscale;
using detail::unchecked_bytes;

training_spec random_run(std::mt19937_64& rng) {
  auto pick = [&](std::uint64_t n) { return rng() % n; };
  training_spec r{};
  r.micro_batch = 1 + pick(8);
  r.seq_len = 16 * (1 + pick(32));  // bert-base-uncased: at most 512
  r.prec = static_cast<precision>(pick(5));
  r.ckpt = static_cast<checkpointing>(pick(3));
  r.attention = static_cast<attention_impl>(pick(3));
  if (pick(3) == 0) {
    r.target = training_target::lora;
    r.lora_rank = 1 + pick(64);
    r.lora_targets = static_cast<lora_modules>(1 + pick(127));
  }
  r.use_cache = static_cast<cache_setting>(pick(3));
  return r;
}

// In constant evaluation the walks stay checked (walk_bound.hpp): the bound is not walked there.
static_assert([] {
  const graph empty;
  return !detail::walk_sums_fit(empty, training_spec{});
}());

}  // namespace

TEST_CASE("the unchecked walks give the checked walks' figures", "[estimate][property]") {
  const model_spec models[] = {presets::gpt2,      presets::bert_base_uncased, presets::llama_2_7b,
                               presets::llama_3_8b, presets::mixtral_8x7b,     presets::qwen2_5_7b};
  std::mt19937_64 rng(20261129);
  for (int i = 0; i < 300; ++i) {
    const model_spec& model = models[static_cast<std::size_t>(i) % std::size(models)];
    const model_graph built = build(model, random_run(rng));
    const training_spec& run = built.run;
    const graph& g = built.stack();
    INFO(model.name << " run " << i);
    REQUIRE(detail::walk_sums_fit(g, run));
    for (const section s : {prologue_of(g), block_of(g), epilogue_of(g)}) {
      for (const bool held : {false, true}) {
        for (const bool saving : {false, true}) {
          const forward_pass checked = forward_walk(g, s, run, held, saving);
          const forward_pass unchecked = forward_walk<unchecked_bytes>(g, s, run, held, saving);
          CHECK(unchecked.saved == checked.saved);
          CHECK(unchecked.checkpoint_saved == checked.checkpoint_saved);
          CHECK(unchecked.cache == checked.cache);
          CHECK(unchecked.peak == checked.peak);
          CHECK(unchecked.peak_before_loss == checked.peak_before_loss);
        }
      }
      for (const bool persist : {false, true}) {
        const backward_profile checked = section_backward_peak(g, s, run, persist, g.stream_grad);
        const backward_profile unchecked = section_backward_peak<unchecked_bytes>(g, s, run, persist, g.stream_grad);
        CHECK(unchecked.peak == checked.peak);
        CHECK(unchecked.grads_at_peak == checked.grads_at_peak);
      }
    }
  }
}

TEST_CASE("a term at 2^51 or FSDP1's flat views leave the walks checked", "[estimate]") {
  model_graph built = build(presets::llama_2_7b, {.micro_batch = 4, .seq_len = 2048, .prec = precision::amp_bf16});
  graph& g = built.stacks.decoder;
  const training_spec run = built.run;
  REQUIRE(detail::walk_sums_fit(g, run));
  g.ops[g.block_begin + 1].bwd_temp = bytes{detail::unchecked_term_limit - 1};
  CHECK(detail::walk_sums_fit(g, run));
  g.ops[g.block_begin + 1].bwd_temp = bytes{detail::unchecked_term_limit};
  CHECK_FALSE(detail::walk_sums_fit(g, run));
  g.ops[g.block_begin + 1].bwd_temp = bytes{};
  g.stream_grad = bytes{detail::unchecked_term_limit};
  CHECK_FALSE(detail::walk_sums_fit(g, run));
  g.stream_grad = bytes{};
  training_spec flat = run;
  flat.fsdp_flat_views = true;
  CHECK_FALSE(detail::walk_sums_fit(g, flat));
}

TEST_CASE("sums past 2^64 are still an overflow error naming the byte count", "[estimate]") {
  model_graph built = build(presets::llama_2_7b, {.micro_batch = 4, .seq_len = 2048, .prec = precision::amp_bf16});
  graph& g = built.stacks.decoder;
  const training_spec run = built.run;
  CHECK(estimate(g, run).steady.tensor.value > 0);
  // Two temporaries of one op, each below 2^64 and together above it.
  g.ops[g.block_begin + 1].fwd_temp = bytes{std::uint64_t{1} << 63};
  g.ops[g.block_begin + 1].extra_saved = bytes{std::uint64_t{1} << 63};
  try {
    (void)estimate(g, run);
    FAIL("no overflow reported");
  } catch (const error& e) {
    CHECK(e.code() == error_code::overflow);
    CHECK(std::string(e.what()).find("byte count overflows") != std::string::npos);
  }
}

}  // namespace unchecked_walks_test
