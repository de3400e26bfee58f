// memscale/allocator/free_set.hpp: the cached blocks of one pool, ordered by (size, address)
// as PyTorch's BlockPool::blocks set (BlockComparatorSize) orders them.
//
// A directory of the distinct sizes, sorted, each with the addresses of its blocks, sorted. A
// replay caches many blocks of few sizes (every layer frees the same tensors), so a search is
// a short binary search over the sizes and then within one size, and inserting or erasing
// moves only that size's entries (the directory moves when a size comes or goes). A size's
// addresses are stored from the highest down: best fit takes a size's lowest address, and a
// cached block mostly returns among the lowest quarter (Llama-2-7B's replay), so both ends of
// the moves are short.
//
// Each size's entries live in an array from a new-expression, default-initialised: its elements
// are alive (if unset), so constant evaluation accepts assigning them on g++ 12 and clang 14,
// which rejects writes into allocated storage whose elements were never constructed. A size's
// array is kept for the next size that takes its slot, so a replay allocates a few dozen times.
#pragma once

#include <cstddef>
#include <cstdint>

#include "memscale/error.hpp"

namespace memscale::allocator {

struct free_entry {
  std::uint64_t size;
  std::uint64_t address;
  std::uint32_t block;
};

// A place in the set: the size's rank (in size order) and the offset among its addresses.
struct free_position {
  std::size_t rank = 0;
  std::size_t offset = 0;
};

template <std::size_t Capacity>
class free_set {
 public:
  constexpr free_set() = default;
  free_set(const free_set&) = delete;
  free_set& operator=(const free_set&) = delete;
  constexpr ~free_set() {
    for (std::size_t s = 0; s < made_; ++s) delete[] slots_[s].items;
  }

  [[nodiscard]] constexpr std::size_t size() const { return total_; }
  [[nodiscard]] constexpr bool empty() const { return total_ == 0; }

  // The first entry not ordered before (size, address); end() when there is none.
  [[nodiscard]] constexpr free_position lower_bound(std::uint64_t size, std::uint64_t address) const {
    std::size_t rank = 0;  // the first size not below `size`
    for (std::size_t n = ranks_; n > 0;) {
      const std::size_t half = n / 2;
      if (sizes_[rank + half] < size) {
        rank += half + 1;
        n -= half + 1;
      } else {
        n = half;
      }
    }
    // Best fit asks from address 0: the size's first entry, without searching its addresses.
    if (rank == ranks_ || sizes_[rank] != size || address == 0) return {rank, 0};
    const slot& k = slots_[slot_of_[rank]];
    std::size_t stored = 0;  // the first stored (highest first) address below `address`
    for (std::size_t n = k.count; n > 0;) {
      const std::size_t half = n / 2;
      if (k.items[stored + half].address >= address) {
        stored += half + 1;
        n -= half + 1;
      } else {
        n = half;
      }
    }
    if (stored == 0) return {rank + 1, 0};
    return {rank, k.count - stored};
  }

  [[nodiscard]] constexpr free_position end() const { return {ranks_, 0}; }
  [[nodiscard]] constexpr bool is_end(free_position p) const { return p.rank >= ranks_; }
  [[nodiscard]] constexpr free_entry at(free_position p) const {
    const located& e = item(slots_[slot_of_[p.rank]], p.offset);
    return {sizes_[p.rank], e.address, e.block};
  }

  [[nodiscard]] constexpr free_position next(free_position p) const {
    if (p.offset + 1 < slots_[slot_of_[p.rank]].count) return {p.rank, p.offset + 1};
    return {p.rank + 1, 0};
  }
  // The entry before p (p must not be the first).
  [[nodiscard]] constexpr free_position previous(free_position p) const {
    if (p.rank < ranks_ && p.offset > 0) return {p.rank, p.offset - 1};
    const std::size_t r = p.rank - 1;
    return {r, slots_[slot_of_[r]].count - 1};
  }
  [[nodiscard]] constexpr bool is_first(free_position p) const { return p.rank == 0 && p.offset == 0; }

  // Whether replace(p, e) may put e in place of the entry at p: e sorts there and keeps to one
  // size's entries (the same size between its neighbours' addresses, or a new size for an
  // entry that is alone in its size, between the neighbouring sizes). When not, the caller
  // erases and inserts.
  [[nodiscard]] constexpr bool sorts_at(free_position p, const free_entry& e) const {
    const slot& k = slots_[slot_of_[p.rank]];
    if (e.size == sizes_[p.rank])
      return (p.offset == 0 || item(k, p.offset - 1).address < e.address) &&
             (p.offset + 1 == k.count || e.address < item(k, p.offset + 1).address);
    return k.count == 1 && (p.rank == 0 || sizes_[p.rank - 1] < e.size) &&
           (p.rank + 1 == ranks_ || e.size < sizes_[p.rank + 1]);
  }

  // Puts e in place of the entry at p (sorts_at(p, e) must hold).
  constexpr void replace(free_position p, const free_entry& e) {
    sizes_[p.rank] = e.size;
    item(slots_[slot_of_[p.rank]], p.offset) = {e.address, e.block};
  }

