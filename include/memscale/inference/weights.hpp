// memscale/inference/weights.hpp: weight storage in the format a checkpoint is served in.
#pragma once

#include <cstdint>

#include "memscale/dtype.hpp"
#include "memscale/graph.hpp"
#include "memscale/inference/spec.hpp"

namespace memscale {
namespace detail {

// bitsandbytes functional.py quantize_4bit (0.41-0.45): codes packed two per byte
// (out = uint8 ((n + 1) // 2, 1)), one fp32 absmax per `blocksize` weights, and the
// 16-entry fp32 code table (get_4bit_type). With compress_statistics the absmax is
// centred (an fp32 offset) and quantized by quantize_blockwise(absmax, blocksize=256):
// uint8 codes, one fp32 absmax per 256, and the 256-entry fp32 dynamic map.
constexpr bytes bnb_4bit_tensor_bytes(std::uint64_t elements, const inference_spec& r) {
  const auto blocks = ceil_div(elements, r.quant_block);
  bytes b = bytes{ceil_div(elements, 2)} + storage(dtype::fp32, 16);
  if (!r.double_quant) return b + storage(dtype::fp32, blocks);
  return b + storage(dtype::int8, blocks) + storage(dtype::fp32, ceil_div(blocks, 256)) + storage(dtype::fp32, 256) +
         storage(dtype::fp32, 1);
}

// bitsandbytes nn/modules.py Int8Params._quantize: int8 CB (out x in) and one fp32
// row scale SCB per output row.
constexpr bytes bnb_int8_tensor_bytes(std::uint64_t rows, std::uint64_t cols) {
  return storage(dtype::int8, checked_mul(rows, cols)) + storage(dtype::fp32, rows);
}

// AutoGPTQ nn_modules/qlinear/qlinear_cuda_old.py QuantLinear.__init__ (bits = 4):
// qweight int32 (in / 32 * bits, out), qzeros int32 (in / group, out / 32 * bits),
// scales fp16 (in / group, out), g_idx int32 (in), bias fp16 (out).
constexpr bytes gptq_tensor_bytes(std::uint64_t out, std::uint64_t in, std::uint64_t group) {
  const auto groups = ceil_div(in, group);
  return bytes{checked_mul(ceil_div(in, 8), out, 4)} + bytes{checked_mul(groups, ceil_div(out, 8), 4)} +
         storage(dtype::fp16, checked_mul(groups, out)) + storage(dtype::fp32, in);
}

// AutoAWQ awq/modules/linear/gemm.py WQLinear_GEMM.__init__ (w_bit = 4, pack_num = 8):
// qweight int32 (in, out / 8), qzeros int32 (in / group, out / 8), scales fp16
// (in / group, out), bias fp16 (out); no g_idx.
constexpr bytes awq_tensor_bytes(std::uint64_t out, std::uint64_t in, std::uint64_t group) {
  const auto groups = ceil_div(in, group);
  return bytes{checked_mul(in, ceil_div(out, 8), 4)} + bytes{checked_mul(groups, ceil_div(out, 8), 4)} +
         storage(dtype::fp16, checked_mul(groups, out));
}

// One quantised weight matrix (out x in), one copy.
constexpr bytes quantized_matrix_bytes(std::uint64_t out, std::uint64_t in, const inference_spec& r) {
  switch (r.weights) {
    case weight_format::bnb_int8: return bnb_int8_tensor_bytes(out, in);
    case weight_format::bnb_nf4:
    case weight_format::bnb_fp4: return bnb_4bit_tensor_bytes(checked_mul(out, in), r);
    case weight_format::gptq_4bit: return gptq_tensor_bytes(out, in, r.group_size);
    case weight_format::awq_4bit: return awq_tensor_bytes(out, in, r.group_size);
    case weight_format::native: break;
  }
  return storage(r.compute, checked_mul(out, in));
}

}  // namespace detail

// Bytes op `index` of `g` stores on the device when served under `r`.
constexpr bytes inference_op_weight_bytes(const graph& g, std::size_t index, const inference_spec& r) {
  const op& o = g.ops[index];
  const bool in_block = index >= g.block_begin && index < g.block_end;
  const bool quantised = is_quantized(r.weights) && in_block && o.kind == op_kind::linear && o.role == param_role::matmul;
  bytes w{};
  if (!o.borrows_weight && o.weight.rows > 0)
    w = quantised ? detail::quantized_matrix_bytes(o.weight.rows, o.weight.cols, r) * o.weight.count
                  : storage(r.compute, o.weight.elements());
  // Quantised layers keep their bias in 16 bits (fp16 for GPTQ and AWQ, the compute dtype for bitsandbytes).
  const dtype bias_type = quantised && (r.weights == weight_format::gptq_4bit || r.weights == weight_format::awq_4bit)
                              ? dtype::fp16
                              : r.compute;
  return w + storage(bias_type, o.bias.elements());
}

// All weights of `g` (embedding, blocks, head) as served under `r`.
constexpr bytes inference_weight_bytes(const graph& g, const inference_spec& r) {
  bytes total{};
  for (std::size_t i = 0; i < g.size; ++i) total += inference_op_weight_bytes(g, i, r) * repeats_of(g, i);
  return total;
}

// Elements of the largest block matmul weight: what a 4-bit or 8-bit kernel
// dequantises at once.
constexpr std::uint64_t largest_block_matmul(const graph& g) {
  std::uint64_t n = 0;
  for (std::size_t i = g.block_begin; i < g.block_end; ++i)
    if (g.ops[i].kind == op_kind::linear && g.ops[i].role == param_role::matmul) n = detail::max(n, g.ops[i].weight.largest());
  return n;
}

// Weight tensors larger than the allocator's small-block limit (for reserved rounding).
constexpr std::uint64_t large_weight_tensors(const graph& g, const inference_spec& r) {
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < g.size; ++i)
    if (storage(r.compute, g.ops[i].weight.largest()) > cuda_small_size)
      n = detail::checked_add(n, detail::checked_mul(repeats_of(g, i), g.ops[i].weight.count));
  return n;
}

}  // namespace memscale
