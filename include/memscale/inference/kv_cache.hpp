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

// Cache bytes per token over all layers: 2 x layers x kv_heads x head_dim x dtype bytes.
constexpr bytes kv_bytes_per_token(const model_spec& m, const inference_spec& r) {
  return storage(r.kv, detail::checked_mul(kv_elements_per_token_layer(m, r), m.layers));
}

// Positions a layer holds once `tokens` have been processed.
constexpr std::uint64_t cached_positions(const inference_spec& r, std::uint64_t tokens) {
  switch (r.cache) {
    case kv_cache_kind::dynamic: return tokens;
    case kv_cache_kind::static_preallocated:
      return r.max_cache_len != 0 ? r.max_cache_len : detail::checked_add(r.context, r.new_tokens);
    case kv_cache_kind::sliding_window:
      // SlidingWindowCache.__init__: max_cache_len = min(sliding_window, max_length).
      return detail::min(r.sliding_window, detail::checked_add(r.context, r.new_tokens));
  }
  return tokens;
}

// The whole cache (all layers, the batch) once `tokens` have been processed.
constexpr bytes kv_cache_bytes(const model_spec& m, const inference_spec& r, std::uint64_t tokens) {
  return kv_bytes_per_token(m, r) * detail::checked_mul(r.batch, cached_positions(r, tokens));
}

// One layer's key (or value) tensor over `positions` positions: what torch.cat copies; the key
// where the two differ (multi-head latent attention's key is the wider).
constexpr bytes kv_layer_half_bytes(const model_spec& m, const inference_spec& r, std::uint64_t positions) {
  if (has_latent_attention(m) && r.kv_lora_rank == 0)
    return storage(r.kv, detail::checked_mul(r.batch, positions,
                                             detail::max(key_elements_per_token_layer(m), value_elements_per_token_layer(m))));
  return storage(r.kv, detail::checked_mul(r.batch, positions, kv_elements_per_token_layer(m, r) / 2));
}

// One layer's value tensor over `positions` positions (the key's size but under multi-head latent attention).
constexpr bytes kv_layer_value_bytes(const model_spec& m, const inference_spec& r, std::uint64_t positions) {
  if (!has_latent_attention(m) || r.kv_lora_rank > 0) return kv_layer_half_bytes(m, r, positions);
  return storage(r.kv, detail::checked_mul(r.batch, positions, value_elements_per_token_layer(m)));
}

}  // namespace memscale
