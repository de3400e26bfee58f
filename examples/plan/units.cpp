// memscale-plan: --units (see units.hpp).
#include "units.hpp"

#include <fmt/format.h>

#include "memscale/fmt.hpp"

namespace memscale_plan {
namespace {

enum class size_unit { gib, gb, mib };
size_unit chosen = size_unit::gib;

}  // namespace

void set_size_unit(std::string_view unit) {
  chosen = unit == "gb" ? size_unit::gb : unit == "mib" ? size_unit::mib : size_unit::gib;
}

std::string_view size_unit_label() {
  switch (chosen) {
    case size_unit::gb: return "GB";
    case size_unit::mib: return "MiB";
    case size_unit::gib: break;
  }
  return "GiB";
}

double in_size_unit(memscale::bytes b) {
  switch (chosen) {
    case size_unit::gb: return memscale::to_gb(b);
    case size_unit::mib: return memscale::to_mib(b);
    case size_unit::gib: break;
  }
  return memscale::to_gib(b);
}

std::string size_text(memscale::bytes b, int decimals) {
  return fmt::format("{:.{}f} {}", in_size_unit(b), decimals, size_unit_label());
}

std::string size_and_bytes(memscale::bytes b) {
  const int decimals = chosen == size_unit::mib ? 1 : 2;
  return fmt::format("{:8.{}f} {:<4} ({} bytes)", in_size_unit(b), decimals, size_unit_label(),
                     memscale::format_count(b.value));
}

}  // namespace memscale_plan
