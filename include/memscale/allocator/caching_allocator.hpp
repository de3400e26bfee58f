// memscale/allocator/caching_allocator.hpp: a constexpr simulation of PyTorch's CUDA caching
// allocator (DeviceCachingAllocator) for one device and one stream.
//
// Rules and where they are, in pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp @ 001074d2
// (the 2.5 base; the generic c10/core/CachingDeviceAllocator.h of 2026 has the same):
// - malloc: round_size, get_pool (<= 1 MiB small), get_allocation_size; get_free_block is a
//   lower_bound on blocks ordered by (stream, size, address): the smallest cached block that
//   fits, lowest address first; an "oversize" block (>= max_split_size) serves only requests
//   >= max_split_size that are within max_non_split_rounding of it.
// - no cached block: alloc_block (cudaMalloc of the allocation size; fails past the cap, as
//   under set_per_process_memory_fraction), then release_available_cached_blocks (oversize
//   blocks, only with max_split_size set), then release_cached_blocks (cudaFree of every cached
//   block that is a whole segment, in both pools) and one more alloc_block, counted in
//   num_alloc_retries; then OutOfMemoryError.
// - should_split: small pool or expandable segments, remainder >= 512 B; large pool, request <
//   max_split_size and remainder > 1 MiB. An unsplit tail is part of the block: it counts as
//   allocated (alloc_found_block: allocated_bytes += block->size).
// - free_block: merge with the previous and next block of the same segment when they are free
//   (try_merge_blocks); nothing goes back to CUDA.
// - expandable_segments:True: one segment per pool that maps pages (2 MiB small, 20 MiB large)
//   as needed (find_expandable_block, map_block); best fit counts the unmapped space after a
//   free block as part of it; releasing unmaps the whole free pages of free blocks (unmap_block).
// Simplifications: one stream (no record_stream events, no per-stream pools), no CUDA graph
// pools, no garbage_collection_threshold (it acts only with a memory fraction set). Each
// cudaMalloc'd segment lies below the ones before it, as CUDA hands them out on the H100: a tie
// in best fit goes to the newer segment. With that order the rules reproduce the reserved peak
// of all thirteen recorded histories to the byte (docs/data/gpu_allocator_history/; with
// growing addresses four of them miss by -6.87% ... +0.23%). Expandable segments grow upwards.
//
// Storage is fixed (template capacities); exceeding it is a memscale::error, never UB. The
// tables here, in free_set and in the event walk are built-in arrays: libstdc++ 12's
// std::array subscript is two calls (operator[], then __array_traits::_S_ref), which g++'s
// constant evaluator makes eight times slower than a built-in subscript; they were most of a
// static_assert's replay (docs/performance.md).
#pragma once

#include <cstddef>
#include <cstdint>

#include "memscale/allocator/free_set.hpp"
#include "memscale/allocator/options.hpp"
#include "memscale/bytes.hpp"
#include "memscale/error.hpp"

namespace memscale::allocator {

inline constexpr std::uint32_t no_block = 0xffffffffU;

// One block: part (or all) of a segment, allocated or cached. No default member
// initialisers: slots are written before they are read (P1331), so an allocator costs
// nothing for the slots it never uses. 32 bytes, two to a cache line: an allocation's
// requested size is kept by tensor id (caching_allocator::live_tensor), not here.
struct block {
  std::uint64_t address;
  std::uint64_t size;
  std::uint32_t prev;       // neighbours in the same segment, or no_block
  std::uint32_t next;
  std::uint32_t owner;      // tensor id while allocated
  pool_kind pool;
  bool allocated;
  bool mapped;              // false: an expandable segment's unmapped address range
  bool expandable;
};

// The first allocation that found no memory.
struct oom_event {
  std::uint64_t event = 0;  // 1-based index in the stream of allocate/release calls (0: none)
  std::uint32_t id = 0;     // the tensor that was being allocated
  bytes request{};          // as rounded by round_size
  bytes tried{};            // the segment size, what OutOfMemoryError prints as "Tried to allocate"
  bytes allocated{};        // at that moment
  bytes reserved{};
};

// torch.cuda.memory_stats() keys, "all" pools.
struct allocator_stats {
  bytes allocated{};       // allocated_bytes.all.current (blocks, unsplit tails included)
  bytes allocated_peak{};  // allocated_bytes.all.peak: max_memory_allocated
  bytes reserved{};        // reserved_bytes.all.current
  bytes reserved_peak{};   // reserved_bytes.all.peak: max_memory_reserved
  bytes requested{};       // requested_bytes.all.current (sizes as asked)
  bytes requested_peak{};
  bytes inactive_split{};  // inactive_split_bytes.all.current: free space in segments in use
  bytes inactive_split_peak{};
  std::uint64_t segment_allocations = 0;  // num_device_alloc (cudaMalloc calls and page maps)
  std::uint64_t segment_releases = 0;     // num_device_free
  std::uint64_t alloc_retries = 0;        // num_alloc_retries
  std::uint64_t ooms = 0;                 // num_ooms
  oom_event first_oom{};
};

// A block as the segment picture sees it.
struct block_view {
  std::uint64_t segment = 0;  // the address of the segment's first block
  std::uint64_t address = 0;
  std::uint64_t size = 0;
  std::uint32_t owner = 0;
  pool_kind pool = pool_kind::small;
  bool allocated = false;
  bool mapped = true;
};

template <std::size_t BlockCapacity, std::size_t IdCapacity>
class caching_allocator {
 public:
  // `capacity`: the bytes the allocator may reserve (device memory less the CUDA context and
  // non-PyTorch memory); zero for an unconstrained device.
  constexpr explicit caching_allocator(const options& settings = {}, bytes capacity = {})
      : opts_(settings), cap_(capacity.value) {}

