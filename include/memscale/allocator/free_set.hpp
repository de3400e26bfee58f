// memscale/allocator/free_set.hpp: the cached blocks of one pool, ordered by (size, address)
// as PyTorch's BlockPool::blocks set (BlockComparatorSize) orders them.
//
// A training step caches thousands of blocks but of few sizes (at most a few tens: the layers
// repeat their tensors), and best fit mostly takes and returns blocks at the low-address end
// of a size (measured over preset runs: 70-90% of inserts and 90-95% of erases). So the set is
// a sorted directory of the sizes present and, per size, the blocks sorted by address in an
// array with room at both ends: an insert or erase moves the entries on its nearer side,
// usually none. Storage grows as needed; more than Capacity entries is a memscale::error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "memscale/error.hpp"

namespace memscale::allocator {

struct free_entry {
  std::uint64_t size;
  std::uint64_t address;
  std::uint32_t block;
};

// A place in the set: the size's rank in the directory and the offset among its blocks.
struct free_position {
  std::size_t rank = 0;
  std::size_t offset = 0;
};

template <std::size_t Capacity>
class free_set {
 public:
  [[nodiscard]] constexpr std::size_t size() const { return total_; }
  [[nodiscard]] constexpr bool empty() const { return total_ == 0; }

  // The first entry not ordered before (size, address); end() when there is none.
  [[nodiscard]] constexpr free_position lower_bound(std::uint64_t size, std::uint64_t address) const {
    const std::size_t d = first_size_not_below(size);
    if (d == sizes_.size() || sizes_[d] != size) return {d, 0};
    const bucket& b = buckets_[bucket_of_[d]];
    const std::size_t k = first_address_not_below(b, address);
    return k == b.count ? free_position{d + 1, 0} : free_position{d, k};
  }

  [[nodiscard]] constexpr free_position end() const { return {sizes_.size(), 0}; }
  [[nodiscard]] constexpr bool is_end(free_position p) const { return p.rank >= sizes_.size(); }
  [[nodiscard]] constexpr free_entry at(free_position p) const {
    const bucket& b = buckets_[bucket_of_[p.rank]];
    const slot& s = b.items[b.head + p.offset];
    return {sizes_[p.rank], s.address, s.block};
  }

  [[nodiscard]] constexpr free_position next(free_position p) const {
    if (p.offset + 1 < buckets_[bucket_of_[p.rank]].count) return {p.rank, p.offset + 1};
    return {p.rank + 1, 0};
  }
  // The entry before p (p must not be the first).
  [[nodiscard]] constexpr free_position previous(free_position p) const {
    if (p.rank < sizes_.size() && p.offset > 0) return {p.rank, p.offset - 1};
    return {p.rank - 1, buckets_[bucket_of_[p.rank - 1]].count - 1};
  }
  [[nodiscard]] constexpr bool is_first(free_position p) const { return p.rank == 0 && p.offset == 0; }

  constexpr void insert(const free_entry& e) {
    if (total_ >= Capacity)
      memscale::detail::fail(error_code::unsupported, "allocator simulation", "has more cached blocks than its capacity",
                             total_);
    const std::size_t d = first_size_not_below(e.size);
    if (d == sizes_.size() || sizes_[d] != e.size) {
      sizes_.insert(sizes_.begin() + static_cast<std::ptrdiff_t>(d), e.size);
      bucket_of_.insert(bucket_of_.begin() + static_cast<std::ptrdiff_t>(d), take_bucket());
    }
    bucket& b = buckets_[bucket_of_[d]];
    insert_at(b, first_address_not_below(b, e.address), slot{e.address, e.block});
    ++total_;
  }

  constexpr void erase(free_position p) {
    const std::uint32_t id = bucket_of_[p.rank];
    erase_at(buckets_[id], p.offset);
    --total_;
    if (buckets_[id].count == 0) drop_size(p.rank);
  }

