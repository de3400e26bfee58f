// Blocks merged away are recycled slots (caching_allocator.hpp delete_block: size 0): the segment
// picture never shows them, and a live tensor's requested size, kept by id, leaves with it.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <memory>
#include <vector>

#include "memscale/allocator/caching_allocator.hpp"

namespace allocator_recycled_blocks_test {
namespace {

using namespace memscale;
using namespace memscale::allocator;

constexpr std::uint64_t MiB = 1ULL << 20;

using sim = caching_allocator<64, 64>;

std::vector<block_view> blocks_of(const sim& a) {
  std::vector<block_view> out;
  a.for_each_block([&](const block_view& b) { out.push_back(b); });
  return out;
}

// Three 3 MiB tensors split one 20 MiB segment (get_allocation_size), freed middle, first, last:
// the blocks merge back into one, and two slots are recycled.
constexpr bool merged_back(sim& a) {
  a.allocate(0, 3 * MiB - 100);
  a.allocate(1, 3 * MiB - 200);
  a.allocate(2, 3 * MiB - 300);
  a.release(1);
  a.release(0);
  a.release(2);
  return a.stats().requested.value == 0 && a.stats().allocated.value == 0 && a.stats().reserved.value == 20 * MiB;
}

constexpr bool merged_back_in_constant_evaluation() {
  sim* const a = new sim();
  const bool ok = merged_back(*a);
  delete a;
  return ok;
}
static_assert(merged_back_in_constant_evaluation());

TEST_CASE("merged blocks leave the segment picture, and requested bytes leave with their tensor",
          "[allocator][recycled]") {
  const auto a = std::make_unique<sim>();
  REQUIRE(merged_back(*a));
  a->allocate(7, 1000);  // a small-pool segment next to the large one
  CHECK(a->stats().requested.value == 1000);
  CHECK(a->stats().reserved.value == 22 * MiB);

  std::vector<block_view> v = blocks_of(*a);
  REQUIRE(v.size() == 3);  // the small segment's block and its cached rest, the large segment's one block
  std::uint64_t large_blocks = 0;
  for (const block_view& b : v)
    if (b.pool == pool_kind::large) {
      ++large_blocks;
      CHECK(b.size == 20 * MiB);
      CHECK(b.address == b.segment);
      CHECK_FALSE(b.allocated);
    }
  CHECK(large_blocks == 1);

  // The recycled slots serve the next split: a 5 MiB tensor and the 15 MiB rest.
  a->allocate(3, 5 * MiB);
  CHECK(a->stats().requested.value == 1000 + 5 * MiB);
  v = blocks_of(*a);
  std::uint64_t large_bytes = 0;
  std::uint64_t allocated_large = 0;
  for (const block_view& b : v)
    if (b.pool == pool_kind::large) {
      large_bytes += b.size;
      if (b.allocated) allocated_large += b.size;
    }
  CHECK(large_bytes == 20 * MiB);
  CHECK(allocated_large == 5 * MiB);
  a->release(3);
  a->release(7);
  CHECK(a->stats().requested.value == 0);
  CHECK(blocks_of(*a).size() == 2);
}

}  // namespace
}  // namespace allocator_recycled_blocks_test
