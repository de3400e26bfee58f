// memscale/allocator/free_set.hpp: the cached blocks of one pool, ordered by (size, address)
// as PyTorch's BlockPool::blocks set (BlockComparatorSize) orders them.
//
// A sorted array cut into chunks of up to 32 entries: finding a place is a binary search over
// the chunks and then within one, and inserting or erasing moves at most one chunk's entries
// (a deep model caches thousands of blocks; one sorted array made the replay quadratic). The
// chunks' last keys are kept in rank order in one array, so the search over the chunks reads
// contiguous memory instead of following the rank -> chunk -> count indirection.
// Fixed storage; running out is a memscale::error.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "memscale/error.hpp"

namespace memscale::allocator {

struct free_entry {
  std::uint64_t size;
  std::uint64_t address;
  std::uint32_t block;
};

// A place in the set: chunk rank (in key order) and offset in the chunk.
struct free_position {
  std::size_t rank = 0;
  std::size_t offset = 0;
};

template <std::size_t Capacity>
class free_set {
 public:
  static constexpr std::size_t chunk_size = 32;
  // Two neighbouring chunks together hold more than half a chunk (erase merges a chunk that
  // falls below half full into a neighbour when they fit), so chunks are at least a quarter
  // full on average and this many suffice.
  static constexpr std::size_t max_chunks = 4 * (Capacity / chunk_size) + 2;

  [[nodiscard]] constexpr std::size_t size() const { return total_; }
  [[nodiscard]] constexpr bool empty() const { return total_ == 0; }

  // The first entry not ordered before (size, address); end() when there is none. Both
  // searches halve a range that ends at an entry not before the key (or at the end), so the
  // last step needs no bounds check. A select written as arithmetic (no branch) mispredicts
  // less but measured slower: each load then waits for the compare before it.
  [[nodiscard]] constexpr free_position lower_bound(std::uint64_t size, std::uint64_t address) const {
    if (ranks_ == 0) return end();
    std::size_t lo = 0;  // first chunk whose last entry is not before the key
    for (std::size_t n = ranks_; n > 1;) {
      const std::size_t half = n / 2;
      const free_key& k = last_[lo + half - 1];
      lo = before(k.size, k.address, size, address) ? lo + half : lo;
      n -= half;
    }
    if (before(last_[lo].size, last_[lo].address, size, address)) return end();
    const auto& items = chunks_[order_[lo]];
    std::size_t at = 0;  // first entry of that chunk not before the key (its last one is not)
    for (std::size_t n = count_[order_[lo]]; n > 1;) {
      const std::size_t half = n / 2;
      const free_entry& e = items[at + half - 1];
      at = before(e.size, e.address, size, address) ? at + half : at;
      n -= half;
    }
    return {lo, at};
  }

  [[nodiscard]] constexpr free_position end() const { return {ranks_, 0}; }
  [[nodiscard]] constexpr bool is_end(free_position p) const { return p.rank >= ranks_; }
  [[nodiscard]] constexpr const free_entry& at(free_position p) const { return chunks_[order_[p.rank]][p.offset]; }

  [[nodiscard]] constexpr free_position next(free_position p) const {
    if (p.offset + 1 < count_[order_[p.rank]]) return {p.rank, p.offset + 1};
    return {p.rank + 1, 0};
  }
  // The entry before p (p must not be the first).
  [[nodiscard]] constexpr free_position previous(free_position p) const {
    if (p.rank < ranks_ && p.offset > 0) return {p.rank, p.offset - 1};
    const std::size_t r = p.rank - 1;
    return {r, static_cast<std::size_t>(count_[order_[r]]) - 1};
  }
  [[nodiscard]] constexpr bool is_first(free_position p) const { return p.rank == 0 && p.offset == 0; }

