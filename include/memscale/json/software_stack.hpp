// memscale/json/software_stack.hpp: the software a run assumes (torch, transformers,
// bitsandbytes, CUDA), read from a run document's "software" object or `--stack
// torch=2.5,transformers=4.46,...`, written back and printed. The versions live in
// training_spec (torch_version, transformers_version, bitsandbytes_version,
// cuda_lazy_loading); the mechanisms that depend on them are the estimators'.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "memscale/current_releases.hpp"
#include "memscale/error.hpp"
#include "memscale/json/fields.hpp"
#include "memscale/release_text.hpp"
#include "memscale/training.hpp"

namespace memscale::json_io {

inline constexpr std::array<std::string_view, 4> software_fields{"torch", "transformers", "bitsandbytes", "cuda"};

namespace detail {

// "2.5", "2.5.1", "0.43.2+cu121": up to three numeric parts (major, minor, patch), each < 100
// except the major; anything else is refused with `field` and the value.
struct version_parts {
  std::uint32_t major = 0;
  std::uint32_t minor = 0;
  std::uint32_t patch = 0;
};

inline version_parts parse_version(const std::string& text, const std::string& field) {
  const auto refuse = [&] {
    bad_field(error_code::invalid_run, field, text, "must be a version like \"2.5\" or \"0.43.2\"");
  };
  std::array<std::uint32_t, 3> part{};
  std::size_t count = 0;
  std::size_t i = 0;
  while (count < 3) {
    std::size_t digits = 0;
    std::uint32_t v = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9' && digits < 4; ++i, ++digits)
      v = v * 10 + static_cast<std::uint32_t>(text[i] - '0');
    if (digits == 0 || (count > 0 && v >= 100) || (i < text.size() && text[i] >= '0' && text[i] <= '9')) refuse();
    part[count++] = v;
    if (i < text.size() && text[i] == '.') {
      ++i;
      continue;
    }
    break;
  }
  // A local build suffix ("+cu121", "a0", ".dev") may follow the numbers; a fourth number may not.
  if (count < 2 || (i < text.size() && text[i] >= '0' && text[i] <= '9')) refuse();
  return {part[0], part[1], part[2]};
}

}  // namespace detail

// torch, transformers and cuda as a training run and generate() both read them (a spec with
// torch_version, transformers_version and cuda_lazy_loading); false for another package.
template <class Spec>
bool set_torch_transformers_cuda(Spec& spec, std::string_view key, const detail::version_parts& v) {
  if (key == "torch") {
    spec.torch_version = v.major * 100 + v.minor;
    // CUDA_MODULE_LOADING=LAZY is set by PyTorch from 1.13 (pytorch PR #86509).
    if (spec.torch_version < 113) spec.cuda_lazy_loading = false;
  } else if (key == "transformers") {
    spec.transformers_version = v.major * 100 + v.minor;
  } else if (key == "cuda") {
    spec.cuda_version = v.major * 100 + v.minor;  // echoed by the reports
    // Lazy module loading needs CUDA 11.7 (CUDA C++ Programming Guide, "Lazy Loading").
    spec.cuda_lazy_loading = spec.cuda_version >= 1107 && spec.torch_version >= 113;
  } else {
    return false;
  }
  return true;
}

// Sets one version of the stack; `field` names it in errors ("software.torch", "--stack torch").
inline void set_software_version(training_spec& run, std::string_view key, const std::string& value,
                                 const std::string& field) {
  const detail::version_parts v = detail::parse_version(value, field);
  if (set_torch_transformers_cuda(run, key, v)) {
    // foreach became the default on CUDA in 2.0 (torch/optim/optimizer.py _default_to_fused_or_foreach).
    if (key == "torch" && run.torch_version < 200) run.optimizer_impl = optimizer_implementation::for_loop;
  } else if (key == "bitsandbytes") {
    run.bitsandbytes_version = v.major * 10000 + v.minor * 100 + v.patch;
  } else {
    throw error(error_code::invalid_run, field + " is not a known package: expected torch, transformers, bitsandbytes "
                                                 "or cuda");
  }
}

// A run document's "software": {"torch": "2.5", "transformers": "4.46", ...}.
inline void read_software(const json& sw, training_spec& run) {
  if (!sw.is_object()) bad_field(error_code::invalid_run, "software", sw, "must be an object of version strings");
  for (const auto& item : sw.items()) {
    const std::string field = "software." + item.key();
    bool known = false;
    for (auto k : software_fields) known = known || item.key() == k;
    if (!known)
      throw error(error_code::invalid_run,
                  field + " is not a known package: expected torch, transformers, bitsandbytes or cuda");
    if (!item.value().is_string())
      bad_field(error_code::invalid_run, field, item.value(), "must be a version string like \"2.5\"");
    set_software_version(run, item.key(), item.value().get<std::string>(), field);
  }
}

// Each `package=version` of a comma-separated `--stack` list, handed to set(key, version,
// field); `packages` names the accepted ones in the error for an item without '='.
template <class Set>
void for_each_stack_item(std::string_view text, const std::string& option, std::string_view packages, Set&& set) {
  if (text.empty()) throw error(error_code::invalid_run, option + " must list package=version pairs (got \"\")");
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item = text.substr(start, comma == std::string_view::npos ? text.size() - start : comma - start);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0)
      bad_field(error_code::invalid_run, option, std::string(item),
                "must be package=version, e.g. torch=2.5 (packages: " + std::string(packages) + ")");
    const std::string key(item.substr(0, eq));
    set(key, std::string(item.substr(eq + 1)), option + " " + key);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
}

