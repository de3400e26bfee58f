// memscale/detail/edit_distance.hpp: a bounded edit distance, for "did you mean" hints on
// misspelt names (JSON keys, options, presets, GPUs).
// IWYU pragma: private, include <memscale/memscale.hpp>
//
// Hostile input reaches it (a 10 MB JSON key), so it is bounded: strings whose lengths
// differ by more than `limit` are answered at once, only the band |i - j| <= limit of the
// table is computed, and memory is three rows, O(length) instead of the full table.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace memscale::detail {

// Optimal-string-alignment distance (insert, delete, substitute, swap two adjacent
// characters) between a and b when it is <= limit; otherwise limit + 1.
inline std::size_t edit_distance(std::string_view a, std::string_view b, std::size_t limit) {
  const std::size_t n = a.size();
  const std::size_t m = b.size();
  const std::size_t over = limit + 1;
  if ((n > m ? n - m : m - n) > limit) return over;
  std::vector<std::size_t> rows(3 * (m + 1), over);
  std::size_t* before = rows.data();           // row i - 2
  std::size_t* previous = before + (m + 1);     // row i - 1
  std::size_t* current = previous + (m + 1);    // row i
  for (std::size_t j = 0; j <= m && j <= limit; ++j) previous[j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    const std::size_t lo = i > limit ? i - limit : 1;
    const std::size_t hi = i + limit < m ? i + limit : m;
    // Cells just outside the band read as "too far"; column 0 is i deletions.
    current[lo - 1] = lo == 1 && i <= limit ? i : over;
    if (hi < m) current[hi + 1] = over;
    std::size_t row_min = current[lo - 1];
    for (std::size_t j = lo; j <= hi; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      std::size_t d = previous[j - 1] + cost;
      if (previous[j] + 1 < d) d = previous[j] + 1;
      if (current[j - 1] + 1 < d) d = current[j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && before[j - 2] + 1 < d) d = before[j - 2] + 1;
      current[j] = d > over ? over : d;
      if (current[j] < row_min) row_min = current[j];
    }
    if (row_min > limit) return over;  // every later row is at least as far
    std::size_t* recycled = before;
    before = previous;
    previous = current;
    current = recycled;
  }
  return previous[m] > limit ? over : previous[m];
}

}  // namespace memscale::detail