  // Whether e sorts where the entry at p is (after its predecessor, before its successor), so
  // that replace(p, e) keeps the order.
  [[nodiscard]] constexpr bool sorts_at(free_position p, const free_entry& e) const {
    if (!is_first(p)) {
      const free_entry& a = at(previous(p));
      if (!before(a.size, a.address, e.size, e.address)) return false;
    }
    const free_position n = next(p);
    if (is_end(n)) return true;
    const free_entry& b = at(n);
    return before(e.size, e.address, b.size, b.address);
  }

  // Puts e in place of the entry at p (sorts_at(p, e) must hold).
  constexpr void replace(free_position p, const free_entry& e) {
    chunks_[order_[p.rank]][p.offset] = e;
    if (p.offset + 1 == count_[order_[p.rank]]) last_[p.rank] = key_of(e);
  }

  constexpr void insert(const free_entry& e) {
    if (total_ >= Capacity)
      memscale::detail::fail(error_code::unsupported, "allocator simulation", "has more cached blocks than its capacity",
                             total_);
    if (ranks_ == 0) {  // the first entry: lower_bound needs a non-empty chunk
      const std::size_t c = new_chunk();
      order_[0] = static_cast<std::uint16_t>(c);
      ranks_ = 1;
      chunks_[c][0] = e;
      count_[c] = 1;
      last_[0] = key_of(e);
      ++total_;
      return;
    }
    free_position p = lower_bound(e.size, e.address);
    if (p.rank == ranks_) p = {ranks_ - 1, count_[order_[ranks_ - 1]]};  // after the last entry
    std::size_t c = order_[p.rank];
    if (count_[c] == chunk_size) {
      split_chunk(p.rank);
      if (p.offset > chunk_size / 2) {
        ++p.rank;
        p.offset -= chunk_size / 2;
      }
      c = order_[p.rank];
    }
    auto& items = chunks_[c];
    for (std::size_t i = count_[c]; i > p.offset; --i) items[i] = items[i - 1];
    items[p.offset] = e;
    ++count_[c];
    if (p.offset + 1 == count_[c]) last_[p.rank] = key_of(e);
    ++total_;
  }

  constexpr void erase(free_position p) {
    const std::size_t c = order_[p.rank];
    auto& items = chunks_[c];
    for (std::size_t i = p.offset; i + 1 < count_[c]; ++i) items[i] = items[i + 1];
    --count_[c];
    --total_;
    if (count_[c] == 0) {
      drop_rank(p.rank);
      return;
    }
    if (p.offset == count_[c]) last_[p.rank] = key_of(items[p.offset - 1]);
    if (count_[c] < chunk_size / 2) {
      if (p.rank + 1 < ranks_ && count_[c] + count_[order_[p.rank + 1]] <= chunk_size)
        absorb_next(p.rank);
      else if (p.rank > 0 && count_[c] + count_[order_[p.rank - 1]] <= chunk_size)
        absorb_next(p.rank - 1);
    }
  }

  // Erases the entries for which drop(entry) is true, keeping the others in order (packed
  // into full chunks again).
  template <class Drop>
  constexpr void erase_if(Drop&& drop) {
    std::size_t out_rank = 0;
    std::size_t out_offset = 0;
    const std::size_t ranks = ranks_;
    for (std::size_t r = 0; r < ranks; ++r) {
      const std::size_t c = order_[r];
      const std::size_t n = count_[c];
      for (std::size_t i = 0; i < n; ++i) {
        const free_entry e = chunks_[c][i];
        if (drop(e)) continue;
        if (out_offset == chunk_size) {
          count_[order_[out_rank]] = static_cast<std::uint16_t>(chunk_size);
          ++out_rank;
          out_offset = 0;
        }
        chunks_[order_[out_rank]][out_offset++] = e;  // never ahead of the entry being read
      }
    }
    std::size_t kept = 0;
    if (out_offset > 0) {
      count_[order_[out_rank]] = static_cast<std::uint16_t>(out_offset);
      kept = out_rank + 1;
    } else {
      kept = out_rank;
    }
    total_ = 0;
    for (std::size_t r = 0; r < kept; ++r) {
      total_ += count_[order_[r]];
      last_[r] = key_of(chunks_[order_[r]][count_[order_[r]] - 1]);
    }
    for (std::size_t r = kept; r < ranks; ++r) spare_[spare_count_++] = order_[r];
    ranks_ = kept;
  }

