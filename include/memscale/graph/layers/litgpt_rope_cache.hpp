// memscale/graph/layers/litgpt_rope_cache.hpp: litgpt's RoPE cache, the GPT module's `cos` and
// `sin` buffers (non-persistent, registered by the max_seq_length setter, litgpt/model.py
// @ b0ea1772 and @ 26857050). fit() sets model.max_seq_length to the longest training sequence
// (finetune/lora.py line 304 @ 26857050), which rebuilds both as build_rope_cache returns them:
// fp32 (`.float()` positions and frequencies), max_seq_length x rope_n_elem each, rope_n_elem =
// int(rotary_percentage x head_size) (config.py line 145 @ 26857050). Where that length is the
// block size the init's cache stays, in the dtype Fabric cast the module to. Neither FSDP1 nor
// fully_shard shards buffers: every rank holds the whole cache.
#pragma once

#include <cstdint>

#include "memscale/bytes.hpp"
#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale::graph_layers {

// The 2023 lit-gpt scripts built their cache in forward (GPT.rope_cache), not modelled here.
constexpr bool litgpt_keeps_rope_cache(const model_spec& m, const training_spec& run) {
  return m.impl == implementation::litgpt && m.positions == position_kind::rotary &&
         run.framework == framework_kind::litgpt && run.framework_version >= litgpt_v0_4;
}

// `module_dtype`: the parameters' dtype after Fabric's convert_module (bf16 under bf16-true).
constexpr bytes litgpt_rope_cache_bytes(const model_spec& m, const training_spec& run, dtype module_dtype) {
  const auto rope_n_elem = static_cast<std::uint64_t>(static_cast<double>(head_dim_of(m)) * m.rotary_fraction);
  const bool rebuilt = m.context_length != run.seq_len;
  const std::uint64_t rows = rebuilt ? run.seq_len : m.context_length;
  return storage(rebuilt ? dtype::fp32 : module_dtype, detail::checked_mul(2, rows, rope_n_elem));
}

}  // namespace memscale::graph_layers
