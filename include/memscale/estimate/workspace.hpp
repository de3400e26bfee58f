// memscale/estimate/workspace.hpp: memory that is neither a model tensor nor an
// activation: cuBLAS workspaces, allocator rounding and the CUDA context.
#pragma once

#include <cstdint>

#include "memscale/bytes.hpp"

namespace memscale {

// The CUDA caching allocator rounds every block up to 512 bytes
// (c10/cuda/CUDACachingAllocator.cpp: kMinBlockSize).
inline constexpr bytes cuda_min_block{512};
// Large segments are rounded up to 2 MiB (same file: kRoundLarge); requests above 1 MiB
// (kSmallSize) are served from them.
inline constexpr bytes cuda_round_large{2ULL << 20};
inline constexpr bytes cuda_small_size{1ULL << 20};

// PyTorch's BLAS workspace per (handle, stream), allocated through the caching allocator
// from torch 2.0: aten/src/ATen/cuda/CublasHandlePool.cpp, parseChosenWorkspaceSize():
// ":4096:2:16:8 default" = 2 x 4096 KiB + 8 x 16 KiB = 8 MiB + 128 KiB (pytorch PR #89027).
inline constexpr bytes pytorch_cublas_workspace_default{4096ULL * 1024 * 2 + 16ULL * 1024 * 8};
// Same function: "32MiB for Hopper and Blackwell" (compute capability major 9-12;
// releases before that change gave 32 MiB to sm_90 only).
inline constexpr bytes pytorch_cublas_workspace_sm90_plus{32ULL << 20};
// Same function, ROCm build: "32MiB default, 128MiB for gfx942/gfx950" (hipBLAS workspace).
inline constexpr bytes pytorch_hipblas_workspace_default{32ULL << 20};
inline constexpr bytes pytorch_hipblas_workspace_gfx942{128ULL << 20};

// The NVIDIA rule by compute capability (10 * major + minor).
constexpr bytes cublas_workspace_bytes(std::uint32_t compute_capability) {
  return compute_capability >= 90 ? pytorch_cublas_workspace_sm90_plus : pytorch_cublas_workspace_default;
}

// CUDA context (driver state and kernel images) as NVML counts it. With lazy module
// loading (CUDA >= 11.7, PyTorch default) about 300-500 MiB (pytorch issue #107667);
// without it over 1 GiB: the Hugging Face single-GPU guide measured 1343 MiB for a 1x1
// tensor on a V100 with CUDA 11.2 (docs perf_train_gpu_one, "GPU memory occupied").
constexpr bytes cuda_context_bytes(bool lazy_loading) {
  return lazy_loading ? bytes{400ULL << 20} : bytes{1343ULL << 20};
}

}  // namespace memscale
