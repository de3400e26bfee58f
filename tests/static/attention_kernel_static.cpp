// Static checks for memscale/attention_kernel.hpp: which kernel SDPA runs, per PyTorch's
// selection filters (cuda/sdp_utils.cpp, sdp_utils_cpp.cpp) at each release.
#include "memscale/attention_kernel.hpp"
#include "memscale/presets.hpp"

namespace {

using namespace memscale;

constexpr sdpa_call cuda_bf16{.device = device_kind::cuda, .type = dtype::bf16, .head_dim = 128, .torch_version = 205};
constexpr sdpa_call cuda_fp32{.device = device_kind::cuda, .type = dtype::fp32, .head_dim = 64, .torch_version = 205};
constexpr sdpa_call cpu_fp32{.device = device_kind::cpu, .type = dtype::fp32, .head_dim = 64, .torch_version = 205};

constexpr sdpa_call with(sdpa_call c, bool mask, bool dropout, bool gqa) {
  c.has_mask = mask;
  c.dropout = dropout;
  c.gqa = gqa;
  return c;
}
constexpr sdpa_call at(sdpa_call c, std::uint32_t torch, std::uint64_t head_dim) {
  c.torch_version = torch;
  c.head_dim = head_dim;
  return c;
}

}  // namespace

// CUDA: flash for 16-bit inputs without a mask; memory-efficient takes fp32, masks and
// odd head sizes; math for what neither takes.
static_assert(sdpa_kernel(cuda_bf16) == attention_kernel::flash);
static_assert(sdpa_kernel(with(cuda_bf16, false, true, false)) == attention_kernel::flash, "flash runs dropout itself");
static_assert(sdpa_kernel(with(cuda_bf16, false, false, true)) == attention_kernel::flash, "flash takes enable_gqa");
static_assert(sdpa_kernel(with(cuda_bf16, true, false, false)) == attention_kernel::mem_efficient,
              "an explicit mask rules flash out; memory-efficient takes it from torch 2.1");
static_assert(sdpa_kernel(at(with(cuda_bf16, true, false, false), 200, 128)) == attention_kernel::math,
              "torch 2.0's memory-efficient kernel refused masks");
static_assert(sdpa_kernel(at(with(cuda_bf16, false, true, false), 200, 128)) == attention_kernel::flash);
static_assert(sdpa_kernel(at(cuda_bf16, 205, 256)) == attention_kernel::flash, "FlashAttention-2: head_dim <= 256");
static_assert(sdpa_kernel(at(cuda_bf16, 201, 256)) == attention_kernel::mem_efficient, "FlashAttention-1: <= 128");
static_assert(sdpa_kernel(at(cuda_bf16, 205, 512)) == attention_kernel::mem_efficient);
static_assert(sdpa_kernel(at(cuda_bf16, 205, 100)) == attention_kernel::math, "16-bit kernels need head_dim % 8 == 0");
static_assert(sdpa_kernel(cuda_fp32) == attention_kernel::mem_efficient, "flash needs fp16/bf16");
static_assert(sdpa_kernel(with(cuda_fp32, true, true, false)) == attention_kernel::mem_efficient);
static_assert(sdpa_kernel(with(cuda_fp32, false, false, true)) == attention_kernel::math,
              "fp32 with enable_gqa: neither fused kernel (measured on an H100, torch 2.11)");
static_assert(sdpa_kernel(at(cuda_fp32, 205, 100)) == attention_kernel::mem_efficient, "fp32 needs head_dim % 4 only");
static_assert(sdpa_kernel(at(cuda_fp32, 113, 64)) == attention_kernel::math, "no SDPA before torch 2.0");

// CPU: flash from torch 2.2, never with dropout; masks from 2.3, GQA from 2.5.
static_assert(sdpa_kernel(at(cpu_fp32, 201, 64)) == attention_kernel::math, "no CPU flash kernel before torch 2.2");
static_assert(sdpa_kernel(at(cpu_fp32, 202, 64)) == attention_kernel::flash);
static_assert(sdpa_kernel(with(cpu_fp32, false, true, false)) == attention_kernel::math, "CPU flash refuses dropout");
static_assert(sdpa_kernel(at(with(cpu_fp32, true, false, false), 202, 64)) == attention_kernel::math);
static_assert(sdpa_kernel(at(with(cpu_fp32, true, false, false), 203, 64)) == attention_kernel::flash);
static_assert(sdpa_kernel(at(with(cpu_fp32, false, false, true), 204, 64)) == attention_kernel::math);
static_assert(sdpa_kernel(with(cpu_fp32, false, false, true)) == attention_kernel::flash);

// A run's call: its device, matmul dtype, head size, release and the model's dropout.
namespace {
constexpr training_spec cpu_training{.micro_batch = 2, .seq_len = 128, .prec = precision::fp32,
                                     .attention = attention_impl::sdpa, .device = device_kind::cpu, .torch_version = 205};
constexpr training_spec cpu_eval = [] {
  training_spec t = cpu_training;
  t.dropout = false;
  return t;
}();
}  // namespace
static_assert(attention_kernel_of(presets::gpt2, cpu_training) == attention_kernel::math,
              "GPT-2 trains with attn_pdrop 0.1: the CPU flash kernel refuses dropout");
static_assert(attention_kernel_of(presets::gpt2, cpu_eval) == attention_kernel::flash);
static_assert(attention_kernel_of(presets::t5_small, cpu_eval) == attention_kernel::math, "T5 has no SDPA path");
static_assert(with_resolved_attention(presets::gpt2, cpu_training).attention == attention_impl::sdpa_math);
static_assert(with_resolved_attention(presets::gpt2, cpu_eval).attention == attention_impl::flash);