  // Allocates `size` bytes for tensor `id`; false when the allocation runs out of memory
  // (the allocator's state is then as PyTorch leaves it after OutOfMemoryError).
  constexpr bool allocate(std::uint32_t id, std::uint64_t size) {
    ++events_;
    if (id >= IdCapacity) detail_fail("tensor id is beyond the id capacity", id);
    for (; id_high_ <= id; ++id_high_) owner_of_[id_high_].block = no_block;
    if (owner_of_[id].block != no_block) detail_fail("tensor id allocated twice", id);
    const std::uint64_t rounded = round_size(opts_, size);
    const pool_kind pool = pool_for(rounded);
    const std::uint64_t alloc_size = allocation_size(rounded);
    const cached_block cached = get_free_block(pool, rounded);
    std::uint32_t b = cached.block;
    if (b != no_block) {
      b = take_cached(free_of(pool), cached, rounded);
    } else {
      b = alloc_block(pool, rounded, alloc_size);
      if (b == no_block && release_available_cached_blocks(pool, rounded)) b = alloc_block(pool, rounded, alloc_size);
      if (b == no_block) {
        release_cached_blocks();
        ++stats_.alloc_retries;
        b = alloc_block(pool, rounded, alloc_size);
      }
      if (b == no_block) {
        ++stats_.ooms;
        if (stats_.first_oom.event == 0)
          stats_.first_oom = {events_, id, bytes{rounded}, bytes{alloc_size}, stats_.allocated, stats_.reserved};
        return false;
      }
      if (should_split(b, rounded)) b = split(b, rounded);
    }
    block& k = blocks_[b];
    k.allocated = true;
    k.owner = id;
    owner_of_[id] = {b, size};
    grow(stats_.allocated, stats_.allocated_peak, k.size);
    grow(stats_.requested, stats_.requested_peak, size);
    return true;
  }

  // Frees tensor `id` (allocated before and not freed since).
  constexpr void release(std::uint32_t id) {
    ++events_;
    if (id >= id_high_ || owner_of_[id].block == no_block) detail_fail("tensor id freed but not allocated", id);
    const live_tensor t = owner_of_[id];
    owner_of_[id].block = no_block;
    const std::uint32_t b = t.block;
    block& k = blocks_[b];
    k.allocated = false;
    shrink(stats_.allocated, k.size);
    shrink(stats_.requested, t.requested);
    const std::uint32_t merged = merge(b, blocks_[b].prev);
    insert_free(merge(merged, blocks_[merged].next));
  }

  // torch.cuda.reset_peak_memory_stats(): every peak restarts from the current value.
  constexpr void reset_peaks() {
    stats_.allocated_peak = stats_.allocated;
    stats_.reserved_peak = stats_.reserved;
    stats_.requested_peak = stats_.requested;
    stats_.inactive_split_peak = stats_.inactive_split;
  }

  // torch.cuda.empty_cache(): release_cached_blocks.
  constexpr void empty_cache() { release_cached_blocks(); }

  [[nodiscard]] constexpr const allocator_stats& stats() const { return stats_; }
  [[nodiscard]] constexpr const options& settings() const { return opts_; }