  // Erases the entries for which drop(entry) is true, keeping the others in order.
  template <class Drop>
  constexpr void erase_if(Drop&& drop) {
    for (std::size_t d = sizes_.size(); d-- > 0;) {
      bucket& b = buckets_[bucket_of_[d]];
      std::size_t kept = 0;
      for (std::size_t i = 0; i < b.count; ++i) {
        const slot s = b.items[b.head + i];
        if (drop(free_entry{sizes_[d], s.address, s.block})) continue;
        b.items[b.head + kept++] = s;  // never ahead of the entry being read
      }
      total_ -= b.count - kept;
      b.count = kept;
      if (kept == 0) drop_size(d);
    }
  }

  // Calls fn(entry) for every entry in order.
  template <class Fn>
  constexpr void for_each(Fn&& fn) const {
    for (std::size_t d = 0; d < sizes_.size(); ++d) {
      const bucket& b = buckets_[bucket_of_[d]];
      for (std::size_t i = 0; i < b.count; ++i) fn(free_entry{sizes_[d], b.items[b.head + i].address, b.items[b.head + i].block});
    }
  }

 private:
  struct slot {
    std::uint64_t address;
    std::uint32_t block;
  };
  // The blocks of one size: items[head, head + count) sorted by address.
  struct bucket {
    std::vector<slot> items;
    std::size_t head = 0;
    std::size_t count = 0;
  };

  [[nodiscard]] constexpr std::size_t first_size_not_below(std::uint64_t size) const {
    std::size_t lo = 0;
    std::size_t hi = sizes_.size();
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (sizes_[mid] < size)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo;
  }

  [[nodiscard]] static constexpr std::size_t first_address_not_below(const bucket& b, std::uint64_t address) {
    std::size_t lo = 0;
    std::size_t hi = b.count;
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (b.items[b.head + mid].address < address)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo;
  }

  // Puts s at offset k, moving the entries on the nearer side that has room.
  static constexpr void insert_at(bucket& b, std::size_t k, slot s) {
    const std::size_t room = b.items.size();
    if (b.count == room) {  // full: regrow with room at both ends
      std::vector<slot> grown(2 * room + 8);
      const std::size_t head = (grown.size() - b.count - 1) / 2;
      for (std::size_t i = 0; i < k; ++i) grown[head + i] = b.items[b.head + i];
      grown[head + k] = s;
      for (std::size_t i = k; i < b.count; ++i) grown[head + i + 1] = b.items[b.head + i];
      b.items = static_cast<std::vector<slot>&&>(grown);
      b.head = head;
    } else if (b.head > 0 && (k <= b.count - k || b.head + b.count == room)) {
      for (std::size_t i = 0; i < k; ++i) b.items[b.head - 1 + i] = b.items[b.head + i];
      --b.head;
      b.items[b.head + k] = s;
    } else {
      for (std::size_t i = b.count; i > k; --i) b.items[b.head + i] = b.items[b.head + i - 1];
      b.items[b.head + k] = s;
    }
    ++b.count;
  }

  static constexpr void erase_at(bucket& b, std::size_t k) {
    if (k < b.count - 1 - k) {
      for (std::size_t i = k; i > 0; --i) b.items[b.head + i] = b.items[b.head + i - 1];
      ++b.head;
    } else {
      for (std::size_t i = k; i + 1 < b.count; ++i) b.items[b.head + i] = b.items[b.head + i + 1];
    }
    --b.count;
  }

  constexpr std::uint32_t take_bucket() {
    if (!spare_.empty()) {
      const std::uint32_t id = spare_.back();
      spare_.pop_back();
      return id;
    }
    buckets_.push_back(bucket{});
    return static_cast<std::uint32_t>(buckets_.size() - 1);
  }

  // The size at directory rank d has no block left: its bucket is kept for reuse.
  constexpr void drop_size(std::size_t d) {
    bucket& b = buckets_[bucket_of_[d]];
    b.head = b.items.size() / 2;
    spare_.push_back(bucket_of_[d]);
    sizes_.erase(sizes_.begin() + static_cast<std::ptrdiff_t>(d));
    bucket_of_.erase(bucket_of_.begin() + static_cast<std::ptrdiff_t>(d));
  }

  std::vector<std::uint64_t> sizes_;      // the sizes present, ascending
  std::vector<std::uint32_t> bucket_of_;  // their buckets
  std::vector<bucket> buckets_;
  std::vector<std::uint32_t> spare_;      // buckets with no block
  std::size_t total_ = 0;
};

}  // namespace memscale::allocator
