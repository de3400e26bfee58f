// memscale-plan: --units, the unit of every size the text reports print (JSON keeps bytes).
#pragma once

#include <string>
#include <string_view>

#include "memscale/bytes.hpp"

namespace memscale_plan {

// gib (default), gb or mib; anything else reads as gib (--units is checked when parsed).
void set_size_unit(std::string_view unit);

// "GiB", "GB" or "MiB".
std::string_view size_unit_label();

// `b` in the chosen unit.
double in_size_unit(memscale::bytes b);

// "12.34 GiB" (`decimals` after the point).
std::string size_text(memscale::bytes b, int decimals = 2);

// "   12.34 GiB  (13,249,974,272 bytes)": the report's aligned size with its exact bytes.
std::string size_and_bytes(memscale::bytes b);

}  // namespace memscale_plan
