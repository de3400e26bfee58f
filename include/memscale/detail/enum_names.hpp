// memscale/detail/enum_names.hpp: an enumerator's name from its enumeration's names listed in
// declaration order, for messages and reports.
#pragma once

#include <cstddef>
#include <string_view>

namespace memscale::detail {

template <class Enum, std::size_t N>
constexpr std::string_view enum_name(Enum e, const std::string_view (&names)[N]) noexcept {
  const auto i = static_cast<std::size_t>(e);
  return i < N ? names[i] : std::string_view("unknown");
}

}  // namespace memscale::detail
