// memscale/detail/nearest_name.hpp: "did you mean ...?" for a misspelt option, model, GPU or
// field name (memscale-plan and the run-document reader, memscale/json/run_document.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "memscale/detail/edit_distance.hpp"

namespace memscale::detail {

// Picks the closest of the names offered to it. Names are compared without case and without
// the separators '-', '_', '.' and ' ' ("A100" and "a100-40gb", "--grad_accum" and
// "--grad-accum"). A name of the typed one's family comes first: one that starts with it
// ("a100" -> a100-40gb and a100-80gb, never a10; "--checkpoint" -> --checkpointing), then one
// that contains it ("4090" -> rtx4090); otherwise a name within an edit distance of a third
// of the typed one (one at least). Within the best kind the nearest by edit distance win, and
// names that tie are all offered (up to four).
class nearest_name {
 public:
  explicit nearest_name(std::string_view typed) : typed_(normal_form(typed)), limit_(typed.size() / 3 + 1) {}

  void offer(std::string_view candidate) {
    const std::string name = normal_form(candidate);
    kind k = kind::none;
    std::size_t d = edit_distance(typed_, name, limit_);
    if (typed_.size() >= family_min && name.size() > typed_.size() && name.compare(0, typed_.size(), typed_) == 0)
      k = kind::prefix;
    else if (typed_.size() >= family_min + 1 && name.find(typed_) != std::string::npos)
      k = kind::contains;
    else if (d <= limit_)
      k = kind::distance;
    if (k == kind::none) return;
    // Within a family the typed name is the shorter: its distance is bounded by the name's length.
    if (k != kind::distance) d = edit_distance(typed_, name, name.size());
    if (k < best_kind_ || (k == best_kind_ && d > best_distance_)) return;
    if (k > best_kind_ || d < best_distance_) {
      best_kind_ = k;
      best_distance_ = d;
      best_.clear();
    }
    if (best_.size() < max_offered) best_.emplace_back(candidate);
  }

  // "; did you mean NAME?", "; did you mean A or B?", "" when nothing was close.
  [[nodiscard]] std::string hint() const {
    if (best_.empty()) return "";
    std::string names = best_.front();
    for (std::size_t i = 1; i < best_.size(); ++i) names += (i + 1 == best_.size() ? " or " : ", ") + best_[i];
    return "; did you mean " + names + "?";
  }

 private:
  // Ranked: a later kind beats an earlier one whatever the distances.
  enum class kind : std::uint8_t { none, distance, contains, prefix };
  static constexpr std::size_t family_min = 3;  // shorter typed names ("a", "rt") name no family
  static constexpr std::size_t max_offered = 4;

  static std::string normal_form(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (const char c : s) {
      if (c == '-' || c == '_' || c == '.' || c == ' ') continue;
      out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    }
    return out;
  }

  std::string typed_;
  std::size_t limit_;
  kind best_kind_ = kind::none;
  std::size_t best_distance_ = static_cast<std::size_t>(-1);
  std::vector<std::string> best_;
};

}  // namespace memscale::detail

namespace memscale {

// Public: the "did you mean" of memscale's own messages, for callers that check names of their own.
using detail::nearest_name;

}  // namespace memscale
