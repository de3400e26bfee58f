// memscale/json/framework_fields.hpp: what a record says about the framework that ran it
// (docs/research/frameworks.md sec. 9): the top-level "framework" object, the loss fields and
// the framework knobs of "train", and lit-gpt's model fields. Each is modelled or refused by
// name, never ignored.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "memscale/json/custom_sharded_layers.hpp"
#include "memscale/json/fields.hpp"
#include "memscale/json/software_stack.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale::json_io::detail {

// Whether a Liger release ("0.5.10", "0.6.2") is one its kernels are modelled at: 0.5 or later.
inline bool liger_version_modelled(const std::string& version) {
  std::size_t dot = version.find('.');
  if (dot == std::string::npos || dot == 0) return false;
  const std::string major = version.substr(0, dot);
  std::size_t end = dot + 1;
  while (end < version.size() && version[end] >= '0' && version[end] <= '9') ++end;
  const std::string minor = version.substr(dot + 1, end - dot - 1);
  if (minor.empty() || major.find_first_not_of("0123456789") != std::string::npos || major.size() > 3 ||
      minor.size() > 3)
    return false;
  return std::stoi(major) > 0 || std::stoi(minor) >= 5;
}

// torchtitan job settings that change the saved set in ways not modelled: float8 (torchao's
// Float8Linear keeps fp8 casts of inputs and weights for backward: model.converters "float8",
// components/float8.py @ f7084fc7) and torch.compile (Inductor's min-cut partitioner decides what
// forward saves: training.compile / compile.enable). Never estimated as eager bf16.
inline void refuse_torchtitan_toml(const json& toml) {
  for (const char* key : {"training.compile", "compile.enable"})
    if (toml.contains(key) && toml.at(key).is_boolean() && toml.at(key).get<bool>())
      bad_field(error_code::unsupported, std::string("framework.toml.") + key, true,
                "torch.compile is not modelled: Inductor's partitioner decides what forward saves (eager bf16 would "
                "be a different run)");
  // Pipeline parallelism changes what a rank holds (stages' microbatches): not modelled; TP is,
  // with loss_parallel as apply_tp enables it by default (ParallelDims.loss_parallel_enabled,
  // distributed/parallel_dims.py @ f7084fc7); CP is with the allgather rotation (train.cp).
  {
    const char* key = "parallelism.pipeline_parallel_degree";
    if (toml.contains(key) && toml.at(key).is_number_integer() && toml.at(key).get<std::int64_t>() > 1)
      bad_field(error_code::unsupported, std::string("framework.toml.") + key, toml.at(key),
                "must be 1: torchtitan's pipeline parallelism is not modelled");
  }
  // alltoall passes one peer's keys and values at a time (_AllToAllRotater) instead of holding
  // the gathered set: a different set of ring buffers, not modelled.
  if (toml.contains("parallelism.context_parallel_rotate_method") &&
      toml.at("parallelism.context_parallel_rotate_method") != "allgather")
    bad_field(error_code::unsupported, "framework.toml.parallelism.context_parallel_rotate_method",
              toml.at("parallelism.context_parallel_rotate_method"),
              "must be \"allgather\" (torchtitan's default): the alltoall rotation's buffers are not modelled");
  for (const char* key : {"parallelism.disable_loss_parallel", "parallelism.enable_async_tensor_parallel"})
    if (toml.contains(key) && toml.at(key).is_boolean() && toml.at(key).get<bool>())
      bad_field(error_code::unsupported, std::string("framework.toml.") + key, true,
                "must be false: TP is modelled with loss_parallel and synchronous collectives (async TP needs "
                "torch.compile)");
  if (toml.contains("model.converters")) {
    const std::string text = toml.at("model.converters").dump();
    if (text.find("float8") != std::string::npos)
      bad_field(error_code::unsupported, "framework.toml.model.converters", toml.at("model.converters"),
                "float8 is not modelled: torchao's Float8Linear saves fp8 casts of inputs and weights (eager bf16 "
                "would be a different run)");
  }
}

