// memscale/json/hf/phi3.hpp: Phi-3 / Phi-3.5 / Phi-4 (transformers v4.51
// models/phi3/modeling_phi3.py): LLaMA blocks with one fused qkv_proj and one fused
// gate_up_proj (model.fused_gate_up: one parameter and one [rows, 2F] output).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/llama.hpp"

namespace memscale::json_io::hf {

inline model_spec phi3(const config& c) {
  model_spec m = llama_like(c);
  m.fused_qkv = true;
  m.fused_gate_up = true;  // Phi3MLP.gate_up_proj
  apply_dropout(c, m, {.attention = {"attention_dropout", 0.0}, .hidden = {"resid_pdrop", 0.0},
                       .embedding = {"embd_pdrop", 0.0}});
  return m;
}

// A ground-truth record's Phi-3: LLaMA with one fused projection (Phi3Attention.qkv_proj).
inline model_spec phi3_record(const record_model& r) {
  model_spec m = llama_record_as(r, {.fused_qkv = true});
  m.fused_gate_up = true;  // Phi3MLP.gate_up_proj
  return m;
}
inline constexpr record_rules phi3_records{.defaults = phi3_record};

}  // namespace memscale::json_io::hf
