// Static checks for memscale/gpus.hpp: building this translation unit is the test.
#include "memscale/gpus.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace {

using namespace memscale;
using namespace memscale::literals;

// Every card the catalog promises, by slug.
inline constexpr std::array<std::string_view, 54> required_slugs{
    "gtx1060-6gb", "gtx1070",   "gtx1080",   "gtx1080ti",   "gtx1660ti",      "rtx2060",   "rtx2070",
    "rtx2080",     "rtx2080ti", "rtx3060-12gb", "rtx3070",  "rtx3080-10gb",   "rtx3080-12gb", "rtx3090",
    "rtx3090ti",   "rtx4060ti-16gb", "rtx4070", "rtx4080",  "rtx4090",        "rtx-a4000", "rtx-a5000",
    "rtx-a6000",   "rtx6000-ada", "t4",      "l4",          "l40s",           "a10",       "a10g",
    "v100-16gb",   "v100-32gb", "a100-40gb", "a100-80gb",   "h100-80gb",      "h200",      "b200",
    "mi250x",      "mi300x",
    // the current generation
    "rtx5070",     "rtx5080",   "rtx5090",   "rtx-pro-6000", "l40",           "h20",       "gb200",
    "b300",        "mi325x",    "mi355x",    "m4-24gb",     "m4-pro-48gb",    "m4-max-36gb", "m4-max-128gb",
    "m3-max-128gb", "m2-ultra-192gb", "m3-ultra-512gb"};

consteval bool has_every_required_card() {
  for (const auto slug : required_slugs) {
    const auto gpu = find_gpu(slug);
    if (!gpu || gpu->name != slug) return false;
  }
  return true;
}

consteval bool slugs_are_unique() {
  // Each key once (clang's constant-evaluation step limit counts every pair's work).
  std::array<detail::gpu_name_key, gpu_catalog.size()> keys{};
  for (std::size_t j = 0; j < gpu_catalog.size(); ++j) keys[j] = detail::make_gpu_name_key(gpu_catalog[j].name);
  for (std::size_t i = 0; i < gpu_catalog.size(); ++i) {
    for (std::size_t j = i + 1; j < gpu_catalog.size(); ++j) {
      if (gpu_catalog[i].name == gpu_catalog[j].name) return false;
      // find_gpu ignores '-', so slugs must also differ without it.
      if (detail::slug_matches(gpu_catalog[i].name, keys[j].view())) return false;
    }
  }
  return true;
}

consteval bool slugs_are_lower_case_slugs() {
  for (const auto& gpu : gpu_catalog) {
    if (gpu.name.empty() || gpu.label.empty()) return false;
    for (const char c : gpu.name) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
    }
  }
  return true;
}

// Slug, upper-cased slug and label all resolve to the same entry.
consteval bool names_round_trip() {
  for (const auto& gpu : gpu_catalog) {
    std::array<char, detail::gpu_name_capacity> upper{};
    for (std::size_t i = 0; i < gpu.name.size(); ++i) {
      const char c = gpu.name[i];
      upper[i] = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
    }
    const auto by_upper = find_gpu(std::string_view{upper.data(), gpu.name.size()});
    const auto by_label = find_gpu(gpu.label);
    if (!by_upper || by_upper->name != gpu.name) return false;
    if (!by_label || by_label->name != gpu.name) return false;
  }
  return true;
}

// Maximum resident threads per SM by compute capability (CUDA C++ Programming Guide,
// technical specifications per compute capability).
constexpr std::uint32_t threads_per_sm(std::uint32_t cc) {
  return cc == 75 ? 1024 : (cc == 86 || cc == 89 || cc == 120) ? 1536 : 2048;
}