  // Calls fn(block_view) for every mapped block of every segment, in address order within a
  // segment (segments in the order they were made).
  template <class Fn>
  constexpr void for_each_block(Fn&& fn) const {
    for (std::uint32_t i = 0; i < used_; ++i) {
      const block& k = blocks_[i];
      if (k.size == 0 || k.prev != no_block) continue;  // start at segment heads (size 0: recycled)
      for (std::uint32_t j = i; j != no_block; j = blocks_[j].next)
        if (blocks_[j].mapped)
          fn(block_view{k.address, blocks_[j].address, blocks_[j].size, blocks_[j].owner, blocks_[j].pool,
                        blocks_[j].allocated, true});
    }
  }

 private:
  using pool_set = free_set<BlockCapacity>;

  [[noreturn]] static void detail_fail(const char* what, std::uint64_t value) {
    memscale::detail::fail(error_code::unsupported, "allocator simulation", what, value);
  }

  // The statistics count with plain arithmetic: each figure is at most the address space
  // handed out (cudaMalloc'd segments below 2^62, expandable ranges by checked_add), so none
  // overflows or goes below zero, and in constant evaluation the checked operators of `bytes`
  // cost g++ several calls per event.
  static constexpr void grow(bytes& now, bytes& peak, std::uint64_t n) {
    now = bytes{now.value + n};
    if (peak.value < now.value) peak = now;
  }
  static constexpr void shrink(bytes& now, std::uint64_t n) { now = bytes{now.value - n}; }

  constexpr pool_set& free_of(pool_kind p) { return p == pool_kind::small ? small_free_ : large_free_; }

  [[nodiscard]] constexpr bool is_split(const block& k) const { return k.prev != no_block || k.next != no_block; }

  constexpr void insert_free(std::uint32_t b) {
    const block& k = blocks_[b];
    free_of(k.pool).insert({k.size, k.address, b});
    count_inactive_split(b);
  }

  // A block that has just become cached: its bytes are inactive split bytes when it is part
  // of a split (non-expandable) segment.
  constexpr void count_inactive_split(std::uint32_t b) {
    const block& k = blocks_[b];
    if (!k.expandable && is_split(k)) grow(stats_.inactive_split, stats_.inactive_split_peak, k.size);
  }

  // A block that leaves the cache: count_inactive_split undone.
  constexpr void uncount_inactive_split(const block& k) {
    if (!k.expandable && is_split(k)) shrink(stats_.inactive_split, k.size);
  }

  constexpr void erase_free_at(pool_set& s, free_position at) {
    uncount_inactive_split(blocks_[s.at(at).block]);
    s.erase(at);
  }

  // A cached block leaves its pool's set (its own fields find it; no entry is read back).
  constexpr void erase_free(std::uint32_t b) {
    const block& k = blocks_[b];
    uncount_inactive_split(k);
    pool_set& s = free_of(k.pool);
    s.erase(s.lower_bound(k.size, k.address));
  }

  constexpr std::uint32_t new_block(const block& k) {
    std::uint32_t b = 0;
    if (recycled_count_ > 0) {
      b = recycled_[--recycled_count_];
    } else {
      if (used_ >= BlockCapacity) detail_fail("has more blocks than its capacity", used_);
      b = used_++;
    }
    blocks_[b] = k;
    return b;
  }

  // A recycled slot reads size 0 (every block holds bytes) until new_block writes it again.
  constexpr void delete_block(std::uint32_t b) {
    blocks_[b].size = 0;
    recycled_[recycled_count_++] = b;
  }

  struct cached_block {
    std::uint32_t block = no_block;
    free_position at{};  // its entry in the pool's free set
  };

  // get_free_block: best fit in the pool, with the oversize rules. The block stays in the set
  // until take_cached.
  constexpr cached_block get_free_block(pool_kind pool, std::uint64_t size) {
    pool_set& s = free_of(pool);
    free_position at = s.lower_bound(size, 0);
    if (s.is_end(at)) return {};
    if (opts_.expandable_segments && blocks_[s.at(at).block].expandable) {
      // The block that can grow into unmapped space counts at its grown size, so a block that
      // fits without growing is preferred (get_free_block's expandable_size walk).
      for (free_position n = s.next(at);
           !s.is_end(n) && expandable_size(s.at(n).block) < expandable_size(s.at(at).block); n = s.next(n))
        at = n;
    }
    const free_entry found = s.at(at);
    const std::uint64_t max_split = opts_.max_split_size.value;
    if (size < max_split && found.size >= max_split) return {};
    if (size >= max_split && found.size >= memscale::detail::checked_add(size, opts_.max_non_split_rounding.value))
      return {};
    return {found.block, at};
  }

