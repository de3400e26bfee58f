// memscale/precision_policy.hpp: which dtype each kind of tensor has under a precision.
#pragma once

#include "memscale/dtype.hpp"
#include "memscale/training.hpp"

namespace memscale {

struct precision_policy {
  dtype param = dtype::fp32;   // parameters, gradients and (for Adam) optimizer state
  dtype matmul = dtype::fp32;  // outputs of matmuls and of ops that follow their input
  bool autocast = false;       // torch.autocast: 16-bit matmuls (casting fp32 weights), fp32-list ops in fp32
  dtype trainable = dtype::fp32;  // trained tensors: `param`, or fp32 adapters over a 16-bit base

  // Autocast casts a weight only when its dtype differs from `matmul` (aten/src/ATen/autocast_mode.cpp
  // cached_cast: is_eligible(arg) && arg.scalar_type() != to_type), so a model loaded in 16 bits
  // has no per-matmul weight copies.
  [[nodiscard]] constexpr bool casts_weights() const { return autocast && param != matmul; }
};

constexpr precision_policy precision_policy_of(const training_spec& t) {
  precision_policy p{};
  switch (t.prec) {
    case precision::fp32: p = {dtype::fp32, dtype::fp32, false}; break;
    case precision::amp_fp16: p = {dtype::fp32, dtype::fp16, true}; break;
    case precision::amp_bf16: p = {dtype::fp32, dtype::bf16, true}; break;
    case precision::pure_bf16: p = {dtype::bf16, dtype::bf16, false}; break;
    case precision::pure_fp16: p = {dtype::fp16, dtype::fp16, false}; break;
  }
  // 16-bit adapters under autocast: the model was loaded in the autocast dtype (training.hpp adapter_dtype).
  if (p.autocast && is_lora(t) && t.adapters == adapter_dtype::autocast_dtype) p.param = p.matmul;
  p.trainable = (is_lora(t) && t.adapters == adapter_dtype::fp32) ? dtype::fp32 : p.param;
  return p;
}

}  // namespace memscale
