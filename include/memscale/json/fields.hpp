// memscale/json/fields.hpp: typed field access and enum parsing for the JSON adapter.
// Every error names the field and the offending value.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>
#include <algorithm>

#include "memscale/error.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale::json_io {

using json = nlohmann::json;

[[noreturn]] inline void bad_field(error_code code, const std::string& field, const json& value,
                                   std::string_view requirement) {
  throw error(code, field + " " + std::string(requirement) + " (got " + value.dump() + ")");
}

inline std::uint64_t get_count(const json& obj, const char* key, const std::string& path, std::uint64_t fallback,
                               error_code code) {
  if (!obj.contains(key) || obj.at(key).is_null()) return fallback;
  const json& v = obj.at(key);
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0)
    bad_field(code, path + "." + key, v, "must be a non-negative integer");
  return v.get<std::uint64_t>();
}

inline std::string get_string(const json& obj, const char* key, const std::string& path, const std::string& fallback,
                              error_code code) {
  if (!obj.contains(key) || obj.at(key).is_null()) return fallback;
  const json& v = obj.at(key);
  if (!v.is_string()) bad_field(code, path + "." + key, v, "must be a string");
  return v.get<std::string>();
}

inline bool get_bool(const json& obj, const char* key, const std::string& path, bool fallback, error_code code) {
  if (!obj.contains(key) || obj.at(key).is_null()) return fallback;
  const json& v = obj.at(key);
  if (!v.is_boolean()) bad_field(code, path + "." + key, v, "must be true or false");
  return v.get<bool>();
}

inline precision parse_precision(const std::string& s, const std::string& field) {
  if (s == "fp32") return precision::fp32;
  if (s == "amp_fp16") return precision::amp_fp16;
  if (s == "amp_bf16") return precision::amp_bf16;
  if (s == "pure_bf16" || s == "bf16") return precision::pure_bf16;
  if (s == "pure_fp16" || s == "fp16") return precision::pure_fp16;
  bad_field(error_code::invalid_run, field, s, "must be one of fp32, amp_fp16, amp_bf16, pure_bf16, pure_fp16");
}

inline optimizer_kind parse_optimizer(const std::string& s, const std::string& field) {
  if (s == "sgd") return optimizer_kind::sgd;
  if (s == "sgd_momentum") return optimizer_kind::sgd_momentum;
  if (s == "adam") return optimizer_kind::adam;
  if (s == "adamw") return optimizer_kind::adamw;
  if (s == "adamw_8bit" || s == "adam8bit" || s == "adamw8bit") return optimizer_kind::adamw_8bit;
  if (s == "adafactor") return optimizer_kind::adafactor;
  if (s == "lion") return optimizer_kind::lion;
  bad_field(error_code::invalid_run, field, s,
            "must be one of sgd, sgd_momentum, adam, adamw, adamw_8bit, adafactor, lion");
}

inline optimizer_implementation parse_optimizer_impl(const std::string& s, const std::string& field) {
  if (s == "foreach") return optimizer_implementation::foreach;
  if (s == "fused") return optimizer_implementation::fused;
  if (s == "for_loop" || s.rfind("single_tensor", 0) == 0) return optimizer_implementation::for_loop;
  bad_field(error_code::invalid_run, field, s, "must be one of for_loop, foreach, fused");
}

inline checkpointing parse_checkpointing(const std::string& s, const std::string& field) {
  if (s == "none") return checkpointing::none;
  if (s == "full") return checkpointing::full;
  if (s == "selective") return checkpointing::selective;
  bad_field(error_code::invalid_run, field, s, "must be one of none, full, selective");
}

inline attention_impl parse_attention(const std::string& s, const std::string& field) {
  if (s == "eager") return attention_impl::eager;
  if (s == "sdpa_math" || s == "math") return attention_impl::sdpa_math;
  if (s == "sdpa" || s == "flash" || s == "mem_efficient") return attention_impl::flash;
  bad_field(error_code::invalid_run, field, s, "must be one of eager, sdpa_math, sdpa, flash");
}

inline implementation parse_impl(const std::string& s, const std::string& field) {
  if (s == "hf-transformers" || s == "transformers" || s == "hf") return implementation::hf_transformers;
  if (s == "litgpt" || s == "lit-gpt") return implementation::litgpt;
  bad_field(error_code::unsupported, field, s, "names an implementation memscale does not model yet");
}

// Edit distance with adjacent transpositions, for spotting misspelt keys.
inline std::size_t key_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// Records may carry extra fields (SCHEMA.md), so an unknown key is accepted unless it
// looks like a misspelling of a known one ("layrs", "batch_size"): then it is an error
// naming the key and the field it resembles, instead of a silently ignored setting.
inline void reject_misspelt_keys(const json& obj, std::initializer_list<std::string_view> known,
                                 const std::string& path, error_code code) {
  if (!obj.is_object()) bad_field(code, path, obj, "must be an object");
  for (const auto& item : obj.items()) {
    const std::string& key = item.key();
    bool exact = false;
    std::string_view resembles;
    for (std::string_view k : known) {
      if (key == k) exact = true;
      const bool prefixed = key.size() > k.size() && key.compare(0, k.size(), k) == 0 && key[k.size()] == '_';
      if (prefixed || key_distance(key, k) <= (k.size() > 4 ? 2U : 1U)) resembles = k;
    }
    if (!exact && !resembles.empty())
      bad_field(code, path + "." + key, item.value(), "is not a known field; did you mean " + path + "." + std::string(resembles) + "?");
  }
}

}  // namespace memscale::json_io
