// memscale/allocator/context.hpp: GPU memory a PyTorch process holds outside the caching
// allocator: the CUDA context, the libraries' kernel images and handles, NCCL's buffers.
// nvidia-smi shows reserved (allocator/replay.hpp) plus this.
//
// Model: a base that grows with the device's thread slots (the driver's per-thread local
// memory, MAX_THREADS_PER_SM x SMs x bytes per thread: NVIDIA forum t/289339), plus the kernel
// images that lazy loading brings in as they are first used (CUDA C++ Programming Guide,
// "Lazy Loading": the default on Linux from CUDA 12.2, set by PyTorch from 1.13 through
// CUDA_MODULE_LOADING=LAZY, pytorch PR #86509), which depend on the work the process runs.
// The base's rate comes from public readings of a bare context; the kernel shares from a
// first-use probe of this project (docs/data/gpu_allocator_runs/context_h100.json,
// tools/gpu-measure/context_probe.py: CUDA 13.0, torch 2.11, driver 580), so they are one
// machine's figures: a different software stack moves them by tens of MiB.
//
// The device's SM count and threads per SM are inputs here: gpu_spec will carry them
// (streaming_multiprocessors, max_threads_per_sm); until then callers pass the numbers.
#pragma once

#include <cstdint>

#include "memscale/bytes.hpp"
#include "memscale/error.hpp"

namespace memscale::allocator {

// A bare context per thread slot: 2 KiB x threads/SM x SMs matches three public readings
// within 5% (cudart only: RTX 4060 Ti 34 SM 107 MiB and RTX PRO 6000 188 SM 555 MiB, llama.cpp
// PR #23604; RTX 3090 82 SM 256 MiB with torch 2.7.1+cu128, InvokeAI issue #9413; 1536
// threads/SM on sm_86/89/120). H100 SXM (132 SM x 2048): 528 MiB.
inline constexpr std::uint64_t context_bytes_per_thread_slot = 2048;

// The first uses below are context_h100.json's (docs/data/gpu_allocator_runs/: nvidia-smi -
// reserved after each first use in one process, H100, torch 2.11 + CUDA 13.0, cuDNN 9.19).
// PyTorch's first kernel and a matmul's cuBLAS/cuBLASLt images and handles on top of the base:
// LAZY fp32_matmul 708,837,376 B (676 MiB) - 528 MiB base (the bare context with one tensor
// reads 610 MiB: the base and PyTorch's first kernels).
inline constexpr bytes forward_kernels{708837376ULL - (528ULL << 20)};
// Autograd's backward (its device thread and kernels) and the optimizer: LAZY
// autograd_backward 775,946,240 - fp32_matmul 708,837,376 B (64 MiB); EAGER adds the same, so
// it is not kernel images; AdamW's step adds nothing.
inline constexpr bytes training_kernels{775946240ULL - 708837376ULL};
// The kernels beyond matmuls that a 16-bit SDPA (flash attention) or a convolution (cuDNN)
// loads: LAZY sdpa_flash_bf16 794,820,608 - autograd_backward 775,946,240 B (18 MiB); cuDNN's
// first fp32 and bf16 convolutions after it add nothing, so either loads them once. A bf16
// matmul after an fp32 one adds nothing either (LAZY bf16_matmul = fp32_matmul).
inline constexpr bytes fused_kernels{794820608ULL - 775946240ULL};
// CUDA_MODULE_LOADING=EAGER loads every kernel of a library when it loads: EAGER - LAZY at
// fp32_matmul, 1,816,133,632 - 708,837,376 B (1,056 MiB: libtorch_cuda, cuBLAS, cuBLASLt).
// (PR #86509's 362 MiB was torch 1.13 with CUDA 11.7; torch 1.x builds read 639-1,439 MiB for
// libtorch's image alone, by the CUDA toolkit they were built with: docs/allocator.md, "Eager
// loading and torch 1.x". The probe's figure is kept: the records do not name their build.)
inline constexpr bytes eager_loading_extra{1816133632ULL - 708837376ULL};
// Eager, a 16-bit matmul loads more of cuBLASLt: EAGER bf16_matmul 1,853,882,368 -
// fp32_matmul 1,816,133,632 B (36 MiB).
inline constexpr bytes eager_half_precision_extra{1853882368ULL - 1816133632ULL};
// Eager, cuDNN's whole library: EAGER cudnn_conv 2,149,580,800 - sdpa_flash_bf16
// 1,944,059,904 B (196 MiB; lazy it adds nothing after flash attention).
inline constexpr bytes eager_cudnn_extra{2149580800ULL - 1944059904ULL};
// NCCL communicators and their buffers when a process talks to other GPUs: the non-torch
// memory vLLM measured went from 1.79 GiB at tensor parallel 1 to 3.58 GiB at 2 on an 80 GB
// card (vllm PR #10511). An upper figure: it includes vLLM's custom all-reduce buffers.
inline constexpr bytes multi_gpu_communication{1922039808ULL};  // 1.79 GiB

enum class workload : std::uint8_t { inference, training };

struct context_inputs {
  std::uint32_t streaming_multiprocessors = 0;  // cudaDeviceProp::multiProcessorCount
  std::uint32_t max_threads_per_sm = 0;         // cudaDeviceProp::maxThreadsPerMultiProcessor
  workload work = workload::training;
  bool half_precision = false;   // bf16/fp16 matmuls (autocast or a 16-bit model)
  bool flash_attention = false;  // a 16-bit fused SDPA kernel runs
  bool convolutions = false;     // cuDNN runs (vision models)
  bool lazy_loading = true;      // CUDA >= 11.7 with CUDA_MODULE_LOADING=LAZY (PyTorch >= 1.13 sets it)
  std::uint32_t gpus = 1;        // processes that communicate (data or tensor parallel)
  bytes blas_outside{};          // torch < 2.0: cuBLAS allocated its workspaces itself
  bytes override_total{};        // non-zero: the user's measured figure (--context-memory), used as is
};

// The parts, so a report can say what it assumed.
struct context_estimate {
  bytes base{};         // thread slots
  bytes kernels{};      // PyTorch, cuBLAS/cuBLASLt, cuDNN kernel images and handles
  bytes communication{};
  bytes other{};        // cuBLAS workspaces outside the allocator; or the user's override
  bool overridden = false;
  bool eager_loading = false;  // the stack loads every kernel of a library with it (CUDA < 11.7 or torch < 1.13)

