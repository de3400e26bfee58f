// memscale/precision_support.hpp: a bf16 run is planned only on a GPU with bf16 arithmetic
// (the single-GPU planners, the cluster planner and the per-GPU verdict share the rule).
#pragma once

#include <string>
#include <string_view>

#include "memscale/error.hpp"
#include "memscale/gpus.hpp"
#include "memscale/training.hpp"

namespace memscale {
namespace detail {

constexpr bool needs_bf16(precision p) { return p == precision::amp_bf16 || p == precision::pure_bf16; }

// Not constexpr (error.hpp): a bf16 run on a GPU without bf16 arithmetic. torch.autocast
// refuses it on CUDA ("Current CUDA Device does not support bfloat16. Please switch dtype to
// float16.", torch/amp/autocast_mode.py, torch 2.0-2.3); from torch 2.4
// torch.cuda.is_bf16_supported(including_emulation=True) lets it run emulated, far slower
// and on kernels this estimate does not model, so the plan is refused, naming the way out.
[[noreturn]] inline void fail_bf16_without_support(precision p, const gpu_spec& gpu) {
  const std::string_view name = !gpu.label.empty() ? gpu.label : !gpu.name.empty() ? gpu.name : "this GPU";
  throw error(error_code::invalid_run,
              "run.precision " + std::string(to_string(p)) + " needs bf16 arithmetic, which the " + std::string(name) +
                  " does not have (gpu.bf16 is false): use amp_fp16 (fp16 autocast with loss scaling)" +
                  (p == precision::pure_bf16 ? " or pure_fp16" : ""));
}

}  // namespace detail

// Refuses (a compile error in constant evaluation, memscale::error at run time) a bf16
// precision on a GPU whose catalog entry or gpu.bf16 says it has no bf16 arithmetic.
constexpr void check_precision_support(precision p, const gpu_spec& gpu) {
  if (!gpu.bf16 && detail::needs_bf16(p)) detail::fail_bf16_without_support(p, gpu);
}

}  // namespace memscale
