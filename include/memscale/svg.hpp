// memscale/svg.hpp: two small chart kinds as self-contained SVG text (standard library only).
//
// Opt-in and run-time only: nothing in the estimators includes it. stacked_bars draws one
// bar per category made of labelled segments, against horizontal reference lines (VRAM,
// budget); line_chart draws series of (x, y) points on a log2 x axis, with reference lines
// and marked x positions (the largest micro-batch that fits); each point carries its values
// exactly (data-x, data-y). A chart with nothing to plot shows a note instead. A figure places
// charts side by side. Every text is XML-escaped, so the output is well-formed whatever the
// labels hold; the legend is placed clear of the reference labels, a marker's label stays inside
// the plot, and a long title is set smaller to fit.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace memscale::svg {

struct segment {
  std::string label{};
  double value = 0.0;
};

struct bar {
  std::string label{};              // under the bar
  std::vector<segment> segments{};  // bottom to top
};

struct reference_line {
  std::string label{};
  double value = 0.0;
  std::string color = "#c0392b";
  bool dashed = false;
};

struct point {
  double x = 0.0;
  double y = 0.0;
};

struct series {
  std::string label{};
  std::vector<point> points{};
};

struct x_marker {
  std::string label{};
  double x = 0.0;
  std::string color = "#27ae60";
};

struct chart {
  std::string title{};
  std::string x_label{};
  std::string y_label{};                     // unit of the values, e.g. "GiB"
  std::vector<bar> bars{};                   // a stacked-bar chart when non-empty
  std::vector<series> lines{};               // otherwise a line chart (log2 x axis)
  std::vector<reference_line> references{};
  std::vector<x_marker> markers{};
  double y_cap = 0.0;  // > 0: the y axis stops here and larger values are drawn at the top
  std::string note{};  // with no bars and no lines: drawn in the plot area instead ('\n' breaks lines)
};

// Segment and series colours (ColorBrewer Set2-like, readable on white and in grey print).
inline constexpr std::array<std::string_view, 8> palette{"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                                         "#76b7b2", "#edc948", "#b07aa1", "#9c755f"};

inline std::string escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters are not allowed in XML 1.0 text.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\n' || c == '\t') out += c;
    }
  }
  return out;
}

inline std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// A value as it round-trips (a point's data-x and data-y, for a program to read back).
inline std::string exact(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

inline std::string value_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : "%.2f", v);
  return buf;
}

namespace detail {

inline constexpr double chart_width = 560;
inline constexpr double chart_height = 400;
inline constexpr double left = 64;
inline constexpr double right = 150;  // room for the legend and reference labels
inline constexpr double top = 40;
inline constexpr double bottom = 56;

inline std::string text(double x, double y, std::string_view s, std::string_view anchor = "start",
                        std::string_view extra = "") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" text-anchor=\"" + std::string(anchor) + "\"" +
         std::string(extra) + ">" + escape(s) + "</text>\n";
}

inline std::string line(double x1, double y1, double x2, double y2, std::string_view color, double width,
                        bool dashed = false) {
  return "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) +
         "\" stroke=\"" + std::string(color) + "\" stroke-width=\"" + num(width) + "\"" +
         (dashed ? " stroke-dasharray=\"6 4\"" : "") + "/>\n";
}

// A "nice" axis maximum (1, 2 or 5 times a power of ten) at or above v.
inline double nice_max(double v) {
  if (!(v > 0)) return 1.0;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= v) return m * p;
  return 10 * p;
}

inline std::string y_axis(double y_max, double plot_w, double plot_h, std::string_view unit) {
  std::string out;
  for (int i = 0; i <= 5; ++i) {
    const double v = y_max * i / 5.0;
    const double y = top + plot_h - plot_h * i / 5.0;
    out += line(left, y, left + plot_w, y, "#e5e5e5", 1);
    out += text(left - 6, y + 4, value_text(v), "end", " class=\"tick\"");
  }
  out += text(16, top + plot_h / 2, unit, "middle",
              " transform=\"rotate(-90 16 " + num(top + plot_h / 2) + ")\" class=\"axis\"");
  return out;
}

// Rough width of a text in DejaVu Sans / Arial, enough to keep labels apart: 0.56 em per
// character, 0.62 em in bold; UTF-8 continuation bytes do not count.
inline double text_width(std::string_view s, double font_px, bool bold = false) {
  double chars = 0;
  for (const char c : s)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) chars += 1;
  return chars * (bold ? 0.62 : 0.56) * font_px;
}

