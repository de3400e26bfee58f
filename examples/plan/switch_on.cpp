// memscale-plan: how to switch on what the chosen mode uses (memscale/switch_on.hpp), one line
// per technique under the plan's "Chosen:" line.
#include <string>

#include "memscale/switch_on.hpp"
#include "output.hpp"

namespace memscale_plan {

std::string switch_on_text(const memscale::plan_result& plan) {
  const bool has_mode = plan.status != memscale::plan_status::shorter_sequence &&
                        plan.status != memscale::plan_status::nothing_fits;
  if (!has_mode) return {};
  std::string out;
  const memscale::technique_set set = plan.chosen_plan().switched_on;
  for (const auto t : memscale::all_techniques)
    if (set.has(t))
      out += "  switch on " + std::string(memscale::to_string(t)) + ": " + std::string(memscale::how_to_switch_on(t)) +
             "\n";
  return out;
}

}  // namespace memscale_plan
