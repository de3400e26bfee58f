// memscale-plan: planning on a GPU (--gpu, --headroom).
#include <CLI/CLI.hpp>
#include <array>
#include <charconv>
#include <cstdint>
#include <utility>
#include <string>
#include <system_error>

#include "memscale/gpus.hpp"
#include "memscale/planner.hpp"
#include "option_groups.hpp"
#include "suggest.hpp"

namespace memscale_plan {

std::uint64_t parse_size(std::string_view text, const std::string& field) {
  const auto bad = [&](const char* why) {
    return usage_error(field + " must be " + why + ", such as 24GiB or 80GB (got " + in_quotes(text) + ")");
  };
  std::size_t digits = 0;
  while (digits < text.size() && ((text[digits] >= '0' && text[digits] <= '9') || text[digits] == '.')) ++digits;
  std::string_view unit = text.substr(digits);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  // Units as typed: ...iB binary (IEC), ...B decimal (SI), as nvidia-smi and spec sheets use them.
  constexpr std::array<std::pair<std::string_view, std::uint64_t>, 9> units{{{"B", 1},
                                                                            {"KB", 1000},
                                                                            {"MB", 1000'000},
                                                                            {"GB", 1000'000'000},
                                                                            {"TB", 1000'000'000'000},
                                                                            {"KiB", 1ULL << 10},
                                                                            {"MiB", 1ULL << 20},
                                                                            {"GiB", 1ULL << 30},
                                                                            {"TiB", 1ULL << 40}}};
  std::uint64_t scale = 0;
  for (const auto& [name, factor] : units)
    if (unit == name) scale = factor;
  if (scale == 0) throw bad("a size with a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)");
  const std::string_view number = text.substr(0, digits);
  double value = 0.0;
  const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (number.empty() || ec != std::errc{} || ptr != number.data() + number.size()) throw bad("a number with a unit");
  const double size = value * static_cast<double>(scale);
  if (!(size >= 1.0 && size < 18446744073709551616.0)) throw bad("a positive size below 16 EiB");
  // Whole numbers are exact (24GiB = 24 x 2^30); fractions round down to whole bytes.
  std::uint64_t whole = 0;
  const auto [wptr, wec] = std::from_chars(number.data(), number.data() + number.size(), whole);
  if (wec == std::errc{} && wptr == number.data() + number.size() && whole <= UINT64_MAX / scale) return whole * scale;
  return memscale::detail::floor_to_u64(size);
}

void add_gpu_options(CLI::App& app, options& o) {
  const auto g = group::gpu;
  add_value(app, g, "--gpu", "NAME", "plan the run on this GPU (see --list-gpus)", [&o](const std::string& v) {
    if (!memscale::find_gpu(v)) {
      nearest_name nearest(v);
      for (const auto& gpu : memscale::gpu_catalog) nearest.offer(gpu.name);
      throw usage_error("--gpu must be a GPU from --list-gpus (got " + in_quotes(v) + ")" + nearest.hint());
    }
    o.gpu = v;
    o.custom_gpu.reset();
  });
  add_value(app, g, "--gpu-memory", "SIZE", "plan on a GPU described by its memory: 24GiB, 80GB (units as typed)",
            [&o](const std::string& v) {
              o.custom_gpu = memscale::custom_gpu(memscale::bytes{parse_size(v, "--gpu-memory")});
              o.gpu.clear();
            });
  add_value(app, g, "--headroom", "FRACTION", "share of VRAM kept free with --gpu or --gpu-memory, 0.10-0.15; default 0.15",
            [&o](const std::string& v) {
              double value = 0.0;
              const char* const last = v.data() + v.size();
              const auto [ptr, ec] = std::from_chars(v.data(), last, value);
              if (v.empty() || ec != std::errc{} || ptr != last)
                throw usage_error("--headroom must be a decimal fraction such as 0.15 (got " + in_quotes(v) + ")");
              // Written so that NaN fails too; the value is quoted as typed ("nan", "inf", "0.150001").
              if (!(value >= memscale::min_headroom && value <= memscale::max_headroom))
                throw usage_error("--headroom must be within 0.10-0.15 (got " + in_quotes(v) + ")");
              o.headroom = value;
            });
}

}  // namespace memscale_plan