  [[nodiscard]] constexpr bytes total() const { return base + kernels + communication + other; }
};

constexpr context_estimate context_memory(const context_inputs& in) {
  context_estimate c{.eager_loading = !in.lazy_loading};
  if (in.override_total.value != 0) {
    c.other = in.override_total;
    c.overridden = true;
    return c;
  }
  memscale::detail::require(in.streaming_multiprocessors > 0, error_code::invalid_gpu, "gpu.streaming_multiprocessors",
                            "must be > 0 to size the CUDA context", in.streaming_multiprocessors);
  memscale::detail::require(in.max_threads_per_sm > 0, error_code::invalid_gpu, "gpu.max_threads_per_sm",
                            "must be > 0 to size the CUDA context", in.max_threads_per_sm);
  c.base = bytes{memscale::detail::checked_mul(context_bytes_per_thread_slot, in.streaming_multiprocessors,
                                               in.max_threads_per_sm)};
  c.kernels = forward_kernels;
  if (in.work == workload::training) c.kernels += training_kernels;
  if (in.flash_attention || in.convolutions) c.kernels += fused_kernels;
  if (c.eager_loading) {
    c.kernels += eager_loading_extra;
    if (in.half_precision) c.kernels += eager_half_precision_extra;
    if (in.convolutions) c.kernels += eager_cudnn_extra;
  }
  if (in.gpus > 1) c.communication = multi_gpu_communication;
  c.other = in.blas_outside;
  return c;
}

}  // namespace memscale::allocator
