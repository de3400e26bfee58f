// memscale/graph/layers/torchao_nf4.hpp: torchao's NF4Tensor, the 4-bit base of torchtune's QLoRA
// (FrozenNF4Linear and LoRALinear(quantize_base=True), torchtune v0.6.1): its storage and what a
// linear_nf4 call allocates while it dequantizes (torchao/dtypes/nf4tensor.py @ 05980129).
#pragma once

#include <cstdint>

#include "memscale/bytes.hpp"
#include "memscale/dtype.hpp"

namespace memscale {

// to_nf4's defaults (nf4tensor.py @ 05980129): one scaler per 64 weights, one quantization
// factor per 256 scalers.
inline constexpr std::uint64_t torchao_nf4_block = 64;
inline constexpr std::uint64_t torchao_nf4_scaler_block = 256;

// What FSDP2 shards and gathers (_INNER_TENSOR_NAMES_FOR_SHARDING): quantized_data (two codes a
// uint8), quantized_scalers (int8, double_quantize_scalers) and quantization_factor in the weight's
// dtype `d`. The scalar scaler_mean and the 16-entry nf4 table stay whole on every rank (68 bytes
// a bf16 weight) and are not counted.
constexpr bytes torchao_nf4_weight_bytes(std::uint64_t elements, dtype d) {
  const std::uint64_t scalers = detail::ceil_div(elements, torchao_nf4_block);
  return storage(dtype::nf4, elements) + storage(dtype::int8, scalers) +
         storage(d, detail::ceil_div(scalers, torchao_nf4_scaler_block));
}

// The most get_original_weight holds: its locals live until it returns, so the stack that builds
// the weight in `d` sees both halves of the codes as int64 (`>> 4`, `& 0b1111`, .to(torch.long)),
// both looked up in the `d` table, the dequantized scalers and both scaled halves.
constexpr bytes torchao_dequantize_peak(std::uint64_t elements, dtype d) {
  const std::uint64_t half = elements / 2;
  const bytes codes = storage(dtype::int64, half) * 2U;
  const bytes looked_up = storage(d, half) * 2U;
  const bytes scalers = storage(d, detail::ceil_div(elements, torchao_nf4_block));
  const bytes scaled = storage(d, half) * 2U;
  return codes + looked_up + scalers + scaled + storage(d, elements);
}

// A linear_nf4 call's temporaries beyond `result` (its output in forward, its input gradient in
// backward): LinearNF4 dequantizes the saved NF4 weight before F.linear, and again before
// grad_output @ W; the dequantized weight then lives beside the result of the matmul.
constexpr bytes torchao_linear_temporaries(std::uint64_t elements, dtype d, bytes result) {
  return max(torchao_dequantize_peak(elements, d), storage(d, elements) + result) - result;
}

}  // namespace memscale
