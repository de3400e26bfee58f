// memscale/json/fields.hpp: typed field access and enum parsing for the JSON adapter.
// Every error names the field and the offending value.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>
#include <algorithm>

#include "memscale/detail/edit_distance.hpp"
#include "memscale/detail/printable.hpp"
#include "memscale/error.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"
#include "memscale/validate.hpp"

namespace memscale::json_io {

using json = nlohmann::json;

// A value as it appears in a message: its JSON text (quoted and escaped for a string), cut
// to 80 characters at a character boundary (a hostile 10 MB string still gives a one-line
// message); memscale::error escapes what a terminal would act on.
inline std::string shown(const json& value) {
  constexpr std::size_t max_shown = memscale::detail::max_quoted_chars;
  const std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() <= max_shown) return text;
  std::size_t cut = max_shown;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
  return text.substr(0, cut) + "...(" + std::to_string(text.size()) + " bytes)";
}

// `path.key` as a message names a field: the key as is when it is a plain name (letters,
// digits, _ . -, at most 64), otherwise quoted, escaped and cut (a key is user text too).
inline std::string field_name(const std::string& path, const std::string& key) {
  constexpr std::size_t max_plain_key = 64;
  const bool plain = !key.empty() && key.size() <= max_plain_key &&
                     std::all_of(key.begin(), key.end(), [](char c) {
                       return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                              c == '.' || c == '-';
                     });
  const std::string shown_key = plain ? key : memscale::detail::quoted(key);
  return path.empty() ? shown_key : path + "." + shown_key;
}

[[noreturn]] inline void bad_field(error_code code, const std::string& field, const json& value,
                                   std::string_view requirement) {
  throw error(code, field + " " + std::string(requirement) + " (got " + shown(value) + ")");
}

// As bad_field, for a file path: a long path keeps its end, the file name.
[[noreturn]] inline void bad_path(error_code code, const std::string& field, std::string_view path,
                                  std::string_view requirement) {
  throw error(code, field + " " + std::string(requirement) + " (got " + memscale::detail::quoted_path(path) + ")");
}

// A model cannot take a sequence longer than its max_position_embeddings or its learned
// position table (e.g. GPT-2's wpe, 1024): the same refusal for --cases records, --run
// files, --config and the command line; `field` names where the length came from
// ("train.seq", "--seq").
inline void check_sequence_fits(const model_spec& model, std::uint64_t seq_len, const std::string& field) {
  memscale::check_sequence(model, seq_len, field);  // memscale/validate.hpp: the one rule for every path
}

// Deepest nesting of arrays and objects a document may have: records and config.json
// files need fewer than 10 levels; the limit keeps recursive walks (dump, comparison)
// far from the stack's end on hostile input.
inline constexpr std::size_t max_json_depth = 64;