// litgpt's version: a 0.4 release (the config hub, read at v0.4.9), or main: "main" and "0.5" are
// the commit read (Lightning-AI/litgpt @ 26857050, tagged v0.5.13), and 0.5.5 to 0.5.13 share its
// memory rules (the restructured attention came in 0.5.5: fabf765b). 0.5.0 to 0.5.4 kept 0.4's
// interleaved qkv under other pins and are not read; later releases are not read either.
inline std::uint32_t litgpt_version(const std::string& version, const std::string& field) {
  if (version == "main" || version == "0.5") return litgpt_main;
  const version_parts v = parse_version(version, field);
  const std::uint32_t n = v.major * 10000 + v.minor * 100 + v.patch;
  if (!framework_version_modelled(framework_kind::litgpt, n))
    bad_field(error_code::unsupported, field, version,
              "is not modelled: litgpt is read at 0.4.9 (Lightning-AI/litgpt @ b0ea1772; its 0.4 releases), at main "
              "(26857050, v0.5.13; releases 0.5.5 to 0.5.13, \"main\" or \"0.5\") and, as plain litgpt, at the 2023 "
              "scripts");
  return n;
}

// A lit-gpt record's framework.version as training_spec::framework_version: a 0.4 release, or
// 0 for the 2023 scripts (the commits the dev rows and their CPU traces name, or none).
inline std::uint32_t litgpt_version_of_record(const json& record) {
  if (!record.contains("framework") || !record.at("framework").is_object() || !record.at("framework").contains("version"))
    return 0;
  const std::string version = get_string(record.at("framework"), "version", "framework", "", error_code::invalid_run);
  if (version == "8641822" || version == "b96a5708") return 0;
  return litgpt_version(version, "framework.version");
}

// The framework a record ran under: its "framework".name, which must agree with model.impl
// when both are given (lit-gpt's and torchtune's records name both).
inline framework_kind framework_of_record(const json& record) {
  const std::string impl =
      record.contains("model") && record.at("model").is_object() ? record.at("model").value("impl", std::string()) : "";
  framework_kind from_impl = framework_kind::hf;
  if (impl == "litgpt" || impl == "lit-gpt") from_impl = framework_kind::litgpt;
  if (impl == "torchtune") from_impl = framework_kind::torchtune;
  if (impl == "torchtitan") from_impl = framework_kind::torchtitan;
  if (!record.contains("framework") || record.at("framework").is_null()) return from_impl;
  const json& f = record.at("framework");
  if (!f.is_object()) bad_field(error_code::invalid_run, "framework", f, "must be an object {\"name\", \"version\", ...}");
  const std::string name = get_string(f, "name", "framework", "", error_code::invalid_run);
  framework_kind named = framework_kind::hf;
  if (name == "hf" || name == "transformers") named = framework_kind::hf;
  else if (name == "litgpt" || name == "lit-gpt") named = framework_kind::litgpt;
  else if (name == "torchtune") named = framework_kind::torchtune;
  else if (name == "torchtitan") named = framework_kind::torchtitan;
  else if (const std::string_view why = unmodelled_framework(name); !why.empty())
    bad_field(error_code::unsupported, "framework.name", name, std::string(why));
  else
    bad_field(error_code::unsupported, "framework.name", name,
              "is a framework memscale does not model yet (hf, litgpt, torchtune and torchtitan are modelled)");
  if (named != from_impl && !impl.empty())
    bad_field(error_code::invalid_run, "framework.name", name, "does not match model.impl \"" + impl + "\"");
  if (named == framework_kind::torchtune && f.contains("version")) {
    // Read from torchtune v0.6.1 (pytorch/torchtune @ a6290a5b); other releases are not read.
    const std::string version = get_string(f, "version", "framework", "", error_code::invalid_run);
    if (version.rfind("0.6.", 0) != 0)
      bad_field(error_code::unsupported, "framework.version", version, "is not modelled: torchtune is read at 0.6.1");
  }
  if (named == framework_kind::torchtitan) {
    if (f.contains("version")) {
      // Read from torchtitan v0.1.0 (pytorch/torchtitan @ f7084fc7).
      const std::string version = get_string(f, "version", "framework", "", error_code::invalid_run);
      if (version.rfind("0.1.", 0) != 0)
        bad_field(error_code::unsupported, "framework.version", version,
                  "is not modelled: torchtitan is read at 0.1.0 (pytorch/torchtitan @ f7084fc7)");
    }
    if (f.contains("toml") && f.at("toml").is_object()) refuse_torchtitan_toml(f.at("toml"));
  }
  // Liger's kernels (train.loss_impl fused_linear_ce, train.fused_rmsnorm, train.fused_swiglu) are
  // read at v0.5.10 (linkedin/Liger-Kernel @ 44a8f2fb); the buffers they make for training are
  // the same at the newest commit read (00eba634), so 0.5 and later releases are accepted.
  if (f.contains("kernels") && f.at("kernels").is_object()) {
    const json& k = f.at("kernels");
    if (k.contains("liger") && !k.at("liger").is_null()) {
      const std::string version = get_string(k, "liger", "framework.kernels", "", error_code::invalid_run);
      if (!liger_version_modelled(version))
        bad_field(error_code::unsupported, "framework.kernels.liger", version,
                  "is not modelled: Liger's kernels are read at 0.5.10 (releases 0.5 and later)");
    }
  }
  return named;
}

