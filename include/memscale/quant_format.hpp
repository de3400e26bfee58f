// memscale/quant_format.hpp: how a quantised checkpoint stores one linear layer's weight,
// and the weight copies the kernels that run it materialise.
//
// One description per format, used by the inference estimate (inference/weights.hpp), the
// quantization_config reader (json/hf/quantization.hpp) and the tests that compare it with
// safetensors headers. Every format stores the (out x in) weight as packed codes plus
// scales (and zero points, a column permutation) in the tensors listed at each function.
// Field order is part of the API: designated initialisers must follow it.
#pragma once

#include <cstdint>
#include <string_view>

#include "memscale/bytes.hpp"
#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/error.hpp"

namespace memscale {

// gptq, awq: integer codes packed into int32, fp16 scales per group of input columns.
// bnb_int8 / bnb_4bit: bitsandbytes LLM.int8 and NF4/FP4 (Linear8bitLt, Linear4bit).
// fp8_block: transformers' fine-grained FP8 (DeepSeek-V3 style, weight_block_size).
// ct_float / ct_int: compressed-tensors float-quantized (fp8) and pack-quantized /
// naive-quantized (int) formats. mxfp4: OCP microscaling FP4 (gpt-oss experts).
enum class quant_method : std::uint8_t { none, gptq, awq, bnb_int8, bnb_4bit, fp8_block, ct_float, ct_int, mxfp4 };

// Which weights share one scale: the whole tensor, an output row, a group of input
// columns within a row, or a (block_out x block_in) tile.
enum class scale_granularity : std::uint8_t { tensor, channel, group, block };

struct quant_format {
  quant_method method = quant_method::none;
  std::uint64_t bits = 4;          // code width: gptq 2, 3, 4, 8; awq 4; ct_int 4 or 8
  std::uint64_t group_size = 128;  // input columns per scale (gptq, awq, ct_int group); 0: the whole row (-1)
  bool zero_points = true;         // stored zero points: gptq always, awq zero_point, ct asymmetric
  bool g_idx = true;               // a column-to-group index: gptq always, ct actorder "group"
  std::uint64_t bnb_block = 64;    // bitsandbytes 4-bit blocksize (Params4bit default 64)
  bool double_quant = false;       // bnb_4bit_use_double_quant (compress_statistics)
  scale_granularity scales = scale_granularity::group;  // ct formats
  std::uint64_t block_out = 128;   // fp8_block / ct block: weight_block_size[0]
  std::uint64_t block_in = 128;    // weight_block_size[1]
  dtype scale_type = dtype::fp16;  // ct scales: the model's dtype (initialize.py observed_dtype)
  bool input_scale = false;        // ct static activation quantisation: one stored input_scale per layer
  bool quantized_inputs = false;   // ct input_activations (static or dynamic): inputs fake-quantised every call
};

constexpr bool is_quantized(quant_method m) { return m != quant_method::none; }

constexpr std::string_view to_string(quant_method m) noexcept {
  switch (m) {
    case quant_method::none: return "none";
    case quant_method::gptq: return "gptq";
    case quant_method::awq: return "awq";
    case quant_method::bnb_int8: return "bitsandbytes-8bit";
    case quant_method::bnb_4bit: return "bitsandbytes-4bit";
    case quant_method::fp8_block: return "fp8";
    case quant_method::ct_float: return "compressed-tensors-float";
    case quant_method::ct_int: return "compressed-tensors-int";
    case quant_method::mxfp4: return "mxfp4";
  }
  return "none";
}

namespace detail {

inline constexpr quantity quant_quantity{"quantised weight storage"};

// int32 words holding `count` codes of `bits` bits (32 // bits codes a word for 2, 4, 8
// bits; 3-bit codes run across words, 32 codes in 3 words).
constexpr std::uint64_t packed_int32_words(std::uint64_t count, std::uint64_t bits) {
  return ceil_div(checked_mul(count, bits, quant_quantity), 32);
}

constexpr std::uint64_t groups_of(std::uint64_t in, std::uint64_t group_size) {
  return group_size == 0 ? 1 : ceil_div(in, group_size);
}

// AutoGPTQ nn_modules/qlinear/qlinear_cuda_old.py @ c80855e2, QuantLinear.__init__:
// qweight int32 (in // 32 * bits, out), qzeros int32 (ceil(in / group), out // 32 * bits),
// scales fp16 (ceil(in / group), out), g_idx int32 (in); group_size -1: one group.
constexpr bytes gptq_linear_bytes(std::uint64_t out, std::uint64_t in, const quant_format& f) {
  const auto groups = groups_of(in, f.group_size);
  return bytes{checked_mul(packed_int32_words(in, f.bits), out, 4, quant_quantity)} +
         bytes{checked_mul(groups, packed_int32_words(out, f.bits), 4, quant_quantity)} +
         storage(dtype::fp16, checked_mul(groups, out, quant_quantity)) + bytes{checked_mul(in, 4, quant_quantity)};
}

// AutoAWQ awq/modules/linear/gemm.py @ d9dc8e56, WQLinear_GEMM.__init__ (w_bit 4 only):
// qweight int32 (in, out / 8), qzeros int32 (in / group, out / 8), scales fp16
// (in / group, out); no g_idx. zero_point=false still stores qzeros (the GEMM kernel reads them).
constexpr bytes awq_linear_bytes(std::uint64_t out, std::uint64_t in, const quant_format& f) {
  const auto groups = groups_of(in, f.group_size);
  return bytes{checked_mul(in, packed_int32_words(out, 4), 4, quant_quantity)} +
         bytes{checked_mul(groups, packed_int32_words(out, 4), 4, quant_quantity)} +
         storage(dtype::fp16, checked_mul(groups, out, quant_quantity));
}

// bitsandbytes functional.py quantize_4bit and QuantState.as_dict (@ 95f9af30): codes
// packed two per byte (uint8 ((n + 1) // 2, 1)), one fp32 absmax per block and the
// 16-entry fp32 quant_map. Double quantisation stores absmax as uint8 codes of
// quantize_blockwise(absmax, blocksize=256): nested_absmax fp32 per 256 blocks, the
// 256-entry fp32 nested_quant_map, and the fp32 offset (a tensor on the device, a number
// inside the file's quant_state.bitsandbytes__* blob).
constexpr bytes bnb_4bit_bytes(std::uint64_t elements, const quant_format& f) {
  const auto blocks = ceil_div(elements, f.bnb_block);
  bytes b = bytes{ceil_div(elements, 2)} + storage(dtype::fp32, 16);
  if (!f.double_quant) return b + storage(dtype::fp32, blocks);
  return b + storage(dtype::int8, blocks) + storage(dtype::fp32, ceil_div(blocks, 256)) + storage(dtype::fp32, 256) +
         storage(dtype::fp32, 1);
}

// bitsandbytes nn/modules.py Int8Params._quantize (@ 95f9af30): int8 CB (out x in) and
// one fp32 row scale SCB per output row (the file adds a one-byte weight_format).
constexpr bytes bnb_int8_bytes(std::uint64_t out, std::uint64_t in) {
  return storage(dtype::int8, checked_mul(out, in, quant_quantity)) + storage(dtype::fp32, out);
}

// transformers integrations/finegrained_fp8.py @ 3c48befb, FP8Linear.__init__: weight
// float8_e4m3fn (out, in), weight_scale_inv fp32 (ceil(out / b0), ceil(in / b1)).
constexpr bytes fp8_block_bytes(std::uint64_t out, std::uint64_t in, const quant_format& f) {
  return storage(dtype::fp8_e4m3, checked_mul(out, in, quant_quantity)) +
         storage(dtype::fp32, checked_mul(ceil_div(out, f.block_out), ceil_div(in, f.block_in), quant_quantity));
}

// Scales of a compressed-tensors weight (quantization/lifecycle/initialize.py @ 9ead292f,
// initialize_qparams): tensor (1,), channel (out, 1), group (out, ceil(in / group)),
// block (ceil(out / b0), ceil(in / b1)).
constexpr std::uint64_t ct_scale_count(std::uint64_t out, std::uint64_t in, const quant_format& f) {
  switch (f.scales) {
    case scale_granularity::tensor: return 1;
    case scale_granularity::channel: return out;
    case scale_granularity::group: return checked_mul(out, groups_of(in, f.group_size), quant_quantity);
    case scale_granularity::block:
      return checked_mul(ceil_div(out, f.block_out), ceil_div(in, f.block_in), quant_quantity);
  }
  return out;
}

// compressed-tensors float-quantized: weight float8_e4m3 (out, in), weight_scale in the
// model dtype, a zero point per scale (fp8) only when asymmetric, input_scale (1,) with
// static activations (compressors/quantized_compressors/base.py keeps the qparams).
constexpr bytes ct_float_bytes(std::uint64_t out, std::uint64_t in, const quant_format& f) {
  const auto scales = ct_scale_count(out, in, f);
  return storage(dtype::fp8_e4m3, checked_mul(out, in, quant_quantity)) + storage(f.scale_type, scales) +
         (f.zero_points ? storage(dtype::fp8_e4m3, scales) : bytes{}) +
         (f.input_scale ? storage(f.scale_type, 1) : bytes{});
}

// compressed-tensors pack-quantized (compressors/quantized_compressors/pack_quantized.py
// @ 0199c6e7, compression_param_info): weight_packed int32 (out, ceil(in / (32 // bits))),
// weight_shape int32 (2), weight_scale (model dtype), weight_zero_point int32
// (ceil(out / (32 // bits)), groups) when asymmetric, weight_g_idx int32 (in) with
// actorder "group". naive-quantized 8-bit stores int8 (out, in): the same bytes as 8-bit packing.
constexpr bytes ct_int_bytes(std::uint64_t out, std::uint64_t in, const quant_format& f) {
  const auto per_word = 32 / f.bits;
  const auto scales = ct_scale_count(out, in, f);
  const auto zero_columns = f.scales == scale_granularity::group ? groups_of(in, f.group_size) : 1;
  bytes b = bytes{checked_mul(out, ceil_div(in, per_word), 4, quant_quantity)} + bytes{8} + storage(f.scale_type, scales);
  const bool zero_stored = f.zero_points && (f.scales == scale_granularity::group || f.scales == scale_granularity::channel);
  if (zero_stored) b += bytes{checked_mul(ceil_div(out, per_word), zero_columns, 4, quant_quantity)};
  if (f.g_idx) b += bytes{checked_mul(in, 4, quant_quantity)};
  if (f.input_scale) b += storage(f.scale_type, 1);
  return b;
}

// transformers integrations/mxfp4.py @ 93a1c400, Mxfp4GptOssExperts: blocks uint8
// (out, in / 32, 16), two FP4 codes a byte, and scales uint8 (out, in / 32), one E8M0
// exponent per 32 weights (OCP MX v1.0): 4.25 bits a weight.
constexpr bytes mxfp4_scale_bytes(std::uint64_t out, std::uint64_t in) {
  return bytes{checked_mul(out, ceil_div(in, 32), quant_quantity)};
}

constexpr bytes mxfp4_bytes(std::uint64_t out, std::uint64_t in) {
  const bytes scales = mxfp4_scale_bytes(out, in);
  return bytes{checked_mul(scales.value, 16, quant_quantity)} + scales;
}

constexpr void check_format(const quant_format& f) {
  using detail::require;
  constexpr auto bad = error_code::invalid_model;
  if (f.method == quant_method::gptq)
    require(f.bits == 2 || f.bits == 3 || f.bits == 4 || f.bits == 8, bad, "quantization_config.bits",
            "must be 2, 3, 4 or 8 for GPTQ", f.bits);
  if (f.method == quant_method::awq) require(f.bits == 4, bad, "quant_format.bits", "must be 4 for AWQ", f.bits);
  if (f.method == quant_method::ct_int)
    require(f.bits >= 1 && f.bits <= 8, bad, "quant_format.bits", "must be 1 to 8 for integer packing",
            f.bits);
  if (f.method == quant_method::bnb_4bit)
    require(f.bnb_block > 0, bad, "quant_format.bnb_block", "must be > 0", f.bnb_block);
  if (f.method == quant_method::fp8_block || f.scales == scale_granularity::block) {
    require(f.block_out > 0, bad, "quant_format.block_out", "must be > 0", f.block_out);
    require(f.block_in > 0, bad, "quant_format.block_in", "must be > 0", f.block_in);
  }
}

}  // namespace detail

// Bytes one quantised (out x in) linear weight occupies, bias excluded (GPTQ and AWQ keep
// it in fp16, the others in the model dtype).
constexpr bytes quantized_linear_bytes(const quant_format& f, std::uint64_t out, std::uint64_t in) {
  detail::check_format(f);
  switch (f.method) {
    case quant_method::gptq: return detail::gptq_linear_bytes(out, in, f);
    case quant_method::awq: return detail::awq_linear_bytes(out, in, f);
    case quant_method::bnb_4bit: return detail::bnb_4bit_bytes(detail::checked_mul(out, in, detail::quant_quantity), f);
    case quant_method::bnb_int8: return detail::bnb_int8_bytes(out, in);
    case quant_method::fp8_block: return detail::fp8_block_bytes(out, in, f);
    case quant_method::ct_float: return detail::ct_float_bytes(out, in, f);
    case quant_method::ct_int: return detail::ct_int_bytes(out, in, f);
    case quant_method::mxfp4: return detail::mxfp4_bytes(out, in);
    case quant_method::none: break;
  }
  detail::fail(error_code::invalid_model, "quant_format.method", "must name a quantised format");
}

// The dense copy of a weight (`elements` of it) a kernel materialises for one matmul over
// `rows` input rows, in `compute` (the activations' dtype); freed after the matmul.
//   bnb_4bit: Linear4bit -> matmul_4bit dequantises to the compute dtype unless the input
//     is a single row (gemv_4bit) (bitsandbytes nn/modules.py, autograd/_functions.py).
//   gptq, awq: AutoAWQ's WQLinear_GEMM dequantises to fp16 for >= 1024 rows
//     (FP16_MATMUL_HEURISTIC_CONDITION, gemm.py @ d9dc8e56); assumed for GPTQ's exllama
//     kernels too, which reconstruct an fp16 weight for large inputs. Marlin and the
//     GEMV kernels dequantise in registers: they are an assumption's lower side.
//   ct_float, ct_int: once decompressed (dense_copy_kept) the layer is FROZEN, and every later call
//     fake-quantises its weight (compressed-tensors quantization/lifecycle/forward.py @ 01dd1a58
//     wrapped_forward: self.weight.data.clone(), then forward_quantize -> fake_quantize): the clone,
//     x / scale, its clamp and the rounded codes coexist, in the compute dtype, and the fp8 cast of
//     float codes besides (quant_args.py round_to_quantized_type_args: clamp, .to(float8) or
//     torch.round, .to(original dtype)).
//   bnb_int8, fp8_block, mxfp4: no weight copy (int8 / fp8 matmuls on quantised inputs, triton
//     matmul_ogs reads MXFP4 directly); their input-sized temporaries: input_quantization_temporary.
constexpr bytes dequantization_temporary(const quant_format& f, std::uint64_t elements, std::uint64_t rows,
                                         dtype compute) {
  switch (f.method) {
    case quant_method::bnb_4bit: return rows > 1 ? storage(compute, elements) : bytes{};
    case quant_method::gptq:
    case quant_method::awq: return rows >= 1024 ? storage(dtype::fp16, elements) : bytes{};
    case quant_method::ct_float: return storage(compute, elements) * 4u + storage(dtype::fp8_e4m3, elements);
    case quant_method::ct_int: return storage(compute, elements) * 4u;
    case quant_method::none:
    case quant_method::bnb_int8:
    case quant_method::fp8_block:
    case quant_method::mxfp4: break;
  }
  return {};
}

// What a compressed-tensors layer makes while its first forward decompresses it (decompress_module),
// beyond the dense weight it keeps (`elements` of it, in `compute`):
//   ct_float: dequantize's x_q.to(scale.dtype) while the product with the scale is made, and the
//     float8 weight it replaces (forward.py @ 01dd1a58 _dequantize);
//   ct_int: unpack_from_int32's int32 codes (4 bytes each), their int32 difference with the
//     offset and its int8 cast (pack_quantized.py @ 0199c6e7 unpack_from_int32); dequantize's
//     int8 codes and their cast, which the scale product follows, are fewer.
// Other formats decompress nothing: none.
constexpr bytes decompression_temporary(const quant_format& f, std::uint64_t elements, dtype compute) {
  if (f.method == quant_method::ct_float) return storage(compute, elements) + storage(dtype::fp8_e4m3, elements);
  if (f.method == quant_method::ct_int)
    return max(bytes{detail::checked_mul(elements, 8, detail::quant_quantity)} + storage(dtype::int8, elements),
               storage(dtype::int8, elements) + storage(compute, elements));
  return {};
}

// What quantising a matmul's input (`elements` of it, `columns` wide) makes, in `compute`:
//   fp8_block: act_quant's float8 copy and one fp32 scale per block_in columns
//     (transformers integrations/finegrained_fp8.py @ 3c48befb FP8Linear.forward, act_quant); the
//     triton matmul writes the layer's own output;
//   ct_float, ct_int with input_activations: fake_quantize of the input (forward.py @ 01dd1a58
//     wrapped_forward -> forward_quantize): x / scale, its clamp and the rounded values (float: the
//     float8 cast and its copy back); the dynamic per-token scales are a column each, left out.
// The others quantise no input here (LLM.int8's rows: the caller's).
constexpr bytes input_quantization_temporary(const quant_format& f, std::uint64_t elements, std::uint64_t columns,
                                             dtype compute) {
  const std::uint64_t rows = columns == 0 ? 0 : elements / columns;
  switch (f.method) {
    case quant_method::fp8_block:
      return storage(dtype::fp8_e4m3, elements) +
             storage(dtype::fp32, detail::checked_mul(rows, detail::ceil_div(columns, f.block_in), detail::quant_quantity));
    case quant_method::ct_float:
      return f.quantized_inputs ? storage(compute, elements) * 3u + storage(dtype::fp8_e4m3, elements) : bytes{};
    case quant_method::ct_int: return f.quantized_inputs ? storage(compute, elements) * 3u : bytes{};
    case quant_method::none:
    case quant_method::gptq:
    case quant_method::awq:
    case quant_method::bnb_int8:
    case quant_method::bnb_4bit:
    case quant_method::mxfp4: break;
  }
  return {};
}

// compressed-tensors' CompressedLinear decompresses its weight at the first forward and keeps it
// as the layer's `weight` from then on (linear/compressed_linear.py @ 6221b4f2, forward:
// register_offload_parameter(self, "weight", decompressed); @ b9299b77 the same through
// self.weight.data): a dense weight in the model dtype. float-quantized stores its float8 codes as
// `weight`, which the dense one replaces; pack-quantized keeps weight_packed beside it. The scales
// (and zero points, g_idx, weight_shape) stay registered.
constexpr bool dense_copy_kept(quant_method m) { return m == quant_method::ct_float || m == quant_method::ct_int; }

// Bytes a compressed-tensors layer (out x in) holds once decompressed: the dense weight in
// `compute` and its stored tensors, less the float8 codes float-quantized replaces.
constexpr bytes decompressed_linear_bytes(const quant_format& f, std::uint64_t out, std::uint64_t in, dtype compute) {
  const auto n = detail::checked_mul(out, in, detail::quant_quantity);
  const bytes replaced = f.method == quant_method::ct_float ? storage(dtype::fp8_e4m3, n) : bytes{};
  return storage(compute, n) + quantized_linear_bytes(f, out, in) - replaced;
}

}  // namespace memscale