// The nesting depth of `text` (brackets outside strings) when it is <= limit; otherwise
// limit + 1, found without parsing. Malformed text is left to the parser.
inline std::size_t json_depth(std::string_view text, std::size_t limit = max_json_depth) {
  std::size_t depth = 0;
  std::size_t deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return limit + 1;
      if (depth > deepest) deepest = depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

namespace detail {

// nlohmann's parse_error text with its "last read: '...'" part (the bytes of the token it
// stopped in, which can be a whole 10 MB string) quoted and cut like any echoed value. The
// token may itself hold "'; expected ", so the end is found from nlohmann's own suffix:
// "; expected " and a token_type_name (nlohmann/detail/input/lexer.hpp, 3.11), or nothing.
inline std::string parse_error_text(const std::string& message) {
  const std::string marker = "last read: '";
  const auto start = message.find(marker);
  if (start == std::string::npos) return message;
  const auto token_start = start + marker.size();
  static constexpr std::string_view expected_names[] = {
      "<uninitialized>", "true literal",  "false literal", "null literal", "string literal",
      "number literal",  "'['",           "'{'",           "']'",          "'}'",
      "':'",             "','",           "<parse error>", "end of input", "'[', '{', or a literal",
      "unknown token"};
  std::string suffix;
  for (const std::string_view name : expected_names) {
    const std::string candidate = "; expected " + std::string(name);
    if (message.size() >= token_start + candidate.size() + 1 &&
        message.compare(message.size() - candidate.size(), candidate.size(), candidate) == 0) {
      suffix = candidate;
      break;
    }
  }
  const auto quote = message.size() - suffix.size() - 1;  // the token's closing quote
  if (quote < token_start || message[quote] != '\'') return message.substr(0, start) + "last read: (cut)";
  return message.substr(0, start) + "last read: " +
         memscale::detail::quoted(std::string_view(message).substr(token_start, quote - token_start)) + suffix;
}

// Frameworks people name that memscale does not model, each with the mechanism it lacks.
inline std::string_view unmodelled_framework(std::string_view name) {
  if (name == "gpt-fast")
    return "gpt-fast's training is not modelled (its generate() is: --inference --framework gpt-fast, its static KV "
           "cache and torchao's int8 KV)";
  if (name == "deepspeed")
    return "DeepSpeed is an engine over Hugging Face's model, not a framework here: give --framework hf with --gpus N "
           "--strategy zero0|zero1|zero2|zero3, and --ds-precision fp16|bf16 for its own 16-bit engine (a 16-bit "
           "model with the fp32 master in its optimizer wrapper)";
  if (name == "trl" || name == "peft")
    return "TRL and PEFT run on Hugging Face transformers: give --framework hf (PEFT's adapters are --lora/--qlora)";
  return {};
}

}  // namespace detail

// Parses one JSON document read from `source` (a file name, for messages). Throws
// memscale::error(invalid_json) naming the source: malformed text, a NUL byte (nlohmann's
// lexer takes NUL for the end of the input, so the rest of the file would be ignored), or
// nesting deeper than max_json_depth.
inline json parse_document(std::string_view text, const std::string& source) {
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    throw error(error_code::invalid_json,
                source + " is not valid JSON: a NUL byte at offset " + std::to_string(nul) + " (JSON text has none)");
  if (json_depth(text) > max_json_depth)
    throw error(error_code::invalid_json, source + " nests arrays/objects deeper than " +
                                              std::to_string(max_json_depth) + " levels");
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e605 (a fuzz finding)
    throw error(error_code::invalid_json, source + " is not valid JSON: " + detail::parse_error_text(e.what()));
  }
}

inline std::uint64_t get_count(const json& obj, const char* key, const std::string& path, std::uint64_t fallback,
                               error_code code) {
  if (!obj.contains(key) || obj.at(key).is_null()) return fallback;
  const json& v = obj.at(key);
  if (!v.is_number_integer() || v.get<std::int64_t>() < 0)
    bad_field(code, path + "." + key, v, "must be a non-negative integer");
  return v.get<std::uint64_t>();
}

