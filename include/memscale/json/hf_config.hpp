// memscale/json/hf_config.hpp: a Hugging Face config.json as a model_spec.
//
//   model_from_hf_config(json)        the config object (also a --cases record's "hf_config")
//   load_hf_model("path/config.json") a file, a model directory holding config.json, or a Hub
//   load_hf_model("Qwen/Qwen3-8B")    id looked up in the local Hub cache (no network)
//
// Each model_type has one reader in json/hf/<family>.hpp that follows the family's
// configuration_<family>.py defaults and modeling_<family>.py shapes; the parameter count
// of the result equals the published total of the class named in "architectures".
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <array>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "memscale/liger.hpp"
#include "memscale/json/hf/bert.hpp"
#include "memscale/json/hf/bloom.hpp"
#include "memscale/json/hf/cohere.hpp"
#include "memscale/json/hf/config.hpp"
#include "memscale/json/hf/deepseek.hpp"
#include "memscale/json/hf/exaone4.hpp"
#include "memscale/json/hf/falcon.hpp"
#include "memscale/json/hf/falcon_h1.hpp"
#include "memscale/json/hf/gemma.hpp"
#include "memscale/json/hf/gemma3.hpp"
#include "memscale/json/hf/gemma3n.hpp"
#include "memscale/json/hf/glm4.hpp"
#include "memscale/json/hf/gpt2.hpp"
#include "memscale/json/hf/gpt_bigcode.hpp"
#include "memscale/json/hf/gpt_neox.hpp"
#include "memscale/json/hf/gpt_oss.hpp"
#include "memscale/json/hf/gptj.hpp"
#include "memscale/json/hf/granite.hpp"
#include "memscale/json/hf/internlm2.hpp"
#include "memscale/json/hf/jamba.hpp"
#include "memscale/json/hf/llama.hpp"
#include "memscale/json/hf/llama4.hpp"
#include "memscale/json/hf/mamba.hpp"
#include "memscale/json/hf/mamba2.hpp"
#include "memscale/json/hf/mixtral.hpp"
#include "memscale/json/hf/nemotron_h.hpp"
#include "memscale/json/hf/olmo2.hpp"
#include "memscale/json/hf/olmoe.hpp"
#include "memscale/json/hf/opt.hpp"
#include "memscale/json/hf/phi.hpp"
#include "memscale/json/hf/phi3.hpp"
#include "memscale/json/hf/phimoe.hpp"
#include "memscale/json/hf/qwen2.hpp"
#include "memscale/json/hf/qwen2_5_vl.hpp"
#include "memscale/json/hf/qwen2_moe.hpp"
#include "memscale/json/hf/qwen2_vl.hpp"
#include "memscale/json/hf/qwen3.hpp"
#include "memscale/json/hf/qwen3_vl.hpp"
#include "memscale/json/hf/qwen3_moe.hpp"
#include "memscale/json/hf/record_rules.hpp"
#include "memscale/json/hf/stablelm.hpp"
#include "memscale/json/hf/starcoder2.hpp"
#include "memscale/json/hf/unknown_model_type.hpp"
#include "memscale/json/hf/t5.hpp"
#include "memscale/json/read_file.hpp"
#include "memscale/model.hpp"

