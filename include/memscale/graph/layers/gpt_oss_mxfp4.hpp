// memscale/graph/layers/gpt_oss_mxfp4.hpp: gpt-oss's MoE without grad over MXFP4 experts, the
// triton_kernels path transformers takes with triton >= 3.4 and the kernels package.
//
// integrations/mxfp4.py@0189b1d0 mlp_forward: the router's logits, triton_kernels' routing, then
// Mxfp4GptOssExperts.forward's two matmul_ogs calls, which read the MXFP4 weights as stored (no
// dequantized copy). Sources of the sizes, triton_kernels as the kernels hub ships it:
// routing.py@04467ccf (sort_tokens), topk.py@02ed6565 (topk_forward), matmul_ogs.py (init_allocation,
// apply_allocation: the weight_scale PrecisionConfig release transformers builds).
#pragma once

#include <cstdint>
#include <initializer_list>

#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/tensor.hpp"
#include "memscale/model.hpp"

namespace memscale::graph_layers {

namespace detail_mxfp4 {

// Graph tensors carry a dtype; triton_kernels' int32 and uint32 index tensors are written at fp32's
// width and its int16 top-k indices at bf16's (the bytes are what the walk reads).
constexpr dtype int32_width = dtype::fp32;
constexpr dtype int16_width = dtype::bf16;

// ExptData.block_ms(): block_m in 16, 32, 64, 128 on CUDA (routing.py@04467ccf block_ms_log2: range(4, 8)).
constexpr std::uint64_t block_m_sizes = 4;
constexpr std::uint64_t smallest_block_m = 16;
// sort_tokens pads token_offs_combined and block_pid_map rows to MEMSET_BLOCK_A = 512 (empty_aligned).
constexpr std::uint64_t memset_block = 512;
// topk_forward's bitmatrix: one bit per expert in 32-bit words, rows padded to BLOCK_M = 32.
constexpr std::uint64_t bits_per_word = 32;
constexpr std::uint64_t topk_block_rows = 32;

// get_max_n_tiles (routing.py@04467ccf): the tiles of the smallest block_m over `gates` routed rows.
constexpr std::uint64_t max_tiles(std::uint64_t experts, std::uint64_t gates) {
  if (gates <= experts) return gates;
  return experts - 1 + memscale::detail::ceil_div(gates - experts + 1, smallest_block_m);
}

// The routing metadata that outlives routing(): ExptData's hist (experts int32), token_offs_combined
// ((block_m_sizes + 1) x pad512(experts + 1) int32) and block_pid_map (block_m_sizes x pad512(max tiles)
// int32), as int32 elements.
constexpr std::uint64_t expt_data_elements(std::uint64_t experts, std::uint64_t gates) {
  using memscale::detail::checked_add;
  using memscale::detail::checked_mul;
  using memscale::detail::round_up;
  return checked_add(checked_add(experts, checked_mul(block_m_sizes + 1, round_up(experts + 1, memset_block))),
                     checked_mul(block_m_sizes, round_up(max_tiles(experts, gates), memset_block)));
}

}  // namespace detail_mxfp4

// mlp_forward over `logits` (the router's [tokens, experts] output, bound until the MLP returns).
// routing(): topk_forward's values [tokens, k] in the logits' dtype, int16 indices and the bitmatrix,
// then sort_tokens' survivors: combined_indx (2 x tokens x k int32, gather and scatter indices are
// views of it), gate_scal (tokens x k) and ExptData. The first matmul_ogs gathers the rows inside the
// kernel and writes [tokens x k, ffn] (the fused swiglu halves 2 x ffn: reduction_n = 2), reading
// gate_up_proj_bias.to(torch.float32), an fp32 copy of the bf16 bias (experts x 2 ffn) made for the
// call. The second allocates its output [tokens, hidden] first, then, with k > 1 and an activation-free
// scatter that cannot be fused (can_use_fused_scatter needs n_expts_act == 1), a scratchpad
// [tokens x k, hidden] in the output dtype that reduce_grouped sums into the output; its bias is an
// fp32 copy too. Split-k is taken as 1: opt_flags_nvidia picks more only when the grid is smaller than
// the SMs, and then its fp32 scratchpad is at most SMs x block_m x block_n x 4 bytes (a few MiB at the
// small decoding batches; not counted).
constexpr tensor gpt_oss_mxfp4_experts_without_grad(const layer_context& ctx, tensor in, tensor logits) {
  using memscale::detail::ceil_div;
  using memscale::detail::checked_mul;
  namespace d = detail_mxfp4;
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const dtype type = in.type;
  const auto gates = checked_mul(ctx.tokens, m.experts_per_token);
  // topk_forward: values, int16 indices, then the transposed bitmatrix.
  const tensor values = ops.elementwise(logits, gates, logits.type);
  const tensor indices = ops.elementwise(logits, gates, d::int16_width);
  const tensor bitmatrix = ops.elementwise(
      logits, checked_mul(ceil_div(m.experts, d::bits_per_word), memscale::detail::round_up(ctx.tokens, d::topk_block_rows)),
      d::int32_width);
  // sort_tokens: combined_indx, gate_scal and the ExptData tensors, read from the top-k outputs.
  const tensor combined = ops.elementwise(indices, checked_mul(gates, 2), d::int32_width);
  const tensor gate_scal = ops.elementwise(values, gates, logits.type);
  const tensor expt_data = ops.elementwise(bitmatrix, d::expt_data_elements(m.experts, gates), d::int32_width);
  ops.reads(values, expt_data);
  ops.reads(indices, expt_data);
  // gate_up: the fp32 bias copy, then the fused-swiglu output.
  const tensor gate_up_bias = ops.elementwise(checked_mul(m.experts, m.ffn, 2), dtype::fp32);
  const tensor intermediate = ops.elementwise(in, checked_mul(gates, m.ffn), type);
  ops.reads(gate_up_bias, intermediate);
  // down: the fp32 bias copy, the output, then the scratchpad the kernel writes before the reduction.
  const tensor down_bias = ops.elementwise(checked_mul(m.experts, m.hidden), dtype::fp32);
  const tensor output = ops.elementwise(checked_mul(ctx.tokens, m.hidden), type);
  const tensor scratch = ops.elementwise(intermediate, checked_mul(gates, m.hidden), type);
  ops.reads(down_bias, scratch);
  ops.reads(output, scratch);
  for (const tensor& bound : {logits, combined, gate_scal, expt_data, in}) ops.reads(bound, scratch);
  return output;
}

}  // namespace memscale::graph_layers
