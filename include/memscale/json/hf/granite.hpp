// memscale/json/hf/granite.hpp: Granite, GraniteMoE and GraniteMoeShared (transformers
// models/granite/modular_granite.py@023633dd, configuration_granite.py@008e5743;
// models/granitemoe/modular_granitemoe.py@023633dd; configuration_granitemoeshared.py@040e1a7e):
// LLaMA blocks with four float multipliers. embedding_multiplier and residual_multiplier
// multiply by a Python float (nothing saved), attention_multiplier is the softmax scale,
// and logits_scaling divides the logits into a second logits tensor (`logits_scale`).
// GraniteMoE's experts are JetMoE's ParallelExperts (input_linear (E, 2f, h), output_linear
// (E, h, f), no bias) behind a bias-free Linear(h, E) router: SwiGLU experts by parameters
// and saved tensors; GraniteMoeShared adds an ungated shared MLP of shared_intermediate_size.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/llama.hpp"

namespace memscale::json_io::hf {

// GraniteConfig, GraniteMoeConfig and GraniteMoeSharedConfig share these sizes: vocab 32000,
// hidden 4096, intermediate 11008, 32 layers, 32 heads, 2048 positions; tie_word_embeddings False.
inline constexpr llama_defaults granite_defaults{
    .shape = {.layers = 32, .hidden = 4096, .heads = 32, .ffn = 11008, .vocab = 32000, .context = 2048}};

inline model_spec granite(const config& c) {
  model_spec m = llama_like(c, granite_defaults);  // attention_bias, mlp_bias, attention_dropout as LLaMA
  m.logits_scale = true;  // `logits / logits_scaling` runs for every value, 1.0 included
  return m;
}

inline model_spec granitemoe(const config& c) {
  model_spec m = granite(c);
  m.mlp_bias = false;  // GraniteMoeParallelExperts have no bias
  m.experts = c.count("num_local_experts", 8);
  m.experts_per_token = c.count("num_experts_per_tok", 2);
  // GraniteMoeMoE.forward gathers every routed row (layer_input[batch_index]) and runs
  // ParallelExperts over all of them before index_add: no loop over experts.
  m.experts_in_one_pass = true;
  return m;
}

inline model_spec granitemoeshared(const config& c) {
  model_spec m = granitemoe(c);
  // GraniteMoeSharedMLP: input_linear (h -> 2s), silu(first half) * second half, output_linear
  // (s -> h), added to the experts' output without a gate; shared_intermediate_size 0: none.
  m.shared_expert_ffn = c.count("shared_intermediate_size", 0);
  m.shared_expert_gate = false;
  return m;
}

}  // namespace memscale::json_io::hf
