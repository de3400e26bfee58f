// memscale-plan: LoRA target names (--lora-targets, "lora_targets" in a --run file) as the
// training_spec's projection set. Until per-projection targets land in the core (h8-lora),
// the set is q, k, v, o and mlp (every MLP projection).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memscale_plan {

// A comma-separated list of target names:
//   memscale:   q, k, v, o, mlp
//   PEFT:       q_proj k_proj v_proj o_proj, query key value (BERT), c_attn (GPT-2 fused qkv),
//               query_key_value (GPT-NeoX, Falcon, BLOOM fused qkv), gate_proj+up_proj+down_proj
//               (all three: the whole MLP), "all-linear" (peft/tuners/tuners_utils.py
//               INCLUDE_LINEAR_LAYERS_SHORTHAND: every linear layer but the output head)
//   lit-gpt:    lora_query lora_key lora_value lora_projection lora_mlp (lit_gpt/lora.py Config)
// Throws usage_error naming `field`, the name as typed and the nearest known name.
std::uint8_t parse_lora_targets(std::string_view text, const std::string& field);

// The set as memscale's short names, "q,v".
std::string lora_targets_text(std::uint8_t set);

}  // namespace memscale_plan
