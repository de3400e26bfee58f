// memscale-plan: how to switch on what the chosen mode uses (memscale/switch_on.hpp), one line
// per technique under the plan's "Chosen:" line.
#include <cstddef>
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
  if (plan.status == memscale::plan_status::cheaper_levers)
    for (std::size_t i = 0; i <= plan.levers.first_likely; ++i) {
      const memscale::lever l = plan.levers.items[i].what;
      // Checkpointing and the 8-bit optimizer are techniques, listed above.
      if (l == memscale::lever::checkpointing || l == memscale::lever::optimizer_8bit) continue;
      out += "  switch on " + std::string(memscale::to_string(l)) + ": " + std::string(memscale::how_to_switch_on(l)) +
             "\n";
    }
  return out;
}

}  // namespace memscale_plan