// `--stack torch=2.5,transformers=4.46,bitsandbytes=0.43.2,cuda=12.4`.
inline void read_stack_option(std::string_view text, training_spec& run, const std::string& option) {
  for_each_stack_item(text, option, "torch, transformers, bitsandbytes, cuda",
                      [&](const std::string& key, const std::string& version, const std::string& field) {
                        set_software_version(run, key, version, field);
                      });
}

// A Hugging Face run that states no transformers release runs the current one. Applied by the
// doors (run documents, memscale-plan) once the framework is known; a record keeps "not stated"
// (it describes an older run), and the other frameworks run no transformers code.
inline training_spec with_current_transformers(training_spec run) {
  if (run.framework == framework_kind::hf && run.transformers_version == 0)
    run.transformers_version = current_transformers_release;
  return run;
}

// Whether a stack is the current releases' (torch and transformers), which a run that states
// none assumes: the reports say so (current_releases_text, the JSON's "software_assumed").
constexpr bool on_current_releases(std::uint32_t torch_version, std::uint32_t transformers_version) {
  return torch_version == current_torch_release && transformers_version == current_transformers_release;
}
inline constexpr std::string_view current_releases_text = " (assumed: the current releases, unless stated)";
inline constexpr std::string_view current_releases_json = "the current releases";

// The stack as a run document writes it back.
inline json software_json(const training_spec& run) {
  json j;
  j["torch"] = release_text(run.torch_version);
  if (run.transformers_version != 0) j["transformers"] = release_text(run.transformers_version);
  const std::uint32_t b = run.bitsandbytes_version;
  j["bitsandbytes"] = std::to_string(b / 10000) + "." + std::to_string(b / 100 % 100) + "." + std::to_string(b % 100);
  // A stated release as stated; otherwise only what changes an estimate: CUDA before 11.7 loads
  // every module eagerly.
  if (run.cuda_version != 0) j["cuda"] = release_text(run.cuda_version);
  else if (!run.cuda_lazy_loading && run.torch_version >= 113) j["cuda"] = "11.6";
  return j;
}

// "CUDA 12.4, modules loaded lazily", or "CUDA modules loaded lazily" when no release is stated.
inline std::string cuda_text(std::uint32_t cuda_version, bool lazy_loading) {
  return "CUDA " + (cuda_version != 0 ? release_text(cuda_version) + ", modules" : std::string("modules")) +
         " loaded " + (lazy_loading ? "lazily" : "eagerly");
}

// "torch 2.5, transformers not stated (...), bitsandbytes 0.49.2, CUDA modules loaded lazily". An
// unstated release takes 4.x's attention and experts but, as 5.x, no use_cache in training
// (graph/layers/attention.hpp): the text says both, so a 4.x run without checkpointing states it.
inline std::string software_text(const training_spec& run) {
  const std::uint32_t b = run.bitsandbytes_version;
  std::string out = "torch " + release_text(run.torch_version) + ", transformers " +
                    (run.transformers_version != 0
                         ? release_text(run.transformers_version)
                         : "not stated (4.x attention and experts; no use_cache cache in training, as from 5.0)") +
                    ", bitsandbytes " + std::to_string(b / 10000) + "." + std::to_string(b / 100 % 100) + "." +
                    std::to_string(b % 100) + ", " + cuda_text(run.cuda_version, run.cuda_lazy_loading);
  if (on_current_releases(run.torch_version, run.transformers_version)) out += current_releases_text;
  return out;
}

}  // namespace memscale::json_io
