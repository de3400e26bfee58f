// memscale-plan: LoRA target names (see lora_targets.hpp).
#include "lora_targets.hpp"

#include <array>
#include <utility>

#include "args.hpp"
#include "memscale/training.hpp"
#include "option_groups.hpp"
#include "suggest.hpp"

namespace memscale_plan {
namespace {

using memscale::lora_target;

constexpr std::uint8_t all_linear = lora_target::q | lora_target::k | lora_target::v | lora_target::o | lora_target::mlp;
constexpr std::uint8_t qkv = lora_target::q | lora_target::k | lora_target::v;
constexpr std::uint8_t bit(lora_target t) { return static_cast<std::uint8_t>(t); }

constexpr std::array<std::pair<std::string_view, std::uint8_t>, 20> names{{
    {"q", bit(lora_target::q)},        {"k", bit(lora_target::k)},
    {"v", bit(lora_target::v)},        {"o", bit(lora_target::o)},
    {"mlp", bit(lora_target::mlp)},    {"all-linear", all_linear},
    {"q_proj", bit(lora_target::q)},   {"k_proj", bit(lora_target::k)},
    {"v_proj", bit(lora_target::v)},   {"o_proj", bit(lora_target::o)},
    {"query", bit(lora_target::q)},    {"key", bit(lora_target::k)},
    {"value", bit(lora_target::v)},    {"c_attn", qkv},
    {"query_key_value", qkv},          {"lora_query", bit(lora_target::q)},
    {"lora_key", bit(lora_target::k)}, {"lora_value", bit(lora_target::v)},
    {"lora_projection", bit(lora_target::o)}, {"lora_mlp", bit(lora_target::mlp)},
}};

// The MLP's projections in PEFT's LLaMA-family names: the core adapts all of them or none.
constexpr std::array<std::string_view, 3> gated_mlp_names{"gate_proj", "up_proj", "down_proj"};

std::string known_names() {
  std::string out;
  for (const auto& [name, set] : names) out += std::string(out.empty() ? "" : ", ") + std::string(name);
  return out + ", gate_proj+up_proj+down_proj";
}

}  // namespace

std::uint8_t parse_lora_targets(std::string_view text, const std::string& field) {
  std::uint8_t set = 0;
  std::size_t mlp_parts = 0;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string_view name = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    start = comma == std::string_view::npos ? text.size() + 1 : comma + 1;
    bool found = false;
    for (const auto& [known, bits] : names)
      if (name == known) {
        set = static_cast<std::uint8_t>(set | bits);
        found = true;
      }
    for (std::size_t i = 0; i < gated_mlp_names.size(); ++i)
      if (name == gated_mlp_names[i]) {
        mlp_parts |= std::size_t{1} << i;
        found = true;
      }
    if (!found) {
      nearest_name nearest(name);
      for (const auto& [known, bits] : names) nearest.offer(known);
      for (const auto known : gated_mlp_names) nearest.offer(known);
      throw usage_error(field + " names an unknown LoRA target " + in_quotes(name) + nearest.hint() + " (known: " +
                        known_names() + ")");
    }
  }
  if (mlp_parts != 0 && mlp_parts != 7)
    throw usage_error(field + " must name gate_proj, up_proj and down_proj together (the MLP is adapted whole) (got " +
                      in_quotes(text) + ")");
  if (mlp_parts == 7) set = set | lora_target::mlp;
  return set;
}

std::string lora_targets_text(std::uint8_t set) {
  std::string out;
  for (std::size_t i = 0; i < 5; ++i) {  // the first five names are memscale's own: q k v o mlp
    const auto& [name, bits] = names[i];
    if ((set & bits) == bits) out += std::string(out.empty() ? "" : ",") + std::string(name);
  }
  return out;
}

}  // namespace memscale_plan
