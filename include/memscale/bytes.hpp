// memscale/bytes.hpp: a strong, structural byte count.
//
// Integral so that == and <=> are exact in static_assert; structural (public member)
// so that it can be a template argument, as mp-units' quantity is. Arithmetic is
// overflow-checked; a double converts only through from_double, which rounds up.
#pragma once

#include <compare>
#include <concepts>
#include <cstdint>

#include "memscale/detail/math.hpp"

namespace memscale {

struct bytes {
  std::uint64_t value = 0;  // public so the type stays structural; treat as read-only

  constexpr auto operator<=>(const bytes&) const = default;

  constexpr bytes& operator+=(bytes other) { value = detail::checked_add(value, other.value); return *this; }
  constexpr bytes& operator-=(bytes other) { value = detail::checked_sub(value, other.value); return *this; }

  // Rounds up, so an estimate converted from a double is never optimistic.
  static constexpr bytes from_double(double count) { return bytes{detail::ceil_to_u64(count)}; }
};

constexpr bytes operator+(bytes a, bytes b) { return bytes{detail::checked_add(a.value, b.value)}; }
constexpr bytes operator-(bytes a, bytes b) { return bytes{detail::checked_sub(a.value, b.value)}; }

template <std::unsigned_integral N>
constexpr bytes operator*(bytes a, N n) { return bytes{detail::checked_mul(a.value, n)}; }
template <std::unsigned_integral N>
constexpr bytes operator*(N n, bytes a) { return bytes{detail::checked_mul(a.value, n)}; }

// Integer division that rounds up: the name says the rounding.
template <std::unsigned_integral N>
constexpr bytes ceil_div(bytes a, N n) {
  if (n == 0) detail::fail(error_code::invalid_run, "ceil_div divisor", "must be > 0", 0);
  return bytes{detail::ceil_div(a.value, n)};
}

// A ratio of two sizes (e.g. memory pressure = peak / VRAM).
constexpr double ratio(bytes a, bytes b) {
  if (b.value == 0) detail::fail(error_code::invalid_run, "ratio denominator", "must be > 0", 0);
  return static_cast<double>(a.value) / static_cast<double>(b.value);
}

constexpr bytes max(bytes a, bytes b) { return a < b ? b : a; }
constexpr bytes min(bytes a, bytes b) { return a < b ? a : b; }

// Rounds up to a multiple of `granule` (allocator block sizes).
constexpr bytes round_up(bytes a, bytes granule) { return bytes{detail::round_up(a.value, granule.value)}; }

constexpr double to_gib(bytes b) { return static_cast<double>(b.value) / 1073741824.0; }
constexpr double to_mib(bytes b) { return static_cast<double>(b.value) / 1048576.0; }
constexpr double to_gb(bytes b) { return static_cast<double>(b.value) / 1e9; }

inline namespace literals {
// Binary (IEC) units: what nvidia-smi's "MiB" and CUDA's totals use.
consteval bytes operator""_B(unsigned long long n) { return bytes{n}; }
consteval bytes operator""_KiB(unsigned long long n) { return bytes{detail::checked_mul(n, 1ULL << 10)}; }
consteval bytes operator""_MiB(unsigned long long n) { return bytes{detail::checked_mul(n, 1ULL << 20)}; }
consteval bytes operator""_GiB(unsigned long long n) { return bytes{detail::checked_mul(n, 1ULL << 30)}; }
consteval bytes operator""_TiB(unsigned long long n) { return bytes{detail::checked_mul(n, 1ULL << 40)}; }
// Decimal (SI) units: what GPU marketing ("80 GB") and many reports (GB = 1e9) use.
consteval bytes operator""_KB(unsigned long long n) { return bytes{detail::checked_mul(n, 1000ULL)}; }
consteval bytes operator""_MB(unsigned long long n) { return bytes{detail::checked_mul(n, 1000'000ULL)}; }
consteval bytes operator""_GB(unsigned long long n) { return bytes{detail::checked_mul(n, 1000'000'000ULL)}; }
consteval bytes operator""_TB(unsigned long long n) { return bytes{detail::checked_mul(n, 1000'000'000'000ULL)}; }
}  // namespace literals

}  // namespace memscale
