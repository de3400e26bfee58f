// memscale/json/hf/stablelm.hpp: StableLM in ground-truth records (no config.json reader
// yet): stablelm-base-alpha's GPT-NeoX blocks (lit-gpt config.py), and with a SwiGLU MLP the
// LLaMA-like sequential blocks with LayerNorm of StableLM 3B-4E1T and StableLM 2
// (transformers models/stablelm/modeling_stablelm.py).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include "memscale/json/hf/gpt_neox.hpp"
#include "memscale/json/hf/record_rules.hpp"

namespace memscale::json_io::hf {

// stablelm-base-alpha's blocks are GPT-NeoX's, defaults included.
inline constexpr record_rules stablelm_records{.defaults = gpt_neox_record, .swiglu_is_sequential = true};

}  // namespace memscale::json_io::hf
