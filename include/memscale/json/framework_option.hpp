// memscale/json/framework_option.hpp: the framework a run is planned for, as `--framework
// NAME[@VERSION]` or a run document's "framework" ("torchtune@0.6.1" or {"name", "version"}),
// written back and printed. The rules each framework brings are the library's (with_framework,
// training.hpp; as_litgpt_model, model.hpp).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "memscale/detail/nearest_name.hpp"
#include "memscale/error.hpp"
#include "memscale/json/custom_sharded_layers.hpp"
#include "memscale/json/fields.hpp"
#include "memscale/json/framework_fields.hpp"
#include "memscale/json/software_stack.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale::json_io {

inline constexpr std::array<std::string_view, 4> framework_names{"hf", "litgpt", "torchtune", "torchtitan"};

namespace detail {

inline std::string version_text(std::uint32_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

}  // namespace detail

// Sets the framework named by `name` and, if not empty, its `version`; `field` names the input
// in errors ("--framework", "framework.name"). The framework's defaults replace the run's loss
// and adapter settings (with_framework); options given afterwards override them.
inline void set_framework(training_spec& run, const std::string& name, const std::string& version,
                          const std::string& field) {
  framework_kind kind = framework_kind::hf;
  if (name == "hf" || name == "transformers") kind = framework_kind::hf;
  else if (name == "litgpt" || name == "lit-gpt") kind = framework_kind::litgpt;
  else if (name == "torchtune") kind = framework_kind::torchtune;
  else if (name == "torchtitan") kind = framework_kind::torchtitan;
  else if (const std::string_view why = detail::unmodelled_framework(name); !why.empty())
    bad_field(error_code::unsupported, field, name, std::string(why));
  else {
    memscale::detail::nearest_name nearest(name.size() > 64 ? std::string_view(name).substr(0, 64) : std::string_view(name));
    for (auto n : framework_names) nearest.offer(n);
    bad_field(error_code::invalid_run, field, name, "must be one of hf, litgpt, torchtune, torchtitan" + nearest.hint());
  }
  training_spec next = with_framework(run, kind);
  next.framework_version = 0;
  if (!version.empty()) {
    const std::string version_field = field + " version";
    switch (kind) {
      case framework_kind::hf:  // the transformers release, as --stack transformers=X sets it
        set_software_version(next, "transformers", version, version_field);
        break;
      case framework_kind::litgpt:
        next.framework_version = detail::litgpt_version(version, version_field);
        // litgpt 0.4.9 pins bitsandbytes==0.42.0 (pyproject.toml @ b0ea1772), whose MatMul4Bit keeps
        // its input; main asks for >=0.45.2 on Linux (pyproject.toml line 46 @ 26857050), which does not.
        next.bitsandbytes_version = next.framework_version >= litgpt_v0_5_5 ? 4502 : 4200;
        break;
      case framework_kind::torchtune: {
        const detail::version_parts v = detail::parse_version(version, version_field);
        next.framework_version = v.major * 10000 + v.minor * 100 + v.patch;
        if (!framework_version_modelled(kind, next.framework_version))
          bad_field(error_code::unsupported, version_field, version,
                    "is not modelled: torchtune's rules are read at 0.6.1 (its 0.6 releases)");
        break;
      }
      case framework_kind::torchtitan:
        if (version.rfind("0.1.", 0) != 0)
          bad_field(error_code::unsupported, version_field, version,
                    "is not modelled: torchtitan is read at 0.1.0 (pytorch/torchtitan @ f7084fc7)");
        break;
    }
  }
  run = next;
}

// `--framework torchtune@0.6.1`: a name, then optionally @ and a version.
inline void read_framework_option(std::string_view text, training_spec& run, const std::string& option) {
  const std::size_t at = text.find('@');
  const std::string name(text.substr(0, at));
  const std::string version = at == std::string_view::npos ? std::string() : std::string(text.substr(at + 1));
  if (at != std::string_view::npos && version.empty())
    bad_field(error_code::invalid_run, option, std::string(text), "must be NAME or NAME@VERSION, e.g. torchtune@0.6.1");
  set_framework(run, name, version, option);
}

// A run document's "framework": "torchtune", "torchtune@0.6.1" or {"name": "torchtune", "version": "0.6.1"}.
inline void read_framework(const json& f, training_spec& run) {
  if (f.is_string()) {
    read_framework_option(f.get<std::string>(), run, "framework");
    return;
  }
  if (!f.is_object())
    bad_field(error_code::invalid_run, "framework", f, "must be a name such as \"torchtune\" or {\"name\", \"version\"}");
  for (const auto& item : f.items())
    if (item.key() != "name" && item.key() != "version")
      throw error(error_code::invalid_run, field_name("framework", item.key()) + " is not a field of framework (name, version)");
  const std::string name = get_string(f, "name", "framework", "", error_code::invalid_run);
  if (name.empty()) bad_field(error_code::invalid_run, "framework.name", f.value("name", json()), "is missing");
  set_framework(run, name, get_string(f, "version", "framework", "", error_code::invalid_run), "framework.name");
}

// The framework as a run document writes it back: {"name"} and, where one is read, "version".
inline json framework_json(const training_spec& run) {
  json j = {{"name", std::string(to_string(run.framework))}};
  const std::uint32_t v = run.framework_version != 0 ? run.framework_version : framework_read_at(run.framework);
  if (v != 0) j["version"] = detail::version_text(v);
  return j;
}

// "torchtune 0.6.1: loss chunked over 8 chunks, optimizer in backward", as reports print it.
inline std::string framework_text(const training_spec& run) {
  std::string out = std::string(to_string(run.framework));
  const std::uint32_t v = run.framework_version != 0 ? run.framework_version : framework_read_at(run.framework);
  if (v != 0) out += " " + detail::version_text(v);
  if (run.framework == framework_kind::litgpt)
    out += run.framework_version == 0 ? " (scripts @ b96a5708)"
           : litgpt_repeats_kv_after_rope(run)
               ? " (main, read at v0.5.13, Lightning-AI/litgpt @ 26857050: RMSNorm in fp32, k and v repeated per query "
                 "head after RoPE)"
               : " (read at v0.4.9, Lightning-AI/litgpt @ b0ea1772: RMSNorm in fp32)";
  if (run.framework == framework_kind::torchtitan && (run.tensor_parallel > 1 || run.context_parallel > 1)) {
    const bool cp = run.context_parallel > 1;
    out += " 0.1.0 (FSDP2 over " + std::to_string(run.data_parallel) +
           (cp ? " x CP " + std::to_string(run.context_parallel) : std::string()) + " ranks";
    if (run.tensor_parallel > 1)
      out += " x TP " + std::to_string(run.tensor_parallel) + " with sequence and loss parallelism";
    if (cp) out += ", ring attention over all-gathered keys and values";
    out += ", fp32 shards, bf16 compute; one GPU's step)";
  } else if (run.framework == framework_kind::torchtitan)
    out += " 0.1.0 (FSDP2 over " + std::to_string(run.data_parallel) + " GPUs, fp32 shards, bf16 compute; one GPU's step)";
  if (run.litgpt_model_parallel)
    out += " (finetune/lora.py under ModelParallelStrategy: FSDP2 over " + std::to_string(run.data_parallel) +
           " GPUs, bf16 shards, every Block checkpointed and resharded after forward; one GPU's step)";
  if (run.framework == framework_kind::torchtune && runs_fsdp2(run))
    out += std::string(is_lora(run) ? " (lora_finetune_distributed" : " (full_finetune_distributed") + ": FSDP2 over " +
           std::to_string(run.data_parallel) + " GPUs, bf16 shards, every layer resharded after forward" +
           (run.custom_sharded.any() ? ", custom_sharded_layers " + json_io::detail::custom_sharded_layers_yaml(run.custom_sharded)
                                     : std::string()) +
           (is_lora(run) ? ", gradients and AdamW state for the adapters only" : "") + "; one GPU's step)";
  out += ": loss ";
  if (run.loss == loss_impl::standard && run.tensor_parallel > 1) out += "over the rank's vocabulary columns (loss_parallel)";
  else if (run.loss == loss_impl::standard) out += "over the whole logits";
  else if (run.loss == loss_impl::fused_linear) out += "fused with the head (Liger's fused linear cross-entropy)";
  else if (run.loss_chunks > 0) out += "chunked over " + std::to_string(run.loss_chunks) + " chunks";
  else out += "chunked every " + std::to_string(run.loss_chunk) + " tokens";
  if (run.optimizer_in_backward) out += ", optimizer in backward";
  if (run.paged_optimizer) out += ", bitsandbytes paged optimizer";
  if (run.liger_rms_norm)
    out += run.liger_norm_patching == liger_patching::instance ? ", Liger RMSNorm (the modules use_liger_kernel patches)"
                                                               : ", Liger RMSNorm (every RMSNorm module)";
  if (run.liger_swiglu) out += ", Liger SwiGLU";
  if (run.liger_geglu) out += ", Liger GEGLU";
  if (run.liger_rope) out += ", Liger RoPE";
  if (run.liger_layer_norm) out += ", Liger LayerNorm";
  if (run.sac == selective_ac::op_save_list) out += ", selective checkpointing: the per-op save list";
  if (run.sac == selective_ac::every_kth_block)
    out += ", selective checkpointing: one block in " + std::to_string(run.sac_every);
  return out;
}

// The model as the run's framework builds it: lit-gpt's scripts run lit-gpt's model code.
inline model_spec model_for_framework(const model_spec& model, const training_spec& run) {
  return run.framework == framework_kind::litgpt ? as_litgpt_model(model) : model;
}

}  // namespace memscale::json_io
