// memscale/inference/gpt_fast_weights.hpp: gpt-fast's weight-only int8 and int4 linear layers
// (pytorch-labs/gpt-fast quantize.py@32971d31), what they store and what each call makes.
//
// - Which layers: every nn.Linear, the output head included (replace_linear_weight_only_int8_per_channel
//   and replace_linear_int4 recurse over all children); the embedding and the norms stay in the
//   model dtype. generate.py@32971d31 _load_model converts the model before model.to(dtype=precision),
//   which casts the floating scales to the model dtype and leaves the int8 / int32 codes as they are.
// - int8 (WeightOnlyInt8Linear): weight int8 (out, in), scales (out,); forward
//   F.linear(input, self.weight.to(dtype=input.dtype)) * self.scales: a dequantized copy of the whole
//   weight while F.linear runs, then the unscaled product while the scaled one is made.
// - int4 (WeightOnlyInt4Linear): weight int32 (out / 8, in / (inner_k_tiles * 16), 32, inner_k_tiles / 2),
//   scales_and_zeros bf16 (in / groupsize, out, 2); in padded to a multiple of 1024 when groupsize or
//   inner_k_tiles * 16 does not divide it (padding=True, find_multiple), and the input padded by F.pad
//   in every call; aten._weight_int4pack_mm allocates its output only (int4mm.cu@05f814fe
//   _weight_int4pack_mm_cuda: C_final = at::empty({m, n}, kBFloat16)).
#pragma once

#include <cstddef>
#include <cstdint>

#include "memscale/bytes.hpp"
#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/error.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/inference/spec.hpp"
#include "memscale/model.hpp"

namespace memscale::detail {

// generate.py@32971d31 _load_model: WeightOnlyInt4QuantHandler(model, groupsize), its default
// inner_k_tiles=8 (quantize.py@32971d31 WeightOnlyInt4QuantHandler.__init__).
inline constexpr std::uint64_t gpt_fast_inner_k_tiles = 8;
// quantize.py@32971d31 _check_linear_int4_k: k % (inner_k_tiles * 16) == 0.
inline constexpr std::uint64_t gpt_fast_k_tile = 16;
// quantize.py@32971d31 WeightOnlyInt4Linear.__init__: in_features = find_multiple(in_features, 1024).
inline constexpr std::uint64_t gpt_fast_int4_padding = 1024;

constexpr bool is_gpt_fast_weights(weight_format w) {
  return w == weight_format::gptfast_int8 || w == weight_format::gptfast_int4;
}

// The layers quantize.py replaces: every linear with its own weight (the head included).
constexpr bool gpt_fast_quantized_op(const op& o, const inference_spec& r) {
  return is_gpt_fast_weights(r.weights) && o.kind == op_kind::linear && o.role == param_role::matmul &&
         !o.borrows_weight && o.weight.rows > 0;
}

// in_features as WeightOnlyInt4Linear stores it: as it is when _check_linear_int4_k passes, else
// padded to a multiple of 1024 (quantize.py@32971d31 replace_linear_int4, padding=True).
constexpr std::uint64_t gpt_fast_int4_in_features(std::uint64_t in, std::uint64_t group_size) {
  const bool fits = in % group_size == 0 && in % (gpt_fast_inner_k_tiles * gpt_fast_k_tile) == 0;
  return fits ? in : round_up(in, gpt_fast_int4_padding);
}

// Stored bytes of one (out x in) linear.
constexpr bytes gpt_fast_linear_bytes(std::uint64_t out, std::uint64_t in, const inference_spec& r) {
  if (r.weights == weight_format::gptfast_int8)  // int8 weight (out, in), scales (out,) in the model dtype
    return storage(dtype::int8, checked_mul(out, in)) + storage(r.compute, out);
  const std::uint64_t k = gpt_fast_int4_in_features(in, r.group_size);
  // int32 (out / 8, k / (inner_k_tiles * 16), 32, inner_k_tiles / 2)
  const std::uint64_t words = checked_mul(checked_mul(out / 8, k / (gpt_fast_inner_k_tiles * gpt_fast_k_tile)),
                                          32 * (gpt_fast_inner_k_tiles / 2));
  constexpr std::uint64_t int32_bytes = 4;
  // scales_and_zeros (k / groupsize, out, 2), bf16 (validate requires the model dtype bf16).
  return bytes{checked_mul(words, int32_bytes)} + storage(dtype::bf16, checked_mul(k / r.group_size, out, 2));
}

// What one call of a replaced linear makes besides its output, alive together with it at the
// call's largest moment: int8, the dequantized weight while F.linear's product is made, then the
// unscaled product while `* self.scales` makes the output (the larger of the two); int4, the input
// padded by F.pad when in_features was padded. `tokens`: the rows of the call's input.
constexpr bytes gpt_fast_linear_temporary(const op& o, const inference_spec& r, std::uint64_t tokens) {
  const std::uint64_t out = o.weight.rows;
  const std::uint64_t in = o.weight.cols;
  if (r.weights == weight_format::gptfast_int8)
    return max(storage(r.compute, checked_mul(out, in)), storage(r.compute, checked_mul(tokens, out)));
  const std::uint64_t k = gpt_fast_int4_in_features(in, r.group_size);
  return k == in ? bytes{} : storage(dtype::bf16, checked_mul(tokens, k));
}

// The layers exist in gpt-fast's model.py only (the estimate's and the allocator stream's check;
// a document's "framework" sets the loop after its "infer" is read).
constexpr void require_gpt_fast_weights_loop(const inference_spec& r) {
  require(r.loop == generate_loop::gpt_fast || !is_gpt_fast_weights(r.weights), error_code::unsupported,
          "infer.weights", "gptfast-int8 and gptfast-int4 are gpt-fast's layers: they need the gpt-fast loop",
          r.weights);
}

// quantize.py@32971d31 WeightOnlyInt4Linear.__init__: assert out_features % 8 == 0, for every
// replaced linear: wqkv, wo, w1, w3, w2 and the head (model.py@32971d31).
constexpr void require_gpt_fast_int4_shapes(const model_spec& m) {
  constexpr std::uint64_t tile = 8;
  const std::uint64_t qkv = checked_mul(checked_add(m.heads, checked_mul(kv_heads_of(m), 2)), head_dim_of(m));
  require(qkv % tile == 0, error_code::unsupported, "model.heads",
          "with gptfast-int4, wqkv's out_features ((heads + 2 kv_heads) x head_dim) must be a multiple of 8", qkv);
  require(m.hidden % tile == 0, error_code::unsupported, "model.hidden",
          "must be a multiple of 8 with gptfast-int4 (wo's and w2's out_features)", m.hidden);
  require(m.ffn % tile == 0, error_code::unsupported, "model.ffn",
          "must be a multiple of 8 with gptfast-int4 (w1's and w3's out_features)", m.ffn);
  require(m.vocab % tile == 0, error_code::unsupported, "model.vocab",
          "must be a multiple of 8 with gptfast-int4 (the head's out_features)", m.vocab);
}

// `g` (a forward graph of `tokens` input rows) with the replaced linears' temporaries
// (gpt_fast_linear_temporary) added to their forward temporaries.
constexpr graph with_gpt_fast_linear_temporaries(graph g, const inference_spec& r, std::uint64_t tokens) {
  for (std::size_t i = 0; i < g.size; ++i)
    if (gpt_fast_quantized_op(g.ops[i], r)) g.ops[i].fwd_temp += gpt_fast_linear_temporary(g.ops[i], r, tokens);
  return g;
}

}  // namespace memscale::detail