  constexpr void insert(const free_entry& e) {
    if (total_ >= Capacity)
      memscale::detail::fail(error_code::unsupported, "allocator simulation", "has more cached blocks than its capacity",
                             total_);
    const free_position p = lower_bound(e.size, e.address);
    std::size_t rank = p.rank;
    std::size_t offset = p.offset;
    if (rank == ranks_ || sizes_[rank] != e.size) {
      // lower_bound moves past a size whose addresses are all below e's: e belongs at its end.
      if (rank > 0 && sizes_[rank - 1] == e.size) {
        --rank;
        offset = slots_[slot_of_[rank]].count;
      } else {
        add_size(rank, e.size);
        offset = 0;
      }
    }
    slot& k = slots_[slot_of_[rank]];
    if (k.count == k.capacity) grow(k);
    const located entry{e.address, e.block};
    const std::size_t stored = k.count - offset;  // the lower addresses move up one
    for (std::size_t i = k.count; i > stored; --i) k.items[i] = k.items[i - 1];
    k.items[stored] = entry;
    ++k.count;
    ++total_;
  }

  constexpr void erase(free_position p) {
    slot& k = slots_[slot_of_[p.rank]];
    for (std::size_t i = k.count - 1 - p.offset; i + 1 < k.count; ++i) k.items[i] = k.items[i + 1];
    --k.count;
    --total_;
    if (k.count == 0) drop_size(p.rank);
  }

  // Erases the entries for which drop(entry) is true (asked in order), keeping the others in order.
  template <class Drop>
  constexpr void erase_if(Drop&& drop) {
    std::size_t kept_ranks = 0;
    for (std::size_t r = 0; r < ranks_; ++r) {
      const std::uint32_t s = slot_of_[r];
      slot& k = slots_[s];
      // In address order (from the stored end), the kept ones packed at the stored end and
      // then moved to the front.
      std::size_t to = k.count;
      for (std::size_t i = k.count; i > 0; --i) {
        const located e = k.items[i - 1];
        if (drop(free_entry{sizes_[r], e.address, e.block})) continue;
        k.items[--to] = e;
      }
      const std::size_t kept = k.count - to;
      for (std::size_t i = 0; i < kept; ++i) k.items[i] = k.items[to + i];
      total_ -= k.count - kept;
      k.count = kept;
      if (kept == 0) {
        spare_[spare_count_++] = s;
        continue;
      }
      sizes_[kept_ranks] = sizes_[r];
      slot_of_[kept_ranks] = s;
      ++kept_ranks;
    }
    ranks_ = kept_ranks;
  }

  // Calls fn(entry) for every entry in order.
  template <class Fn>
  constexpr void for_each(Fn&& fn) const {
    for (std::size_t r = 0; r < ranks_; ++r) {
      const slot& k = slots_[slot_of_[r]];
      for (std::size_t i = k.count; i > 0; --i) fn(free_entry{sizes_[r], k.items[i - 1].address, k.items[i - 1].block});
    }
  }

 private:
  struct located {
    std::uint64_t address;
    std::uint32_t block;
  };
  // One size's entries: `count` set ones, highest address first, at the front of `capacity`.
  struct slot {
    located* items;
    std::size_t count;
    std::size_t capacity;
  };
  // The entry at `offset` in address order.
  static constexpr located& item(const slot& k, std::size_t offset) { return k.items[k.count - 1 - offset]; }
  static constexpr std::size_t first_capacity = 8;

  // A new size at `rank` with no entries yet, in a spare slot or a new one.
  constexpr void add_size(std::size_t rank, std::uint64_t size) {
    std::uint32_t s = 0;
    if (spare_count_ > 0) {
      s = spare_[--spare_count_];
    } else {
      s = static_cast<std::uint32_t>(made_++);  // at most Capacity: each size holds an entry
      slots_[s] = {new located[first_capacity], 0, first_capacity};
    }
    for (std::size_t r = ranks_; r > rank; --r) {
      sizes_[r] = sizes_[r - 1];
      slot_of_[r] = slot_of_[r - 1];
    }
    sizes_[rank] = size;
    slot_of_[rank] = s;
    ++ranks_;
  }

  // The size at `rank` has no entries left: its slot keeps its array for the next new size.
  constexpr void drop_size(std::size_t rank) {
    spare_[spare_count_++] = slot_of_[rank];
    for (std::size_t r = rank; r + 1 < ranks_; ++r) {
      sizes_[r] = sizes_[r + 1];
      slot_of_[r] = slot_of_[r + 1];
    }
    --ranks_;
  }

  static constexpr void grow(slot& k) {
    located* const more = new located[2 * k.capacity];
    for (std::size_t i = 0; i < k.count; ++i) more[i] = k.items[i];
    delete[] k.items;
    k.items = more;
    k.capacity *= 2;
  }

  // Written before read (P1331): a set costs nothing for the sizes it never holds.
  std::uint64_t sizes_[Capacity];    // by rank
  std::uint32_t slot_of_[Capacity];  // by rank
  std::uint32_t spare_[Capacity];    // slots with no size
  slot slots_[Capacity];
  std::size_t ranks_ = 0;
  std::size_t made_ = 0;
  std::size_t spare_count_ = 0;
  std::size_t total_ = 0;
};

}  // namespace memscale::allocator