consteval bool figures_are_plausible() {
  for (const auto& gpu : gpu_catalog) {
    if (gpu.memory < 4_GiB || gpu.memory > 512_GiB) return false;
    if (gpu.fp8 && !gpu.bf16) return false;
    if (gpu.multiprocessors == 0) return false;
    if (gpu.vendor == gpu_vendor::apple) {
      // Unified memory: the GPU's share, the DRAM as the "host link", no CUDA figures.
      if (gpu.memory_from != memory_source::unified_share) return false;
      if (gpu.host_link_gb_per_s < 100.0 || gpu.compute_capability != 0 || gpu.max_threads_per_multiprocessor != 0)
        return false;
      continue;
    }
    if (gpu.memory_from != memory_source::cuda_reported && gpu.memory_from != memory_source::derived) return false;
    const bool pcie = gpu.host_link_gb_per_s >= 15.0 && gpu.host_link_gb_per_s <= 64.0;
    if (!pcie && gpu.host_link_gb_per_s != nvlink_c2c_gb_per_s) return false;
    if (gpu.vendor == gpu_vendor::nvidia) {
      if (gpu.compute_capability < 60) return false;
      if (gpu.bf16 != (gpu.compute_capability >= 80)) return false;
      if (gpu.fp8 != (gpu.compute_capability >= 89)) return false;
      if (gpu.max_threads_per_multiprocessor != threads_per_sm(gpu.compute_capability)) return false;
      const bool big_workspace = gpu.compute_capability >= 90;
      if (gpu.cublas_workspace != (big_workspace ? pytorch_cublas_workspace_sm90_plus : pytorch_cublas_workspace_default)) {
        return false;
      }
    } else if (gpu.compute_capability != 0 || gpu.max_threads_per_multiprocessor != 2048) {
      return false;
    }
  }
  return true;
}

constexpr bool is(std::string_view query, std::string_view slug) {
  const auto gpu = find_gpu(query);
  return gpu.has_value() && gpu->name == slug;
}

}  // namespace

static_assert(gpu_catalog.size() >= 54, "memscale::gpu_catalog: lost an entry; every required card must stay");
static_assert(has_every_required_card(), "memscale::gpu_catalog: a required card is missing or find_gpu cannot find it by slug");
static_assert(slugs_are_unique(), "memscale::gpu_catalog: two slugs collide (also compared without '-')");
static_assert(slugs_are_lower_case_slugs(), "memscale::gpu_catalog: slugs use a-z, 0-9 and '-'; labels are non-empty");
static_assert(names_round_trip(), "memscale::find_gpu: every slug (any case) and label must resolve to its own entry");
static_assert(figures_are_plausible(), "memscale::gpu_catalog: a row breaks the architecture rules (bf16 sm_80+, fp8 sm_89+, workspace sm_90+, threads per SM)");

// Lookups by the names the ground-truth files and nvidia-smi use.
static_assert(is("rtx3090", "rtx3090"));
static_assert(is("RTX3090", "rtx3090"));
static_assert(is("RTX3090-24GB", "rtx3090"), "memscale::find_gpu: a matching trailing size is ignored");
static_assert(is("A100-SXM4-40GB", "a100-40gb"));
static_assert(is("NVIDIA A100-SXM4-80GB", "a100-80gb"));
static_assert(is("NVIDIA A100 80GB PCIe", "a100-80gb"));
static_assert(is("V100-SXM2-16GB", "v100-16gb"));
static_assert(is("Tesla V100-PCIE-32GB", "v100-32gb"));
static_assert(is("Tesla T4", "t4"));
static_assert(is("NVIDIA GeForce RTX 3090", "rtx3090"));
static_assert(is("NVIDIA GeForce RTX 4060 Ti 16GB", "rtx4060ti-16gb"));
static_assert(is("NVIDIA H100 80GB HBM3", "h100-80gb"));
static_assert(is("NVIDIA RTX 6000 Ada Generation", "rtx6000-ada"));
static_assert(is("nvidia_rtx_a6000", "rtx-a6000"));
static_assert(is("AMD Instinct MI300X", "mi300x"));

static_assert(!find_gpu("no-such-gpu").has_value());
static_assert(!find_gpu("").has_value());
static_assert(!find_gpu("nvidia").has_value(), "memscale::find_gpu: noise words alone name no GPU");
static_assert(!find_gpu("A100").has_value(), "memscale::find_gpu: ambiguous (40 GB or 80 GB) must not guess");
static_assert(!find_gpu("RTX 3080").has_value(), "memscale::find_gpu: ambiguous (10 GB or 12 GB) must not guess");
static_assert(!find_gpu("RTX 4060 Ti").has_value(), "memscale::find_gpu: the 8 GB model is not in the catalog");
static_assert(!find_gpu("RTX3090-48GB").has_value(), "memscale::find_gpu: a trailing size must match the memory");
static_assert(!find_gpu("RTX2060-12GB").has_value(), "memscale::find_gpu: the 12 GB RTX 2060 is not the catalog's 6 GB one");
static_assert(!find_gpu("2xA100-SXM4-40GB").has_value(), "memscale::find_gpu: multi-GPU names are not a device");
static_assert(!find_gpu("rtx30900").has_value());
static_assert(!find_gpu("a100-40gbx").has_value());

