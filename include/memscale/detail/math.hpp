// memscale/detail/math.hpp: checked integer arithmetic and constexpr rounding.
// IWYU pragma: private, include <memscale/memscale.hpp>
//
// Unsigned arithmetic wraps silently even in constant evaluation, so every count that
// can grow with the model goes through these helpers. No <cmath>: clang 14 rejects it
// in constant expressions.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "memscale/error.hpp"

namespace memscale::detail {

inline constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();

// What a checked count is, for its overflow message: "tokens (micro_batch x seq_len)".
// Passed by value down to the failure, so in constant evaluation the compilers print it
// in the call backtrace (g++: "in 'constexpr' expansion of checked_mul(..., quantity{"..."})",
// clang: "in call to 'checked_mul(..., {&"..."[0]})'"): the quantity is named at compile
// time too.
struct quantity {
  const char* name;
};

inline constexpr quantity byte_count{"byte count"};

// Not constexpr (see error.hpp): "<quantity> overflows: A x B exceeds 2^64-1".
[[noreturn]] inline void fail_overflow(quantity q, std::uint64_t a, const char* op, std::uint64_t b) {
  throw error(error_code::overflow, std::string(q.name) + " overflows: " + std::to_string(a) + op +
                                        std::to_string(b) + " exceeds 2^64-1");
}

// The overflow builtins (g++ and clang++, usable in constant evaluation) instead of a
// test by division: a 64-bit division costs tens of cycles and estimates do hundreds.
constexpr std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, quantity q = byte_count) {
  std::uint64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) fail_overflow(q, a, " + ", b);
  return sum;
}

constexpr std::uint64_t checked_sub(std::uint64_t a, std::uint64_t b) {
  if (b > a) fail(error_code::underflow, "byte count", "would go below zero", b - a);
  return a - b;
}

constexpr std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, quantity q = byte_count) {
  std::uint64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) fail_overflow(q, a, " x ", b);
  return product;
}

constexpr std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, std::uint64_t c, quantity q = byte_count) {
  return checked_mul(checked_mul(a, b, q), c, q);
}

// By 1 (one rank, no sharding: the usual case) without dividing: a 64-bit division takes about
// 4 ns, and an estimate made 18, most by 1 (docs/performance.md).
constexpr std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) {
  if (b == 1) return a;
  return a / b + (a % b != 0 ? 1 : 0);
}

constexpr std::uint64_t round_up(std::uint64_t a, std::uint64_t multiple) {
  return checked_mul(ceil_div(a, multiple), multiple);
}

// Rounds a non-negative double up to the next integer; fails when it cannot be represented
// (NaN, negative, or >= 2^64: the double nearest 2^64-1 is 2^64), so no double reaches the
// cast unchecked.
constexpr std::uint64_t ceil_to_u64(double x, quantity q = byte_count) {
  if (!(x >= 0.0)) fail(error_code::underflow, q.name, "must be a non-negative number");
  if (!(x < 18446744073709551616.0)) fail(error_code::overflow, q.name, "exceeds 2^64-1");
  const auto truncated = static_cast<std::uint64_t>(x);
  return static_cast<double>(truncated) < x ? truncated + 1 : truncated;
}

// Rounds a non-negative double down; the same checks as ceil_to_u64.
constexpr std::uint64_t floor_to_u64(double x, quantity q = byte_count) {
  if (!(x >= 0.0)) fail(error_code::underflow, q.name, "must be a non-negative number");
  if (!(x < 18446744073709551616.0)) fail(error_code::overflow, q.name, "exceeds 2^64-1");
  return static_cast<std::uint64_t>(x);
}

constexpr std::uint64_t max(std::uint64_t a, std::uint64_t b) { return a < b ? b : a; }
constexpr std::uint64_t min(std::uint64_t a, std::uint64_t b) { return a < b ? a : b; }

}  // namespace memscale::detail