  // The cached block serves a request of `size`: it leaves the free set
  // (get_free_block) and is split when it should be (alloc_found_block), the rest cached again.
  // The rest is smaller than the block, so it often sorts where the block's entry was: then it
  // takes that entry's place (the set's contents and the statistics as erase, then insert).
  constexpr std::uint32_t take_cached(pool_set& s, const cached_block& cached, std::uint64_t size) {
    const std::uint32_t found = cached.block;
    const free_position at = cached.at;
    if (!should_split(found, size)) {
      erase_free_at(s, at);
      return found;
    }
    uncount_inactive_split(blocks_[found]);
    const std::uint32_t b = split_off(found, size);
    const free_entry rest{blocks_[found].size, blocks_[found].address, found};
    if (s.sorts_at(at, rest)) {
      s.replace(at, rest);
    } else {
      s.erase(at);
      s.insert(rest);
    }
    count_inactive_split(found);
    return b;
  }

  [[nodiscard]] constexpr std::uint64_t expandable_size(std::uint32_t b) const {
    const block& k = blocks_[b];
    return k.size + (k.next != no_block && !blocks_[k.next].mapped ? blocks_[k.next].size : 0);
  }

  [[nodiscard]] constexpr bool over_cap(std::uint64_t more) const {
    return cap_ != 0 && memscale::detail::checked_add(stats_.reserved.value, more) > cap_;
  }

  constexpr void add_reserved(std::uint64_t n) {
    grow(stats_.reserved, stats_.reserved_peak, n);
    ++stats_.segment_allocations;
  }

  // alloc_block: a new segment of `alloc_size` (cudaMalloc), or pages of the pool's
  // expandable segment; no_block past the cap.
  constexpr std::uint32_t alloc_block(pool_kind pool, std::uint64_t size, std::uint64_t alloc_size) {
    if (over_cap(alloc_size)) return no_block;
    if (opts_.expandable_segments) return allocate_expandable(pool, size);
    if (alloc_size > segment_floor_) detail_fail("ran out of simulated address space at a segment of", alloc_size);
    segment_floor_ -= alloc_size;
    const std::uint32_t b =
        new_block(block{segment_floor_, alloc_size, no_block, no_block, 0, pool, false, true, false});
    add_reserved(alloc_size);
    return b;
  }

  [[nodiscard]] constexpr bool should_split(std::uint32_t b, std::uint64_t size) const {
    const block& k = blocks_[b];
    const std::uint64_t remaining = k.size - size;
    if (k.pool == pool_kind::small || opts_.expandable_segments) return remaining >= min_block_size;
    return size < opts_.max_split_size.value && remaining > small_size;
  }

  // alloc_found_block's split: the front `size` bytes become the allocation, the rest stays cached.
  constexpr std::uint32_t split(std::uint32_t rest, std::uint64_t size) {
    const std::uint32_t b = split_off(rest, size);
    insert_free(rest);
    return b;
  }

  // The split itself: a new block for the front, `rest` keeps the tail (not yet cached).
  constexpr std::uint32_t split_off(std::uint32_t rest, std::uint64_t size) {
    const block r = blocks_[rest];
    const std::uint32_t b = new_block(block{r.address, size, r.prev, rest, 0, r.pool, false, true, r.expandable});
    if (r.prev != no_block) blocks_[r.prev].next = b;
    block& k = blocks_[rest];
    k.prev = b;
    k.address += size;
    k.size -= size;
    return b;
  }

  // try_merge_blocks: `src` joins `dst` when it is a free neighbour in the same mapping state.
  // Returns the block that remains (always dst).
  constexpr std::uint32_t merge(std::uint32_t dst, std::uint32_t src) {
    if (src == no_block) return dst;
    block& s = blocks_[src];
    block& d = blocks_[dst];
    if (s.allocated || s.mapped != d.mapped) return dst;
    if (s.mapped)
      erase_free(src);
    else
      erase_unmapped(src);
    if (d.prev == src) {
      d.address = s.address;
      d.prev = s.prev;
      if (d.prev != no_block) blocks_[d.prev].next = dst;
    } else {
      d.next = s.next;
      if (d.next != no_block) blocks_[d.next].prev = dst;
    }
    d.size += s.size;
    delete_block(src);
    return dst;
  }

