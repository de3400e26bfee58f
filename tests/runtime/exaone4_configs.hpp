// The small EXAONE 4 config the CPU traces ran (tools/trace/families_2025.py), shared by
// exaone4_test.cpp and exaone4_nope_test.cpp.
#pragma once

#include "memscale/json.hpp"

namespace exaone4_configs {

// 4 layers, hidden 256, 8 heads of 32, 2 kv heads, SwiGLU 688, vocab 4096, untied; `extra`
// overrides or adds keys.
inline nlohmann::json small(nlohmann::json extra = nlohmann::json::object()) {
  nlohmann::json c{{"model_type", "exaone4"},      {"architectures", {"Exaone4ForCausalLM"}},
                   {"hidden_size", 256},           {"num_hidden_layers", 4},
                   {"num_attention_heads", 8},     {"num_key_value_heads", 2},
                   {"head_dim", 32},               {"intermediate_size", 688},
                   {"vocab_size", 4096},           {"max_position_embeddings", 2048},
                   {"sliding_window", 128},        {"sliding_window_pattern", 4}};
  c.update(extra);
  return c;
}

}  // namespace exaone4_configs
