// memscale/json/hf/olmoe.hpp: OLMoE (transformers models/olmoe/modular_olmoe.py@052b1dcd,
// configuration_olmoe.py@008e5743): LLaMA pre-norm blocks with OLMo-2's RMSNorm over the whole
// q and k projections (before the head split), and a Mixtral-style sparse block of
// num_experts SwiGLU experts behind a bias-free router; no shared expert.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/llama.hpp"

namespace memscale::json_io::hf {

inline model_spec olmoe(const config& c) {
  // clip_qkv clamps q, k and v in place in training, which this reader does not model.
  if (c.has("clip_qkv"))
    bad_field(error_code::unsupported, "config.clip_qkv", c.raw().at("clip_qkv"),
              "must be null: the in-place clamp of q, k and v is not modelled");
  // OlmoeConfig: vocab 50304, hidden 2048, intermediate 2048, 16 layers, 16 heads, 4096 positions.
  model_spec m = llama_like(c, {.shape = {.layers = 16, .hidden = 2048, .heads = 16, .ffn = 2048, .vocab = 50304,
                                          .context = 4096}});
  m.qk_norm = qk_norm_kind::full_width;  // q_norm(hidden), k_norm(kv_heads * head_dim)
  // OlmoeConfig attribute_map: num_local_experts is another name for num_experts (64 by default).
  m.experts = c.count({"num_experts", "num_local_experts"}, 64);
  m.experts_per_token = c.count("num_experts_per_tok", 8);
  return m;
}

}  // namespace memscale::json_io::hf
