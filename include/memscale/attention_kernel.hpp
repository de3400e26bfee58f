// memscale/attention_kernel.hpp: which kernel F.scaled_dot_product_attention runs.
//
// SDPA picks a kernel at run time from the call it gets: its device, dtype, mask,
// dropout, head size and whether k and v have fewer heads than q (enable_gqa). What the
// step keeps follows from the kernel: the fused ones (flash, memory-efficient, cuDNN) keep
// q, k, v, the output and a per-row log-sum-exp; the math kernel keeps the B x H x S^2
// probabilities (and their dropout mask), as eager attention does.
//
// The rules are PyTorch's selection filters at each release:
//   CUDA: aten/src/ATen/native/transformers/cuda/sdp_utils.cpp select_sdp_backend (order
//   flash, mem-efficient, math; cuDNN, where preferred, saves what flash saves);
//   CPU: aten/src/ATen/native/transformers/sdp_utils_cpp.cpp select_sdp_backend_cpp
//   (flash, then math).
#pragma once

#include <cstdint>
#include <string_view>

#include "memscale/dtype.hpp"
#include "memscale/model.hpp"
#include "memscale/precision_policy.hpp"
#include "memscale/training.hpp"

namespace memscale {

// math: softmax(QK^T)V written out (eager code or SDPA's math kernel); flash and
// mem_efficient: fused kernels that keep no S x S tensor.
enum class attention_kernel : std::uint8_t { math, flash, mem_efficient };

constexpr std::string_view to_string(attention_kernel k) noexcept {
  switch (k) {
    case attention_kernel::math: return "math";
    case attention_kernel::flash: return "flash";
    case attention_kernel::mem_efficient: return "mem_efficient";
  }
  return "math";
}

constexpr bool is_fused(attention_kernel k) noexcept { return k != attention_kernel::math; }

// One SDPA call as the dispatcher sees it.
struct sdpa_call {
  device_kind device = device_kind::cuda;
  dtype type = dtype::fp32;             // q, k and v
  bool has_mask = false;                // an explicit attn_mask (padding, an ALiBi bias), not is_causal
  bool dropout = false;                 // dropout_p > 0 (training with attention dropout)
  std::uint64_t head_dim = 64;
  std::uint32_t torch_version = 205;    // major * 100 + minor
  bool gqa = false;                     // enable_gqa: k and v have fewer heads than q
};

namespace detail {

constexpr bool sixteen_bit(dtype t) { return t == dtype::fp16 || t == dtype::bf16; }

// CUDA flash (cuda/sdp_utils.cpp can_use_flash_attention): check_dtypes_flash_attention
// takes fp16/bf16 only; check_for_attn_mask refuses any mask; check_head_dim_size_flash
// takes head_dim <= 256 from FlashAttention-2 (torch 2.2), <= 128 in 2.0/2.1 (FlashAttention
// 1, check_head_dim_size); a multiple of 8 (sdp_utils.h @ v2.0.0 check_head_dim_size; later
// releases pad to it and copy). enable_gqa exists from torch 2.5 and flash accepts it
// (check_batch_size_and_num_heads_dense<supports_gqa = true>).
constexpr bool cuda_flash_runs(const sdpa_call& c) {
  const std::uint64_t max_head_dim = c.torch_version >= 202 ? 256 : 128;
  return sixteen_bit(c.type) && !c.has_mask && c.head_dim <= max_head_dim && c.head_dim % 8 == 0;
}

// CUDA memory-efficient (can_use_mem_efficient_attention): fp32, fp16 and bf16 on sm80+;
// head_dim a multiple of minimum_gemm_alignment (8 for 16-bit, 4 for fp32);
// arbitrary masks and dropout from torch 2.1 (2.0's sdp_utils.h has check_for_attn_mask
// and check_for_non_zero_dropout in its filter list). It refused enable_gqa on torch 2.11
// (measured on an H100: docs/research/gpu/sdpa_backends_h100.json).
constexpr bool cuda_mem_efficient_runs(const sdpa_call& c) {
  const bool dtype_ok = c.type == dtype::fp32 || sixteen_bit(c.type);
  const std::uint64_t alignment = sixteen_bit(c.type) ? 8 : 4;
  const bool version_ok = c.torch_version >= 201 || (!c.has_mask && !c.dropout);
  return dtype_ok && c.head_dim % alignment == 0 && version_ok && !c.gqa;
}

// CPU flash (sdp_utils_cpp.cpp use_flash_attention_cpp) exists from torch 2.2: fp32, fp64
// and bf16 (fp16 from 2.3); check_for_dropout refuses dropout_p > 0 in every release;
// masks pass from 2.3 (check_attn_mask_shape replaced 2.2's check_for_attn_mask); GQA
// from 2.5 (check_batch_size_and_num_heads_dense<supports_gqa = true>). Any head_dim.
constexpr bool cpu_flash_runs(const sdpa_call& c) {
  if (c.torch_version < 202 || c.dropout) return false;
  const bool dtype_ok = c.type == dtype::fp32 || c.type == dtype::bf16 || (c.type == dtype::fp16 && c.torch_version >= 203);
  return dtype_ok && (!c.has_mask || c.torch_version >= 203) && (!c.gqa || c.torch_version >= 205);
}

}  // namespace detail

// The kernel SDPA runs for `c`. Before torch 2.0 there is no SDPA: the math path.
constexpr attention_kernel sdpa_kernel(const sdpa_call& c) {
  if (c.torch_version < 200) return attention_kernel::math;
  if (c.device == device_kind::cpu) return detail::cpu_flash_runs(c) ? attention_kernel::flash : attention_kernel::math;
  if (detail::cuda_flash_runs(c)) return attention_kernel::flash;
  if (detail::cuda_mem_efficient_runs(c)) return attention_kernel::mem_efficient;
  return attention_kernel::math;
}

// Hugging Face passes k and v at their kv-head size with enable_gqa from transformers 5.0
// when there is no mask (integrations/sdpa_attention.py use_gqa_in_sdpa, v5.17.0); before,
// repeat_kv expands them to every head first. lit-gpt expands them itself.
// A padding-free row or a padded batch brings a mask (padded_row_mask below): repeat_kv as before.
constexpr bool sdpa_gets_grouped_kv(const model_spec& m, const training_spec& t) {
  return kv_heads_of(m) != m.heads && m.impl == implementation::hf_transformers && t.transformers_version >= 500 &&
         t.packing != batch_packing::padding_free && !t.padded;
}

// Dropout on the attention probabilities is active in this step (model.train() and p > 0).
constexpr bool attention_dropout_active(const model_spec& m, const training_spec& t) {
  return t.dropout && m.dropout && m.attention_dropout;
}

// A mask the attention is handed besides the causal pattern, under SDPA or eager attention:
// a padding-free row's (1, 1, tokens, tokens) block-diagonal mask from the restarting
// position_ids (masking_utils.py@00c4411c find_packed_sequence_indices), or a padded batch's
// (batch, 1, rows, keys) mask of its attention_mask's zeros; sdpa_mask makes it bool, eager_mask a
// torch.where copy in the embeddings' dtype. flash_attention_2 takes the boundaries as varlen
// offsets instead (attention.hpp attention_path_of).
constexpr bool padded_row_mask(const training_spec& t) {
  return (t.packing == batch_packing::padding_free || t.padded) && t.attention != attention_impl::flash;
}

// The mask SDPA is handed is bool (sdpa_mask, from transformers 5.0): a padding-free row's always
// (modelled from 5.0 only). Before 5.0, LlamaModel._update_causal_mask hands a padded batch's mask
// as an additive copy in the model's dtype (modeling_llama.py@v4.45.0
// _prepare_4d_causal_attention_mask_with_cache_position); the 4.53-4.57 releases that already use
// masking_utils are not told apart here.
constexpr bool bool_attention_mask(const training_spec& t) {
  return t.packing == batch_packing::padding_free || t.transformers_version >= 500;
}

// The SDPA call one attention layer of `m` makes under `t`. An ALiBi bias goes in as
// attn_mask (modeling_falcon.py FalconAttention.forward, v4.51), and so does a padding-free row's mask.
constexpr sdpa_call sdpa_call_of(const model_spec& m, const training_spec& t) {
  return sdpa_call{.device = t.device,
                   .type = precision_policy_of(t).matmul,
                   .has_mask = m.alibi || padded_row_mask(t),
                   .dropout = attention_dropout_active(m, t),
                   .head_dim = head_dim_of(m),
                   .torch_version = t.torch_version,
                   .gqa = sdpa_gets_grouped_kv(m, t)};
}

// The attention kernel a training step of `m` runs under `t`: eager and sdpa_math write
// the scores out; flash is a fused kernel as requested (Hugging Face's flash_attention_2
// casts fp32 inputs to 16 bits); sdpa lets PyTorch choose.
// T5Attention has no SDPA path (modeling_t5.py @ 6b8b757d): an encoder-decoder is eager.
// Attention sinks have no SDPA path: gpt-oss sets `_supports_sdpa = False`
// (modeling_gpt_oss.py@00d4b3d2 GptOssPreTrainedModel), so an sdpa request runs eager.
constexpr attention_kernel attention_kernel_of(const model_spec& m, const training_spec& t) {
  if (m.arch == architecture::encoder_decoder) return attention_kernel::math;
  if (m.attention_sinks && t.attention == attention_impl::sdpa) return attention_kernel::math;
  switch (t.attention) {
    case attention_impl::eager:
    case attention_impl::sdpa_math: return attention_kernel::math;
    case attention_impl::flash: return attention_kernel::flash;
    case attention_impl::sdpa: return sdpa_kernel(sdpa_call_of(m, t));
  }
  return attention_kernel::math;
}

// The run with `sdpa` replaced by the implementation that builds the same graph: flash
// for a fused kernel, sdpa_math for the math kernel (for estimators that see only the run).
constexpr training_spec with_resolved_attention(const model_spec& m, training_spec t) {
  if (t.attention == attention_impl::sdpa)
    t.attention = is_fused(attention_kernel_of(m, t)) ? attention_impl::flash : attention_impl::sdpa_math;
  return t;
}

}  // namespace memscale