// Memory: what CUDA reports (deviceQuery totalGlobalMem / torch total_memory), not marketing.
// RTX 3090: deviceQuery "24268 MBytes (25447170048 bytes)" (CUDA 11.8); nvidia-smi shows 24576 MiB.
static_assert(find_gpu("rtx3090")->memory == 25447170048_B);
static_assert(find_gpu("rtx3090")->memory < 24_GiB, "memscale::gpu_catalog: RTX 3090 memory is below the nvidia-smi total");
// A100 80GB: mixbench "Total global mem: 81049 MB" (MiB), driver 12.3 (ekondis/mixbench#47).
static_assert(find_gpu("a100-80gb")->memory == 81049_MiB);
static_assert(find_gpu("a100-80gb")->memory < 80_GiB);
static_assert(find_gpu("a100-40gb")->memory == 42296475648_B);
static_assert(find_gpu("v100-16gb")->memory == 16945512448_B);
static_assert(find_gpu("t4")->memory == 14930_MiB);
static_assert(find_gpu("h100-80gb")->memory == 81082_MiB);
static_assert(find_gpu("mi300x")->memory == 205822885888_B);
static_assert(find_gpu("rtx3090")->memory_from == memory_source::cuda_reported);
// One rule: without a reading, 96 % of the stated capacity, so never the nominal size.
static_assert(find_gpu("rtx3070")->memory_from == memory_source::derived);
static_assert(find_gpu("rtx3070")->memory == 7864_MiB, "memscale::gpu_catalog: 8 GiB x 0.96");
static_assert(find_gpu("rtx3090ti")->memory < 24_GiB, "memscale::gpu_catalog: the RTX 3090 Ti row is what CUDA reports, not 24 GiB");
static_assert(find_gpu("rtx3090ti")->memory == 23592_MiB);
static_assert(find_gpu("l40")->memory == 44236_MiB, "memscale::gpu_catalog: 48 GiB less ECC's 1/16, x 0.96");
// Readings of the current generation.
static_assert(find_gpu("rtx5090")->memory == 33677180928_B);
static_assert(find_gpu("rtx5080")->memory == 16602497024_B);
consteval bool no_row_at_nominal_size() {
  for (const auto& gpu : gpu_catalog) {
    if (gpu.vendor == gpu_vendor::apple) continue;
    for (std::uint64_t gib = 4; gib <= 512; ++gib)
      if (gpu.memory == bytes{gib << 30}) return false;
  }
  return true;
}
static_assert(no_row_at_nominal_size(), "memscale::gpu_catalog: a row holds a nominal size instead of what CUDA reports");

// SMs and threads per SM (the CUDA context grows with them).
static_assert(find_gpu("rtx4090")->multiprocessors == 128 && find_gpu("rtx4090")->max_threads_per_multiprocessor == 1536);
static_assert(find_gpu("rtx5090")->multiprocessors == 170 && find_gpu("rtx5090")->max_threads_per_multiprocessor == 1536);
static_assert(find_gpu("rtx-pro-6000")->multiprocessors == 188);
static_assert(find_gpu("a100-80gb")->multiprocessors == 108 && find_gpu("a100-80gb")->max_threads_per_multiprocessor == 2048);
static_assert(find_gpu("h100-80gb")->multiprocessors == 132);
static_assert(find_gpu("t4")->max_threads_per_multiprocessor == 1024);
static_assert(find_gpu("mi300x")->multiprocessors == 304);

// Apple silicon: the share macOS leaves the GPU (2/3 up to 36 GiB, 3/4 above).
static_assert(apple_gpu_share(24_GiB) == 16_GiB);
static_assert(apple_gpu_share(36_GiB) == 24_GiB);
static_assert(apple_gpu_share(128_GiB) == 96_GiB);
static_assert(find_gpu("m4-max-128gb")->memory == 96_GiB);
static_assert(find_gpu("Apple M4 Max 128GB")->name == "m4-max-128gb");
static_assert(find_gpu("m4-max-128gb")->memory_from == memory_source::unified_share);
static_assert(find_gpu("m4-max-128gb")->vendor == gpu_vendor::apple);

