// memscale/release_text.hpp: a software release as messages and reports write it.
#pragma once

#include <cstdint>
#include <string>

namespace memscale {

// "4.51" for a release stored as major x 100 + minor (torch, transformers, CUDA), "not stated"
// for 0 (a config or stack that does not say). Run time only: reports and messages.
inline std::string release_text(std::uint32_t release) {
  if (release == 0) return "not stated";
  return std::to_string(release / 100) + "." + std::to_string(release % 100);
}

}  // namespace memscale
