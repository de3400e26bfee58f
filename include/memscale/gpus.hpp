// memscale/gpus.hpp: a constexpr catalog of GPUs and a name lookup that works at
// compile time and at run time.
//
// One rule for memory: gpu_spec::memory is what torch.cuda.get_device_properties(i).total_memory
// reports (cudaDeviceProp::totalGlobalMem, the total of cudaMemGetInfo; on ROCm the same
// fields through HIP). It is below the marketing size ("24 GB") and below nvidia-smi's "Total"
// (RTX 3090: nvidia-smi 24576 MiB, CUDA 24268 MiB) because the driver reserves part of the
// frame buffer, and GDDR cards that run ECC by default (T4, A10, L4, L40, L40S) lose another
// 1/16 to it. The reading moves with the driver, ECC mode and OS by a few hundred MiB (A100
// 40GB: 40536 MiB on CUDA 11.4 drivers, 40337 MiB on 12.0), so where several public readings
// exist the smallest Linux one is used (memory_source::cuda_reported, cited per row).
// Where no reading was found the figure is derived (memory_source::derived): 96 % of the
// capacity the vendor states, in binary units, after ECC's 1/16 where ECC is on by default.
// The 96 % is the catalog's own evidence: every reading below lies between 96.6 % (RTX 5080:
// 15833 of 16384 MiB) and 99.9 % of that capacity, so a derived row is never above a card's
// reading and at most ~3.5 % below it.
// Apple-silicon Macs have no device memory: their row is the share of unified memory macOS
// lets the GPU wire (memory_source::unified_share, the rule at apple_gpu_share).
//
// Field order of gpu_spec is API (designated initialisers); append new fields at the end.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "memscale/bytes.hpp"
#include "memscale/estimate/workspace.hpp"
#include "memscale/error.hpp"

