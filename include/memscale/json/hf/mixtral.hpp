// memscale/json/hf/mixtral.hpp: Mixtral (transformers v4.51 models/mixtral/modeling_mixtral.py):
// LLaMA attention, a sparse MoE block of num_local_experts SwiGLU experts with a bias-free
// router (gate: Linear(hidden, experts)).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/llama.hpp"

namespace memscale::json_io::hf {

inline model_spec mixtral(const config& c) {
  model_spec m = llama_like(c);
  m.experts = c.count("num_local_experts", 8);
  m.experts_per_token = c.count("num_experts_per_tok", 2);
  m.rotary_tables_per_layer_before = 442;  // the Mistral family's per-layer rotary tables (PR #30642)
  return m;
}

// A ground-truth record's Mixtral: 8 experts, 2 per token, unless the record says otherwise
// (MixtralConfig num_local_experts, num_experts_per_tok).
inline model_spec mixtral_record(const record_model& r) {
  model_spec m = llama_record(r);
  m.rotary_tables_per_layer_before = 442;  // the Mistral family's (PR #30642)
  return m;
}
inline constexpr record_rules mixtral_records{.defaults = mixtral_record, .experts = 8, .experts_per_token = 2};

}  // namespace memscale::json_io::hf