// Whether a run object states its loss (`loss_key`: "loss" in a run document, "loss_impl" in a
// record) or its chunks, which name the chunked loss; otherwise the script's applies.
inline bool states_loss(const json& run, const char* loss_key) {
  if (!run.is_object()) return false;
  for (const char* key : {loss_key, "loss_chunk", "loss_chunks"})
    if (run.contains(key) && !run.at(key).is_null()) return true;
  return false;
}

// train.loss_impl / loss_chunk / loss_chunks, over the framework's defaults.
inline void read_loss_fields(const json& t, training_spec& run) {
  const std::string path = "train";
  constexpr auto bad = error_code::invalid_run;
  const std::string loss = get_string(t, "loss_impl", path, "", bad);
  if (loss == "standard") {
    run.loss = loss_impl::standard;
    run.loss_chunks = 0;
  } else if (loss == "chunked") {
    run.loss = loss_impl::chunked;
  } else if (loss == "fused_linear_ce") {
    run.loss = loss_impl::fused_linear;
    run.loss_chunks = 0;
  } else if (!loss.empty()) {
    bad_field(bad, path + ".loss_impl", loss, "must be one of standard, chunked, fused_linear_ce");
  }
  if (t.contains("loss_chunk") && get_count(t, "loss_chunk", path, 0, bad) > 0)
    run.loss_chunk = get_count(t, "loss_chunk", path, 0, bad);
  const std::uint64_t chunks = get_count(t, "loss_chunks", path, 0, bad);
  if (chunks > 0 && run.loss != loss_impl::chunked)
    bad_field(bad, path + ".loss_chunks", t.at("loss_chunks"), "needs train.loss_impl chunked");
  if (t.contains("loss_chunks") && !t.at("loss_chunks").is_null()) run.loss_chunks = chunks;
}

// train.optimizer_in_backward (torchtune's optimizer_in_bwd), train.activation_offload (its
// enable_activation_offloading); train.fused_rmsnorm, fused_swiglu, fused_geglu, fused_rope and
// fused_layernorm (Liger's kernels).
inline void read_framework_knobs(const json& t, training_spec& run) {
  run.optimizer_in_backward = get_bool(t, "optimizer_in_backward", "train", false, error_code::invalid_run);
  run.paged_optimizer = get_bool(t, "paged_optimizer", "train", false, error_code::invalid_run);
  run.liger_rms_norm = get_bool(t, "fused_rmsnorm", "train", false, error_code::invalid_run);
  run.liger_swiglu = get_bool(t, "fused_swiglu", "train", false, error_code::invalid_run);
  run.liger_geglu = get_bool(t, "fused_geglu", "train", false, error_code::invalid_run);
  run.liger_rope = get_bool(t, "fused_rope", "train", false, error_code::invalid_run);
  run.liger_layer_norm = get_bool(t, "fused_layernorm", "train", false, error_code::invalid_run);
  if (const auto v = get_string(t, "liger_patching", "train", "", error_code::invalid_run); !v.empty()) {
    if (!run.liger_rms_norm)
      bad_field(error_code::invalid_run, "train.liger_patching", t.at("liger_patching"), "needs train.fused_rmsnorm true");
    run.liger_norm_patching = parse_liger_patching(v, "train.liger_patching");
  }
  if (get_bool(t, "activation_offload", "train", false, error_code::invalid_run)) {
    // torchtune's enable_activation_offloading (training/_activation_offloading.py @ a6290a5b).
    if (run.framework != framework_kind::torchtune)
      bad_field(error_code::unsupported, "train.activation_offload", true,
                "is torchtune's OffloadActivations (framework.name torchtune); other frameworks offload with "
                "\"offload\": [\"activations\"] in a run document");
    // The recipes raise without activation checkpointing (recipes/lora_finetune_single_device.py @ a6290a5b).
    if (run.ckpt != checkpointing::full)
      bad_field(error_code::invalid_run, "train.activation_offload", true,
                "needs train.checkpointing full: torchtune's recipes refuse enable_activation_offloading without "
                "enable_activation_checkpointing");
    run.offload_activations = true;
  }
}