// A text that must stay within `room` pixels: set smaller (down to 10 px) when it is wider
// at `px`, then cut with an ellipsis.
inline std::string fitted_text(double x, double y, std::string s, double room, double px, std::string_view cls,
                               bool bold = false) {
  const double fitted =
      std::max(10.0, std::min(px, std::floor(10.0 * px * room / std::max(text_width(s, px, bold), 1.0)) / 10.0));
  if (text_width(s, fitted, bold) > room) {
    const auto drop_last_character = [&] {
      while (!s.empty() && (static_cast<unsigned char>(s.back()) & 0xC0) == 0x80) s.pop_back();
      if (!s.empty()) s.pop_back();
    };
    while (!s.empty() && text_width(s + "\u2026", fitted, bold) > room) drop_last_character();
    s += "\u2026";
  }
  return text(x, y, s, "start",
              " class=\"" + std::string(cls) + "\"" +
                  (fitted < px ? " style=\"font-size:" + num(fitted) + "px\"" : std::string()));
}

// Where reference line i's label sits: the first above its line, the others below, so close
// lines stay readable. Baseline y of 11 px text.
inline double reference_label_y(std::size_t i, double line_y) { return i == 0 ? line_y - 4 : line_y + 12; }

inline double reference_y(const reference_line& r, double y_max, double plot_h) {
  return top + plot_h - plot_h * std::min(r.value, y_max) / y_max;
}

inline std::string references(const chart& c, double y_max, double plot_w, double plot_h) {
  std::string out;
  for (std::size_t i = 0; i < c.references.size(); ++i) {
    const reference_line& r = c.references[i];
    const double y = reference_y(r, y_max, plot_h);
    out += "<g class=\"reference\" data-label=\"" + escape(r.label) + "\">\n";
    out += line(left, y, left + plot_w, y, r.color, 2, r.dashed);
    out += text(left + plot_w + 6, reference_label_y(i, y), r.label + " " + value_text(r.value), "start",
                " class=\"label\" fill=\"" + r.color + "\"");
    out += "</g>\n";
  }
  return out;
}

// The top of a legend block `height` high in the column right of the plot, clear of the
// reference labels that share that column: the preferred end of the plot (bottom for bars,
// top for lines) when it is free, else the other end, else next to a label.
inline double legend_top(const chart& c, double y_max, double plot_h, double height, bool prefer_bottom) {
  struct span {
    double from;
    double to;
  };
  std::vector<span> taken;
  for (std::size_t i = 0; i < c.references.size(); ++i) {
    const double baseline = reference_label_y(i, reference_y(c.references[i], y_max, plot_h));
    taken.push_back({baseline - 12, baseline + 4});
  }
  const double lowest = top;
  const double highest = chart_height - 8 - height;  // the column is free down to the chart's bottom edge
  std::vector<double> candidates;
  if (prefer_bottom) candidates = {top + plot_h - height, top};
  else candidates = {top, top + plot_h - height};
  for (const span& t : taken) {
    candidates.push_back(t.to + 2);
    candidates.push_back(t.from - 2 - height);
  }
  for (const double y : candidates) {
    if (y < lowest || y > highest) continue;
    bool clear = true;
    for (const span& t : taken) clear = clear && (y + height <= t.from || y >= t.to);
    if (clear) return y;
  }
  return candidates.front();
}

inline double max_value(const chart& c) {
  double m = 0;
  for (const auto& b : c.bars) {
    double sum = 0;
    for (const auto& s : b.segments) sum += s.value;
    m = std::max(m, sum);
  }
  for (const auto& s : c.lines)
    for (const auto& p : s.points) m = std::max(m, p.y);
  for (const auto& r : c.references) m = std::max(m, r.value);
  return m;
}