  // release_cached_blocks: every cached block that is a whole segment goes back to CUDA;
  // expandable segments unmap their whole free pages.
  constexpr void release_cached_blocks() {
    for (const pool_kind pool : {pool_kind::large, pool_kind::small}) {
      pool_set& s = free_of(pool);
      std::size_t expandable_count = 0;
      s.erase_if([&](const free_entry& e) {
        const block& k = blocks_[e.block];
        if (k.expandable) {
          unmap_queue_[expandable_count++] = e.block;
          return false;
        }
        if (is_split(k)) return false;
        shrink(stats_.reserved, k.size);
        ++stats_.segment_releases;
        delete_block(e.block);
        return true;
      });
      for (std::size_t i = 0; i < expandable_count; ++i) unmap_block(unmap_queue_[i]);
    }
  }

  // release_available_cached_blocks: with max_split_size set, free oversize cached segments,
  // the smallest one that covers the request or else the largest ones until they do.
  constexpr bool release_available_cached_blocks(pool_kind pool, std::uint64_t size) {
    const std::uint64_t max_split = opts_.max_split_size.value;
    if (max_split == memscale::detail::u64_max) return false;
    pool_set& s = free_of(pool);
    const std::uint64_t key = size < max_split ? max_split : size;
    free_position at = s.lower_bound(key, 0);
    auto release_at = [&](free_position p) {
      const std::uint32_t b = s.at(p).block;
      shrink(stats_.reserved, blocks_[b].size);
      ++stats_.segment_releases;
      erase_free_at(s, p);
      delete_block(b);
    };
    if (!s.is_end(at) && !blocks_[s.at(at).block].expandable) {
      release_at(at);
      return true;
    }
    // No single block covers the request: release oversize blocks from the largest down.
    std::uint64_t released = 0;
    while (released < key && !s.empty() && !s.is_first(at)) {
      at = s.previous(at);
      if (s.at(at).size < max_split) break;
      if (blocks_[s.at(at).block].expandable) continue;
      const free_entry e = s.at(at);
      released += e.size;
      release_at(at);
      at = s.lower_bound(e.size, e.address);  // erasing moves the entries after it (or their size)
    }
    return released >= key;
  }

  // ---- expandable segments ---------------------------------------------------------------
  // One virtual range per pool, far larger than any device (the real one is 1.125x the
  // device's memory); addresses are counted from its base, which is page aligned.
  static constexpr std::uint64_t expandable_range = 1ULL << 46;

  constexpr void insert_unmapped(std::uint32_t b) {
    if (unmapped_count_ >= unmapped_capacity) detail_fail("has more unmapped ranges than its capacity", unmapped_count_);
    std::size_t at = 0;
    while (at < unmapped_count_ && blocks_[unmapped_[at]].address < blocks_[b].address) ++at;
    for (std::size_t i = unmapped_count_; i > at; --i) unmapped_[i] = unmapped_[i - 1];
    unmapped_[at] = b;
    ++unmapped_count_;
  }

  constexpr void erase_unmapped(std::uint32_t b) {
    std::size_t at = 0;
    while (at < unmapped_count_ && unmapped_[at] != b) ++at;
    for (std::size_t i = at; i + 1 < unmapped_count_; ++i) unmapped_[i] = unmapped_[i + 1];
    --unmapped_count_;
  }

  [[nodiscard]] constexpr bool allocatable(std::uint32_t b) const { return b != no_block && !blocks_[b].allocated; }

  // find_expandable_block: the lowest unmapped range of the pool (joined with a free block just
  // before it) with room for `size`; a new segment when there is none.
  constexpr std::uint32_t find_expandable_block(pool_kind pool, std::uint64_t size) {
    for (std::size_t i = 0; i < unmapped_count_; ++i) {
      std::uint32_t c = unmapped_[i];
      if (blocks_[c].pool != pool) continue;
      if (allocatable(blocks_[c].prev)) c = blocks_[c].prev;
      std::uint64_t room = 0;
      for (std::uint32_t j = c; room < size && allocatable(j); j = blocks_[j].next) room += blocks_[j].size;
      if (room >= size) return c;
    }
    const std::uint64_t base = next_address_;
    next_address_ = memscale::detail::checked_add(next_address_, expandable_range);
    const std::uint32_t b = new_block(block{base, expandable_range, no_block, no_block, 0, pool, false, false, true});
    segment_base_[pool == pool_kind::small ? 0 : 1] = base;
    insert_unmapped(b);
    return b;
  }

