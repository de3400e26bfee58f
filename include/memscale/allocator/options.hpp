// memscale/allocator/options.hpp: the constants of PyTorch's CUDA caching allocator and the
// options people set through PYTORCH_CUDA_ALLOC_CONF (parsed by allocator/alloc_conf.hpp).
//
// Rules are read in pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp @ 001074d2 (main of
// Aug 2024, the base of the 2.5 release) and, for the current releases, in the generic
// DeviceCachingAllocator that CUDA now instantiates (c10/core/CachingDeviceAllocator.h, main
// 2026: get_round_size, get_allocation_size, get_free_block, release_cached_blocks) and
// c10/core/AllocatorConfig.cpp @ 0ac71663 (option defaults and parser). The two agree on
// every rule simulated here.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

#include "memscale/bytes.hpp"
#include "memscale/detail/math.hpp"

namespace memscale::allocator {

// Every block is a multiple of 512 B (CUDACachingAllocator.cpp @ 001074d2: kMinBlockSize).
inline constexpr std::uint64_t min_block_size = 512;
// Requests of at most 1 MiB use the small pool (same file: kSmallSize).
inline constexpr std::uint64_t small_size = 1ULL << 20;
// Small-pool segments are 2 MiB (kSmallBuffer); also the small pool's page under expandable segments.
inline constexpr std::uint64_t small_buffer = 2ULL << 20;
// Requests in (1 MiB, 10 MiB) share 20 MiB segments (kLargeBuffer, kMinLargeAlloc); also the
// large pool's page under expandable segments (Note [Expandable Segments]).
inline constexpr std::uint64_t large_buffer = 20ULL << 20;
inline constexpr std::uint64_t min_large_alloc = 10ULL << 20;
// Larger requests get a segment of their size rounded up to 2 MiB (kRoundLarge).
inline constexpr std::uint64_t round_large = 2ULL << 20;
// roundup_power2_divisions has one entry per power-of-two interval from 1 MiB to 64 GiB
// (c10/core/AllocatorConfig.cpp @ 0ac71663: kRoundUpPowerOfTwoIntervals, Start, End).
inline constexpr std::size_t power2_intervals = 16;

// The allocator settings a run can change (PYTORCH_CUDA_ALLOC_CONF). Defaults are PyTorch's
// (AllocatorConfig.cpp parseArgs: max_split_size SIZE_MAX, divisions all 0, expandable off;
// max_non_split_rounding = kLargeBuffer, pytorch PR #136174, torch >= 2.6).
struct options {
  bool expandable_segments = false;
  // Blocks at least this large are never split, and serve only requests within
  // max_non_split_rounding of their size (CUDACachingAllocator.cpp get_free_block).
  bytes max_split_size{memscale::detail::u64_max};
  bytes max_non_split_rounding{large_buffer};
  // Divisions per power-of-two interval [2^(20+i), 2^(21+i)); 0 or 1: plain 512 B rounding.
  std::array<std::uint16_t, power2_intervals> roundup_power2_divisions{};

  friend constexpr bool operator==(const options&, const options&) = default;
};

namespace detail {

// 0 for v == 0, as the shifting loop it replaces gave (std::bit_width is one instruction).
constexpr unsigned floor_log2(std::uint64_t v) { return v == 0 ? 0U : static_cast<unsigned>(std::bit_width(v)) - 1U; }

constexpr bool is_power_of_two(std::uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace detail

// The divisions that apply to a request of `size` bytes (AllocatorConfig.cpp
// roundup_power2_divisions(size): interval log2(size) - 20, clamped to [0, 15]).
constexpr std::uint64_t divisions_for(const options& o, std::uint64_t size) {
  const unsigned log_size = detail::floor_log2(size);
  std::size_t index = log_size > 20 ? log_size - 20 : 0;
  if (index >= power2_intervals) index = power2_intervals - 1;
  return o.roundup_power2_divisions[index];
}

// The next of `divisions` equal steps between the powers of two around `size`
// (CUDACachingAllocator.cpp roundup_power2_next_division: 1200 B, 4 divisions -> 1280 B).
constexpr std::uint64_t round_to_power2_division(std::uint64_t size, std::uint64_t divisions) {
  if (detail::is_power_of_two(size)) return size;
  const std::uint64_t floor = std::uint64_t{1} << detail::floor_log2(size);
  const std::uint64_t step = floor >> detail::floor_log2(divisions);
  if (step == 0) return floor << 1;
  const std::uint64_t rounded_down = size & ~(step - 1);
  return rounded_down == size ? size : memscale::detail::checked_add(rounded_down, step);
}

// The block size a request becomes (round_size): it feeds max_memory_allocated too.
constexpr std::uint64_t round_size(const options& o, std::uint64_t size) {
  if (size < min_block_size) return min_block_size;
  const std::uint64_t divisions = divisions_for(o, size);
  if (divisions > 1 && size > min_block_size * divisions) return round_to_power2_division(size, divisions);
  return memscale::detail::round_up(size, min_block_size);
}

enum class pool_kind : std::uint8_t { small, large };

constexpr pool_kind pool_for(std::uint64_t rounded) { return rounded <= small_size ? pool_kind::small : pool_kind::large; }

// The cudaMalloc size when no cached block serves a request (get_allocation_size).
constexpr std::uint64_t allocation_size(std::uint64_t rounded) {
  if (rounded <= small_size) return small_buffer;
  if (rounded < min_large_alloc) return large_buffer;
  return memscale::detail::round_up(rounded, round_large);
}

// The page an expandable segment maps at a time: 2 MiB small pool, 20 MiB large pool.
constexpr std::uint64_t expandable_page(pool_kind p) { return p == pool_kind::small ? small_buffer : large_buffer; }

}  // namespace memscale::allocator
