// The caching allocator simulation, rule by rule, on hand-made event streams
// (c10/cuda/CUDACachingAllocator.cpp @ 001074d2; memscale/allocator/caching_allocator.hpp).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <memory>
#include <vector>

#include "memscale/allocator/alloc_conf.hpp"
#include "memscale/allocator/caching_allocator.hpp"

namespace allocator_rules_test {
namespace {

using namespace memscale;
using namespace memscale::allocator;

constexpr std::uint64_t KiB = 1ULL << 10;
constexpr std::uint64_t MiB = 1ULL << 20;

using sim = caching_allocator<1024, 1024>;

std::unique_ptr<sim> make(const options& o = {}, std::uint64_t cap = 0) {
  return std::make_unique<sim>(o, bytes{cap});
}

std::uint64_t reserved(const sim& a) { return a.stats().reserved.value; }
std::uint64_t allocated(const sim& a) { return a.stats().allocated.value; }

// Every mapped block, segment by segment.
std::vector<block_view> blocks_of(const sim& a) {
  std::vector<block_view> out;
  a.for_each_block([&](const block_view& b) { out.push_back(b); });
  return out;
}

}  // namespace

TEST_CASE("every block is a multiple of 512 bytes, and allocated counts the rounded block", "[allocator]") {
  auto a = make();
  a->allocate(0, 100);
  CHECK(allocated(*a) == 512);
  a->allocate(1, 513);
  CHECK(allocated(*a) == 512 + 1024);
  CHECK(a->stats().requested.value == 613);
  CHECK(round_size({}, 1) == 512);
  CHECK(round_size({}, 512) == 512);
  CHECK(round_size({}, 1537) == 2048);
}

TEST_CASE("requests up to 1 MiB share 2 MiB small-pool segments", "[allocator]") {
  auto a = make();
  a->allocate(0, MiB);  // exactly kSmallSize: small pool
  CHECK(reserved(*a) == 2 * MiB);
  a->allocate(1, MiB);  // the segment's other half (remainder >= 512 B splits in the small pool)
  CHECK(reserved(*a) == 2 * MiB);
  a->allocate(2, 700 * KiB);
  CHECK(reserved(*a) == 4 * MiB);
  CHECK(pool_for(round_size({}, MiB)) == pool_kind::small);
  CHECK(pool_for(round_size({}, MiB + 1)) == pool_kind::large);
}

TEST_CASE("large requests: 20 MiB segments below 10 MiB, their size rounded to 2 MiB above", "[allocator]") {
  CHECK(allocation_size(MiB + 512) == 20 * MiB);
  CHECK(allocation_size(10 * MiB - 512) == 20 * MiB);
  CHECK(allocation_size(10 * MiB) == 10 * MiB);
  CHECK(allocation_size(11 * MiB) == 12 * MiB);
  auto a = make();
  a->allocate(0, 5 * MiB);
  CHECK(reserved(*a) == 20 * MiB);
  a->allocate(1, 9 * MiB);  // fits the first segment's 15 MiB tail
  CHECK(reserved(*a) == 20 * MiB);
  a->allocate(2, 30 * MiB + 1);
  CHECK(reserved(*a) == 20 * MiB + 32 * MiB);
}

TEST_CASE("a large-pool block splits only when more than 1 MiB remains", "[allocator]") {
  auto a = make();
  a->allocate(0, 11 * MiB);  // 12 MiB segment, 1 MiB left: not split, the tail counts as allocated
  CHECK(allocated(*a) == 12 * MiB);
  auto b = make();
  b->allocate(0, 10 * MiB + 512 * KiB);  // 1.5 MiB left: split
  CHECK(allocated(*b) == 10 * MiB + 512 * KiB);
  CHECK(blocks_of(*b).size() == 2);
}

TEST_CASE("freed blocks merge with free neighbours of the same segment only", "[allocator]") {
  auto a = make();
  a->allocate(0, 4 * MiB);
  a->allocate(1, 4 * MiB);  // same 20 MiB segment
  a->allocate(2, 13 * MiB);  // the first segment's 12 MiB tail is too small: a 14 MiB segment
  a->release(0);
  a->release(1);
  const auto blocks = blocks_of(*a);
  REQUIRE(blocks.size() == 2);  // the 20 MiB segment is one free block again; the 14 MiB one is allocated
  CHECK(blocks[0].size == 20 * MiB);
  CHECK_FALSE(blocks[0].allocated);
  a->release(2);
  // Two wholly free segments do not merge with each other: 32 MiB needs a new segment.
  a->allocate(3, 32 * MiB);
  CHECK(reserved(*a) == 20 * MiB + 14 * MiB + 32 * MiB);
}

TEST_CASE("best fit: the smallest cached block that fits, the newer segment on a tie", "[allocator]") {
  // CUDA hands segments out top-down, so the newer one has the lower address and wins the tie
  // (docs/allocator.md: with that order the rules reproduce all thirteen recorded histories).
  auto a = make();
  a->allocate(0, 30 * MiB);
  a->allocate(1, 14 * MiB);
  a->allocate(2, 14 * MiB);
  a->release(0);
  a->release(1);
  a->release(2);
  a->allocate(3, 13 * MiB);  // the second 14 MiB segment, not the first nor the 30 MiB one
  CHECK(reserved(*a) == 58 * MiB);
  for (const block_view& b : blocks_of(*a))
    if (b.allocated) CHECK(b.size == 14 * MiB);  // 1 MiB left: not split
  std::uint64_t first_fourteen = 0;
  std::uint64_t second_fourteen = 0;
  std::uint64_t allocated_at = 0;
  for (const block_view& b : blocks_of(*a)) {  // segments in the order they were made
    if (b.size == 14 * MiB && first_fourteen != 0 && second_fourteen == 0) second_fourteen = b.address;
    if (b.size == 14 * MiB && first_fourteen == 0) first_fourteen = b.address;
    if (b.allocated) allocated_at = b.address;
  }
  CHECK(second_fourteen < first_fourteen);
  CHECK(allocated_at == second_fourteen);
}

TEST_CASE("nothing is returned to CUDA while memory lasts", "[allocator]") {
  auto a = make();
  for (std::uint32_t i = 0; i < 8; ++i) a->allocate(i, (i + 1) * 3 * MiB);
  const std::uint64_t before = reserved(*a);
  for (std::uint32_t i = 0; i < 8; ++i) a->release(i);
  CHECK(reserved(*a) == before);
  CHECK(allocated(*a) == 0);
  a->empty_cache();  // torch.cuda.empty_cache(): every wholly free segment goes back
  CHECK(reserved(*a) == 0);
}

TEST_CASE("at the cap the allocator frees its whole cached segments and retries, then fails", "[allocator]") {
  auto a = make({}, 40 * MiB);
  REQUIRE(a->allocate(0, 24 * MiB));
  a->release(0);
  REQUIRE(a->allocate(1, 30 * MiB));  // 24 + 30 > 40: the cached 24 MiB segment is freed first
  CHECK(a->stats().alloc_retries == 1);
  CHECK(reserved(*a) == 30 * MiB);
  CHECK(a->stats().reserved_peak.value == 30 * MiB);
  CHECK_FALSE(a->allocate(2, 16 * MiB));  // nothing left to free: OutOfMemoryError
  CHECK(a->stats().ooms == 1);
  CHECK(a->stats().first_oom.event == 4);
  CHECK(a->stats().first_oom.tried.value == 16 * MiB);
  CHECK(a->stats().first_oom.allocated.value == 30 * MiB);
}

TEST_CASE("a segment with a live block is not released at the cap", "[allocator]") {
  auto a = make({}, 40 * MiB);
  REQUIRE(a->allocate(0, 4 * MiB));   // a 20 MiB segment, 16 MiB of it cached
  REQUIRE(a->allocate(1, 17 * MiB));  // too large for that tail: an 18 MiB segment
  a->release(1);
  REQUIRE(a->allocate(2, 14 * MiB));  // best fit: the first segment's 16 MiB tail, no retry
  CHECK(a->stats().alloc_retries == 0);
  CHECK(reserved(*a) == 38 * MiB);
  // 19 MiB: no cached block fits; 38 + 20 > 40, so the wholly free 18 MiB segment goes back
  // and the retry fits. The first segment holds live blocks and stays.
  REQUIRE(a->allocate(3, 19 * MiB));
  CHECK(a->stats().alloc_retries == 1);
  CHECK(reserved(*a) == 20 * MiB + 20 * MiB);
}

TEST_CASE("expandable segments map 20 MiB pages into one segment per pool", "[allocator]") {
  options o{};
  o.expandable_segments = true;
  auto a = make(o);
  a->allocate(0, 5 * MiB);
  CHECK(reserved(*a) == 20 * MiB);
  a->allocate(1, 30 * MiB);  // 35 MiB in one segment: two pages
  CHECK(reserved(*a) == 40 * MiB);
  auto d = make();
  d->allocate(0, 5 * MiB);
  d->allocate(1, 30 * MiB);
  CHECK(reserved(*d) == 50 * MiB);  // default: a 20 MiB and a 30 MiB segment
  a->allocate(2, 100);               // small pool: its own segment of 2 MiB pages
  CHECK(reserved(*a) == 42 * MiB);
  // Blocks split at 512 B: a 4.5 MiB tail is left in the large segment's second page and is used.
  a->allocate(3, 4 * MiB);
  CHECK(reserved(*a) == 42 * MiB);
  a->release(0);
  a->release(1);
  a->release(2);
  a->release(3);
  a->empty_cache();  // unmaps every free page
  CHECK(reserved(*a) == 0);
}

TEST_CASE("expandable segments can reserve one page more than the default", "[allocator]") {
  // Three 11 MiB tensors: three 12 MiB segments by default (36 MiB), 33 MiB of 20 MiB pages (40 MiB).
  options o{};
  o.expandable_segments = true;
  auto e = make(o);
  auto d = make();
  for (std::uint32_t i = 0; i < 3; ++i) {
    e->allocate(i, 11 * MiB);
    d->allocate(i, 11 * MiB);
  }
  CHECK(reserved(*d) == 36 * MiB);
  CHECK(reserved(*e) == 40 * MiB);
}

TEST_CASE("expandable segments under a cap: only the request's allocation size is checked", "[allocator]") {
  // alloc_block compares reserved + the allocation size (21 MiB -> 22 MiB) with the cap, then
  // maps whole 20 MiB pages (40 MiB) past it: the memory fraction is not checked when mapping.
  options o{};
  o.expandable_segments = true;
  auto a = make(o, 30 * MiB);
  REQUIRE(a->allocate(0, 21 * MiB));
  CHECK(reserved(*a) == 40 * MiB);
  CHECK(a->stats().alloc_retries == 0);
  // A small request's 2 MiB allocation size: 40 + 2 > 30, and no whole free page to unmap.
  CHECK_FALSE(a->allocate(1, 100));
  CHECK(a->stats().ooms == 1);
}

TEST_CASE("max_split_size: oversize blocks are not split and serve only requests close to them", "[allocator]") {
  options o{};
  o.max_split_size = bytes{40 * MiB};
  auto a = make(o);
  a->allocate(0, 100 * MiB);
  a->release(0);
  a->allocate(1, 30 * MiB);  // below max_split_size: may not take the 100 MiB oversize block
  CHECK(reserved(*a) == 130 * MiB);
  a->allocate(2, 70 * MiB);  // 100 >= 70 + 20 (max_non_split_rounding): a new segment
  CHECK(reserved(*a) == 200 * MiB);
  a->release(2);
  a->allocate(3, 85 * MiB);  // the 100 MiB block, whole (100 < 85 + 20; oversize blocks never split)
  CHECK(reserved(*a) == 200 * MiB);
  CHECK(allocated(*a) == 30 * MiB + 100 * MiB);
}

TEST_CASE("max_split_size: at the cap oversize cached blocks are released first", "[allocator]") {
  options o{};
  o.max_split_size = bytes{40 * MiB};
  auto a = make(o, 150 * MiB);
  REQUIRE(a->allocate(0, 100 * MiB));
  a->release(0);
  REQUIRE(a->allocate(1, 60 * MiB));  // 160 > 150: release_available_cached_blocks frees the 100 MiB block
  CHECK(a->stats().alloc_retries == 0);
  CHECK(reserved(*a) == 60 * MiB);
}

TEST_CASE("roundup_power2_divisions rounds to equal steps between powers of two", "[allocator]") {
  CHECK(round_to_power2_division(1200, 4) == 1280);  // the comment's example in roundup_power2_next_division
  const options o = parse_alloc_conf("roundup_power2_divisions:4").settings;
  CHECK(round_size(o, 5 * MiB + 1) == 6 * MiB);
  CHECK(round_size(o, 1200) == 1536);  // below 512 x 4 B the plain 512 B rounding applies
  auto a = make(o);
  a->allocate(0, 5 * MiB + 1);
  CHECK(allocated(*a) == 6 * MiB);
}

TEST_CASE("PYTORCH_CUDA_ALLOC_CONF strings", "[allocator][alloc_conf]") {
  const alloc_conf c =
      parse_alloc_conf("expandable_segments:True, max_split_size_mb:128,roundup_power2_divisions:[256:1,512:2,>:4]");
  CHECK(c.settings.expandable_segments);
  CHECK(c.settings.max_split_size.value == 128 * MiB);
  CHECK(c.settings.roundup_power2_divisions[0] == 1);   // below the first boundary: its value
  CHECK(c.settings.roundup_power2_divisions[8] == 1);   // [256 MiB, 512 MiB)
  CHECK(c.settings.roundup_power2_divisions[9] == 2);
  CHECK(c.settings.roundup_power2_divisions[15] == 4);
  CHECK(parse_alloc_conf("").settings == options{});
  CHECK(parse_alloc_conf("garbage_collection_threshold:0.6").has(unmodelled_option::garbage_collection_threshold));
  CHECK(parse_alloc_conf("max_non_split_rounding_mb:64").settings.max_non_split_rounding.value == 64 * MiB);
  CHECK_THROWS_AS(parse_alloc_conf("max_split_size_mb:10"), memscale::error);  // must be >= 20
  CHECK_THROWS_AS(parse_alloc_conf("expandable_segments:yes"), memscale::error);
  CHECK_THROWS_AS(parse_alloc_conf("roundup_power2_divisions:3"), memscale::error);
  CHECK_THROWS_AS(parse_alloc_conf("max_split_size:128"), memscale::error);  // unknown key (the option is _mb)
  CHECK_THROWS_AS(parse_alloc_conf("backend:cudaMallocAsync"), memscale::error);
  CHECK_THROWS_AS(parse_alloc_conf("roundup_power2_divisions:[256:1"), memscale::error);
}

TEST_CASE("misused ids are errors, not undefined behaviour", "[allocator]") {
  auto a = make();
  CHECK_THROWS_AS(a->release(3), memscale::error);
  a->allocate(0, 100);
  CHECK_THROWS_AS(a->allocate(0, 100), memscale::error);
  CHECK_THROWS_AS(a->allocate(5000, 100), memscale::error);
  caching_allocator<4, 16> tiny{};
  for (std::uint32_t i = 0; i < 4; ++i) tiny.allocate(i, 30 * MiB);
  CHECK_THROWS_AS(tiny.allocate(4, 30 * MiB), memscale::error);  // block capacity
}

}  // namespace allocator_rules_test
