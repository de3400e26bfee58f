// memscale/inference/kv_cache.hpp: the key/value cache of autoregressive decoding.
#pragma once

#include <cstdint>

#include "memscale/dtype.hpp"
#include "memscale/inference/spec.hpp"
#include "memscale/model.hpp"

namespace memscale {

// Whether generate() holds the previous step's cache tuples while the forward builds the next
// (the release before the family's Cache support, or a run that says so).
constexpr bool keeps_tuple_cache(const model_spec& m, const inference_spec& r) {
  return r.legacy_tuple_cache || r.transformers_version < m.generate_tuple_cache_before;
}

// Elements of one layer's key and of its value per token: kv_heads x head_dim each; under
// multi-head latent attention every head's decompressed key (qk_nope_head_dim + qk_rope_head_dim)
// and value (v_head_dim), what transformers caches (modeling_deepseek_v2.py@0233e509
// DeepseekV2Attention.forward: past_key_values.update(key_states, value_states) after the cat).
constexpr std::uint64_t key_elements_per_token_layer(const model_spec& m) {
  if (has_latent_attention(m)) return detail::checked_mul(m.heads, detail::checked_add(m.qk_nope_head_dim, m.qk_rope_head_dim));
  return detail::checked_mul(kv_heads_of(m), head_dim_of(m));
}
constexpr std::uint64_t value_elements_per_token_layer(const model_spec& m) {
  if (has_latent_attention(m)) return detail::checked_mul(m.heads, m.v_head_dim);
  return detail::checked_mul(kv_heads_of(m), head_dim_of(m));
}

// Elements one layer caches per token: its key and value, or MLA's latent plus its rotary key.
constexpr std::uint64_t kv_elements_per_token_layer(const model_spec& m, const inference_spec& r) {
  if (r.kv_lora_rank > 0) return detail::checked_add(r.kv_lora_rank, r.qk_rope_head_dim);
  return detail::checked_add(key_elements_per_token_layer(m), value_elements_per_token_layer(m));
}

// `elements` values quantised as QuantizedCache stores them: codes of kv_bits packed into bytes
// (optimum-quanto PackedTensor: two int4 or four int2 codes per uint8) and a scale and a shift
// per kv_group values in the compute dtype (quanto MaxOptimizer + quantize_weight with
// q_group_size: one (scale, zeropoint) pair per group; transformers cache_utils.py v4.45
// QuantoQuantizedCache._quantize).
constexpr bytes quantized_kv_bytes(const inference_spec& r, std::uint64_t elements) {
  const std::uint64_t packed = detail::ceil_div(detail::checked_mul(elements, r.kv_bits), 8);
  const std::uint64_t groups = detail::ceil_div(elements, r.kv_group);
  return bytes{packed} + storage(r.compute, detail::checked_mul(groups, 2));
}

// gpt-fast's setup_caches length: min(prompt + new tokens, block_size) rounded up to a multiple
// of 8 (generate.py@32971d31 generate: max_seq_length; model.py setup_caches: find_multiple(., 8)).
// A given max_cache_len stands for the max_seq_length handed to setup_caches.
constexpr std::uint64_t gpt_fast_cache_length(const model_spec& m, const inference_spec& r) {
  std::uint64_t want = r.max_cache_len != 0 ? r.max_cache_len : detail::checked_add(r.context, r.new_tokens);
  if (m.context_length != 0) want = detail::min(want, m.context_length);
  return detail::round_up(want, 8);
}

// Cache bytes per token over all layers: 2 x layers x kv_heads x head_dim x dtype bytes; a
// quantized cache's packed codes and group scales; torchao's int8 cache adds a per-token scale
// per kv head in the model dtype (_models/llama/model.py AffineQuantizedKVCache@1f66d47).
constexpr bytes kv_bytes_per_token(const model_spec& m, const inference_spec& r) {
  const auto elements = detail::checked_mul(kv_elements_per_token_layer(m, r), m.layers);
  if (r.cache == kv_cache_kind::quantized) return quantized_kv_bytes(r, elements);
  if (r.loop == generate_loop::gpt_fast && r.kv == dtype::int8)
    return storage(dtype::int8, elements) + storage(r.compute, detail::checked_mul(2, kv_heads_of(m), m.layers));
  return storage(r.kv, elements);
}

// How a quantized cache holds `tokens` positions: the packed part and the residual window in
// the compute dtype. The prompt is quantised whole at the prefill; each decoding step appends
// to the residual, and the step that finds residual_length - 1 tokens there (a 4-D tensor: not
// the step right after a re-quantisation, whose residual is torch.zeros(0)) quantises
// everything again and empties it (cache_utils.py v4.45 QuantizedCache.update). So the window
// holds (decoding steps) mod max(residual_length, 2) tokens.
struct quantized_split {
  std::uint64_t packed = 0;
  std::uint64_t residual = 0;
};

constexpr std::uint64_t quantized_period(const inference_spec& r) { return detail::max(r.kv_residual, std::uint64_t{2}); }

constexpr quantized_split split_quantized(const inference_spec& r, std::uint64_t tokens) {
  if (tokens <= r.context) return {.packed = tokens, .residual = 0};
  const std::uint64_t residual = (tokens - r.context) % quantized_period(r);
  return {.packed = tokens - residual, .residual = residual};
}

// Whether the decoding step that starts with `done` positions cached re-quantises the layer.
constexpr bool requantizes(const inference_spec& r, std::uint64_t done) {
  return r.cache == kv_cache_kind::quantized && done >= r.context &&
         split_quantized(r, detail::checked_add(done, 1)).residual == 0;
}

// StaticCache's length when the run names none: generate()'s max_length (prompt + new tokens),
// from 5.0 less the last token, which is never fed back (generation/utils.py 5.x GenerationMixin.generate:
// max_cache_length = generation_config.max_length - 1; the 5.17 histories allocate 1279 and 2175
// positions for 1024 + 256 and 2048 + 128: docs/data/gpu_allocator_history/*-static.json.gz).
// StaticLayer allocates both tensors at that length at its first update (cache_utils.py@004999d9
// StaticLayer.lazy_initialization: torch.zeros) and writes into them in place (index_copy_).
constexpr std::uint64_t static_cache_length(const inference_spec& r) {
  if (r.max_cache_len != 0) return r.max_cache_len;
  const std::uint64_t max_length = detail::checked_add(r.context, r.new_tokens);
  return r.transformers_version >= 500 ? max_length - 1 : max_length;
}

// Positions a layer holds once `tokens` have been processed.
constexpr std::uint64_t cached_positions(const inference_spec& r, std::uint64_t tokens) {
  switch (r.cache) {
    case kv_cache_kind::dynamic:
    case kv_cache_kind::quantized: return tokens;
    case kv_cache_kind::static_preallocated: return static_cache_length(r);
    case kv_cache_kind::sliding_window:
      // SlidingWindowCache.__init__: max_cache_len = min(sliding_window, max_length).
      return detail::min(r.sliding_window, detail::checked_add(r.context, r.new_tokens));
  }
  return tokens;
}

// One layer's key (or value) tensor over `positions` positions: what torch.cat copies; the key
// where the two differ (multi-head latent attention's key is the wider).
constexpr bytes kv_layer_half_bytes(const model_spec& m, const inference_spec& r, std::uint64_t positions) {
  if (has_latent_attention(m) && r.kv_lora_rank == 0)
    return storage(r.kv, detail::checked_mul(r.batch, positions,
                                             detail::max(key_elements_per_token_layer(m), value_elements_per_token_layer(m))));
  return storage(r.kv, detail::checked_mul(r.batch, positions, kv_elements_per_token_layer(m, r) / 2));
}

// The elements of one layer's key (or value) tensor over `positions` positions.
constexpr std::uint64_t kv_layer_half_elements(const model_spec& m, const inference_spec& r, std::uint64_t positions) {
  return detail::checked_mul(r.batch, positions, kv_elements_per_token_layer(m, r) / 2);
}

// One layer's quantized cache over `positions` positions: keys and values, each quantised as one
// tensor, and their residual windows.
constexpr bytes quantized_layer_bytes(const model_spec& m, const inference_spec& r, std::uint64_t positions) {
  const quantized_split s = split_quantized(r, positions);
  return (quantized_kv_bytes(r, kv_layer_half_elements(m, r, s.packed)) + kv_layer_half_bytes(m, r, s.residual)) * 2u;
}

// Positions a sliding-window layer's DynamicSlidingWindowLayer holds in storage once `tokens`
// have been processed (cache_utils.py@004999d9 DynamicSlidingWindowLayer.update): its keys are
// the view full_key_states[:, :, -window + 1:] of torch.cat([cached, new]), so after the prefill
// the whole prompt's cat stays referenced; after a decoding step the cat of the window - 1
// cached positions and the new one: min(tokens, window).
constexpr std::uint64_t sliding_layer_positions(const model_spec& m, const inference_spec& r, std::uint64_t tokens) {
  return tokens <= r.context ? tokens : detail::min(tokens, m.sliding_window);
}

// Whether layer `layer` (from 0) keeps a DynamicSlidingWindowLayer: by model_spec::sliding_period
// when stated, else the first sliding_layers layers (the last one full unless all slide).
constexpr bool is_sliding_layer(const model_spec& m, std::uint64_t layer) {
  if (m.sliding_period > 0) return (layer + 1) % m.sliding_period != 0;
  return layer < m.sliding_layers;
}

// The whole cache (all layers, the batch) once `tokens` have been processed.
constexpr bytes kv_cache_bytes(const model_spec& m, const inference_spec& r, std::uint64_t tokens) {
  if (r.cache == kv_cache_kind::quantized) return quantized_layer_bytes(m, r, tokens) * m.layers;
  if (r.loop == generate_loop::gpt_fast) return kv_bytes_per_token(m, r) * detail::checked_mul(r.batch, gpt_fast_cache_length(m, r));
  if (m.sliding_layers > 0 && r.cache == kv_cache_kind::dynamic) {
    // DynamicCache(config=...) gives every sliding_attention layer a DynamicSlidingWindowLayer
    // (cache_utils.py@004999d9 DynamicCache.__init__), the others a DynamicLayer.
    const std::uint64_t positions =
        detail::checked_add(detail::checked_mul(m.layers - m.sliding_layers, tokens),
                            detail::checked_mul(m.sliding_layers, sliding_layer_positions(m, r, tokens)));
    return storage(r.kv, detail::checked_mul(r.batch, positions, kv_elements_per_token_layer(m, r)));
  }
  return kv_bytes_per_token(m, r) * detail::checked_mul(r.batch, cached_positions(r, tokens));
}

// One layer's value tensor over `positions` positions (the key's size but under multi-head latent attention).
constexpr bytes kv_layer_value_bytes(const model_spec& m, const inference_spec& r, std::uint64_t positions) {
  if (!has_latent_attention(m) || r.kv_lora_rank > 0) return kv_layer_half_bytes(m, r, positions);
  return storage(r.kv, detail::checked_mul(r.batch, positions, value_elements_per_token_layer(m)));
}

}  // namespace memscale
