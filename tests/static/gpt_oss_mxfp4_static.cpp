// Compile-time checks of gpt-oss's generate() over MXFP4 experts (graph/layers/gpt_oss_mxfp4.hpp).
#include <cstdint>

#include <memscale/inference.hpp>

namespace {

using namespace memscale;

// A small gpt-oss: sinks, 3-D experts with biases, two of four layers sliding.
constexpr model_spec gpt_oss_small{.layers = 4, .hidden = 256, .heads = 8, .kv_heads = 2, .head_dim = 32, .ffn = 256,
                                   .vocab = 4096, .context_length = 4096, .positions = position_kind::rotary,
                                   .norm = norm_kind::rmsnorm, .mlp = mlp_kind::clamped_swiglu, .qkv_bias = true,
                                   .attn_out_bias = true, .experts = 8, .experts_per_token = 2,
                                   .attention_sinks = true, .expert_weight_copies = true, .router_bias = true,
                                   .sliding_window = 128, .sliding_layers = 2, .rotary_chunked_halves = true};

constexpr inference_spec run_of(weight_format w) {
  return {.batch = 4, .context = 200, .new_tokens = 4, .compute = dtype::bf16, .weights = w, .kv = dtype::bf16,
          .attention = attention_impl::eager, .transformers_version = 456};
}

constexpr auto mx = estimate_inference(gpt_oss_small, run_of(weight_format::mxfp4));
constexpr auto native = estimate_inference(gpt_oss_small, run_of(weight_format::native));
constexpr std::uint64_t expert_weights = 4 * 8 * (256 * 2 * 256 + 256 * 256);

// The experts at 17 bytes per 32 weights (blocks and scales), the rest as the bf16 run holds it.
static_assert(native.weight_bytes - mx.weight_bytes == bytes{expert_weights * 2 - expert_weights * 17 / 32});
// matmul_ogs over tokens x top-k rows holds far less than the every-expert bmm over experts x tokens.
static_assert(mx.prefill.breakdown.activations < native.prefill.breakdown.activations);
static_assert(mx.kv_cache_bytes == native.kv_cache_bytes);

// The allocator's generate() walk places sliding layers by a stated period (the reader's 2 for gpt-oss's
// alternation); without one it refuses them.
constexpr model_spec with_period(model_spec m) {
  m.sliding_period = 2;
  return m;
}
static_assert(!detail::generate_walk_covers(gpt_oss_small));
static_assert(detail::generate_walk_covers(with_period(gpt_oss_small)));

}  // namespace