namespace memscale::json_io {

namespace hf {

using family_reader = model_spec (*)(const config&);

struct family_entry {
  std::string_view model_type;
  family_reader read;    // null: no config.json reader yet (the family is known to records only)
  bool encoder = false;  // the reader sets the head itself (encoders choose pooler and MLM head)
  record_rules records{};  // how a ground-truth record naming the family is read (json/records.hpp)
};

// One row per Hugging Face model_type: the one registry of families, for config.json files
// and for ground-truth records. A new family: one json/hf/<family>.hpp, one row.
inline constexpr std::array families{
    family_entry{"gpt2", gpt2, false, gpt2_records},
    family_entry{"gpt_neox", gpt_neox, false, gpt_neox_records},
    family_entry{"gptj", gptj},
    family_entry{"opt", opt, false, opt_records},
    family_entry{"bloom", bloom, false, bloom_records},
    family_entry{"falcon", falcon, false, falcon_records},
    family_entry{"llama", llama, false, llama_records},
    family_entry{"mistral", mistral, false, llama_records},
    family_entry{"mixtral", mixtral, false, mixtral_records},
    family_entry{"qwen2", qwen2, false, qwen2_records},
    family_entry{"qwen2_moe", qwen2_moe},
    family_entry{"qwen2_vl", qwen2_vl},
    family_entry{"qwen2_5_vl", qwen2_5_vl},
    family_entry{"qwen3", qwen3},
    family_entry{"qwen3_moe", qwen3_moe},
    family_entry{"qwen3_vl", qwen3_vl},
    family_entry{"gemma", gemma, false, gemma_records},
    family_entry{"gemma2", gemma2, false, gemma2_records},
    family_entry{"gemma3_text", gemma3_text},
    family_entry{"gemma3", gemma3},
    family_entry{"gemma3n_text", gemma3n_text},
    family_entry{"gemma3n", gemma3n},
    family_entry{"phi", phi, false, phi_records},
    family_entry{"phi3", phi3, false, phi3_records},
    family_entry{"starcoder2", starcoder2},
    family_entry{"olmo2", olmo2},
    family_entry{"internlm2", internlm2},
    family_entry{"olmoe", olmoe},
    family_entry{"granite", granite},
    family_entry{"granitemoe", granitemoe},
    family_entry{"granitemoeshared", granitemoeshared},
    family_entry{"gpt_bigcode", gpt_bigcode},
    family_entry{"glm4", glm4},
    family_entry{"exaone4", exaone4},
    family_entry{"phimoe", phimoe},
    family_entry{"gpt_oss", gpt_oss},
    family_entry{"deepseek_v2", deepseek_v2},
    family_entry{"deepseek_v3", deepseek_v3},
    family_entry{"cohere", cohere},
    family_entry{"cohere2", cohere2},
    family_entry{"llama4_text", llama4_text},
    family_entry{"llama4", llama4},
    family_entry{"mamba", mamba},
    family_entry{"falcon_mamba", falcon_mamba},
    family_entry{"mamba2", mamba2},
    family_entry{"jamba", jamba},
    family_entry{"falcon_h1", falcon_h1},
    family_entry{"nemotron_h", nemotron_h},
    family_entry{"bert", bert, true, bert_records},
    family_entry{"roberta", roberta, true, roberta_records},
    family_entry{"distilbert", distilbert, true},
    family_entry{"t5", [](const config& c) { return t5_from_hf_config(c.raw()); }, true, t5_records},
    family_entry{"mt5", [](const config& c) { return t5_from_hf_config(c.raw()); }, true},
    family_entry{"stablelm", nullptr, false, stablelm_records},
};

// The row whose config.json reader reads `type`; null when no reader does.
inline const family_entry* reader_for(std::string_view type) {
  for (const auto& f : families)
    if (f.model_type == type && f.read != nullptr) return &f;
  return nullptr;
}

// The model_types a config.json may name.
inline std::vector<std::string_view> readable_model_types() {
  std::vector<std::string_view> types;
  for (const auto& f : families)
    if (f.read != nullptr) types.push_back(f.model_type);
  return types;
}

}  // namespace hf

// The model a config.json object describes, with the head of its "architectures" class.
inline model_spec model_from_hf_config(const json& cfg) {
  const hf::config c(cfg);
  const std::string type = c.text("model_type", "");
  if (type.empty()) bad_field(error_code::invalid_model, "config.model_type", json(), "is required");
  if (const hf::family_entry* f = hf::reader_for(type)) {
    model_spec m = f->read(c);
    m.name = f->model_type;
    m.liger = liger_patch_of_model_type(f->model_type);
    if (!f->encoder) hf::apply_head(c, m, head_kind::causal_lm);
    m.use_cache = c.flag("use_cache", true);  // PretrainedConfig's key, the same for every family
    return validate(m);
  }
  const std::vector<std::string_view> supported = hf::readable_model_types();
  hf::refuse_unknown_model_type(type, cfg, supported);  // names the nearest family and the ways forward
}

namespace detail {

// Python's json module writes float('inf') and float('nan') as the bare tokens Infinity,
// -Infinity and NaN (json/encoder.py floatstr, allow_nan=True), which transformers leaves in a
// config.json (Mamba2Config's time_step_limit [0.0, Infinity]). They are not JSON: each token
// outside a string becomes the string of its name, so a key that must be a number still says
// so by name, and every other key reads as written.
inline std::string python_constants_as_strings(std::string text) {
  constexpr std::string_view tokens[] = {"-Infinity", "Infinity", "NaN"};
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      out += ch;
      if (ch == '\\' && i + 1 < text.size()) out += text[++i];
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') in_string = true;
    bool replaced = false;
    for (const std::string_view t : tokens)
      if (std::string_view(text).substr(i, t.size()) == t) {
        out += '"';
        out += t;
        out += '"';
        i += t.size() - 1;
        replaced = true;
        break;
      }
    if (!replaced) out += ch;
  }
  return out;
}

inline json read_json_file(const std::filesystem::path& file) {
  const std::string source = "config " + memscale::detail::quoted_path(file.string());
  // parse_document limits the nesting depth (a 10^5-deep document would exhaust the stack).
  return parse_document(python_constants_as_strings(read_input_file(file, source)), source);
}

// huggingface_hub's cache: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub.
inline std::filesystem::path hub_cache_dir() {
  if (const char* hub = std::getenv("HF_HUB_CACHE"); hub != nullptr && *hub != '\0') return hub;
  if (const char* home = std::getenv("HF_HOME"); home != nullptr && *home != '\0')
    return std::filesystem::path(home) / "hub";
  const char* user = std::getenv("HOME");
  return std::filesystem::path(user != nullptr ? user : ".") / ".cache" / "huggingface" / "hub";
}

// ORG/NAME (or NAME) -> models--ORG--NAME/snapshots/<rev>/config.json, preferring the
// revision refs/main points at; empty when the cache holds no such config.
inline std::filesystem::path hub_config(std::string_view id) {
  namespace fs = std::filesystem;
  std::string folder = "models--";
  for (char ch : id) folder += ch == '/' ? std::string("--") : std::string(1, ch);
  const fs::path repo = hub_cache_dir() / folder;
  std::error_code ec;
  if (const fs::path ref = repo / "refs" / "main"; fs::exists(ref, ec)) {
    const std::string text = read_input_file(ref, "Hub cache ref " + memscale::detail::quoted_path(ref.string()));
    const std::string rev = text.substr(0, text.find_first_of("\r\n"));
    const fs::path p = repo / "snapshots" / rev / "config.json";
    if (!rev.empty() && fs::is_regular_file(p, ec)) return p;
  }
  fs::path newest;
  fs::file_time_type newest_time{};
  for (fs::directory_iterator it(repo / "snapshots", ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path p = it->path() / "config.json";
    if (!fs::is_regular_file(p, ec)) continue;
    const auto t = fs::last_write_time(p, ec);
    if (!ec && (newest.empty() || t > newest_time)) {
      newest = p;
      newest_time = t;
    }
  }
  return newest;
}

}  // namespace detail

// A config.json file, a directory holding one, or a Hub id in the local cache.
inline json load_hf_config_json(std::string_view path_or_hub_id) {
  namespace fs = std::filesystem;
  const fs::path given{std::string(path_or_hub_id)};
  std::error_code ec;
  if (fs::is_regular_file(given, ec)) return detail::read_json_file(given);
  // Something else at that path (a FIFO, a device): the reader refuses it, naming what it is.
  if (fs::exists(given, ec) && !fs::is_directory(given, ec)) return detail::read_json_file(given);
  if (fs::is_directory(given, ec)) {
    if (fs::is_regular_file(given / "config.json", ec)) return detail::read_json_file(given / "config.json");
    bad_field(error_code::invalid_model, "--config", std::string(path_or_hub_id), "is a directory without config.json");
  }
  const fs::path cached = detail::hub_config(path_or_hub_id);
  if (!cached.empty()) return detail::read_json_file(cached);
  bad_field(error_code::invalid_model, "--config", std::string(path_or_hub_id),
            "is neither a config.json file, a directory holding one, nor a model in the local Hub cache (" +
                detail::hub_cache_dir().string() + "; memscale never downloads)");
}

inline model_spec load_hf_model(std::string_view path_or_hub_id) {
  return model_from_hf_config(load_hf_config_json(path_or_hub_id));
}

}  // namespace memscale::json_io
