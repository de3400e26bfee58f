// memscale/detail/unchecked_bytes.hpp: a byte sum added without overflow checks.
// IWYU pragma: private, include <memscale/memscale.hpp>
//
// For a walk whose caller proved first that none of its sums can reach 2^64
// (estimate/walk_bound.hpp): the same sums as `bytes` makes, each addition without its check.
// A `bytes` term converts implicitly, so a sum that starts with one of these stays unchecked.
#pragma once

#include <compare>
#include <cstdint>

#include "memscale/bytes.hpp"

namespace memscale::detail {

struct unchecked_bytes {
  std::uint64_t value = 0;

  constexpr unchecked_bytes() = default;
  constexpr unchecked_bytes(bytes b) : value(b.value) {}  // NOLINT(google-explicit-constructor): a term
  constexpr explicit unchecked_bytes(std::uint64_t v) : value(v) {}

  constexpr auto operator<=>(const unchecked_bytes&) const = default;

  constexpr unchecked_bytes& operator+=(unchecked_bytes other) {
    value += other.value;
    return *this;
  }
  constexpr unchecked_bytes& operator-=(unchecked_bytes other) {
    value -= other.value;
    return *this;
  }
  friend constexpr unchecked_bytes operator+(unchecked_bytes a, unchecked_bytes b) {
    return unchecked_bytes{a.value + b.value};
  }
  friend constexpr unchecked_bytes max(unchecked_bytes a, unchecked_bytes b) { return a < b ? b : a; }
};

}  // namespace memscale::detail
