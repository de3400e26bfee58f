// memscale/fmt.hpp: opt-in fmt adapter (target memscale::fmt, links fmt::fmt).
//
//   fmt::format("{}", 1536_MiB)            -> "1.50 GiB"
//   fmt::format("{:>10}", 512_MiB)         -> " 512.0 MiB"   (fill, align and width as for strings)
//   fmt::format("{}", precision::amp_bf16) -> "amp_bf16"     (every enum prints its to_string)
//   memscale::format_count(124439808)      -> "124,439,808"
//   memscale::format_breakdown(result)     -> a table: component, size, bytes, share of peak, bar
//
// Sizes use binary (IEC) units, as CUDA's totals and nvidia-smi's MiB do. fmt 9.1 has no
// format_as (fmt 10), so every type gets a fmt::formatter specialisation; format() is const,
// as fmt >= 10 requires. This header is the only memscale header that includes fmt.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <fmt/format.h>
#include <string>
#include <string_view>

#include "memscale/bytes.hpp"
#include "memscale/dtype.hpp"
#include "memscale/estimate.hpp"
#include "memscale/training.hpp"

namespace memscale {

namespace fmt_detail {

// Binary units, smallest first; bytes are printed without decimals.
inline constexpr std::array<std::string_view, 7> size_units{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

// Width of the share bar in format_breakdown: 30 '#' is 100 % of the peak.
inline constexpr std::size_t bar_width = 30;

}  // namespace fmt_detail

// A human size: "12 B", "1023 B", "1.5 KiB"-style with one decimal below GiB ("512.0 MiB")
// and two from GiB up ("1.50 GiB"). A value that would round up to 1024 of a unit moves to
// the next unit ("1.00 GiB", never "1024.0 MiB").
inline std::string format_size(bytes b) {
  if (b.value < 1024) return fmt::format("{} B", b.value);
  double v = static_cast<double>(b.value);
  std::size_t unit = 0;
  while (v >= 1024.0 && unit + 1 < fmt_detail::size_units.size()) {
    v /= 1024.0;
    ++unit;
  }
  auto render = [](double x, std::size_t u) {
    return u >= 3 ? fmt::format("{:.2f} {}", x, fmt_detail::size_units[u])
                  : fmt::format("{:.1f} {}", x, fmt_detail::size_units[u]);
  };
  std::string out = render(v, unit);
  if (out.rfind("1024.", 0) == 0 && unit + 1 < fmt_detail::size_units.size()) out = render(v / 1024.0, unit + 1);
  return out;
}

// An exact count with thousands separators: 124439808 -> "124,439,808" (locale-independent).
inline std::string format_count(std::uint64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  out.reserve(digits.size() + digits.size() / 3);
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// A table of one breakdown: a row per component, then the total. `share` and the bar are
// relative to the total (the peak the breakdown was taken at); the bar has 30 columns.
// `size` writes the size column (format_size: a human size in binary units).
inline std::string format_breakdown(const memory_breakdown& b, std::string (*size)(bytes) = format_size) {
  struct row {
    std::string_view name;
    bytes size;
  };
  const bytes total = b.total();
  const std::array<row, 6> rows{{{"parameters", b.parameters},
                                 {"gradients", b.gradients},
                                 {"optimizer", b.optimizer},
                                 {"activations", b.activations},
                                 {"workspace", b.workspace},
                                 {"total", total}}};
  std::string out = fmt::format("{:<12} {:>11} {:>17} {:>7}\n", "component", "size", "bytes", "share");
  for (const row& r : rows) {
    const double share = total.value == 0 ? 0.0 : ratio(r.size, total);
    auto width = static_cast<std::size_t>(share * static_cast<double>(fmt_detail::bar_width) + 0.5);
    if (width > fmt_detail::bar_width) width = fmt_detail::bar_width;
    if (r.name == "total") out += std::string(12 + 1 + 11 + 1 + 17 + 1 + 7 + 2 + fmt_detail::bar_width, '-') + '\n';
    out += fmt::format("{:<12} {:>11} {:>17} {:>6.1f}%", r.name, size(r.size), format_count(r.size.value),
                       share * 100.0);
    if (width > 0) out += "  " + std::string(width, '#');
    out += '\n';
  }
  return out;
}

// The breakdown at the steady-state peak (every step after the first).
inline std::string format_breakdown(const estimate_result& r, std::string (*size)(bytes) = format_size) {
  return format_breakdown(r.steady.breakdown, size);
}

namespace fmt_detail {

// Formats an enum through its to_string, with the string presentation's fill/align/width.
template <class E>
struct enum_formatter : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(E value, FormatContext& ctx) const -> decltype(ctx.out()) {
    return fmt::formatter<std::string_view>::format(to_string(value), ctx);
  }
};

}  // namespace fmt_detail
}  // namespace memscale

// bytes: a human size (memscale::format_size); accepts the string specs ("{:>12}").
template <>
struct fmt::formatter<memscale::bytes> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(const memscale::bytes& b, FormatContext& ctx) const -> decltype(ctx.out()) {
    const std::string text = memscale::format_size(b);
    return fmt::formatter<std::string_view>::format(std::string_view(text), ctx);
  }
};

template <>
struct fmt::formatter<memscale::precision> : memscale::fmt_detail::enum_formatter<memscale::precision> {};
template <>
struct fmt::formatter<memscale::optimizer_kind> : memscale::fmt_detail::enum_formatter<memscale::optimizer_kind> {};
template <>
struct fmt::formatter<memscale::checkpointing> : memscale::fmt_detail::enum_formatter<memscale::checkpointing> {};
template <>
struct fmt::formatter<memscale::attention_impl> : memscale::fmt_detail::enum_formatter<memscale::attention_impl> {};
template <>
struct fmt::formatter<memscale::phase> : memscale::fmt_detail::enum_formatter<memscale::phase> {};
template <>
struct fmt::formatter<memscale::dtype> : memscale::fmt_detail::enum_formatter<memscale::dtype> {};
