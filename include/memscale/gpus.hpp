// memscale/gpus.hpp: a constexpr catalog of GPUs and a name lookup that works at
// compile time and at run time.
//
// gpu_spec::memory is what CUDA (or HIP) says the device offers: cudaDeviceProp::totalGlobalMem,
// which is also the total of cudaMemGetInfo and torch.cuda.get_device_properties().total_memory.
// It is smaller than both the marketing size ("24 GB") and, on recent drivers, the nvidia-smi
// "Total" column (RTX 3090: nvidia-smi 24576 MiB, CUDA 24268 MiB), because the driver reserves
// part of the frame buffer. The reading moves with the driver version, ECC mode and OS by a
// few hundred MiB (A100 40GB: 40536 MiB on CUDA 11.4 drivers, 40337 MiB on 12.0), so where
// several public readings exist the smallest Linux one is used. Rows without a public reading
// carry the nominal size in binary units and memory_from == memory_source::nominal; treat those
// as 1-3 % optimistic.
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

enum class gpu_vendor : std::uint8_t { nvidia, amd };

// Where gpu_spec::memory comes from.
enum class memory_source : std::uint8_t {
  cuda_reported,  // a public totalGlobalMem / torch total_memory / rocm-smi reading (cited per row)
  nominal,        // no reading found: the datasheet size in binary units (optimistic)
  user,           // given by the caller (custom_gpu or a hand-written gpu_spec)
};

constexpr std::string_view to_string(gpu_vendor v) noexcept {
  switch (v) {
    case gpu_vendor::nvidia: return "nvidia";
    case gpu_vendor::amd: return "amd";
  }
  return "unknown";
}

constexpr std::string_view to_string(memory_source s) noexcept {
  switch (s) {
    case memory_source::cuda_reported: return "cuda_reported";
    case memory_source::nominal: return "nominal";
    case memory_source::user: return "user";
  }
  return "unknown";
}

// Host link, GB/s (1e9) per direction. PCI-SIG base specs: 8 / 16 / 32 GT/s per lane for
// Gen3 / Gen4 / Gen5 with 128b/130b encoding, i.e. 0.985 / 1.97 / 3.94 GB/s per lane.
inline constexpr double pcie3_x16_gb_per_s = 15.75;
inline constexpr double pcie4_x8_gb_per_s = 15.75;
inline constexpr double pcie4_x16_gb_per_s = 31.5;
inline constexpr double pcie5_x16_gb_per_s = 63.0;

// BLAS workspace sizes: memscale/estimate/workspace.hpp.

struct gpu_spec {
  std::string_view name{};    // machine slug: lower case, e.g. "rtx3090", "a100-80gb"
  std::string_view label{};   // human name, e.g. "NVIDIA GeForce RTX 3090"
  bytes memory{};             // bytes CUDA/HIP reports as the device total (see header comment)
  memory_source memory_from = memory_source::user;
  bool bf16 = true;           // native bf16 arithmetic: sm_80+ (Ampere, Ada, Hopper, Blackwell), CDNA2/3
  bool fp8 = false;           // fp8 tensor cores: sm_89 (Ada), sm_90 (Hopper), Blackwell, CDNA3 (MI300)
  double host_link_gb_per_s = pcie4_x16_gb_per_s;  // PCIe host link per direction (not NVLink)
  std::uint32_t compute_capability = 0;  // NVIDIA 10*major+minor (86 = sm_86); 0 = not NVIDIA / unknown
  gpu_vendor vendor = gpu_vendor::nvidia;
  bytes cublas_workspace = pytorch_cublas_workspace_default;  // PyTorch default per handle and stream
};

