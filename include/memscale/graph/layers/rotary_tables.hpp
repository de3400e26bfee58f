// memscale/graph/layers/rotary_tables.hpp: rotary tables every attention layer registers as
// buffers of its own: InternLM2's remote code (InternLM2RotaryEmbedding), and the LLaMA and
// Mistral families before their layers shared one table (model_spec::rotary_tables_per_layer_before;
// modeling_llama.py@v4.32 LlamaRotaryEmbedding: cos_cached and sin_cached of
// max_position_embeddings x head_dim built in the default dtype, which from_pretrained sets to
// the load dtype, and inv_freq of head_dim / 2 in fp32).
#pragma once

#include <cstdint>

#include "memscale/bytes.hpp"
#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/model.hpp"

namespace memscale {

// Whether each layer holds its own tables at this transformers release (0: not stated).
constexpr bool rotary_tables_per_layer(const model_spec& m, std::uint32_t transformers_version) {
  return m.rotary_cache_per_layer ||
         (transformers_version != 0 && transformers_version < m.rotary_tables_per_layer_before);
}

// Every layer's cos and sin tables in `load` and its inv_freq in fp32.
constexpr bytes rotary_table_buffers(const model_spec& m, dtype load) {
  const std::uint64_t hd = head_dim_of(m);
  const bytes per_layer = storage(load, detail::checked_mul(2, m.context_length, hd)) + storage(dtype::fp32, hd / 2);
  return per_layer * m.layers;
}

}  // namespace memscale