inline std::string bars(const chart& c, double y_max, double plot_w, double plot_h) {
  std::string out;
  const double slot = plot_w / static_cast<double>(std::max<std::size_t>(c.bars.size(), 1));
  const double width = slot * 0.8;
  std::vector<std::string> legend;
  for (std::size_t i = 0; i < c.bars.size(); ++i) {
    const bar& b = c.bars[i];
    const double x = left + slot * static_cast<double>(i) + (slot - width) / 2;
    double base = 0;
    out += "<g class=\"bar\" data-label=\"" + escape(b.label) + "\">\n";
    for (std::size_t k = 0; k < b.segments.size(); ++k) {
      const segment& s = b.segments[k];
      const double y0 = top + plot_h - plot_h * std::min(base, y_max) / y_max;
      const double y1 = top + plot_h - plot_h * std::min(base + s.value, y_max) / y_max;
      const auto color = palette[k % palette.size()];
      out += "<rect class=\"segment\" data-label=\"" + escape(s.label) + "\" data-value=\"" + value_text(s.value) +
             "\" x=\"" + num(x) + "\" y=\"" + num(y1) + "\" width=\"" + num(width) + "\" height=\"" +
             num(std::max(0.0, y0 - y1)) + "\" fill=\"" + std::string(color) + "\"><title>" + escape(s.label) + ": " +
             value_text(s.value) + "</title></rect>\n";
      // Label a segment inside the bar when it is tall enough to hold the text.
      if (y0 - y1 >= 14 && width >= 5.6 * static_cast<double>(s.label.size())) out += text(x + width / 2, (y0 + y1) / 2 + 4, s.label, "middle", " class=\"inside\"");
      if (std::find(legend.begin(), legend.end(), s.label) == legend.end()) legend.push_back(s.label);
      base += s.value;
    }
    out += text(x + width / 2, top + plot_h - plot_h * std::min(base, y_max) / y_max - 5, value_text(base), "middle",
                " class=\"tick\"");
    // The bar's label under it; a second line after '\n' (e.g. "(no fit)").
    const auto nl = b.label.find('\n');
    out += text(x + width / 2, top + plot_h + 18, b.label.substr(0, nl), "middle", " class=\"axis\"");
    if (nl != std::string::npos)
      out += text(x + width / 2, top + plot_h + 32, b.label.substr(nl + 1), "middle", " class=\"tick\"");
    out += "</g>\n";
  }
  // Listed bottom to top, as the segments stack.
  const double height = 16.0 * static_cast<double>(legend.size());
  const double block = legend_top(c, y_max, plot_h, height, true);
  for (std::size_t k = 0; k < legend.size(); ++k) {
    const double y = block + height - 16.0 * static_cast<double>(k) - 4;
    out += "<rect class=\"legend-key\" x=\"" + num(left + plot_w + 6) + "\" y=\"" + num(y - 9) +
           "\" width=\"10\" height=\"10\" fill=\"" + std::string(palette[k % palette.size()]) + "\"/>\n";
    out += text(left + plot_w + 20, y, legend[k], "start", " class=\"legend\"");
  }
  return out;
}

inline std::string lines(const chart& c, double y_max, double plot_w, double plot_h) {
  std::string out;
  double x_min = 0;
  double x_max = 0;
  bool first = true;
  for (const auto& s : c.lines)
    for (const auto& p : s.points) {
      const double lx = std::log2(std::max(p.x, 1.0));
      x_min = first ? lx : std::min(x_min, lx);
      x_max = first ? lx : std::max(x_max, lx);
      first = false;
    }
  if (x_max <= x_min) x_max = x_min + 1;
  const auto to_x = [&](double x) { return left + plot_w * (std::log2(std::max(x, 1.0)) - x_min) / (x_max - x_min); };
  const auto to_y = [&](double y) { return top + plot_h - plot_h * std::min(y, y_max) / y_max; };
  for (double lx = std::ceil(x_min); lx <= x_max; lx += 1) {
    const double x = left + plot_w * (lx - x_min) / (x_max - x_min);
    out += line(x, top, x, top + plot_h, "#f0f0f0", 1);
    char tick[32];
    std::snprintf(tick, sizeof tick, "%.0f", std::pow(2.0, lx));
    out += text(x, top + plot_h + 16, tick, "middle", " class=\"tick\"");
  }
  out += text(left + plot_w / 2, top + plot_h + 36, c.x_label, "middle", " class=\"axis\"");
  const double legend_block = legend_top(c, y_max, plot_h, 16.0 * static_cast<double>(c.lines.size()), false);
  for (std::size_t k = 0; k < c.lines.size(); ++k) {
    const series& s = c.lines[k];
    const auto color = std::string(palette[k % palette.size()]);
    std::string path;
    for (const auto& p : s.points) path += (path.empty() ? "M" : " L") + num(to_x(p.x)) + " " + num(to_y(p.y));
    out += "<g class=\"series\" data-label=\"" + escape(s.label) + "\">\n";
    out += "<path d=\"" + path + "\" fill=\"none\" stroke=\"" + color + "\" stroke-width=\"2\"/>\n";
    for (const auto& p : s.points)
      out += "<circle cx=\"" + num(to_x(p.x)) + "\" cy=\"" + num(to_y(p.y)) + "\" r=\"2.5\" fill=\"" + color +
             "\" data-x=\"" + exact(p.x) + "\" data-y=\"" + exact(p.y) + "\"><title>" + escape(s.label) + ": " +
             value_text(p.x) + " -> " + value_text(p.y) + "</title></circle>\n";
    out += "</g>\n";
    const double y = legend_block + 12 + 16.0 * static_cast<double>(k);
    out += "<rect class=\"legend-key\" x=\"" + num(left + plot_w + 6) + "\" y=\"" + num(y - 5) +
           "\" width=\"10\" height=\"3\" fill=\"" + color + "\"/>\n";
    out += text(left + plot_w + 20, y, s.label, "start", " class=\"legend\"");
  }
  for (const auto& m : c.markers) {
    const double x = to_x(m.x);
    out += "<g class=\"marker\" data-label=\"" + escape(m.label) + "\">\n";
    out += line(x, top, x, top + plot_h, m.color, 1.5, true);
    // The label stays inside the plot: right of the line where it fits, else left of it.
    const bool fits_right = x + 4 + text_width(m.label, 11) <= left + plot_w;
    // A white halo keeps it readable where it crosses a curve.
    out += text(fits_right ? x + 4 : x - 4, top + 12, m.label, fits_right ? "start" : "end",
                " class=\"label\" fill=\"" + m.color + "\" stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\"");
    out += "</g>\n";
  }
  return out;
}

}  // namespace detail