// Rows: one comment line (memory source; PCIe link source), then the entry. Architecture
// facts (bf16, fp8, compute capability) follow the NVIDIA CUDA C++ Programming Guide's
// compute-capability tables and the AMD CDNA2/CDNA3 whitepapers.
inline constexpr auto gpu_catalog = std::to_array<gpu_spec>({
    // --- Pascal, sm_61: no bf16, no fp8; PCIe 3.0 x16 (NVIDIA GeForce 10-series spec pages) ---
    // mem: no public reading found, nominal 6 GiB GDDR5 (NVIDIA GTX 1060 6GB spec page)
    {.name = "gtx1060-6gb", .label = "NVIDIA GeForce GTX 1060 6GB", .memory = 6_GiB, .memory_from = memory_source::nominal,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 61,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: deviceQuery "8120 MBytes (8513978368 bytes)" on a 16-SM GP104 (GTX 1070 config., 1379 MHz: laptop part), CUDA 10.2
    {.name = "gtx1070", .label = "NVIDIA GeForce GTX 1070", .memory = 8513978368_B, .memory_from = memory_source::cuda_reported,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 61,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: deviceQuery "8120 MBytes (8513978368 bytes)", GTX 1080 (20 SMs, 1734 MHz), CUDA 9.1/9.0 (public log)
    {.name = "gtx1080", .label = "NVIDIA GeForce GTX 1080", .memory = 8513978368_B, .memory_from = memory_source::cuda_reported,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 61,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: deviceQuery "11178 MBytes (11721506816 bytes)", CUDA 11.2/10.1 and 10.1/10.0 (public logs)
    {.name = "gtx1080ti", .label = "NVIDIA GeForce GTX 1080 Ti", .memory = 11721506816_B, .memory_from = memory_source::cuda_reported,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 61,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},

    // --- Turing, sm_75: no bf16, no fp8; PCIe 3.0 x16 (NVIDIA GeForce 16/20-series spec pages) ---
    // mem: no public reading found, nominal 6 GiB GDDR6 (NVIDIA GTX 1660 Ti spec page)
    {.name = "gtx1660ti", .label = "NVIDIA GeForce GTX 1660 Ti", .memory = 6_GiB, .memory_from = memory_source::nominal,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 75,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: no public reading found, nominal 6 GiB GDDR6 (NVIDIA RTX 2060 spec page; the 2021 12 GB model is not this row)
    {.name = "rtx2060", .label = "NVIDIA GeForce RTX 2060", .memory = 6_GiB, .memory_from = memory_source::nominal,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 75,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: no public reading found, nominal 8 GiB GDDR6 (NVIDIA RTX 2070 spec page)
    {.name = "rtx2070", .label = "NVIDIA GeForce RTX 2070", .memory = 8_GiB, .memory_from = memory_source::nominal,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 75,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: deviceQuery "7949 MBytes (8335327232 bytes)", Linux, CUDA 10.0 (public log; Windows WDDM shows 8192)
    {.name = "rtx2080", .label = "NVIDIA GeForce RTX 2080", .memory = 8335327232_B, .memory_from = memory_source::cuda_reported,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 75,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: deviceQuery "10989 MBytes (11523260416 bytes)", CUDA 10.0 and 10.1 (several public logs)
    {.name = "rtx2080ti", .label = "NVIDIA GeForce RTX 2080 Ti", .memory = 11523260416_B, .memory_from = memory_source::cuda_reported,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 75,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},

    // --- Ampere GeForce, sm_86: bf16, no fp8; PCIe 4.0 x16 (NVIDIA GeForce RTX 30-series spec pages) ---
    // mem: torch total_memory=11931MB (MiB), smallest of 11931-12044 in public logs
    {.name = "rtx3060-12gb", .label = "NVIDIA GeForce RTX 3060 12GB", .memory = 11931_MiB, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: no public reading found, nominal 8 GiB GDDR6 (NVIDIA RTX 3070 spec page)
    {.name = "rtx3070", .label = "NVIDIA GeForce RTX 3070", .memory = 8_GiB, .memory_from = memory_source::nominal,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: deviceQuery "9987 MBytes (10472390656 bytes)", Linux, driver 12.0 / runtime 11.8 (Windows WDDM shows 10240)
    {.name = "rtx3080-10gb", .label = "NVIDIA GeForce RTX 3080 10GB", .memory = 10472390656_B, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: no public reading found, nominal 12 GiB GDDR6X (NVIDIA RTX 3080 spec page, 12 GB model)
    {.name = "rtx3080-12gb", .label = "NVIDIA GeForce RTX 3080 12GB", .memory = 12_GiB, .memory_from = memory_source::nominal,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: deviceQuery "24268 MBytes (25447170048 bytes)", CUDA 11.8 and 11.3 (public logs); nvidia-smi Total 24576 MiB
    {.name = "rtx3090", .label = "NVIDIA GeForce RTX 3090", .memory = 25447170048_B, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: no public reading found, nominal 24 GiB GDDR6X (NVIDIA RTX 3090 Ti spec page)
    {.name = "rtx3090ti", .label = "NVIDIA GeForce RTX 3090 Ti", .memory = 24_GiB, .memory_from = memory_source::nominal,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},

    // --- Ada GeForce, sm_89: bf16, fp8; PCIe 4.0 (NVIDIA GeForce RTX 40-series spec pages) ---
    // mem: no public reading found, nominal 16 GiB; link: PCIe 4.0 x8 (NVIDIA RTX 4060 Ti spec page)
    {.name = "rtx4060ti-16gb", .label = "NVIDIA GeForce RTX 4060 Ti 16GB", .memory = 16_GiB, .memory_from = memory_source::nominal,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie4_x8_gb_per_s, .compute_capability = 89,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: no public reading found, nominal 12 GiB GDDR6X (NVIDIA RTX 4070 spec page); PCIe 4.0 x16
    {.name = "rtx4070", .label = "NVIDIA GeForce RTX 4070", .memory = 12_GiB, .memory_from = memory_source::nominal,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 89,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: no public reading found, nominal 16 GiB GDDR6X (NVIDIA RTX 4080 spec page); PCIe 4.0 x16
    {.name = "rtx4080", .label = "NVIDIA GeForce RTX 4080", .memory = 16_GiB, .memory_from = memory_source::nominal,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 89,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: deviceQuery "24081 MBytes (25250627584 bytes)", driver 13.0 / runtime 11.8 (others: 24207-24564); PCIe 4.0 x16
    {.name = "rtx4090", .label = "NVIDIA GeForce RTX 4090", .memory = 25250627584_B, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 89,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},

    // --- Workstation: RTX A-series sm_86, RTX 6000 Ada sm_89; PCIe 4.0 x16 (NVIDIA RTX datasheets) ---
    // mem: no public reading found, nominal 16 GiB GDDR6 (NVIDIA RTX A4000 datasheet)
    {.name = "rtx-a4000", .label = "NVIDIA RTX A4000", .memory = 16_GiB, .memory_from = memory_source::nominal,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: no public reading found, nominal 24 GiB GDDR6 (NVIDIA RTX A5000 datasheet)
    {.name = "rtx-a5000", .label = "NVIDIA RTX A5000", .memory = 24_GiB, .memory_from = memory_source::nominal,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: torch total_memory=48676MB (MiB) (public log)
    {.name = "rtx-a6000", .label = "NVIDIA RTX A6000", .memory = 48676_MiB, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: no public reading found, nominal 48 GiB GDDR6 (NVIDIA RTX 6000 Ada Generation datasheet)
    {.name = "rtx6000-ada", .label = "NVIDIA RTX 6000 Ada Generation", .memory = 48_GiB, .memory_from = memory_source::nominal,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 89,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},

    // --- Data-centre PCIe cards ---
    // mem: torch total_memory=14930MB (MiB), smallest of 14930-15109 in public logs (nvidia-smi 15360 MiB, ECC on); PCIe 3.0 x16 (T4 datasheet)
    {.name = "t4", .label = "NVIDIA T4", .memory = 14930_MiB, .memory_from = memory_source::cuda_reported,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 75,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: deviceQuery "22518 MBytes (23612293120 bytes)", driver 12.0 / runtime 11.8 (nvidia-smi 23034 MiB); PCIe 4.0 x16 (L4 datasheet)
    {.name = "l4", .label = "NVIDIA L4", .memory = 23612293120_B, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 89,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: torch total_memory=45589MB (MiB) (public log); PCIe 4.0 x16 (L40S datasheet)
    {.name = "l40s", .label = "NVIDIA L40S", .memory = 45589_MiB, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 89,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: deviceQuery "22516 MBytes (23609475072 bytes)", driver 12.2 / runtime 11.8 (22599 MiB on 12.8); PCIe 4.0 x16 (A10 datasheet)
    {.name = "a10", .label = "NVIDIA A10", .memory = 23609475072_B, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: torch total_memory=22587MB (MiB) (public log; nvidia-smi 23028 MiB); link: PCIe 4.0 x16 as the A10 (AWS G5)
    {.name = "a10g", .label = "NVIDIA A10G", .memory = 22587_MiB, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 86,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},

    // --- Data-centre SXM/OAM parts: host link is their PCIe link, not NVLink / Infinity Fabric ---
    // mem: deviceQuery "16160 MBytes (16945512448 bytes)", SXM2, CUDA 9.0-10.2 (public logs); PCIe 3.0 x16 (V100 datasheet)
    {.name = "v100-16gb", .label = "NVIDIA Tesla V100 16GB", .memory = 16945512448_B, .memory_from = memory_source::cuda_reported,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 70,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: deviceQuery "32510 MBytes (34089730048 bytes)", PCIe/SXM2/SXM3, CUDA 10.2-11.4 (public logs); PCIe 3.0 x16 (V100 datasheet)
    {.name = "v100-32gb", .label = "NVIDIA Tesla V100 32GB", .memory = 34089730048_B, .memory_from = memory_source::cuda_reported,
     .bf16 = false, .fp8 = false, .host_link_gb_per_s = pcie3_x16_gb_per_s, .compute_capability = 70,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: global_mem_size 42296475648 (AdaptiveCpp issue #1258, driver 12.0; 42505273344 on CUDA 11.4); PCIe 4.0 x16 (A100 datasheet)
    {.name = "a100-40gb", .label = "NVIDIA A100 40GB", .memory = 42296475648_B, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 80,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: mixbench "Total global mem: 81049 MB" (MiB), A100 80GB PCIe, driver 12.3 (ekondis/mixbench#47; SXM4 nvidia-smi 81251/81920 MiB)
    {.name = "a100-80gb", .label = "NVIDIA A100 80GB", .memory = 81049_MiB, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 80,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_default},
    // mem: torch total_memory=81082MB (MiB), H100 80GB HBM3 (SXM5), cu118 (81089-81090 on CUDA 12.8); PCIe 5.0 x16 (H100 datasheet)
    {.name = "h100-80gb", .label = "NVIDIA H100 80GB HBM3", .memory = 81082_MiB, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie5_x16_gb_per_s, .compute_capability = 90,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_sm90_plus},
    // mem: torch total_memory=143156MB (MiB) (public vLLM log); PCIe 5.0 x16 (H200 datasheet)
    {.name = "h200", .label = "NVIDIA H200", .memory = 143156_MiB, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie5_x16_gb_per_s, .compute_capability = 90,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_sm90_plus},
    // mem: torch total_memory=182631MB (MiB), smaller of 182631/182642 (public logs); link: Gen5 x16 assumed (Gen5 hosts; not verified)
    {.name = "b200", .label = "NVIDIA B200", .memory = 182631_MiB, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie5_x16_gb_per_s, .compute_capability = 100,
     .vendor = gpu_vendor::nvidia, .cublas_workspace = pytorch_cublas_workspace_sm90_plus},
    // mem: one GCD (PyTorch device) of two, 68702699520 B (Cray ACC "Total GPU memory", gfx90a; KFD size_in_bytes); PCIe 4.0 x16 (AMD MI250X datasheet)
    {.name = "mi250x", .label = "AMD Instinct MI250X", .memory = 68702699520_B, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = false, .host_link_gb_per_s = pcie4_x16_gb_per_s, .compute_capability = 0,
     .vendor = gpu_vendor::amd, .cublas_workspace = pytorch_hipblas_workspace_default},
    // mem: rocm-smi "VRAM Total Memory (B): 205822885888" = totalGlobalMem = torch mem_get_info total (public logs); PCIe 5.0 x16 (AMD MI300X datasheet)
    {.name = "mi300x", .label = "AMD Instinct MI300X", .memory = 205822885888_B, .memory_from = memory_source::cuda_reported,
     .bf16 = true, .fp8 = true, .host_link_gb_per_s = pcie5_x16_gb_per_s, .compute_capability = 0,
     .vendor = gpu_vendor::amd, .cublas_workspace = pytorch_hipblas_workspace_gfx942},
});

namespace detail {

inline constexpr std::size_t gpu_name_capacity = 64;

// Words that do not tell two catalog entries apart: vendor and brand words, form factors,
// memory technology. "NVIDIA GeForce RTX 3090", "Tesla V100-SXM2-16GB" and
// "NVIDIA H100 80GB HBM3" (nvidia-smi / torch device names) reduce to catalog slugs.
inline constexpr std::array<std::string_view, 15> gpu_name_noise{
    "nvidia", "geforce", "tesla", "amd", "instinct", "generation", "pcie",
    "sxm", "sxm2", "sxm3", "sxm4", "sxm5", "hbm2e", "hbm3", "hbm3e"};

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
