// memscale/detail/largest_fitting.hpp: the largest micro-batch (or sequence length) whose
// peak stays within a budget.
// IWYU pragma: private, include <memscale/memscale.hpp>
//
// Two searches over a monotone quantity (a larger batch or sequence never needs less memory):
//  * largest_fitting / largest_fitting_from: bisection over a fits / does-not-fit predicate;
//  * largest_within_budget: the same answer from the peak values. A peak is piecewise linear in
//    the micro-batch (affine within each regime: which phase peaks, which tensors are live) and
//    close to it in the sequence length, so a secant through two evaluated points lands on the
//    crossing, and the bracket around it is closed by the points on either side. A guess that
//    misses only narrows the bracket; after a few misses the search bisects what is left.
// Both work in constant evaluation: no <cmath>, no unchecked double-to-integer conversion, and
// no arithmetic that can wrap.
#pragma once

#include <cstdint>

namespace memscale::detail {

// Largest value in [lo, hi] for which fits_at(v) holds, given that fits_at(lo) holds and
// fits is monotone (a larger batch or sequence never needs less memory).
template <class Fits>
constexpr std::uint64_t largest_fitting_from(std::uint64_t lo, std::uint64_t hi, Fits fits_at) {
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2 + (hi - lo) % 2;  // lo + ceil((hi - lo) / 2), no wrap
    if (fits_at(mid)) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// Largest value in [1, hi] for which fits_at(v) holds; 0 when even 1 does not fit.
template <class Fits>
constexpr std::uint64_t largest_fitting(std::uint64_t hi, Fits fits_at) {
  if (hi == 0 || !fits_at(std::uint64_t{1})) return 0;
  return largest_fitting_from(1, hi, fits_at);
}

// One evaluated point of a search: the value (a peak in bytes) at `at`.
struct probe_point {
  std::uint64_t at = 0;
  std::uint64_t value = 0;
};

// Secant guesses tried before the search falls back to bisection for good. Each guess lies
// strictly inside the bracket, so every probe narrows it; a piecewise-linear peak needs two
// or three, a quadratic one (attention scores in the sequence length) a few more.
inline constexpr int secant_guesses = 8;

// The integer just at or below where the line through a and b (a.at < b.at) reaches budget,
// clamped to [floor_at, ceil_at]; `flat` when the line does not rise, `fallback` when the
// points are too close together for a double to tell them apart. Computed in double: it is
// only a guess (every guess is evaluated), nothing is divided by zero, and the range checks
// come before the conversion, so NaN, infinities and out-of-range results never reach it.
constexpr std::uint64_t secant_crossing(probe_point a, probe_point b, std::uint64_t budget, std::uint64_t floor_at,
                                        std::uint64_t ceil_at, std::uint64_t flat, std::uint64_t fallback) {
  if (b.value <= a.value) return flat;
  const double rise = static_cast<double>(b.value) - static_cast<double>(a.value);
  const double run = static_cast<double>(b.at) - static_cast<double>(a.at);
  if (!(rise > 0.0) || !(run > 0.0)) return fallback;
  const double x =
      static_cast<double>(a.at) + (static_cast<double>(budget) - static_cast<double>(a.value)) / rise * run;
  if (!(x >= static_cast<double>(floor_at))) return floor_at;
  if (!(x < static_cast<double>(ceil_at))) return ceil_at;
  const auto whole = static_cast<std::uint64_t>(x);  // x in [floor_at, ceil_at): in range
  return whole < floor_at ? floor_at : whole > ceil_at ? ceil_at : whole;
}

// Largest v in [1, hi] with value_at(v) <= budget (0 when there is none), for value_at
// non-decreasing: the answer largest_fitting(hi, v -> value_at(v) <= budget) gives, from fewer
// evaluations. Points already evaluated can be passed in: `fit` one that fits
// (fit.value == value_at(fit.at) <= budget), `over` one above it that does not (over.value >
// budget; it may lie beyond hi); at == 0 means none. `first`, when not 0, is the caller's
// estimate of the answer and the first point evaluated (moved into the candidates left).
// Without it the first point is 1 when nothing is known to fit (as largest_fitting starts),
// else the bisection midpoint (as largest_fitting_from starts).
template <class Value>
constexpr std::uint64_t largest_within_budget(std::uint64_t hi, std::uint64_t budget, Value value_at,
                                              probe_point fit = {}, probe_point over = {}, std::uint64_t first = 0) {
  probe_point low = fit;           // the largest point known to fit (at == 0: none, without a value)
  bool bounded = over.at > fit.at;  // a point above low is known not to fit
  probe_point high = bounded ? over : probe_point{};  // the smallest such point
  probe_point last = bounded ? over : fit;            // the two most recent points, for the secant
  probe_point before = fit;
  int points = (fit.at != 0 ? 1 : 0) + (bounded ? 1 : 0);
  for (int probes = 0;; ++probes) {
    // Candidates left: (low.at, top].
    const std::uint64_t top = bounded && high.at - 1 < hi ? high.at - 1 : hi;
    if (low.at >= top) return low.at;
    const std::uint64_t next = low.at + 1;
    const std::uint64_t mid = low.at + (top - low.at) / 2 + (top - low.at) % 2;
    std::uint64_t at = low.at == 0 ? next : mid;
    if (probes == 0 && first != 0) {
      at = first < next ? next : first > top ? top : first;
    } else if (points >= 2 && probes < secant_guesses) {
      const probe_point a = last.at < before.at ? last : before;
      const probe_point b = last.at < before.at ? before : last;
      // A line that does not rise: both points fit (the answer is as far up as it can be),
      // or the values are not monotone (bisect).
      const std::uint64_t flat = a.value <= budget && b.value <= budget ? top : mid;
      at = secant_crossing(a, b, budget, next, top, flat, mid);
    }
    const std::uint64_t value = value_at(at);
    before = last;
    last = probe_point{at, value};
    ++points;
    if (value <= budget) {
      low = last;
    } else {
      high = last;
      bounded = true;
    }
  }
}

}  // namespace memscale::detail
