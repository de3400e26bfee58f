// memscale-plan: LoRA target names (see lora_targets.hpp); the reader and writer are shared
// with the run document (memscale/json/run_settings.hpp).
#include "lora_targets.hpp"

#include <string>

#include "memscale/json/run_settings.hpp"

namespace memscale_plan {

memscale::lora_modules parse_lora_targets(std::string_view text, const std::string& field) {
  return memscale::json_io::parse_lora_target_list(text, field);
}

std::string lora_targets_text(memscale::lora_modules set) { return memscale::json_io::lora_targets_text(set); }

}  // namespace memscale_plan
