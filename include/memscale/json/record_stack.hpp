// memscale/json/record_stack.hpp: software-stack facts a record's source states but its fields
// do not carry (docs/data/gpu_published_stack.json: torch and CUDA versions, bitsandbytes, how
// the era's Trainer zeroed gradients, the causal-LM loss of a transformers release), merged
// into the record before it is estimated. Inputs, never measured answers; a field the record
// has itself wins. The accuracy report, the budget sweep and memscale-plan --cases-stack read
// records through this.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "memscale/error.hpp"
#include "memscale/json/fields.hpp"

namespace memscale::json_io {

// The entry of `stacks` (an array of objects with "id") for `id`; an empty object if none.
inline nlohmann::json stack_entry(const nlohmann::json& stacks, const std::string& id) {
  if (!stacks.is_array()) bad_field(error_code::invalid_run, "stack file", stacks.type_name(), "must be a JSON array");
  for (const nlohmann::json& s : stacks)
    if (s.is_object() && s.contains("id") && s.at("id") == id) return s;
  return nlohmann::json::object();
}

// Whether a stack entry names the causal-LM loss of transformers >= 4.48 (loss/loss_utils.py
// ForCausalLMLoss at d0fed636: logits.float(), then labels padded and shifted instead of a
// shifted logits copy); any other value is refused.
inline bool names_shifted_labels_loss(const nlohmann::json& stack) {
  if (!stack.contains("causal_lm_loss")) return false;
  if (stack.at("causal_lm_loss") != "transformers>=4.48")
    bad_field(error_code::invalid_run, "causal_lm_loss", stack.at("causal_lm_loss"), "must be \"transformers>=4.48\"");
  return true;
}

// `record` with its entry of `stacks` merged in.
inline nlohmann::json with_stack(nlohmann::json record, const nlohmann::json& stacks) {
  if (!record.is_object() || !record.contains("id") || !record.at("id").is_string()) return record;
  const nlohmann::json stack = stack_entry(stacks, record.at("id").get<std::string>());
  for (const char* key : {"torch", "cuda"})
    if (stack.contains(key) && !record.contains(key)) record[key] = stack.at(key);
  if (stack.contains("bitsandbytes") && !record.contains("software")) record["software"]["bitsandbytes"] = stack.at("bitsandbytes");
  if (stack.contains("zero_grad") && record.contains("train") && !record.at("train").contains("zero_grad"))
    record["train"]["zero_grad"] = stack.at("zero_grad");
  // The records read the loss from their transformers release (json_io::model_for_record).
  const bool release_stated = record.contains("software") && record.at("software").contains("transformers");
  if (!release_stated && names_shifted_labels_loss(stack)) record["software"]["transformers"] = "4.48";
  return record;
}

}  // namespace memscale::json_io