// One chart as an SVG <g> at (x, y), chart_width x chart_height.
inline std::string chart_group(const chart& c, double x, double y) {
  using namespace detail;
  const double plot_w = chart_width - left - right;
  const double plot_h = chart_height - top - bottom;
  double y_max = nice_max(max_value(c) * 1.05);
  if (c.y_cap > 0) y_max = std::min(y_max, nice_max(c.y_cap));
  std::string out = "<g class=\"chart\" transform=\"translate(" + num(x) + " " + num(y) + ")\">\n";
  out += fitted_text(left, 22, c.title, chart_width - left - 8, 15, "title", true);
  if (c.bars.empty() && c.lines.empty() && !c.note.empty()) {
    // Nothing to plot: the note in an empty frame, broken at '\n' and wrapped to the frame.
    out += "<rect class=\"note-frame\" x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(plot_w) +
           "\" height=\"" + num(plot_h) + "\" fill=\"#fafafa\" stroke=\"#ccc\"/>\n";
    std::vector<std::string> note_lines;
    std::size_t start = 0;
    while (start <= c.note.size()) {
      const auto end = std::min(c.note.find('\n', start), c.note.size());
      std::string current;
      std::size_t word = start;
      while (word < end) {
        const auto space = std::min(c.note.find(' ', word), end);
        const std::string next = c.note.substr(word, space - word);
        if (!current.empty() && text_width(current + " " + next, 12) > plot_w - 16) {
          note_lines.push_back(current);
          current = next;
        } else {
          current += (current.empty() ? "" : " ") + next;
        }
        word = space + 1;
      }
      note_lines.push_back(current);
      start = end + 1;
    }
    double line_y = top + plot_h / 2 - 8.0 * static_cast<double>(note_lines.size() - 1);
    out += "<g class=\"note\">\n";
    for (const std::string& l : note_lines) {
      out += text(left + plot_w / 2, line_y, l, "middle", " class=\"axis\"");
      line_y += 16;
    }
    out += "</g>\n</g>\n";
    return out;
  }
  out += y_axis(y_max, plot_w, plot_h, c.y_label);
  out += c.bars.empty() ? lines(c, y_max, plot_w, plot_h) : bars(c, y_max, plot_w, plot_h);
  out += references(c, y_max, plot_w, plot_h);
  out += line(left, top + plot_h, left + plot_w, top + plot_h, "#333", 1);
  out += line(left, top, left, top + plot_h, "#333", 1);
  out += "</g>\n";
  return out;
}

// A standalone SVG document with the charts side by side.
inline std::string figure(const std::vector<chart>& charts, std::string_view caption = {}) {
  const double width = detail::chart_width * static_cast<double>(std::max<std::size_t>(charts.size(), 1));
  const double height = detail::chart_height + (caption.empty() ? 0.0 : 24.0);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" + num(height) +
         "\" viewBox=\"0 0 " + num(width) + " " + num(height) + "\" font-family=\"DejaVu Sans, Arial, sans-serif\">\n";
  out += "<style>.title{font-size:15px;font-weight:bold}.axis{font-size:12px}.tick{font-size:10px;fill:#555}"
         ".legend{font-size:11px}.label{font-size:11px}.inside{font-size:10px;fill:#fff}</style>\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  for (std::size_t i = 0; i < charts.size(); ++i)
    out += chart_group(charts[i], detail::chart_width * static_cast<double>(i), 0);
  if (!caption.empty()) out += detail::fitted_text(12, height - 8, std::string(caption), width - 24, 12, "axis");
  out += "</svg>\n";
  return out;
}

}  // namespace memscale::svg