  // Calls fn(entry) for every entry in order.
  template <class Fn>
  constexpr void for_each(Fn&& fn) const {
    for (std::size_t r = 0; r < ranks_; ++r)
      for (std::size_t i = 0; i < count_[order_[r]]; ++i) fn(chunks_[order_[r]][i]);
  }

 private:
  struct free_key {
    std::uint64_t size;
    std::uint64_t address;
  };
  static constexpr free_key key_of(const free_entry& e) { return {e.size, e.address}; }

  static constexpr bool before(std::uint64_t size_a, std::uint64_t addr_a, std::uint64_t size_b,
                               std::uint64_t addr_b) {
    return size_a < size_b || (size_a == size_b && addr_a < addr_b);
  }

  constexpr std::size_t new_chunk() {
    std::size_t c = 0;
    if (spare_count_ > 0) {
      c = spare_[--spare_count_];
    } else {
      if (made_ >= max_chunks)
        memscale::detail::fail(error_code::unsupported, "allocator simulation", "free-set chunks exhausted", made_);
      c = made_++;
    }
    count_[c] = 0;
    return c;
  }

  constexpr void drop_rank(std::size_t rank) {
    spare_[spare_count_++] = order_[rank];
    for (std::size_t r = rank; r + 1 < ranks_; ++r) {
      order_[r] = order_[r + 1];
      last_[r] = last_[r + 1];
    }
    --ranks_;
  }

  // Appends the chunk after `rank` to the one at `rank` (they fit together).
  constexpr void absorb_next(std::size_t rank) {
    const std::size_t a = order_[rank];
    const std::size_t b = order_[rank + 1];
    for (std::size_t i = 0; i < count_[b]; ++i) chunks_[a][count_[a] + i] = chunks_[b][i];
    count_[a] = static_cast<std::uint16_t>(count_[a] + count_[b]);
    last_[rank] = last_[rank + 1];
    drop_rank(rank + 1);
  }

  // Moves the upper half of the chunk at `rank` into a new chunk right after it.
  constexpr void split_chunk(std::size_t rank) {
    const std::size_t c = order_[rank];
    const std::size_t n = new_chunk();
    for (std::size_t i = chunk_size / 2; i < chunk_size; ++i) chunks_[n][i - chunk_size / 2] = chunks_[c][i];
    count_[n] = static_cast<std::uint16_t>(chunk_size - chunk_size / 2);
    count_[c] = static_cast<std::uint16_t>(chunk_size / 2);
    for (std::size_t r = ranks_; r > rank + 1; --r) {
      order_[r] = order_[r - 1];
      last_[r] = last_[r - 1];
    }
    order_[rank + 1] = static_cast<std::uint16_t>(n);
    last_[rank + 1] = last_[rank];
    last_[rank] = key_of(chunks_[c][chunk_size / 2 - 1]);
    ++ranks_;
  }

  // Written before read (P1331): a set costs nothing for the chunks it never uses.
  std::array<std::array<free_entry, chunk_size>, max_chunks> chunks_;
  std::array<std::uint16_t, max_chunks> count_;
  std::array<std::uint16_t, max_chunks> order_;
  std::array<std::uint16_t, max_chunks> spare_;
  std::array<free_key, max_chunks> last_;  // by rank: the key of that chunk's last entry
  std::size_t ranks_ = 0;
  std::size_t made_ = 0;
  std::size_t spare_count_ = 0;
  std::size_t total_ = 0;
};

}  // namespace memscale::allocator