namespace memscale {

enum class gpu_vendor : std::uint8_t { nvidia, amd, apple };

// Where gpu_spec::memory comes from (the rule is in the header comment).
enum class memory_source : std::uint8_t {
  cuda_reported,  // a public totalGlobalMem / torch total_memory / rocm-smi reading (cited per row)
  derived,        // no reading found: 96 % of the stated capacity (after ECC where it is on by default)
  user,           // given by the caller (custom_gpu or a hand-written gpu_spec)
  unified_share,  // Apple silicon: the share of unified memory macOS lets the GPU wire (apple_gpu_share)
};

constexpr std::string_view to_string(gpu_vendor v) noexcept {
  switch (v) {
    case gpu_vendor::nvidia: return "nvidia";
    case gpu_vendor::amd: return "amd";
    case gpu_vendor::apple: return "apple";
  }
  return "unknown";
}

constexpr std::string_view to_string(memory_source s) noexcept {
  switch (s) {
    case memory_source::cuda_reported: return "cuda_reported";
    case memory_source::derived: return "derived";
    case memory_source::user: return "user";
    case memory_source::unified_share: return "unified_share";
  }
  return "unknown";
}

// Host link, GB/s (1e9) per direction. PCI-SIG base specs: 8 / 16 / 32 GT/s per lane for
// Gen3 / Gen4 / Gen5 with 128b/130b encoding, i.e. 0.985 / 1.97 / 3.94 GB/s per lane.
inline constexpr double pcie3_x16_gb_per_s = 15.75;
inline constexpr double pcie4_x8_gb_per_s = 15.75;
inline constexpr double pcie4_x16_gb_per_s = 31.5;
inline constexpr double pcie5_x16_gb_per_s = 63.0;
// NVLink-C2C between a Grace CPU and its Blackwell GPUs: 900 GB/s both ways (NVIDIA GB200
// NVL72 specifications), 450 per direction.
inline constexpr double nvlink_c2c_gb_per_s = 450.0;

// What macOS lets an Apple-silicon GPU wire of `ram` by default (MTLDevice
// recommendedMaxWorkingSetSize, the iogpu.wired_limit_mb default): about two thirds of the
// memory up to 36 GiB, three quarters above (gpustack/gpustack#1375: 75 %; exo-explore/exo#1672:
// 10.67 GB of a 16 GB M4). Newer macOS releases leave more (antirez/ds4#893: 107.52 GiB of
// 128 GiB on macOS 26), so the rule errs low. Raising the limit (sudo sysctl
// iogpu.wired_limit_mb=N) is not refused: plan with --gpu-memory N MiB instead.
constexpr bytes apple_gpu_share(bytes ram) noexcept {
  return ram <= bytes{36ULL << 30} ? bytes{ram.value / 3 * 2} : bytes{ram.value / 4 * 3};
}

// BLAS workspace sizes: memscale/estimate/workspace.hpp.

struct gpu_spec {
  std::string_view name{};    // machine slug: lower case, e.g. "rtx3090", "a100-80gb"
  std::string_view label{};   // human name, e.g. "NVIDIA GeForce RTX 3090"
  bytes memory{};             // what torch total_memory reports (see header comment)
  memory_source memory_from = memory_source::user;
  bool bf16 = true;           // native bf16 arithmetic: sm_80+ (Ampere, Ada, Hopper, Blackwell), CDNA2/3, Apple M2+
  bool fp8 = false;           // fp8 tensor cores: sm_89 (Ada), sm_90 (Hopper), Blackwell, CDNA3 (MI300)
  double host_link_gb_per_s = pcie4_x16_gb_per_s;  // host link per direction: PCIe, NVLink-C2C (Grace), Apple DRAM
  std::uint32_t compute_capability = 0;  // NVIDIA 10*major+minor (86 = sm_86); 0 = not NVIDIA / unknown
  gpu_vendor vendor = gpu_vendor::nvidia;
  bytes cublas_workspace = pytorch_cublas_workspace_default;  // PyTorch default per handle and stream
  // cudaDeviceProp::multiProcessorCount (NVIDIA SMs; AMD compute units; Apple GPU cores) and
  // maxThreadsPerMultiProcessor (CUDA C++ Programming Guide, technical specifications per
  // compute capability; HIP reports 2048 on CDNA); 0: unknown or not published.
  std::uint32_t multiprocessors = 0;
  std::uint32_t max_threads_per_multiprocessor = 0;
};

// Rows: one comment line (memory source; link; SM count source), then the entry. Architecture
// facts (bf16, fp8, compute capability, threads per SM) follow the NVIDIA CUDA C++ Programming
// Guide's compute-capability tables and the AMD CDNA2/CDNA3/CDNA4 whitepapers; SM counts are
// the spec pages' CUDA cores over the cores per SM of the architecture (64 on Volta/Turing,
// 128 on Pascal, Ampere GeForce, Ada and Blackwell GeForce) unless the row says otherwise.
inline constexpr auto gpu_catalog = std::to_array<gpu_spec>({
    // --- Pascal, sm_61: no bf16, no fp8; PCIe 3.0 x16 (NVIDIA GeForce 10-series spec pages) ---
    // mem: derived, 6 GiB GDDR5 x 0.96 (no reading found); SMs: 1280 CUDA cores / 128
    {.name = "gtx1060-6gb", .label = "NVIDIA GeForce GTX 1060 6GB", .memory = 5898_MiB, .memory_from = memory_source::derived,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 61,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 10,
     .max_threads_per_multiprocessor = 2048},
    // mem: deviceQuery "8120 MBytes (8513978368 bytes)" on a GP104, CUDA 10.2; SMs: 1920 / 128 (desktop card)
    {.name = "gtx1070", .label = "NVIDIA GeForce GTX 1070", .memory = 8513978368_B, .memory_from = memory_source::cuda_reported,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 61,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 15,
     .max_threads_per_multiprocessor = 2048},
    // mem: deviceQuery "8120 MBytes (8513978368 bytes)", CUDA 9.1/9.0 (public log); SMs: 2560 / 128
    {.name = "gtx1080", .label = "NVIDIA GeForce GTX 1080", .memory = 8513978368_B, .memory_from = memory_source::cuda_reported,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 61,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 20,
     .max_threads_per_multiprocessor = 2048},
    // mem: deviceQuery "11178 MBytes (11721506816 bytes)", CUDA 11.2/10.1 and 10.1/10.0 (public logs); SMs: 3584 / 128
    {.name = "gtx1080ti", .label = "NVIDIA GeForce GTX 1080 Ti", .memory = 11721506816_B, .memory_from = memory_source::cuda_reported,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 61,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 28,
     .max_threads_per_multiprocessor = 2048},

    // --- Turing, sm_75: no bf16, no fp8; PCIe 3.0 x16 (NVIDIA GeForce 16/20-series spec pages) ---
    // mem: derived, 6 GiB GDDR6 x 0.96 (no reading found); SMs: 1536 CUDA cores / 64
    {.name = "gtx1660ti", .label = "NVIDIA GeForce GTX 1660 Ti", .memory = 5898_MiB, .memory_from = memory_source::derived,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 75,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 24,
     .max_threads_per_multiprocessor = 1024},
    // mem: derived, 6 GiB GDDR6 x 0.96 (the 2021 12 GB model is not this row); SMs: 1920 / 64
    {.name = "rtx2060", .label = "NVIDIA GeForce RTX 2060", .memory = 5898_MiB, .memory_from = memory_source::derived,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 75,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 30,
     .max_threads_per_multiprocessor = 1024},
    // mem: derived, 8 GiB GDDR6 x 0.96 (no reading found); SMs: 2304 / 64
    {.name = "rtx2070", .label = "NVIDIA GeForce RTX 2070", .memory = 7864_MiB, .memory_from = memory_source::derived,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 75,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 36,
     .max_threads_per_multiprocessor = 1024},
    // mem: deviceQuery "7949 MBytes (8335327232 bytes)", Linux, CUDA 10.0 (public log; Windows WDDM shows 8192); SMs: 2944 / 64
    {.name = "rtx2080", .label = "NVIDIA GeForce RTX 2080", .memory = 8335327232_B, .memory_from = memory_source::cuda_reported,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 75,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 46,
     .max_threads_per_multiprocessor = 1024},
    // mem: deviceQuery "10989 MBytes (11523260416 bytes)", CUDA 10.0 and 10.1 (several public logs); SMs: 4352 / 64
    {.name = "rtx2080ti", .label = "NVIDIA GeForce RTX 2080 Ti", .memory = 11523260416_B, .memory_from = memory_source::cuda_reported,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 75,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 68,
     .max_threads_per_multiprocessor = 1024},

    // --- Ampere GeForce, sm_86: bf16, no fp8; PCIe 4.0 x16 (NVIDIA GeForce RTX 30-series spec pages) ---
    // mem: torch total_memory=11931MB (MiB), smallest of 11931-12044 in public logs; SMs: 3584 / 128
    {.name = "rtx3060-12gb", .label = "NVIDIA GeForce RTX 3060 12GB", .memory = 11931_MiB, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 28,
     .max_threads_per_multiprocessor = 1536},
    // mem: derived, 8 GiB GDDR6 x 0.96 (no reading found); SMs: 5888 / 128
    {.name = "rtx3070", .label = "NVIDIA GeForce RTX 3070", .memory = 7864_MiB, .memory_from = memory_source::derived,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 46,
     .max_threads_per_multiprocessor = 1536},
    // mem: deviceQuery "9987 MBytes (10472390656 bytes)", Linux, driver 12.0 / runtime 11.8 (Windows WDDM shows 10240); SMs: 8704 / 128
    {.name = "rtx3080-10gb", .label = "NVIDIA GeForce RTX 3080 10GB", .memory = 10472390656_B, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 68,
     .max_threads_per_multiprocessor = 1536},
    // mem: derived, 12 GiB GDDR6X x 0.96 (no reading found); SMs: 8960 / 128
    {.name = "rtx3080-12gb", .label = "NVIDIA GeForce RTX 3080 12GB", .memory = 11796_MiB, .memory_from = memory_source::derived,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 70,
     .max_threads_per_multiprocessor = 1536},
    // mem: deviceQuery "24268 MBytes (25447170048 bytes)", CUDA 11.8 and 11.3 (public logs); nvidia-smi Total 24576 MiB; SMs: 10496 / 128
    {.name = "rtx3090", .label = "NVIDIA GeForce RTX 3090", .memory = 25447170048_B, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 82,
     .max_threads_per_multiprocessor = 1536},
    // mem: derived, 24 GiB GDDR6X x 0.96 (no reading found; nvidia-smi Total 24564 MiB in public configs); SMs: 10752 / 128
    {.name = "rtx3090ti", .label = "NVIDIA GeForce RTX 3090 Ti", .memory = 23592_MiB, .memory_from = memory_source::derived,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 84,
     .max_threads_per_multiprocessor = 1536},

    // --- Ada GeForce, sm_89: bf16, fp8; PCIe 4.0 (NVIDIA GeForce RTX 40-series spec pages) ---
    // mem: derived, 16 GiB x 0.96 (no reading found); link: PCIe 4.0 x8 (NVIDIA RTX 4060 Ti spec page); SMs: 4352 / 128
    {.name = "rtx4060ti-16gb", .label = "NVIDIA GeForce RTX 4060 Ti 16GB", .memory = 15728_MiB, .memory_from = memory_source::derived,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie4_x8_gb_per_s, .compute_capability = 89,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 34,
     .max_threads_per_multiprocessor = 1536},
    // mem: derived, 12 GiB GDDR6X x 0.96 (no reading found); PCIe 4.0 x16; SMs: 5888 / 128
    {.name = "rtx4070", .label = "NVIDIA GeForce RTX 4070", .memory = 11796_MiB, .memory_from = memory_source::derived,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 89,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 46,
     .max_threads_per_multiprocessor = 1536},
    // mem: derived, 16 GiB GDDR6X x 0.96 (no reading found); PCIe 4.0 x16; SMs: 9728 / 128
    {.name = "rtx4080", .label = "NVIDIA GeForce RTX 4080", .memory = 15728_MiB, .memory_from = memory_source::derived,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 89,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 76,
     .max_threads_per_multiprocessor = 1536},
    // mem: deviceQuery "24081 MBytes (25250627584 bytes)", driver 13.0 / runtime 11.8, the smallest of the public readings (24210 MiB = 25386352640 B on 12.4 / 12.4); PCIe 4.0 x16; SMs: 16384 / 128
    {.name = "rtx4090", .label = "NVIDIA GeForce RTX 4090", .memory = 25250627584_B, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 89,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 128,
     .max_threads_per_multiprocessor = 1536},

    // --- Blackwell GeForce, sm_120: bf16, fp8; PCIe 5.0 x16 (NVIDIA GeForce RTX 50-series spec pages) ---
    // mem: derived, 12 GiB GDDR7 x 0.96 (no reading found); SMs: 6144 / 128
    {.name = "rtx5070", .label = "NVIDIA GeForce RTX 5070", .memory = 11796_MiB, .memory_from = memory_source::derived,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie5_x16_gb_per_s, .compute_capability = 120,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_sm90_plus, .multiprocessors = 48,
     .max_threads_per_multiprocessor = 1536},
    // mem: torch total_memory 16602497024 B (15833 MiB; public experiment logs, nvidia-smi Total 16303 MiB); SMs: 10752 / 128
    {.name = "rtx5080", .label = "NVIDIA GeForce RTX 5080", .memory = 16602497024_B, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie5_x16_gb_per_s, .compute_capability = 120,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_sm90_plus, .multiprocessors = 84,
     .max_threads_per_multiprocessor = 1536},
    // mem: deviceQuery "32117 MBytes (33677180928 bytes)", 12.8 / 12.8 (aikitoria/open-gpu-kernel-modules#1; 32120 MiB in NVIDIA/nccl#1637); SMs: deviceQuery (170) Multiprocessors, 1536 threads per SM
    {.name = "rtx5090", .label = "NVIDIA GeForce RTX 5090", .memory = 33677180928_B, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie5_x16_gb_per_s, .compute_capability = 120,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_sm90_plus, .multiprocessors = 170,
     .max_threads_per_multiprocessor = 1536},

    // --- Workstation: RTX A-series sm_86, RTX 6000 Ada sm_89, RTX PRO Blackwell sm_120 (NVIDIA RTX datasheets; ECC off by default) ---
    // mem: derived, 16 GiB GDDR6 x 0.96 (no reading found); SMs: 6144 / 128
    {.name = "rtx-a4000", .label = "NVIDIA RTX A4000", .memory = 15728_MiB, .memory_from = memory_source::derived,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 48,
     .max_threads_per_multiprocessor = 1536},
    // mem: derived, 24 GiB GDDR6 x 0.96 (no reading found); SMs: 8192 / 128
    {.name = "rtx-a5000", .label = "NVIDIA RTX A5000", .memory = 23592_MiB, .memory_from = memory_source::derived,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 64,
     .max_threads_per_multiprocessor = 1536},
    // mem: torch total_memory=48676MB (MiB) (public log); SMs: 10752 / 128
    {.name = "rtx-a6000", .label = "NVIDIA RTX A6000", .memory = 48676_MiB, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 84,
     .max_threads_per_multiprocessor = 1536},
    // mem: derived, 48 GiB GDDR6 x 0.96 (no reading found; nvidia-smi Total 49140 MiB in public logs); SMs: 18176 / 128
    {.name = "rtx6000-ada", .label = "NVIDIA RTX 6000 Ada Generation", .memory = 47185_MiB, .memory_from = memory_source::derived,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 89,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 142,
     .max_threads_per_multiprocessor = 1536},
    // mem: derived, 96 GiB GDDR7 x 0.96 (no reading found; with ECC switched on the card loses 1/16: give --gpu-memory); Workstation and Server Editions alike; SMs: 24064 / 128 (NVIDIA RTX Blackwell architecture whitepaper)
    {.name = "rtx-pro-6000", .label = "NVIDIA RTX PRO 6000 Blackwell", .memory = 94371_MiB, .memory_from = memory_source::derived,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie5_x16_gb_per_s, .compute_capability = 120,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_sm90_plus, .multiprocessors = 188,
     .max_threads_per_multiprocessor = 1536},

    // --- Data-centre PCIe cards (ECC on by default on the GDDR ones) ---
    // mem: torch total_memory=14930MB (MiB), smallest of 14930-15109 in public logs (nvidia-smi 15360 MiB, ECC on); PCIe 3.0 x16 (T4 datasheet); SMs: 2560 / 64
    {.name = "t4", .label = "NVIDIA T4", .memory = 14930_MiB, .memory_from = memory_source::cuda_reported,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 75,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 40,
     .max_threads_per_multiprocessor = 1024},
    // mem: deviceQuery "22518 MBytes (23612293120 bytes)", driver 12.0 / runtime 11.8 (nvidia-smi 23034 MiB); PCIe 4.0 x16 (L4 datasheet); SMs: 7424 / 128
    {.name = "l4", .label = "NVIDIA L4", .memory = 23612293120_B, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 89,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 58,
     .max_threads_per_multiprocessor = 1536},
    // mem: derived, 48 GiB GDDR6 less ECC's 1/16, x 0.96 (no reading found); PCIe 4.0 x16 (L40 datasheet); SMs: 18176 / 128
    {.name = "l40", .label = "NVIDIA L40", .memory = 44236_MiB, .memory_from = memory_source::derived,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 89,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 142,
     .max_threads_per_multiprocessor = 1536},
    // mem: torch total_memory=45589MB (MiB) (public log; nvidia-smi 46068 MiB); PCIe 4.0 x16 (L40S datasheet); SMs: 18176 / 128
    {.name = "l40s", .label = "NVIDIA L40S", .memory = 45589_MiB, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 89,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 142,
     .max_threads_per_multiprocessor = 1536},
    // mem: deviceQuery "22516 MBytes (23609475072 bytes)", driver 12.2 / runtime 11.8 (22599 MiB on 12.8); PCIe 4.0 x16 (A10 datasheet); SMs: 9216 / 128
    {.name = "a10", .label = "NVIDIA A10", .memory = 23609475072_B, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 72,
     .max_threads_per_multiprocessor = 1536},
    // mem: torch total_memory=22587MB (MiB) (public log; nvidia-smi 23028 MiB); link: PCIe 4.0 x16 as the A10 (AWS G5); SMs: 80 (deviceQuery on AWS G5)
    {.name = "a10g", .label = "NVIDIA A10G", .memory = 22587_MiB, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 80,
     .max_threads_per_multiprocessor = 1536},

    // --- Data-centre SXM/OAM parts: host link is their PCIe link (NVLink-C2C on Grace superchips) ---
    // mem: deviceQuery "16160 MBytes (16945512448 bytes)", SXM2, CUDA 9.0-10.2 (public logs); PCIe 3.0 x16 (V100 datasheet); SMs: 5120 / 64
    {.name = "v100-16gb", .label = "NVIDIA Tesla V100 16GB", .memory = 16945512448_B, .memory_from = memory_source::cuda_reported,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 70,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 80,
     .max_threads_per_multiprocessor = 2048},
    // mem: deviceQuery "32510 MBytes (34089730048 bytes)", PCIe/SXM2/SXM3, CUDA 10.2-11.4 (public logs); PCIe 3.0 x16 (V100 datasheet); SMs: 5120 / 64
    {.name = "v100-32gb", .label = "NVIDIA Tesla V100 32GB", .memory = 34089730048_B, .memory_from = memory_source::cuda_reported,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 70,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 80,
     .max_threads_per_multiprocessor = 2048},
    // mem: global_mem_size 42296475648 (AdaptiveCpp issue #1258, driver 12.0; 42505273344 on CUDA 11.4); PCIe 4.0 x16 (A100 datasheet); SMs: 108 (NVIDIA A100 whitepaper)
    {.name = "a100-40gb", .label = "NVIDIA A100 40GB", .memory = 42296475648_B, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 80,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 108,
     .max_threads_per_multiprocessor = 2048},
    // mem: mixbench "Total global mem: 81049 MB" (MiB), A100 80GB PCIe, driver 12.3 (ekondis/mixbench#47; SXM4 nvidia-smi 81251/81920 MiB); SMs: 108
    {.name = "a100-80gb", .label = "NVIDIA A100 80GB", .memory = 81049_MiB, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 80,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default, .multiprocessors = 108,
     .max_threads_per_multiprocessor = 2048},
    // mem: derived, 96 GiB HBM3 x 0.96 (no reading found); PCIe 5.0 x16; SMs: 78 (public spec listings; NVIDIA publishes no count)
    {.name = "h20", .label = "NVIDIA H20", .memory = 94371_MiB, .memory_from = memory_source::derived,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie5_x16_gb_per_s, .compute_capability = 90,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_sm90_plus, .multiprocessors = 78,
     .max_threads_per_multiprocessor = 2048},
    // mem: torch total_memory=81082MB (MiB), H100 80GB HBM3 (SXM5), cu118 (81089-81090 on CUDA 12.8; nvidia-smi 81559 MiB); PCIe 5.0 x16 (H100 datasheet); SMs: 132 (SXM5, NVIDIA H100 whitepaper)
    {.name = "h100-80gb", .label = "NVIDIA H100 80GB HBM3", .memory = 81082_MiB, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie5_x16_gb_per_s, .compute_capability = 90,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_sm90_plus, .multiprocessors = 132,
     .max_threads_per_multiprocessor = 2048},
    // mem: torch total_memory=143156MB (MiB) (public vLLM log); PCIe 5.0 x16 (H200 datasheet); SMs: 132
    {.name = "h200", .label = "NVIDIA H200", .memory = 143156_MiB, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie5_x16_gb_per_s, .compute_capability = 90,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_sm90_plus, .multiprocessors = 132,
     .max_threads_per_multiprocessor = 2048},
    // mem: torch total_memory=182631MB (MiB), smaller of 182631/182642 (public logs); link: Gen5 x16 assumed (Gen5 hosts; not verified); SMs: 148
    {.name = "b200", .label = "NVIDIA B200", .memory = 182631_MiB, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie5_x16_gb_per_s, .compute_capability = 100,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_sm90_plus, .multiprocessors = 148,
     .max_threads_per_multiprocessor = 2048},
    // one GPU of a GB200 superchip (a machine has two per Grace CPU). mem: derived, 186 GiB HBM3e (GB200 NVL72: 13.4 TB over 72 GPUs) x 0.96; link: NVLink-C2C to Grace; SMs: 148 as B200
    {.name = "gb200", .label = "NVIDIA GB200", .memory = 182845_MiB, .memory_from = memory_source::derived,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = nvlink_c2c_gb_per_s, .compute_capability = 100,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_sm90_plus, .multiprocessors = 148,
     .max_threads_per_multiprocessor = 2048},
    // mem: derived, 288 GiB HBM3e x 0.96 (no reading found; GB300 rows too, per GPU); link: Gen5 x16 assumed; SMs: up to 160 (NVIDIA Blackwell Ultra technical blog; the enabled count is not published)
    {.name = "b300", .label = "NVIDIA B300", .memory = 283115_MiB, .memory_from = memory_source::derived,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie5_x16_gb_per_s, .compute_capability = 103,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_sm90_plus, .multiprocessors = 160,
     .max_threads_per_multiprocessor = 2048},

    // --- AMD Instinct (CDNA2/3/4): bf16; 2048 threads per CU (HIP maxThreadsPerMultiProcessor) ---
    // one GCD (PyTorch device) of two. mem: 68702699520 B (Cray ACC "Total GPU memory", gfx90a; KFD size_in_bytes); PCIe 4.0 x16 (AMD MI250X datasheet); CUs: 110 per GCD
    {.name = "mi250x", .label = "AMD Instinct MI250X", .memory = 68702699520_B, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 0,
     .vendor = gpu_vendor::amd, .cublas_workspace = pytorch_hipblas_workspace_default, .multiprocessors = 110,
     .max_threads_per_multiprocessor = 2048},
    // mem: rocm-smi "VRAM Total Memory (B): 205822885888" = totalGlobalMem = torch mem_get_info total (public logs); PCIe 5.0 x16 (AMD MI300X datasheet); CUs: 304
    {.name = "mi300x", .label = "AMD Instinct MI300X", .memory = 205822885888_B, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie5_x16_gb_per_s, .compute_capability = 0,
     .vendor = gpu_vendor::amd, .cublas_workspace = pytorch_hipblas_workspace_gfx942, .multiprocessors = 304,
     .max_threads_per_multiprocessor = 2048},
    // mem: derived, 256 GiB HBM3E x 0.96 (no reading found); PCIe 5.0 x16 (AMD MI325X datasheet); CUs: 304
    {.name = "mi325x", .label = "AMD Instinct MI325X", .memory = 251658_MiB, .memory_from = memory_source::derived,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie5_x16_gb_per_s, .compute_capability = 0,
     .vendor = gpu_vendor::amd, .cublas_workspace = pytorch_hipblas_workspace_gfx942, .multiprocessors = 304,
     .max_threads_per_multiprocessor = 2048},
    // mem: derived, 288 GiB HBM3E x 0.96 (no reading found); PCIe 5.0 x16 (AMD MI355X datasheet); CUs: 256
    {.name = "mi355x", .label = "AMD Instinct MI355X", .memory = 283115_MiB, .memory_from = memory_source::derived,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie5_x16_gb_per_s, .compute_capability = 0,
     .vendor = gpu_vendor::amd, .cublas_workspace = pytorch_hipblas_workspace_gfx942, .multiprocessors = 256,
     .max_threads_per_multiprocessor = 2048},

    // --- Apple silicon (MPS): unified memory; the row is the GPU's share (apple_gpu_share). No CUDA
    // SMs: multiprocessors counts GPU cores, and Metal publishes no per-core thread limit (0). The
    // host link is the chip's memory bandwidth: offloading to "host" memory copies within the same
    // DRAM. bf16: Metal bfloat on M2 and later (PyTorch MPS from macOS 14). (Apple tech specs pages.) ---
    // 24 GiB unified memory, 10 GPU cores, 120 GB/s
    {.name = "m4-24gb", .label = "Apple M4 24GB", .memory = apple_gpu_share(24_GiB), .memory_from = memory_source::unified_share,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = 120.0, .compute_capability = 0,
     .vendor = gpu_vendor::apple, .cublas_workspace = bytes{0}, .multiprocessors = 10,
     .max_threads_per_multiprocessor = 0},
    // 48 GiB unified memory, 20 GPU cores, 273 GB/s
    {.name = "m4-pro-48gb", .label = "Apple M4 Pro 48GB", .memory = apple_gpu_share(48_GiB), .memory_from = memory_source::unified_share,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = 273.0, .compute_capability = 0,
     .vendor = gpu_vendor::apple, .cublas_workspace = bytes{0}, .multiprocessors = 20,
     .max_threads_per_multiprocessor = 0},
    // 36 GiB unified memory, 32 GPU cores, 410 GB/s
    {.name = "m4-max-36gb", .label = "Apple M4 Max 36GB", .memory = apple_gpu_share(36_GiB), .memory_from = memory_source::unified_share,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = 410.0, .compute_capability = 0,
     .vendor = gpu_vendor::apple, .cublas_workspace = bytes{0}, .multiprocessors = 32,
     .max_threads_per_multiprocessor = 0},
    // 128 GiB unified memory, 40 GPU cores, 546 GB/s
    {.name = "m4-max-128gb", .label = "Apple M4 Max 128GB", .memory = apple_gpu_share(128_GiB), .memory_from = memory_source::unified_share,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = 546.0, .compute_capability = 0,
     .vendor = gpu_vendor::apple, .cublas_workspace = bytes{0}, .multiprocessors = 40,
     .max_threads_per_multiprocessor = 0},
    // 128 GiB unified memory, 40 GPU cores, 400 GB/s
    {.name = "m3-max-128gb", .label = "Apple M3 Max 128GB", .memory = apple_gpu_share(128_GiB), .memory_from = memory_source::unified_share,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = 400.0, .compute_capability = 0,
     .vendor = gpu_vendor::apple, .cublas_workspace = bytes{0}, .multiprocessors = 40,
     .max_threads_per_multiprocessor = 0},
    // 192 GiB unified memory, 76 GPU cores, 800 GB/s
    {.name = "m2-ultra-192gb", .label = "Apple M2 Ultra 192GB", .memory = apple_gpu_share(192_GiB), .memory_from = memory_source::unified_share,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = 800.0, .compute_capability = 0,
     .vendor = gpu_vendor::apple, .cublas_workspace = bytes{0}, .multiprocessors = 76,
     .max_threads_per_multiprocessor = 0},
    // 512 GiB unified memory, 80 GPU cores, 819 GB/s
    {.name = "m3-ultra-512gb", .label = "Apple M3 Ultra 512GB", .memory = apple_gpu_share(512_GiB), .memory_from = memory_source::unified_share,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = 819.0, .compute_capability = 0,
     .vendor = gpu_vendor::apple, .cublas_workspace = bytes{0}, .multiprocessors = 80,
     .max_threads_per_multiprocessor = 0},
});

namespace detail {

inline constexpr std::size_t gpu_name_capacity = 64;

// Words that do not tell two catalog entries apart: vendor and brand words, form factors,
// memory technology. "NVIDIA GeForce RTX 3090", "Tesla V100-SXM2-16GB", "NVIDIA H100 80GB HBM3",
// "NVIDIA B300 SXM6 AC" and "NVIDIA RTX PRO 6000 Blackwell Server Edition" (nvidia-smi / torch
// device names) reduce to catalog slugs.
inline constexpr std::array<std::string_view, 22> gpu_name_noise{
    "nvidia", "geforce", "tesla", "amd", "instinct", "generation", "pcie", "sxm", "sxm2", "sxm3", "sxm4",
    "sxm5", "sxm6", "ac", "hbm2e", "hbm3", "hbm3e", "blackwell", "workstation", "server", "edition", "apple"};

constexpr char ascii_lower(char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

constexpr bool is_gpu_name_separator(char c) noexcept {
  return c == ' ' || c == '-' || c == '_' || c == '\t';
}

constexpr bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  }
  return true;
}

constexpr bool is_gpu_name_noise(std::string_view token) noexcept {
  for (const auto word : gpu_name_noise) {
    if (iequals(token, word)) return true;
  }
  return false;
}

// "24GB" -> 24; 0 when the token is not 1-4 digits followed by "gb".
constexpr std::uint64_t parse_gb_token(std::string_view token) noexcept {
  if (token.size() < 3 || token.size() > 6) return 0;
  if (!iequals(token.substr(token.size() - 2), "gb")) return 0;
  std::uint64_t n = 0;
  for (std::size_t i = 0; i + 2 < token.size(); ++i) {
    const char c = token[i];
    if (c < '0' || c > '9') return 0;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return n;
}

// A device name reduced to lower-case letters and digits without separators or noise
// words; remembers where a trailing "<n>gb" word starts.
struct gpu_name_key {
  std::array<char, gpu_name_capacity> text{};
  std::size_t size = 0;
  bool valid = true;
  bool has_size_suffix = false;
  std::size_t suffix_at = 0;
  std::uint64_t suffix_gb = 0;

  [[nodiscard]] constexpr std::string_view view() const noexcept { return {text.data(), size}; }
  [[nodiscard]] constexpr std::string_view without_suffix() const noexcept { return {text.data(), suffix_at}; }
};

constexpr gpu_name_key make_gpu_name_key(std::string_view name) noexcept {
  gpu_name_key key;
  std::size_t i = 0;
  while (i < name.size()) {
    while (i < name.size() && is_gpu_name_separator(name[i])) ++i;
    const std::size_t start = i;
    while (i < name.size() && !is_gpu_name_separator(name[i])) ++i;
    const std::string_view token = name.substr(start, i - start);
    if (token.empty() || is_gpu_name_noise(token)) continue;
    if (key.size + token.size() > key.text.size()) {
      key.valid = false;
      return key;
    }
    const std::uint64_t gb = parse_gb_token(token);
    key.has_size_suffix = gb != 0;
    key.suffix_at = key.size;
    key.suffix_gb = gb;
    for (const char c : token) key.text[key.size++] = ascii_lower(c);
  }
  return key;
}

// Compares a catalog slug with a key, ignoring the slug's '-' separators.
constexpr bool slug_matches(std::string_view slug, std::string_view key) noexcept {
  std::size_t k = 0;
  for (const char c : slug) {
    if (c == '-') continue;
    if (k >= key.size() || key[k] != c) return false;
    ++k;
  }
  return k == key.size();
}

// A "<n>gb" suffix is accepted only if it is within 12.5 % of the entry's memory,
// so "rtx2060-12gb" does not resolve to the 6 GB RTX 2060.
constexpr bool memory_near_gb(bytes memory, std::uint64_t gb) noexcept {
  const std::uint64_t nominal = gb << 30;  // gb has at most 4 digits: no overflow
  return memory.value >= nominal - nominal / 8 && memory.value <= nominal + nominal / 8;
}

}  // namespace detail

// Public: a name as find_gpu compares it (vendor and form-factor words, case and separators
// dropped), for callers that suggest the nearest catalog name.
using detail::gpu_name_key;
using detail::make_gpu_name_key;

// Looks a GPU up by slug ("rtx3090"), case-insensitively, or by a common device name:
// vendor/brand words and form factors are ignored ("NVIDIA GeForce RTX 3090",
// "A100-SXM4-40GB", "Tesla V100-SXM2-16GB"), and a trailing "<n>GB" is dropped when the
// slug carries no size and n matches the memory ("RTX3090-24GB"). Ambiguous names such as
// "A100", "V100" or "RTX 3080" give nullopt, as do multi-GPU names ("2xA100-SXM4-40GB").
constexpr std::optional<gpu_spec> find_gpu(std::string_view name) {
  const detail::gpu_name_key key = detail::make_gpu_name_key(name);
  if (!key.valid || key.size == 0) return std::nullopt;
  for (const gpu_spec& gpu : gpu_catalog) {
    if (detail::slug_matches(gpu.name, key.view())) return gpu;
  }
  if (key.has_size_suffix && key.suffix_at > 0) {
    for (const gpu_spec& gpu : gpu_catalog) {
      if (detail::slug_matches(gpu.name, key.without_suffix()) && detail::memory_near_gb(gpu.memory, key.suffix_gb)) {
        return gpu;
      }
    }
  }
  return std::nullopt;
}

// A GPU that is not in the catalog. memory is what CUDA reports as the device total
// (torch.cuda.get_device_properties(i).total_memory), not the marketing size.
constexpr gpu_spec custom_gpu(bytes memory, bool bf16 = true, double host_link_gb_per_s = pcie4_x16_gb_per_s) {
  if (memory.value == 0) detail::fail(error_code::invalid_gpu, "gpu.memory", "must be > 0", 0);
  if (!(host_link_gb_per_s > 0.0)) detail::fail(error_code::invalid_gpu, "gpu.host_link_gb_per_s", "must be > 0");
  return gpu_spec{.name = "custom",
                  .label = "Custom GPU",
                  .memory = memory,
                  .memory_from = memory_source::user,
                  .bf16 = bf16,
                  .fp8 = false,
                  .host_link_gb_per_s = host_link_gb_per_s,
                  .compute_capability = 0,
                  .vendor = gpu_vendor::nvidia,
                  .cublas_workspace = pytorch_cublas_workspace_default};
}

}  // namespace memscale
