// memscale/detail/math.hpp: checked integer arithmetic and constexpr rounding.
// IWYU pragma: private, include <memscale/memscale.hpp>
//
// Unsigned arithmetic wraps silently even in constant evaluation, so every count that
// can grow with the model goes through these helpers. No <cmath>: clang 14 rejects it
// in constant expressions.
#pragma once

#include <cstdint>
#include <limits>

#include "memscale/error.hpp"

namespace memscale::detail {

inline constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();

constexpr std::uint64_t checked_add(std::uint64_t a, std::uint64_t b) {
  if (a > u64_max - b) fail(error_code::overflow, "byte count", "exceeds 2^64-1");
  return a + b;
}

constexpr std::uint64_t checked_sub(std::uint64_t a, std::uint64_t b) {
  if (b > a) fail(error_code::underflow, "byte count", "would go below zero", b - a);
  return a - b;
}

constexpr std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b) {
  if (a != 0 && b > u64_max / a) fail(error_code::overflow, "byte count", "exceeds 2^64-1");
  return a * b;
}

constexpr std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  return checked_mul(checked_mul(a, b), c);
}

constexpr std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

constexpr std::uint64_t round_up(std::uint64_t a, std::uint64_t multiple) {
  return checked_mul(ceil_div(a, multiple), multiple);
}

// Rounds a non-negative double up to the next integer; fails when it cannot be represented.
constexpr std::uint64_t ceil_to_u64(double x) {
  if (!(x >= 0.0)) fail(error_code::underflow, "byte count", "must be a non-negative number");
  if (x >= 18446744073709551615.0) fail(error_code::overflow, "byte count", "exceeds 2^64-1");
  const auto truncated = static_cast<std::uint64_t>(x);
  return static_cast<double>(truncated) < x ? truncated + 1 : truncated;
}

constexpr std::uint64_t max(std::uint64_t a, std::uint64_t b) { return a < b ? b : a; }
constexpr std::uint64_t min(std::uint64_t a, std::uint64_t b) { return a < b ? a : b; }

}  // namespace memscale::detail
