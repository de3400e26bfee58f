// The allocator's free set (memscale/allocator/free_set.hpp) against a sorted vector: random
// inserts, erases, replacements, lower_bound queries and erase_if sweeps, with many equal
// sizes (as a model's repeated layers cache them), so sizes come and go, their arrays grow and
// are reused, and replace() is taken both within a size and for a size of its own.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "memscale/allocator/free_set.hpp"

namespace free_set_test {
namespace {

using memscale::allocator::free_entry;
using memscale::allocator::free_position;
using memscale::allocator::free_set;

constexpr std::size_t capacity = 4096;

bool before(const free_entry& a, std::uint64_t size, std::uint64_t address) {
  return a.size < size || (a.size == size && a.address < address);
}

struct lcg {
  std::uint64_t state;
  std::uint64_t next(std::uint64_t bound) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % bound;
  }
};

// The set's entries in order, and that previous() walks the same order back.
std::vector<free_entry> contents(const free_set<capacity>& s) {
  std::vector<free_entry> out;
  s.for_each([&](const free_entry& e) { out.push_back(e); });
  return out;
}

void check_same(const free_set<capacity>& s, const std::vector<free_entry>& expected, lcg& rng) {
  const std::vector<free_entry> got = contents(s);
  REQUIRE(s.size() == expected.size());
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    REQUIRE(got[i].size == expected[i].size);
    REQUIRE(got[i].address == expected[i].address);
    REQUIRE(got[i].block == expected[i].block);
  }
  // Queries at existing keys, between them and past both ends.
  for (int q = 0; q < 24; ++q) {
    std::uint64_t size = 0;
    std::uint64_t address = 0;
    if (!expected.empty() && q % 2 == 0) {
      const free_entry& e = expected[rng.next(expected.size())];
      size = e.size;
      address = q % 8 == 0 ? 0 : e.address + (q % 4 == 0 ? 0 : 1);  // 0: as best fit asks
    } else {
      size = rng.next(14) * 512;
      address = rng.next(1ULL << 20);
    }
    const auto it = std::partition_point(expected.begin(), expected.end(),
                                         [&](const free_entry& e) { return before(e, size, address); });
    const free_position p = s.lower_bound(size, address);
    if (it == expected.end()) {
      REQUIRE(s.is_end(p));
      continue;
    }
    REQUIRE_FALSE(s.is_end(p));
    REQUIRE(s.at(p).size == it->size);
    REQUIRE(s.at(p).address == it->address);
    if (it != expected.begin()) {
      const free_entry& back = s.at(s.previous(p));
      REQUIRE(back.address == std::prev(it)->address);
    } else {
      REQUIRE(s.is_first(p));
    }
  }
}

TEST_CASE("free set keeps the order of a sorted vector under random inserts and erases") {
  for (std::uint64_t seed : {1ULL, 7ULL, 2026ULL}) {
    auto s = std::make_unique<free_set<capacity>>();
    std::vector<free_entry> expected;
    lcg rng{seed};
    std::uint64_t next_address = 1;
    std::uint32_t next_block = 0;
    std::size_t replaced = 0;
    for (int round = 0; round < 6000; ++round) {
      const std::uint64_t roll = rng.next(100);
      // Grow to a few thousand entries, then shrink, so chunks split and merge both ways.
      const bool grow = (round / 1500) % 2 == 0;
      if (expected.empty() || roll < (grow ? 65U : 30U)) {
        if (expected.size() >= capacity) continue;
        const free_entry e{(1 + rng.next(12)) * 512 * (rng.next(4) == 0 ? 4096 : 1), next_address, next_block++};
        next_address += 1 + rng.next(3);
        s->insert(e);
        expected.insert(std::partition_point(expected.begin(), expected.end(),
                                              [&](const free_entry& x) { return before(x, e.size, e.address); }),
                        e);
      } else if (roll < (grow ? 75U : 40U)) {
        // A split block's rest (caching_allocator take_cached): replaced in place when it sorts
        // there, else erased and inserted.
        const std::size_t i = rng.next(expected.size());
        const free_entry& old = expected[i];
        const std::uint64_t size = rng.next(2) == 0 ? old.size : std::max<std::uint64_t>(512, old.size / 1024 * 512);
        const free_entry e{size, rng.next(2) == 0 ? old.address : next_address++, old.block};
        const free_position p = s->lower_bound(old.size, old.address);
        REQUIRE(s->at(p).block == old.block);
        expected.erase(expected.begin() + static_cast<std::ptrdiff_t>(i));
        const auto to = std::partition_point(expected.begin(), expected.end(),
                                             [&](const free_entry& x) { return before(x, e.size, e.address); });
        if (to != expected.end() && to->size == e.size && to->address == e.address) {  // keys stay unique
          s->erase(p);
          continue;
        }
        if (s->sorts_at(p, e)) {
          ++replaced;
          s->replace(p, e);
        } else {
          s->erase(p);
          s->insert(e);
        }
        expected.insert(to, e);
      } else if (roll < 99) {
        const std::size_t i = rng.next(expected.size());
        const free_position p = s->lower_bound(expected[i].size, expected[i].address);
        REQUIRE(s->at(p).block == expected[i].block);
        s->erase(p);
        expected.erase(expected.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        const std::uint64_t drop_size = (1 + rng.next(12)) * 512;
        s->erase_if([&](const free_entry& e) { return e.size == drop_size; });
        std::erase_if(expected, [&](const free_entry& e) { return e.size == drop_size; });
      }
      if (round % 50 == 0) check_same(*s, expected, rng);
    }
    check_same(*s, expected, rng);
    REQUIRE(replaced > 100);
  }
}

}  // namespace
}  // namespace free_set_test