// Device names as torch reports them.
static_assert(is("NVIDIA GeForce RTX 5090", "rtx5090"));
static_assert(is("NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtx-pro-6000"));
static_assert(is("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx-pro-6000"));
static_assert(is("NVIDIA B300 SXM6 AC", "b300"));
static_assert(is("NVIDIA GB200", "gb200"));
static_assert(is("NVIDIA H20", "h20"));
static_assert(is("NVIDIA L40", "l40"));
static_assert(is("AMD Instinct MI355X", "mi355x"));

// bf16: Ampere and newer, CDNA2/3; not Volta, Turing, Pascal.
static_assert(!find_gpu("v100-16gb")->bf16);
static_assert(!find_gpu("v100-32gb")->bf16);
static_assert(!find_gpu("t4")->bf16);
static_assert(!find_gpu("rtx2080")->bf16);
static_assert(!find_gpu("gtx1080ti")->bf16);
static_assert(find_gpu("a100-40gb")->bf16);
static_assert(find_gpu("a100-80gb")->bf16);
static_assert(find_gpu("rtx3090")->bf16);
static_assert(find_gpu("mi250x")->bf16);

// fp8: Ada, Hopper, Blackwell, MI300X.
static_assert(find_gpu("h100-80gb")->fp8);
static_assert(find_gpu("rtx4090")->fp8);
static_assert(find_gpu("l4")->fp8);
static_assert(find_gpu("b200")->fp8);
static_assert(find_gpu("mi300x")->fp8);
static_assert(!find_gpu("a100-80gb")->fp8);
static_assert(!find_gpu("rtx3090")->fp8);
static_assert(!find_gpu("mi250x")->fp8);

// Host link (PCIe per direction) and PyTorch's cuBLAS workspace.
static_assert(find_gpu("rtx4060ti-16gb")->host_link_gb_per_s == pcie4_x8_gb_per_s, "memscale::gpu_catalog: the RTX 4060 Ti is PCIe 4.0 x8");
static_assert(find_gpu("v100-16gb")->host_link_gb_per_s == 15.75);
static_assert(find_gpu("a100-40gb")->host_link_gb_per_s == 31.5);
static_assert(find_gpu("h100-80gb")->host_link_gb_per_s == 63.0);
static_assert(pytorch_cublas_workspace_default == 8_MiB + 128_KiB);
static_assert(pytorch_cublas_workspace_default == bytes{4096 * 1024 * 2 + 16 * 1024 * 8});
static_assert(find_gpu("a100-80gb")->cublas_workspace == 8_MiB + 128_KiB);
static_assert(find_gpu("h100-80gb")->cublas_workspace == 32_MiB);
static_assert(find_gpu("mi300x")->cublas_workspace == 128_MiB);
static_assert(find_gpu("mi250x")->cublas_workspace == 32_MiB);

// custom_gpu and partial designated initialisation.
static_assert(custom_gpu(12_GiB).memory == 12_GiB);
static_assert(custom_gpu(12_GiB).bf16);
static_assert(!custom_gpu(12_GiB, false).bf16);
static_assert(custom_gpu(12_GiB, true, 15.75).host_link_gb_per_s == 15.75);
static_assert(custom_gpu(12_GiB).memory_from == memory_source::user);
static_assert(custom_gpu(12_GiB).cublas_workspace == pytorch_cublas_workspace_default);
inline constexpr gpu_spec partial{.name = "mine", .memory = 20_GiB, .fp8 = true};
static_assert(partial.bf16 && partial.fp8 && partial.vendor == gpu_vendor::nvidia && partial.label.empty());

// custom_gpu(bytes{0}) is not a constant expression (detail::fail); the run-time test checks the throw.
template <bytes Memory>
concept constant_custom_gpu = requires { typename std::integral_constant<bool, custom_gpu(Memory).bf16>; };
static_assert(constant_custom_gpu<1_GiB>);
static_assert(!constant_custom_gpu<bytes{0}>, "memscale::custom_gpu: zero memory must not be a constant expression");
