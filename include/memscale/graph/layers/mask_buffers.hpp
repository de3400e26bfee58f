// memscale/graph/layers/mask_buffers.hpp: the buffers each attention layer of an older GPT-NeoX
// registers for itself (model_spec::mask_buffers_per_layer_before): GPTNeoXAttention._init_bias
// makes `bias`, tril(ones(max_pos, max_pos, bool)), and `masked_bias`, a scalar; its rotary
// embedding holds cos_cached and sin_cached of max_pos x rotary_ndims (rotary_ndims =
// int(head_size * rotary_pct)) and inv_freq of rotary_ndims / 2 in fp32 (docs/research/
// transformers-versions.md T1, T2: modeling_gpt_neox.py at 4.31-4.45).
#pragma once

#include <cstdint>

#include "memscale/bytes.hpp"
#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/model.hpp"

namespace memscale {

// Whether each layer holds its own mask and tables at this transformers release (0: not stated).
constexpr bool mask_buffers_per_layer(const model_spec& m, std::uint32_t transformers_version) {
  return transformers_version != 0 && transformers_version < m.mask_buffers_per_layer_before;
}

// Every layer's mask, masked_bias and rotary tables; the tables in `load`, the dtype the model
// was built in (fp32 for fp32 and autocast training).
constexpr bytes mask_buffer_bytes(const model_spec& m, dtype load) {
  const auto rotary = static_cast<std::uint64_t>(static_cast<double>(head_dim_of(m)) * m.rotary_fraction);
  const std::uint64_t positions = m.context_length;
  const bytes mask = storage(dtype::boolean, detail::checked_mul(positions, positions));
  const bytes tables = storage(load, detail::checked_mul(2, positions, rotary)) + storage(dtype::fp32, rotary / 2);
  return (mask + storage(dtype::fp32, 1) + tables) * m.layers;
}

}  // namespace memscale