// A record's train.precision: torchtitan's "fsdp_mixed_bf16" is bf16 compute over fp32 shards
// (MixedPrecisionPolicy(param_dtype=bfloat16), apply_fsdp @ f7084fc7), built as pure_bf16
// with the fp32 shards from the FSDP2 rule (estimate/fsdp2.hpp).
inline precision parse_record_precision(const std::string& s, const std::string& field, const training_spec& run) {
  if (s == "fsdp_mixed_bf16") {
    if (run.framework != framework_kind::torchtitan)
      bad_field(error_code::unsupported, field, s, "is torchtitan's FSDP2 mixed precision: needs framework torchtitan");
    return precision::pure_bf16;
  }
  return parse_precision(s, field);
}

// torch.compile and float8 training, refused by name wherever a run states them (`field` is
// train.compile, run.compile, --compile, ...; `float8`: which of the two).
[[noreturn]] inline void refuse_compile_or_float8(const std::string& field, bool float8) {
  bad_field(error_code::unsupported, field, true,
            float8 ? "float8 training is not modelled: torchao's Float8Linear saves fp8 casts of inputs and weights "
                     "(components/float8.py @ f7084fc7); estimating it as eager bf16 would be a different run"
                   : "torch.compile is not modelled: Inductor's partitioner decides what forward saves; estimating it "
                     "as eager would be a different run");
}

// torchtitan's activation checkpointing policy over the run's checkpointing as given
// (activation_checkpoint.mode and selective_ac_option, apply_ac @ f7084fc7): "none"; "full" with
// checkpointing full; "op" or "layer:K" with checkpointing selective ("layer:1" is every block,
// the same as full). `field` / `ckpt_field` name the two inputs in errors.
inline void apply_sac_policy(training_spec& run, const std::string& sac, const std::string& field,
                             const std::string& ckpt_field) {
  constexpr auto bad = error_code::invalid_run;
  const checkpointing as_given = run.ckpt;
  run.sac = selective_ac::none;
  run.sac_every = 0;
  if (sac == "op") {
    run.sac = selective_ac::op_save_list;
  } else if (sac.rfind("layer:", 0) == 0 && sac.size() > 6 && sac.size() < 12 &&
             sac.find_first_not_of("0123456789", 6) == std::string::npos) {
    run.sac = selective_ac::every_kth_block;
    run.sac_every = std::stoull(sac.substr(6));
    if (run.sac_every == 0) bad_field(bad, field, sac, "must name k > 0 in layer:k");
  } else if (sac == "full") {
    if (as_given != checkpointing::full) bad_field(bad, field, sac, "needs " + ckpt_field + " full");
  } else if (sac != "none") {
    bad_field(bad, field, sac, "must be one of none, full, op, layer:K");
  }
  // apply_ac's selective modes: checkpointing "selective" is the policy above.
  if (run.sac != selective_ac::none) {
    if (as_given != checkpointing::selective)
      bad_field(bad, ckpt_field, std::string(to_string(as_given)), "must be selective with sac_policy " + sac);
    run.ckpt = checkpointing::none;
    if (run.sac_every == 1) {  // every block: the same as mode full
      run.sac = selective_ac::none;
      run.sac_every = 0;
      run.ckpt = checkpointing::full;
    }
  } else if (as_given == checkpointing::selective) {
    bad_field(bad, field, sac, "must be op or layer:K with " + ckpt_field + " selective");
  }
}

