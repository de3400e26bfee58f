// memscale/detail/nearest_name.hpp: "did you mean ...?" for a misspelt option, model, GPU or
// field name (memscale-plan and the run-document reader, memscale/json/run_document.hpp).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "memscale/detail/edit_distance.hpp"

namespace memscale::detail {

// Picks the closest of the names offered to it: an edit distance of at most a third of the
// typed name (one at least), or a name that starts with what was typed ("--checkpoint").
class nearest_name {
 public:
  explicit nearest_name(std::string_view typed) : typed_(typed), limit_(typed.size() / 3 + 1) {}

  void offer(std::string_view candidate) {
    std::size_t d = edit_distance(typed_, candidate, limit_);
    if (d > limit_ && typed_.size() >= 4 && candidate.substr(0, typed_.size()) == typed_) d = limit_;
    if (d <= limit_ && d < best_distance_) {
      best_distance_ = d;
      best_ = std::string(candidate);
    }
  }

  // "; did you mean NAME?" or "" when nothing was close.
  [[nodiscard]] std::string hint() const { return best_.empty() ? "" : "; did you mean " + best_ + "?"; }

 private:
  std::string_view typed_;
  std::size_t limit_;
  std::size_t best_distance_ = static_cast<std::size_t>(-1);
  std::string best_;
};

}  // namespace memscale::detail
