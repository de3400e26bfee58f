// memscale/estimate/workspace.hpp: memory that is neither a model tensor nor an
// activation: cuBLAS workspaces, allocator rounding and the CUDA context.
#pragma once

#include <cstdint>

#include "memscale/bytes.hpp"
#include "memscale/training.hpp"

namespace memscale {

// The CUDA caching allocator rounds every block up to 512 bytes
// (c10/cuda/CUDACachingAllocator.cpp: kMinBlockSize).
inline constexpr bytes cuda_min_block{512};
// Large segments are rounded up to 2 MiB (same file: kRoundLarge); requests above 1 MiB
// (kSmallSize) are served from them.
inline constexpr bytes cuda_round_large{2ULL << 20};
inline constexpr bytes cuda_small_size{1ULL << 20};

// cuBLAS workspace PyTorch allocates through the caching allocator, per handle and
// stream: ":4096:8" (4096 KiB x 2 + 16 KiB x 8... default config string "4096:2:16:8")
// before Hopper, 32 MiB on sm_90 (aten/src/ATen/cuda/CublasHandlePool.cpp,
// getChosenWorkspaceSize; pytorch PR #89027, #120925). Forward and backward streams
// share one handle in a plain training loop.
constexpr bytes cublas_workspace_bytes(std::uint32_t compute_capability) {
  return compute_capability >= 90 ? bytes{32ULL << 20} : bytes{(4096ULL << 10) * 2 + (16ULL << 10) * 8};
}

// CUDA context (driver state and kernel images) as NVML counts it. With lazy module
// loading (CUDA >= 11.7, PyTorch default) about 300-500 MiB (pytorch issue #107667);
// without it over 1 GiB: the Hugging Face single-GPU guide measured 1343 MiB for a 1x1
// tensor on a V100 with CUDA 11.2 (docs perf_train_gpu_one, "GPU memory occupied").
constexpr bytes cuda_context_bytes(bool lazy_loading) {
  return lazy_loading ? bytes{400ULL << 20} : bytes{1343ULL << 20};
}

}  // namespace memscale
