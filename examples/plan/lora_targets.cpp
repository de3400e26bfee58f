// memscale-plan: LoRA target names (see lora_targets.hpp).
#include "lora_targets.hpp"

#include <string>

#include "memscale/error.hpp"
#include "memscale/lora.hpp"
#include "option_groups.hpp"
#include "suggest.hpp"

namespace memscale_plan {

memscale::lora_modules parse_lora_targets(std::string_view text, const std::string& field) {
  try {
    return memscale::parse_lora_targets(text);
  } catch (const memscale::error& e) {
    // An unknown name: offer the nearest known one.
    std::string_view rest = text;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string_view name = memscale::detail::trim(rest.substr(0, comma));
      if (!name.empty()) {
        try {
          (void)memscale::lora_module(name);
        } catch (const memscale::error&) {
          memscale_plan::nearest_name nearest(name);
          for (const auto known : memscale::lora_module_names) nearest.offer(known);
          throw usage_error(field + " names an unknown LoRA target " + in_quotes(name) + nearest.hint() +
                            " (PEFT, lit-gpt or the family's module names; see docs/estimators.md)");
        }
      }
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    // The core says "lora_targets names an unknown module ...": name the option or field instead.
    const std::string message = e.what();
    const auto at = message.find("lora_targets");
    throw usage_error(field + message.substr(at == std::string::npos ? 0 : at + std::string("lora_targets").size()) +
                      " (got " + in_quotes(text) + ")");
  }
}

std::string lora_targets_text(memscale::lora_modules set) {
  using memscale::lora_target;
  if (set == memscale::lora_all_linear) return "all-linear";
  std::string out;
  const auto add = [&](bool on, const char* name) {
    if (on) out += std::string(out.empty() ? "" : ",") + name;
  };
  // Names the core parser reads back to the same set.
  add(memscale::has(set, lora_target::q), "q");
  add(memscale::has(set, lora_target::k), "k");
  add(memscale::has(set, lora_target::v), "v");
  add(memscale::has(set, lora_target::o), "o_proj");
  const bool whole_mlp = (set & memscale::lora_mlp) == memscale::lora_mlp;
  add(whole_mlp, "mlp");
  add(!whole_mlp && memscale::has(set, lora_target::gate), "gate_proj");
  add(!whole_mlp && memscale::has(set, lora_target::up), "up_proj");
  add(!whole_mlp && memscale::has(set, lora_target::down), "down_proj");
  add(memscale::has(set, lora_target::head), "lm_head");
  add(memscale::has(set, lora_target::router), "gate");
  return out;
}

}  // namespace memscale_plan
