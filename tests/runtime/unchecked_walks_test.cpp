// The estimate's walks add without overflow checks when one bound on the graph proves their sums
// fit (estimate/walk_bound.hpp walk_sums_fit), and checked otherwise: a term at the bound fails it,
// and a graph whose sums overflow still gets the overflow error from the checked walk.
// (section_walks_test.cpp holds the unchecked walks' figures equal to the checked ones.)
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <string>

#include "memscale/memscale.hpp"

namespace unchecked_walks_test {
namespace {

using namespace memscale;

// In constant evaluation the walks stay checked (walk_bound.hpp): the bound is not walked there.
static_assert([] {
  const graph empty;
  return !detail::walk_sums_fit(empty, training_spec{});
}());

}  // namespace

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