// torchtitan's train fields: sac_policy (apply_sac_policy), FSDP2's param_dtype / reduce_dtype
// (only bf16 / fp32, the MixedPrecisionPolicy apply_fsdp builds) and reshard_after_forward
// (torchtitan's default: every block but the last); train.compile and train.float8 are refused
// for every framework.
inline void read_torchtitan_fields(const json& t, training_spec& run) {
  const std::string path = "train";
  constexpr auto bad = error_code::invalid_run;
  for (const char* key : {"compile", "float8"})
    if (get_bool(t, key, path, false, bad)) refuse_compile_or_float8(path + "." + key, std::string(key) == "float8");
  if (run.framework != framework_kind::torchtitan) return;
  apply_sac_policy(run, get_string(t, "sac_policy", path, "none", bad), path + ".sac_policy", path + ".checkpointing");
  if (t.contains("param_dtype") && get_string(t, "param_dtype", path, "", bad) != "bf16")
    bad_field(error_code::unsupported, path + ".param_dtype", t.at("param_dtype"),
              "is modelled as bf16 (torchtitan's mixed_precision_param bfloat16)");
  if (t.contains("reduce_dtype") && get_string(t, "reduce_dtype", path, "", bad) != "fp32")
    bad_field(error_code::unsupported, path + ".reduce_dtype", t.at("reduce_dtype"),
              "is modelled as fp32 (torchtitan's mixed_precision_reduce float32)");
  if (t.contains("reshard_after_forward") &&
      get_string(t, "reshard_after_forward", path, "", bad) != "all but the last block")
    bad_field(error_code::unsupported, path + ".reshard_after_forward", t.at("reshard_after_forward"),
              "is modelled as torchtitan's default: \"all but the last block\" (apply_fsdp)");
}

// torchtitan's context_parallel_degree: the record's train.cp, or its job TOML's
// parallelism.context_parallel_degree; both given, they must agree.
inline std::uint64_t read_context_parallel(const json& record, const json& t, const std::string& path) {
  constexpr auto bad = error_code::invalid_run;
  const char* toml_key = "parallelism.context_parallel_degree";
  const json* toml = nullptr;
  if (record.contains("framework") && record.at("framework").is_object() && record.at("framework").contains("toml") &&
      record.at("framework").at("toml").is_object() && record.at("framework").at("toml").contains(toml_key))
    toml = &record.at("framework").at("toml").at(toml_key);
  if (toml != nullptr && (!toml->is_number_integer() || toml->get<std::int64_t>() < 1))
    bad_field(bad, std::string("framework.toml.") + toml_key, *toml, "must be an integer >= 1");
  const std::uint64_t from_toml = toml != nullptr ? toml->get<std::uint64_t>() : 1;
  const std::uint64_t cp = get_count(t, "cp", path, from_toml, bad);
  if (toml != nullptr && cp != from_toml)
    bad_field(bad, path + ".cp", t.at("cp"), "must equal framework.toml." + std::string(toml_key));
  if (cp > 1 && framework_of_record(record) != framework_kind::torchtitan)
    bad_field(error_code::unsupported, path + ".cp", cp, "context parallelism is modelled for torchtitan only");
  return cp;
}

// FSDP2's fields outside torchtitan: torchtune's distributed recipes state what shard_model does
// (bf16 parameters and reduction, every layer resharded: training/_distributed.py v0.6.1); other
// runs are refused by name.
inline void refuse_unmodelled_fsdp2_fields(const json& t, const training_spec& run) {
  const std::string path = "train";
  constexpr auto bad = error_code::invalid_run;
  if (run.framework == framework_kind::torchtitan) return;
  const std::string sac = get_string(t, "sac_policy", path, "none", bad);
  if (sac != "none")
    bad_field(error_code::unsupported, path + ".sac_policy", sac,
              "selective activation checkpointing policies are modelled for torchtitan only");
  if (run.framework == framework_kind::torchtune && run.shard == sharding::full) {
    for (const char* key : {"param_dtype", "reduce_dtype"})
      if (t.contains(key) && get_string(t, key, path, "", bad) != "bf16")
        bad_field(error_code::unsupported, path + "." + key, t.at(key),
                  "is modelled as bf16 for torchtune's distributed recipes (no MixedPrecisionPolicy: the model's "
                  "bf16 dtype)");
    if (t.contains("reshard_after_forward") && get_string(t, "reshard_after_forward", path, "", bad) != "all")
      bad_field(error_code::unsupported, path + ".reshard_after_forward", t.at("reshard_after_forward"),
                "is modelled as torchtune's default: \"all\" (shard_model, reshard_after_forward=True)");
    return;
  }
  for (const char* key : {"param_dtype", "reduce_dtype", "reshard_after_forward"})
    if (t.contains(key) && !t.at(key).is_null())
      bad_field(error_code::unsupported, path + "." + key, t.at(key),
                "FSDP2 mixed precision and resharding are modelled for torchtitan and torchtune's distributed "
                "recipes only");
}

