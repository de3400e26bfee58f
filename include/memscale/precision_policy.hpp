// memscale/precision_policy.hpp: which dtype each kind of tensor has under a precision.
#pragma once

#include "memscale/dtype.hpp"
#include "memscale/training.hpp"

namespace memscale {

struct precision_policy {
  dtype param = dtype::fp32;   // parameters, gradients and (for Adam) optimizer state
  dtype matmul = dtype::fp32;  // outputs of matmuls and of ops that follow their input
  bool autocast = false;       // torch.autocast: fp32 weights cast per matmul, fp32-list ops stay fp32
};

constexpr precision_policy precision_policy_of(const training_spec& t) {
  switch (t.prec) {
    case precision::fp32: return {dtype::fp32, dtype::fp32, false};
    case precision::amp_fp16: return {dtype::fp32, dtype::fp16, true};
    case precision::amp_bf16: return {dtype::fp32, dtype::bf16, true};
    case precision::pure_bf16: return {dtype::bf16, dtype::bf16, false};
    case precision::pure_fp16: return {dtype::fp16, dtype::fp16, false};
  }
  return {};
}

}  // namespace memscale
