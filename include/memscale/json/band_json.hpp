// memscale/json/band_json.hpp: an error band as JSON, the same object wherever a report prints one.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "memscale/error_band.hpp"

namespace memscale::json_io {

// {"class", "quantity", "low", "high", "measured", "source"}: the class of run, what it bounds
// (the tensors or the device), how far under and over the estimate may be, and where that comes from.
inline nlohmann::json band_json(const error_band& b) {
  return {{"class", std::string(to_string(b.of))},
          {"quantity", std::string(to_string(b.quantity))},
          {"low", b.low},
          {"high", b.high},
          {"measured", b.measured},
          {"source", std::string(b.source)}};
}

}  // namespace memscale::json_io