// train.offload of a torchtitan or torchtune record (one rank's FSDP2 step, not a multi-GPU layout):
// torchtune's fsdp_cpu_offload is CPUOffloadPolicy, which moves parameters, gradients and optimizer
// state together (training/_distributed.py shard_model @ v0.6.1): "optimizer+params" or "none".
inline void read_fsdp2_offload(const json& t, training_spec& run) {
  if (run.framework != framework_kind::torchtune && run.framework != framework_kind::torchtitan) return;
  const std::string offload = get_string(t, "offload", "train", "none", error_code::invalid_run);
  if (offload == "optimizer+params") run.offload_optimizer = run.offload_parameters = true;
  else if (offload != "none")
    bad_field(error_code::unsupported, "train.offload", t.at("offload"),
              "must be none or optimizer+params (fsdp_cpu_offload: CPUOffloadPolicy) for an FSDP2 framework record");
}

// framework.strategy of a litgpt record: "ModelParallelStrategy" is finetune/lora.py over several
// devices from 0.5.11 (parallel/litgpt_fsdp2.hpp), one rank's FSDP2 step; "FSDPStrategy" or none,
// the multi-GPU layout of FSDP1.
inline bool record_runs_litgpt_model_parallel(const json& record) {
  if (!record.contains("framework") || !record.at("framework").is_object() ||
      !record.at("framework").contains("strategy") || framework_of_record(record) != framework_kind::litgpt)
    return false;
  const std::string strategy = get_string(record.at("framework"), "strategy", "framework", "", error_code::invalid_run);
  if (strategy != "ModelParallelStrategy" && strategy != "FSDPStrategy")
    bad_field(error_code::unsupported, "framework.strategy", strategy,
              "must be ModelParallelStrategy or FSDPStrategy (litgpt's multi-GPU strategies)");
  return strategy == "ModelParallelStrategy";
}

// train.logits_upcast states what the loss upcast; it must be what memscale builds for the
// framework and loss: per chunk (torchtune's chunked loss), the whole logits (output(h).float(),
// HF >= 4.48, heads with logits.float()), or none.
inline void check_logits_upcast(const json& record, const model_spec& model, const training_spec& run) {
  if (!record.contains("train") || !record.at("train").contains("logits_upcast")) return;
  const std::string stated = get_string(record.at("train"), "logits_upcast", "train", "", error_code::invalid_run);
  const bool torchtune = run.framework == framework_kind::torchtune;
  const std::string modelled = run.loss == loss_impl::fused_linear ? "none"  // upcast inside the kernel
                               : run.loss == loss_impl::chunked  ? (torchtune ? "per_chunk" : "none")
                               : (model.upcast_logits || torchtune) ? "full"
                                                                    : "none";
  if (stated != "full" && stated != "per_chunk" && stated != "none")
    bad_field(error_code::invalid_run, "train.logits_upcast", stated, "must be one of full, per_chunk, none");
  if (stated != modelled)
    bad_field(error_code::unsupported, "train.logits_upcast", stated,
              "is not what memscale models for this framework and loss (" + modelled + ")");
}

// lit-gpt's model fields (rotary_pct, parallel_residual, qkv_bias): the family's row decides
// them; a record that states another value describes a model memscale does not build.
inline void check_litgpt_model_fields(const json& m, const model_spec& spec) {
  const std::string path = "model";
  constexpr auto bad = error_code::invalid_model;
  if (m.contains("rotary_pct") && !m.at("rotary_pct").is_null()) {
    const json& v = m.at("rotary_pct");
    if (!v.is_number() || v.get<double>() != spec.rotary_fraction)
      bad_field(error_code::unsupported, path + ".rotary_pct", v,
                "differs from the family's rotary fraction (" + std::to_string(spec.rotary_fraction) + ")");
  }
  if (m.contains("parallel_residual") &&
      get_bool(m, "parallel_residual", path, false, bad) != (spec.layout == block_layout::parallel))
    bad_field(error_code::unsupported, path + ".parallel_residual", m.at("parallel_residual"),
              "differs from the family's block layout");
  if (m.contains("qkv_bias") && get_bool(m, "qkv_bias", path, false, bad) != spec.qkv_bias)
    bad_field(error_code::unsupported, path + ".qkv_bias", m.at("qkv_bias"), "differs from the family's qkv bias");
}

}  // namespace memscale::json_io::detail

namespace memscale::json_io {
// Public: the command line applies torchtitan's policy and refuses compile / float8 as run documents do.
using detail::apply_sac_policy;
using detail::parse_custom_sharded_layers;
using detail::refuse_compile_or_float8;
// Public: the command line keeps a run document's stated loss over the script's default.
using detail::states_loss;
}  // namespace memscale::json_io
