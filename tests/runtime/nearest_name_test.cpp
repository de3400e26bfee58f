// "did you mean ...?": a name's family (prefix, then containment) before edit distance.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <initializer_list>
#include <string>
#include <string_view>

#include "memscale/detail/nearest_name.hpp"
#include "memscale/gpus.hpp"

namespace nearest_name_test {
namespace {

std::string gpu_hint(std::string_view typed) {
  memscale::detail::nearest_name nearest(typed);
  for (const auto& gpu : memscale::gpu_catalog) nearest.offer(gpu.name);
  return nearest.hint();
}

std::string hint(std::string_view typed, std::initializer_list<std::string_view> names) {
  memscale::detail::nearest_name nearest(typed);
  for (const auto name : names) nearest.offer(name);
  return nearest.hint();
}

}  // namespace

TEST_CASE("GPU suggestions prefer the family over a near spelling", "[suggest]") {
  CHECK(gpu_hint("a100") == "; did you mean a100-40gb or a100-80gb?");  // not a10
  CHECK(gpu_hint("h100") == "; did you mean h100-80gb?");               // not h200
  CHECK(gpu_hint("A100") == "; did you mean a100-40gb or a100-80gb?");  // case
  CHECK(gpu_hint("4090") == "; did you mean rtx4090?");                 // contained
  CHECK(gpu_hint("rtx309") == "; did you mean rtx3090?");               // the nearest of the family
  CHECK(gpu_hint("rtx-5090") == "; did you mean rtx5090?");             // separators ignored
  CHECK(gpu_hint("zz") == "");
}

TEST_CASE("option and field suggestions keep working", "[suggest]") {
  CHECK(hint("--checkpoint", {"--checkpointing", "--batch", "--seq"}) == "; did you mean --checkpointing?");
  CHECK(hint("--batc", {"--checkpointing", "--batch", "--seq"}) == "; did you mean --batch?");
  CHECK(hint("micro_bacth", {"micro_batch", "seq_len"}) == "; did you mean micro_batch?");
  CHECK(hint("gpt2-xxl", {"gpt2", "gpt2-xl", "gpt2-large"}) == "; did you mean gpt2-xl?");
  // A hostile name gives no hint and bounded work.
  CHECK(hint(std::string(100000, 'a'), {"a100-40gb"}) == "");
}

}  // namespace nearest_name_test
