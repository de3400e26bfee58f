// Compile-time checks of gpt-fast's weight-only int8 and int4 layers (inference/gpt_fast_weights.hpp).
#include <memscale/inference.hpp>
#include <memscale/presets.hpp>

namespace {

using namespace memscale;

constexpr inference_spec gpt_fast(weight_format w, std::uint64_t group) {
  inference_spec r{.compute = dtype::bf16, .weights = w, .kv = dtype::bf16, .cache = kv_cache_kind::static_preallocated,
                   .group_size = group};
  r.loop = generate_loop::gpt_fast;
  return r;
}

// quantize.py@32971d31 WeightOnlyInt8Linear: int8 (out, in) and bf16 scales (out,).
static_assert(detail::gpt_fast_linear_bytes(11008, 4096, gpt_fast(weight_format::gptfast_int8, 128)) ==
              bytes{11008ULL * 4096 + 11008 * 2});
// WeightOnlyInt4Linear: int32 (out / 8, in / 128, 32, 4) is half a byte per weight, whatever
// inner_k_tiles; bf16 scales_and_zeros (in / group, out, 2).
static_assert(detail::gpt_fast_linear_bytes(11008, 4096, gpt_fast(weight_format::gptfast_int4, 32)) ==
              bytes{11008ULL * 4096 / 2 + 4096 / 32 * 11008 * 4});
// in_features padded to a multiple of 1024 when the group or 128 does not divide it.
static_assert(detail::gpt_fast_int4_in_features(4096, 256) == 4096);
static_assert(detail::gpt_fast_int4_in_features(1376, 32) == 2048);
static_assert(detail::gpt_fast_int4_in_features(11008, 256) == 11008);
// Llama-2-7B in int8: every Linear (the head too) int8 with bf16 scales, embedding and norms bf16.
static_assert(inference_weight_bytes(detail::inference_weights_graph(presets::llama_2_7b,
                                                                     gpt_fast(weight_format::gptfast_int8, 128))
                                         .stack(),
                                     gpt_fast(weight_format::gptfast_int8, 128)) ==
              bytes{32ULL * (12288ULL * 4096 + 4096 * 4096 + 3 * 11008ULL * 4096 + (12288 + 4096 + 2 * 11008 + 4096) * 2 +
                             2 * 4096 * 2) +
                    32000ULL * 4096 * 2 + 32000ULL * 4096 + 32000 * 2 + 4096 * 2});

}  // namespace