// An absent or null key takes `fallback`; a present one must be a non-empty string (an empty
// one would otherwise read as "not given" and silently take the default).
inline std::string get_string(const json& obj, const char* key, const std::string& path, const std::string& fallback,
                              error_code code) {
  if (!obj.contains(key) || obj.at(key).is_null()) return fallback;
  const json& v = obj.at(key);
  if (!v.is_string() || v.get_ref<const std::string&>().empty())
    bad_field(code, path + "." + key, v, "must be a non-empty string");
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

// "sdpa" leaves the kernel to PyTorch (memscale/attention_kernel.hpp resolves it from the
// device, dtype, mask and release); "flash" and "mem_efficient" name a fused kernel.
inline attention_impl parse_attention(const std::string& s, const std::string& field) {
  if (s == "eager") return attention_impl::eager;
  if (s == "sdpa_math" || s == "math") return attention_impl::sdpa_math;
  if (s == "sdpa") return attention_impl::sdpa;
  if (s == "flash" || s == "flash_attention_2" || s == "mem_efficient") return attention_impl::flash;
  bad_field(error_code::invalid_run, field, s, "must be one of eager, sdpa_math, sdpa, flash");
}

// "flash_attention_2" names transformers' flash-attn path (training_spec::flash_attention_2).
inline bool names_flash_attention_2(const std::string& s) { return s == "flash_attention_2"; }

// The state-space kernels (training_spec::ssm_kernels): fused (mamba-ssm), torch (the modeling
// file's slow path) or default (fused on CUDA, torch on CPU).
inline ssm_kernel_choice parse_ssm_kernels(const std::string& s, const std::string& field) {
  if (s == "fused") return ssm_kernel_choice::fused;
  if (s == "torch") return ssm_kernel_choice::torch;
  if (s == "default") return ssm_kernel_choice::framework_default;
  bad_field(error_code::invalid_run, field, s, "must be one of fused, torch, default");
}

// How Liger's function met the model (training_spec::liger_norm_patching): "classes" (called
// before the model was built) or "instance" (on the built model, as use_liger_kernel does).
inline liger_patching parse_liger_patching(const std::string& s, const std::string& field) {
  if (s == "classes") return liger_patching::classes;
  if (s == "instance") return liger_patching::instance;
  bad_field(error_code::invalid_run, field, s,
            "must be classes (apply_liger_kernel_to_<model_type>() before the model is built) or instance (on the "
            "built model, as transformers' use_liger_kernel does)");
}

// What the loop does to the model's logits before the loss (training_spec::output_cast):
// absent, the implementation's framework decides; "none" or "fp32" state it.
inline output_cast_kind parse_output_cast(const std::string& s, const std::string& field) {
  if (s.empty() || s == "framework_default") return output_cast_kind::framework_default;
  if (s == "none") return output_cast_kind::none;
  if (s == "fp32") return output_cast_kind::fp32;
  bad_field(error_code::invalid_run, field, s, "must be one of none, fp32 (absent: the framework's default)");
}

// How the micro-batch's examples become rows (training_spec::packing).
inline batch_packing parse_packing(const std::string& s, const std::string& field) {
  if (s == "none") return batch_packing::none;
  if (s == "packed") return batch_packing::packed;
  if (s == "padding_free") return batch_packing::padding_free;
  bad_field(error_code::invalid_run, field, s, "must be one of none, packed, padding_free");
}

// "packing", "example_tokens" and "padded" of a run document's run or a record's train object;
// absent, the run's own stay.
inline void read_packing_fields(const json& obj, const std::string& path, training_spec& run) {
  const std::string packing = get_string(obj, "packing", path, std::string(to_string(run.packing)), error_code::invalid_run);
  run.packing = parse_packing(packing, path + ".packing");
  run.example_tokens = get_count(obj, "example_tokens", path, run.example_tokens, error_code::invalid_run);
  run.padded = get_bool(obj, "padded", path, run.padded, error_code::invalid_run);
}

inline implementation parse_impl(const std::string& s, const std::string& field) {
  if (s == "hf-transformers" || s == "transformers" || s == "hf") return implementation::hf_transformers;
  if (s == "litgpt" || s == "lit-gpt") return implementation::litgpt;
  if (const std::string_view why = detail::unmodelled_framework(s); !why.empty())
    bad_field(error_code::unsupported, field, s, "names a framework's model code: " + std::string(why));
  bad_field(error_code::unsupported, field, s, "names an implementation memscale does not model yet");
}

// Edit distance with adjacent transpositions, for spotting misspelt keys; distances above
// `limit` read as limit + 1 (bounded work and memory for hostile keys, see edit_distance.hpp).
inline std::size_t key_distance(std::string_view a, std::string_view b, std::size_t limit = 2) {
  return memscale::detail::edit_distance(a, b, limit);
}

// Longest key compared with the known ones: a longer one cannot be a misspelling of any
// (the known keys are short), so it is skipped, not measured.
inline constexpr std::size_t max_compared_key = 64;

// Records may carry extra fields (SCHEMA.md), so an unknown key is accepted unless it
// looks like a misspelling of a known one ("layrs", "batch_size"): then it is an error
// naming the key and the field it resembles, instead of a silently ignored setting.
inline void reject_misspelt_keys(const json& obj, std::span<const std::string_view> known, const std::string& path,
                                 error_code code) {
  if (!obj.is_object()) bad_field(code, path, obj, "must be an object");
  for (const auto& item : obj.items()) {
    const std::string& key = item.key();
    if (key.size() > max_compared_key) continue;
    bool exact = false;
    std::string_view resembles;
    for (std::string_view k : known) {
      if (key == k) {
        exact = true;
        break;
      }
      const bool prefixed = key.size() > k.size() && key.compare(0, k.size(), k) == 0 && key[k.size()] == '_';
      const std::size_t limit = k.size() > 4 ? 2U : 1U;
      if (prefixed || key_distance(key, k, limit) <= limit) resembles = k;
    }
    if (!exact && !resembles.empty())
      bad_field(code, field_name(path, key), item.value(),
                "is not a known field; did you mean " + path + "." + std::string(resembles) + "?");
  }
}

inline void reject_misspelt_keys(const json& obj, std::initializer_list<std::string_view> known,
                                 const std::string& path, error_code code) {
  reject_misspelt_keys(obj, std::span<const std::string_view>(known.begin(), known.size()), path, code);
}

}  // namespace memscale::json_io
