// memscale/dtype.hpp: storage types and their sizes.
#pragma once

#include <cstdint>
#include <string_view>

#include "memscale/bytes.hpp"

namespace memscale {

enum class dtype : std::uint8_t { fp32, fp16, bf16, fp8_e4m3, fp8_e5m2, int8, nf4, int4, int64, boolean };

// Bits per element; nf4/int4 pack two elements per byte (bitsandbytes Params4bit).
constexpr std::uint64_t bits_of(dtype t) noexcept {
  switch (t) {
    case dtype::int64: return 64;
    case dtype::fp32: return 32;
    case dtype::fp16:
    case dtype::bf16: return 16;
    case dtype::fp8_e4m3:
    case dtype::fp8_e5m2:
    case dtype::int8:
    case dtype::boolean: return 8;  // torch.bool is stored one byte per element
    case dtype::nf4:
    case dtype::int4: return 4;
  }
  return 32;
}

// Storage of `count` elements, rounded up to whole bytes.
constexpr bytes storage(dtype t, std::uint64_t count) {
  return bytes{detail::ceil_div(detail::checked_mul(count, bits_of(t), detail::quantity{"tensor size in bits (elements x dtype bits)"}), 8)};
}

constexpr std::string_view to_string(dtype t) noexcept {
  switch (t) {
    case dtype::fp32: return "fp32";
    case dtype::fp16: return "fp16";
    case dtype::bf16: return "bf16";
    case dtype::fp8_e4m3: return "fp8_e4m3";
    case dtype::fp8_e5m2: return "fp8_e5m2";
    case dtype::int8: return "int8";
    case dtype::nf4: return "nf4";
    case dtype::int4: return "int4";
    case dtype::int64: return "int64";
    case dtype::boolean: return "bool";
  }
  return "unknown";
}

}  // namespace memscale
