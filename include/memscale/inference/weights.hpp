// memscale/inference/weights.hpp: weight storage in the format a checkpoint is served in.
#pragma once

#include <cstddef>
#include <cstdint>

#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/inference/gpt_fast_weights.hpp"
#include "memscale/inference/spec.hpp"
#include "memscale/quant_format.hpp"

namespace memscale {
namespace detail {

// The stored format of a quantised weight served under `r` (memscale/quant_format.hpp
// describes every format once; GPTQ and AWQ here are 4-bit).
constexpr quant_format quant_format_of(const inference_spec& r) {
  switch (r.weights) {
    case weight_format::bnb_int8: return {.method = quant_method::bnb_int8};
    case weight_format::bnb_nf4:
    case weight_format::bnb_fp4:
      return {.method = quant_method::bnb_4bit, .bnb_block = r.quant_block, .double_quant = r.double_quant};
    case weight_format::gptq_4bit: return {.method = quant_method::gptq, .bits = 4, .group_size = r.group_size};
    case weight_format::awq_4bit: return {.method = quant_method::awq, .bits = 4, .group_size = r.group_size};
    case weight_format::mxfp4: return {.method = quant_method::mxfp4};
    case weight_format::fp8_block:
      return {.method = quant_method::fp8_block, .block_out = r.quant_scheme.block_out, .block_in = r.quant_scheme.block_in};
    case weight_format::ct_float:
    case weight_format::ct_int: {
      quant_format f = r.quant_scheme;
      f.method = r.weights == weight_format::ct_float ? quant_method::ct_float : quant_method::ct_int;
      f.scale_type = r.compute;  // initialize.py: the scales take the loaded weight's dtype
      return f;
    }
    case weight_format::native:
    case weight_format::gptfast_int8:  // gpt-fast's own layers: gpt_fast_weights.hpp
    case weight_format::gptfast_int4: break;
  }
  return {};
}

// One quantised weight matrix (out x in), one copy; a compressed-tensors layer as it is from its
// first forward on (decompressed_linear_bytes): what generate() holds in all but the prefill's
// first layers.
constexpr bytes quantized_matrix_bytes(std::uint64_t out, std::uint64_t in, const inference_spec& r) {
  if (!is_quantized(r.weights)) return storage(r.compute, checked_mul(out, in));
  if (is_gpt_fast_weights(r.weights)) return gpt_fast_linear_bytes(out, in, r);
  const quant_format f = quant_format_of(r);
  if (dense_copy_kept(f.method)) return decompressed_linear_bytes(f, out, in, r.compute);
  return quantized_linear_bytes(f, out, in);
}

// Whether op `index` of `g` is one of the 3-D experts MXFP4 stores (the block matmuls over more than
// one copy of a weight): attention, router, embeddings and head stay in the compute dtype.
constexpr bool mxfp4_experts_op(const graph& g, std::size_t index, const inference_spec& r) {
  const op& o = g.ops[index];
  return r.weights == weight_format::mxfp4 && index >= g.block_begin && index < g.block_end &&
         o.kind == op_kind::linear && o.role == param_role::matmul && o.weight.count > 1;
}

// Whether the served format quantises the experts `g` holds as bare nn.Parameters
// (graph::parameter_experts); formats and layouts whose load is broken are refused before
// (generate_peak.hpp check_inference: GPTQ, AWQ, FP8 and compressed-tensors where no loader
// fills the parameters, 4.x-saved bitsandbytes checkpoints of 5.x's merged experts).
// - bitsandbytes replaces nn.Linear modules only and leaves them in the load dtype (bitsandbytes
//   issue #1849; graph/layers/mlp.hpp with_unquantized_experts), except Llama 4's from a
//   pre-quantised checkpoint, whose quantizer swaps in per-expert nn.Linear MLPs first
//   (graph::experts_swapped_for_prequantized).
// - compressed-tensors quantises Llama 4's swapped experts too. The experts interface's 3-D
//   parameters take the checkpoint's per-expert tensors decompressed: DecompressExperts
//   (integrations/compressed_tensors.py@039570ae) dequantises each expert before the merge, so
//   they are held in the compute dtype.
// - fine-grained FP8 replaces the experts interface's parameters with FP8Expert's float8 3-D
//   weights and fp32 block scales (integrations/finegrained_fp8.py@0095b976, transformers PR
//   #42654): per expert, the bytes of an FP8Linear of that matrix.
// - MXFP4 stores gpt-oss's 3-D experts itself (mxfp4_experts_op).
constexpr bool expert_parameters_quantized(const graph& g, const inference_spec& r) {
  if (is_bitsandbytes(r.weights)) return r.prequantized && g.experts_swapped_for_prequantized;
  if (r.weights == weight_format::ct_float || r.weights == weight_format::ct_int) return g.experts_swapped_for_prequantized;
  return true;
}

}  // namespace detail

// Bytes op `index` of `g` stores on the device when served under `r`.
constexpr bytes inference_op_weight_bytes(const graph& g, std::size_t index, const inference_spec& r) {
  const op& o = g.ops[index];
  if (detail::gpt_fast_quantized_op(o, r))  // the head too (gpt_fast_weights.hpp)
    return detail::gpt_fast_linear_bytes(o.weight.rows, o.weight.cols, r) * o.weight.count +
           storage(r.compute, o.bias.elements());
  const bool in_block = index >= g.block_begin && index < g.block_end;
  // Experts held as bare nn.Parameters the format leaves in the load dtype.
  const bool unconverted_experts =
      g.parameter_experts && o.weight.count > 1 && !detail::expert_parameters_quantized(g, r);
  // A linear the checkpoint keeps in 16 bits (modules_to_not_convert) is stored as any other weight.
  const bool block_matmul = in_block && o.kind == op_kind::linear && o.role == param_role::matmul &&
                            !o.unquantized_base && !unconverted_experts;
  // MXFP4 stores the 3-D experts alone; its Mxfp4GptOssExperts biases are loaded as the checkpoint
  // stores them (bf16, the compute dtype).
  const bool quantised = r.weights == weight_format::mxfp4 ? detail::mxfp4_experts_op(g, index, r) && !o.unquantized_base
                                                           : is_quantized(r.weights) && !detail::is_gpt_fast_weights(r.weights) &&
                                                                 block_matmul;
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

// Input columns of the widest block matmul: the largest input a layer quantises per row.
constexpr std::uint64_t widest_block_matmul_input(const graph& g) {
  std::uint64_t n = 0;
  for (std::size_t i = g.block_begin; i < g.block_end; ++i)
    if (g.ops[i].kind == op_kind::linear && g.ops[i].role == param_role::matmul) n = detail::max(n, g.ops[i].weight.cols);
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