  // map_block: maps whole pages covering `size` bytes at the start of an unmapped range. The
  // cap is not checked here: alloc_block compared the request's allocation size with it, and
  // the pages may go past it (CUDACachingAllocator.cpp @ 001074d2: set_fraction is read in
  // alloc_block only; ExpandableSegment::map fails only when cuMemCreate does).
  constexpr void map_block(std::uint32_t b, std::uint64_t size) {
    const std::uint64_t page = expandable_page(blocks_[b].pool);
    std::uint64_t mapped = memscale::detail::round_up(size, page);
    if (mapped > blocks_[b].size) mapped = blocks_[b].size;
    erase_unmapped(b);
    blocks_[b].mapped = true;
    if (mapped < blocks_[b].size) {
      const block k = blocks_[b];
      const std::uint32_t rest =
          new_block(block{k.address + mapped, k.size - mapped, b, k.next, 0, k.pool, false, false, true});
      if (k.next != no_block) blocks_[k.next].prev = rest;
      blocks_[b].next = rest;
      blocks_[b].size = mapped;
      insert_unmapped(rest);
    }
    const std::uint32_t m = merge(merge(b, blocks_[b].prev), blocks_[b].next);
    insert_free(m);
    add_reserved(mapped);
  }

  // try_allocate_expandable_block.
  constexpr std::uint32_t allocate_expandable(pool_kind pool, std::uint64_t size) {
    std::uint32_t c = find_expandable_block(pool, size);
    if (!blocks_[c].mapped) {
      const std::uint64_t want = blocks_[c].size < size ? blocks_[c].size : size;
      map_block(c, want);
    }
    while (blocks_[c].size < size) {
      const std::uint32_t n = blocks_[c].next;
      const std::uint64_t remaining = size - blocks_[c].size;
      map_block(n, remaining < blocks_[n].size ? remaining : blocks_[n].size);
      c = n;  // the newly mapped range absorbed its free predecessor (merge keeps the destination)
    }
    erase_free(c);
    return c;
  }

  // unmap_block: the whole pages inside a free block go back to CUDA.
  constexpr void unmap_block(std::uint32_t b) {
    const block k = blocks_[b];
    const std::uint64_t page = expandable_page(k.pool);
    const std::uint64_t base = segment_base_[k.pool == pool_kind::small ? 0 : 1];
    const std::uint64_t begin = base + memscale::detail::round_up(k.address - base, page);
    const std::uint64_t end = base + (k.address + k.size - base) / page * page;
    if (begin >= end) return;
    erase_free(b);
    if (begin > k.address) {
      const std::uint32_t before_free =
          new_block(block{k.address, begin - k.address, k.prev, b, 0, k.pool, false, true, true});
      if (k.prev != no_block) blocks_[k.prev].next = before_free;
      blocks_[b].prev = before_free;
      insert_free(before_free);
    }
    if (end < k.address + k.size) {
      const std::uint32_t after_free =
          new_block(block{end, k.address + k.size - end, b, k.next, 0, k.pool, false, true, true});
      if (k.next != no_block) blocks_[k.next].prev = after_free;
      blocks_[b].next = after_free;
      insert_free(after_free);
    }
    blocks_[b].address = begin;
    blocks_[b].size = end - begin;
    blocks_[b].mapped = false;
    const std::uint32_t m = merge(merge(b, blocks_[b].prev), blocks_[b].next);
    insert_unmapped(m);
    shrink(stats_.reserved, end - begin);
    ++stats_.segment_releases;
  }

  options opts_;
  std::uint64_t cap_ = 0;
  std::uint64_t next_address_ = 1ULL << 40;   // expandable segments' ranges, upwards
  std::uint64_t segment_floor_ = 1ULL << 62;  // cudaMalloc'd segments, each below the last
  std::uint64_t events_ = 0;
  allocator_stats stats_{};
  block blocks_[BlockCapacity];
  std::uint32_t recycled_[BlockCapacity];
  std::uint32_t used_ = 0;
  std::uint32_t recycled_count_ = 0;
  // A live tensor's block and the size it asked for.
  struct live_tensor {
    std::uint32_t block;
    std::uint64_t requested;
  };
  live_tensor owner_of_[IdCapacity];  // written up to id_high_
  std::uint32_t id_high_ = 0;
  pool_set small_free_;
  pool_set large_free_;
  std::uint32_t unmap_queue_[BlockCapacity];
  static constexpr std::size_t unmapped_capacity = 64;
  std::uint32_t unmapped_[unmapped_capacity]{};
  std::size_t unmapped_count_ = 0;
  std::uint64_t segment_base_[2]{};
};

}  // namespace memscale::allocator
