// memscale-plan: LoRA target names (--lora-targets, "lora_targets" in a --run file), read by the
// core parser (memscale/lora.hpp parse_lora_targets: PEFT, lit-gpt and family module names).
#pragma once

#include <string>
#include <string_view>

#include "memscale/lora.hpp"

namespace memscale_plan {

// A comma-separated list of module names. Throws usage_error naming `field` and the name as typed.
memscale::lora_modules parse_lora_targets(std::string_view text, const std::string& field);

// The set as names parse_lora_targets reads back: "q,v", "all-linear", "q,v,mlp,lm_head".
std::string lora_targets_text(memscale::lora_modules set);

}  // namespace memscale_plan
