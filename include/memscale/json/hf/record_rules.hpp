// memscale/json/hf/record_rules.hpp: what a ground-truth record's "model" object (shared
// ground-truth SCHEMA.md: family, layers, hidden, heads, ...) takes from the family it names.
// Each family's reader file gives its row of hf::families (json/hf_config.hpp) these rules,
// so a family's knowledge stays in that one file.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstdint>
#include <string_view>

#include "memscale/model.hpp"

namespace memscale::json_io::hf {

// The record's fields that size a family's defaults.
struct record_model {
  std::uint64_t layers = 0;
  std::uint64_t hidden = 0;
  std::uint64_t heads = 0;
  std::string_view class_name;  // the record's "name": BertForSequenceClassification, T5Model, ...
};

using record_defaults = model_spec (*)(const record_model&);

struct record_rules {
  record_defaults defaults = nullptr;  // null: records cannot name the family
  std::uint64_t position_offset = 0;   // learned position rows beyond the record's max_pos
  bool activation_label_kept = false;  // the record's "activation" names the family's own (GPT-2 says gelu for gelu_new)
  bool swiglu_is_sequential = false;   // "activation": "swiglu" means LLaMA-like sequential blocks
  std::uint64_t experts = 0;           // routed experts when the record names none
  std::uint64_t experts_per_token = 0;
};

}  // namespace memscale::json_io::hf
