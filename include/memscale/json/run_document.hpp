// memscale/json/run_document.hpp: a whole run (model, training settings, GPU, headroom) as
// one JSON document, read and written back (docs/run-json.md). memscale-plan's --run and
// --json and the web calculator (web/) use this one reader and writer.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "memscale/detail/nearest_name.hpp"
#include "memscale/allocator/alloc_conf.hpp"
#include "memscale/gpus.hpp"
#include "memscale/json/fields.hpp"
#include "memscale/json/framework_fields.hpp"
#include "memscale/json/framework_option.hpp"
#include "memscale/json/records.hpp"
#include "memscale/json/run_settings.hpp"
#include "memscale/json/software_stack.hpp"
#include "memscale/json/vision_document.hpp"
#include "memscale/json/vision_records.hpp"
#include "memscale/model.hpp"
#include "memscale/planner.hpp"
#include "memscale/presets.hpp"
#include "memscale/liger.hpp"
#include "memscale/training.hpp"
#include "memscale/validate.hpp"
#include "memscale/vision/model.hpp"
#include "memscale/vision/presets.hpp"

namespace memscale::json_io {

// What a run document describes. Fields the document leaves out keep their values here.
struct run_input {
  model_spec model = presets::gpt2;
  training_spec run = default_run();
  // How the model was given, written back by run_document_json: null for a preset (written
  // as its name), otherwise the document's model object; for a vision model, its name as given.
  json model_description;
  // A torchvision or timm model (json/vision_document.hpp), with the run's image size and
  // memory format; `model` is then unused.
  std::optional<vision::vision_spec> vision;
  std::string gpu;                     // a gpu_catalog name; empty: none (or custom_gpu)
  std::optional<gpu_spec> custom_gpu;  // a GPU described by its memory
  std::optional<double> headroom;
  std::optional<double> lora_alpha;    // scales the adapter output; no memory of its own
  std::string alloc_conf;              // PYTORCH_CUDA_ALLOC_CONF for the allocator replay; empty: defaults
  bytes context_memory{};              // a measured CUDA context + non-PyTorch memory; zero: modelled
};

// The GPU the run is planned on, if any.
inline std::optional<gpu_spec> gpu_of(const run_input& in) {
  if (in.custom_gpu) return in.custom_gpu;
  if (!in.gpu.empty()) return find_gpu(in.gpu);
  return std::nullopt;
}

namespace detail {

inline constexpr auto bad_run = error_code::invalid_run;

// Input fields of the run document, and the result fields --json adds (read back and ignored).
inline constexpr std::array<std::string_view, 8> document_fields{"model",      "run",            "gpu",      "headroom",
                                                                 "alloc_conf", "context_memory", "software", "framework"};
inline constexpr std::array<std::string_view, 11> result_fields{"parameters", "trainable_parameters", "breakdown",
                                                                "peak",       "first_step",           "static",
                                                                "plan",       "attention_kernel",     "allocator",
                                                                "ssm_kernels", "software_assumed"};
inline constexpr std::array<std::string_view, 46> run_fields{
    "micro_batch", "seq_len",   "grad_accum",   "precision",  "optimizer",    "optimizer_impl",
    "checkpointing", "attention", "target",     "lora_rank",  "lora_targets", "lora_alpha",
    "lora_variant", "lora_dropout", "quant",    "dropout",    "device",       "offload",
    "no_sync",     "output_cast", "loss",       "loss_chunk", "loss_chunks",  "optimizer_in_backward",
    "ssm_kernels", "liger",     "fused_rmsnorm", "fused_swiglu", "data_parallel", "sac_policy",
    "compile",     "float8",   "use_cache",   "packing",    "example_tokens", "fused_rope",
    "fused_geglu", "fused_layernorm", "liger_patching", "padded", "paged_optimizer", "tensor_parallel", "context_parallel",
    "custom_sharded_layers", "use_reentrant", "adapter_dtype"};
inline constexpr std::array<std::string_view, 2> gpu_fields{"memory", "bf16"};

// Every key of `obj` must be one of `known` (or `ignored`); an unknown one is an error
// naming it and the nearest known field.
inline void require_known_keys(const json& obj, std::span<const std::string_view> known, const std::string& path,
                               std::span<const std::string_view> ignored = {}) {
  if (!obj.is_object()) bad_field(bad_run, path, obj, "must be a JSON object");
  for (const auto& item : obj.items()) {
    const std::string& key = item.key();
    bool found = false;
    for (auto k : known) found = found || key == k;
    for (auto k : ignored) found = found || key == k;
    if (found) continue;
    memscale::detail::nearest_name nearest(key.size() > 64 ? std::string_view(key).substr(0, 64) : std::string_view(key));
    for (auto k : known) nearest.offer(k);
    throw error(bad_run, field_name(path, key) + " is not a field of a run document" + nearest.hint());
  }
}

inline std::uint64_t positive(const json& obj, const char* key, const std::string& path, std::uint64_t fallback) {
  const std::uint64_t v = get_count(obj, key, path, fallback, bad_run);
  if (v == 0) bad_field(bad_run, path + "." + key, obj.at(key), "must be a positive integer");
  return v;
}

inline model_spec model_of(const json& m, run_input& in) {
  if (m.is_string()) {
    const std::string name = m.get<std::string>();
    const auto found = presets::find(name);
    if (!found) {
      if (const auto why = vision::presets::refusal(name); !why.empty())  // a timm name memscale does not model
        bad_field(error_code::unsupported, "model", m, std::string(why));
      memscale::detail::nearest_name nearest(name);
      for (const auto& p : presets::all) nearest.offer(p.name);
      for (const auto& p : vision::presets::all) nearest.offer(p.name);
      bad_field(error_code::invalid_model, "model", m, "must be a preset name (see --list-models)" + nearest.hint());
    }
    in.model_description = nullptr;
    return *found;
  }
  if (!m.is_object())
    bad_field(error_code::invalid_model, "model", m, "must be a preset name or a model object (docs/run-json.md)");
  const model_spec spec = model_from_record(m);
  in.model_description = m;
  return spec;
}

inline void read_run_object(const json& r, run_input& in) {
  const std::string path = "run";
  require_known_keys(r, run_fields, path);
  training_spec& run = in.run;
  run.micro_batch = positive(r, "micro_batch", path, run.micro_batch);
  run.seq_len = positive(r, "seq_len", path, run.seq_len);
  run.grad_accum = positive(r, "grad_accum", path, run.grad_accum);
  const auto text = [&](const char* key) { return get_string(r, key, path, "", bad_run); };
  if (const auto v = text("precision"); !v.empty()) run.prec = parse_precision(v, path + ".precision");
  if (const auto v = text("optimizer"); !v.empty()) run.optimizer = parse_optimizer(v, path + ".optimizer");
  if (const auto v = text("optimizer_impl"); !v.empty())
    run.optimizer_impl = parse_optimizer_impl(v, path + ".optimizer_impl");
  if (const auto v = text("checkpointing"); !v.empty()) run.ckpt = parse_checkpointing(v, path + ".checkpointing");
  if (const auto v = text("attention"); !v.empty()) {
    run.attention = parse_attention(v, path + ".attention");
    run.flash_attention_2 = names_flash_attention_2(v);
  }
  if (const auto v = text("target"); !v.empty()) {
    if (v == "full") run.target = training_target::full;
    else if (v == "lora") run.target = training_target::lora;
    else if (v == "qlora") run.target = training_target::qlora;
    else bad_field(bad_run, path + ".target", r.at("target"), "must be full, lora or qlora");
  }
  run.lora_rank = get_count(r, "lora_rank", path, run.lora_rank, bad_run);
  if (const auto v = text("lora_targets"); !v.empty()) run.lora_targets = parse_lora_target_list(v, path + ".lora_targets");
  if (r.contains("lora_alpha") && !r.at("lora_alpha").is_null()) {
    const json& a = r.at("lora_alpha");
    if (!a.is_number() || !(a.get<double>() > 0.0 && a.get<double>() < 1e9))
      bad_field(bad_run, path + ".lora_alpha", a, "must be a positive number");
    in.lora_alpha = a.get<double>();
  }
  for (const char* key : {"lora_variant", "lora_dropout", "adapter_dtype"})
    if (!is_lora(run) && r.contains(key) && !r.at(key).is_null())
      bad_field(bad_run, path + "." + key, r.at(key), "needs run.target lora or qlora");
  if (const auto v = text("lora_variant"); !v.empty()) {
    if (v == "lora") run.lora_kind = lora_variant::lora;
    else if (v == "rslora") run.lora_kind = lora_variant::rslora;
    else if (v == "dora") run.lora_kind = lora_variant::dora;
    else bad_field(bad_run, path + ".lora_variant", r.at("lora_variant"), "must be lora, rslora or dora");
  }
  // The adapters' dtype (training.hpp adapter_dtype); absent: the framework's default.
  if (const auto v = text("adapter_dtype"); !v.empty()) {
    if (v == "base") run.adapters = adapter_dtype::as_base;
    else if (v == "fp32") run.adapters = adapter_dtype::fp32;
    else if (v == "autocast") run.adapters = adapter_dtype::autocast_dtype;
    else bad_field(bad_run, path + ".adapter_dtype", r.at("adapter_dtype"), "must be base, fp32 or autocast");
  }
  if (r.contains("lora_dropout") && !r.at("lora_dropout").is_null()) {
    const json& p = r.at("lora_dropout");
    if (!p.is_number() || !(p.get<double>() >= 0.0 && p.get<double>() < 1.0))
      bad_field(bad_run, path + ".lora_dropout", p, "must be a probability in [0, 1)");
    run.lora_dropout = p.get<double>() > 0.0;
  }
  if (const auto v = text("quant"); !v.empty()) {
    if (v == "nf4") run.quant = base_quant::nf4;
    else if (v == "nf4_double_quant") run.quant = base_quant::nf4_double_quant;
    else bad_field(bad_run, path + ".quant", r.at("quant"), "must be nf4 or nf4_double_quant");
  }
  run.dropout = get_bool(r, "dropout", path, run.dropout, bad_run);
  run.no_sync = get_bool(r, "no_sync", path, run.no_sync, bad_run);
  // use_cache as the script passes it; absent, the model's config.json decides (cache_setting::config).
  if (r.contains("use_cache") && !r.at("use_cache").is_null())
    run.use_cache = get_bool(r, "use_cache", path, true, bad_run) ? cache_setting::on : cache_setting::off;
  if (r.contains("use_reentrant") && !r.at("use_reentrant").is_null())
    run.ckpt_variant = get_bool(r, "use_reentrant", path, false, bad_run) ? checkpoint_variant::reentrant
                                                                          : checkpoint_variant::non_reentrant;
  read_packing_fields(r, path, run);
  if (const auto v = text("output_cast"); !v.empty()) run.output_cast = parse_output_cast(v, path + ".output_cast");
  if (const auto v = text("loss"); !v.empty()) {
    if (v == "standard") {
      run.loss = loss_impl::standard;
      run.loss_chunks = 0;
    } else if (v == "chunked") {
      run.loss = loss_impl::chunked;
    } else if (v == "fused_linear_ce") {
      run.loss = loss_impl::fused_linear;
      run.loss_chunks = 0;
    } else {
      bad_field(bad_run, path + ".loss", r.at("loss"), "must be standard, chunked or fused_linear_ce");
    }
  }
  // "liger": true applies what transformers' use_liger_kernel=True patches into the model: its
  // family's apply_liger_kernel_to_<model_type> defaults (liger.hpp, Liger-Kernel v0.5.10).
  if (get_bool(r, "liger", path, false, bad_run)) apply_liger(run, in.model);
  run.liger_rms_norm = get_bool(r, "fused_rmsnorm", path, run.liger_rms_norm, bad_run);
  run.liger_swiglu = get_bool(r, "fused_swiglu", path, run.liger_swiglu, bad_run);
  run.liger_rope = get_bool(r, "fused_rope", path, run.liger_rope, bad_run);
  run.liger_geglu = get_bool(r, "fused_geglu", path, run.liger_geglu, bad_run);
  run.liger_layer_norm = get_bool(r, "fused_layernorm", path, run.liger_layer_norm, bad_run);
  if (const auto v = text("liger_patching"); !v.empty()) {
    if (!run.liger_rms_norm)
      bad_field(bad_run, path + ".liger_patching", r.at("liger_patching"), "needs fused_rmsnorm (or liger) true");
    run.liger_norm_patching = parse_liger_patching(v, path + ".liger_patching");
  }
  run.loss_chunk = positive(r, "loss_chunk", path, run.loss_chunk);
  if (r.contains("loss_chunks") && !r.at("loss_chunks").is_null())
    run.loss_chunks = positive(r, "loss_chunks", path, run.loss_chunks);
  // A chunk size in tokens is read by lit-gpt's chunked loss only: refused where nothing reads it.
  if (r.contains("loss_chunk") && !r.at("loss_chunk").is_null()) {
    if (run.loss != loss_impl::chunked)
      bad_field(bad_run, path + ".loss_chunk", r.at("loss_chunk"), "needs a chunked loss (loss \"chunked\", or litgpt's)");
    if (run.loss_chunks != 0)
      bad_field(bad_run, path + ".loss_chunk", r.at("loss_chunk"),
                "counts tokens per chunk (lit-gpt's loss); torchtune's chunked loss is cut into loss_chunks pieces");
  }
  run.optimizer_in_backward = get_bool(r, "optimizer_in_backward", path, run.optimizer_in_backward, bad_run);
  run.paged_optimizer = get_bool(r, "paged_optimizer", path, run.paged_optimizer, bad_run);
  if (const auto v = text("ssm_kernels"); !v.empty()) run.ssm_kernels = parse_ssm_kernels(v, path + ".ssm_kernels");
  if (const auto v = text("device"); !v.empty()) {
    if (v == "cuda") run.device = device_kind::cuda;
    else if (v == "cpu") run.device = device_kind::cpu;
    else bad_field(bad_run, path + ".device", r.at("device"), "must be cuda or cpu");
  }
  if (r.contains("offload") && !r.at("offload").is_null()) {
    const json& list = r.at("offload");
    if (!list.is_array()) bad_field(bad_run, path + ".offload", list, "must be an array of strings");
    for (const json& item : list) {
      if (!item.is_string()) bad_field(bad_run, path + ".offload", item, "must hold strings");
      set_offload(run, item.get<std::string>(), path + ".offload");
    }
  }
  for (const char* key : {"compile", "float8"})
    if (get_bool(r, key, path, false, bad_run)) refuse_compile_or_float8(path + "." + key, std::string(key) == "float8");
  // torchtitan's checkpointing policy and the FSDP2 ranks of torchtitan and torchtune (one rank's
  // share of a fully_shard run).
  if (r.contains("sac_policy") && !r.at("sac_policy").is_null()) {
    if (run.framework != framework_kind::torchtitan)
      bad_field(error_code::unsupported, path + ".sac_policy", r.at("sac_policy"),
                "is torchtitan's activation checkpointing policy: needs framework torchtitan");
    apply_sac_policy(run, text("sac_policy"), path + ".sac_policy", path + ".checkpointing");
  } else if (r.contains("checkpointing") && !r.at("checkpointing").is_null()) {
    run.sac = selective_ac::none;
    run.sac_every = 0;
  }
  if (r.contains("custom_sharded_layers")) run.custom_sharded = read_custom_sharded_layers(r, "custom_sharded_layers", path);
  if (r.contains("data_parallel") && !r.at("data_parallel").is_null()) {
    const std::uint64_t ranks = positive(r, "data_parallel", path, 1);
    if (run.framework != framework_kind::torchtitan && run.framework != framework_kind::torchtune)
      bad_field(error_code::unsupported, path + ".data_parallel", r.at("data_parallel"),
                "is the FSDP2 ranks of torchtitan and torchtune's distributed recipes: other multi-GPU runs are "
                "laid out with --gpus and --strategy");
    run.data_parallel = ranks;
    run.shard = ranks > 1 ? sharding::full : sharding::none;
  }
  if (r.contains("tensor_parallel") && !r.at("tensor_parallel").is_null()) {
    if (run.framework != framework_kind::torchtitan)
      bad_field(error_code::unsupported, path + ".tensor_parallel", r.at("tensor_parallel"),
                "is torchtitan's tensor_parallel_degree: needs framework torchtitan (other multi-GPU runs are laid "
                "out with --gpus and --tp)");
    run.tensor_parallel = positive(r, "tensor_parallel", path, 1);
  }
  if (r.contains("context_parallel") && !r.at("context_parallel").is_null()) {
    if (run.framework != framework_kind::torchtitan)
      bad_field(error_code::unsupported, path + ".context_parallel", r.at("context_parallel"),
                "is torchtitan's context_parallel_degree: needs framework torchtitan");
    run.context_parallel = positive(r, "context_parallel", path, 1);
    // FSDP2 shards over dp_shard x cp (apply_fsdp's dp_shard_cp mesh, parallelize.py @ f7084fc7).
    if (run.context_parallel > 1) run.shard = sharding::full;
  }
}

inline void read_gpu(const json& g, run_input& in) {
  if (g.is_string()) {
    const std::string name = g.get<std::string>();
    if (!find_gpu(name)) {
      memscale::detail::nearest_name nearest(name);
      for (const auto& gpu : gpu_catalog) nearest.offer(gpu.name);
      bad_field(error_code::invalid_gpu, "gpu", g, "must be a GPU from --list-gpus" + nearest.hint());
    }
    in.gpu = name;
    in.custom_gpu.reset();
    return;
  }
  require_known_keys(g, gpu_fields, "gpu");
  if (!g.contains("memory")) bad_field(error_code::invalid_gpu, "gpu.memory", json(), "is missing");
  const json& m = g.at("memory");
  std::uint64_t memory = 0;
  if (m.is_string()) memory = parse_size(m.get<std::string>(), "gpu.memory");
  else if ((m.is_number_unsigned() && m.get<std::uint64_t>() > 0) ||
           (m.is_number_integer() && !m.is_number_unsigned() && m.get<std::int64_t>() > 0))  // json(24) is signed
    memory = m.get<std::uint64_t>();
  else bad_field(error_code::invalid_gpu, "gpu.memory", m, "must be a byte count > 0 or a size such as \"24GiB\"");
  checked_gpu_memory(memory, "gpu.memory", m.is_string() ? m.get<std::string>() : m.dump());
  const bool bf16 = get_bool(g, "bf16", "gpu", true, error_code::invalid_gpu);
  in.custom_gpu = custom_gpu(bytes{memory}, bf16);
  in.gpu.clear();
}

// The document's GPU and the allocator's settings: "gpu", "headroom", "alloc_conf", "context_memory".
inline void read_device_fields(const json& doc, run_input& in) {
  if (doc.contains("gpu")) read_gpu(doc.at("gpu"), in);
  if (doc.contains("headroom")) {
    const json& h = doc.at("headroom");
    if (!h.is_number() || !(h.get<double>() >= min_headroom && h.get<double>() <= max_headroom))
      bad_field(error_code::invalid_plan_option, "headroom", h, "must be a number within 0.10-0.15");
    in.headroom = h.get<double>();
  }
  if (doc.contains("alloc_conf")) {
    const json& c = doc.at("alloc_conf");
    if (!c.is_string())
      bad_field(bad_run, "alloc_conf", c, "must be a PYTORCH_CUDA_ALLOC_CONF string like \"expandable_segments:True\"");
    (void)allocator::parse_alloc_conf(c.get<std::string>());  // its errors name the option and the value
    in.alloc_conf = c.get<std::string>();
  }
  if (doc.contains("context_memory")) {
    const json& c = doc.at("context_memory");
    if (!c.is_number_unsigned() || c.get<std::uint64_t>() == 0)
      bad_field(bad_run, "context_memory", c, "must be a positive integer of bytes (the measured nvidia-smi - reserved)");
    in.context_memory = bytes{c.get<std::uint64_t>()};
  }
}

// A vision document's own fields, and the result fields its report adds (read back and ignored).
inline constexpr std::array<std::string_view, 7> vision_document_fields{"model",      "run",            "gpu",     "headroom",
                                                                        "alloc_conf", "context_memory", "software"};
// (json/vision_report.hpp: "architecture" is the model's description).
inline constexpr std::array<std::string_view, 10> vision_report_fields{
    "parameters", "trainable_parameters", "breakdown", "peak",         "first_step",
    "static",     "plan",                 "allocator", "architecture", "software_assumed"};

template <std::size_t N>
bool listed(const std::array<std::string_view, N>& names, std::string_view key) {
  for (auto k : names)
    if (k == key) return true;
  return false;
}

// The run object of a vision document: the shared training settings by read_run_object, then
// the image and its memory format. A transformer run's field is an error naming it.
inline void read_vision_run(const json& r, const std::string& name, vision::vision_spec& spec, run_input& in) {
  if (!r.is_object()) bad_field(bad_run, "run", r, "must be a JSON object");
  for (const auto& item : r.items()) {
    if (listed(vision_run_fields, item.key()) || !listed(run_fields, item.key())) continue;
    std::string known;
    for (auto k : vision_run_fields) known += (known.empty() ? "" : ", ") + std::string(k);
    bad_field(error_code::unsupported, "run." + item.key(), item.value(),
              "is a transformer run's field: the vision model " + name + " takes " + known);
  }
  require_known_keys(r, vision_run_fields, "run");
  json shared = r;
  shared.erase("image");
  shared.erase("channels_last");
  read_run_object(shared, in);
  read_image_size(r, spec, "run");
  spec.channels_last = get_bool(r, "channels_last", "run", spec.channels_last, bad_run);
  // vision/estimate.hpp checkpoints whole stages whatever the setting: selective would read as full.
  if (in.run.ckpt == checkpointing::selective)
    bad_field(error_code::unsupported, "run.checkpointing", r.at("checkpointing"),
              "must be none or full for a vision model (torch.utils.checkpoint over whole stages)");
}

// A document whose "model" names a torchvision or timm model (`spec`, the preset).
inline void read_vision_document(const json& doc, vision::vision_spec spec, run_input& in) {
  const std::string name = doc.at("model").get<std::string>();
  if (doc.contains("framework") && !doc.at("framework").is_null())
    bad_field(error_code::unsupported, "framework", doc.at("framework"),
              "does not apply to the vision model " + name + ": the vision estimate models torchvision's training step");
  require_known_keys(doc, vision_document_fields, "", vision_report_fields);
  if (doc.contains("run")) read_vision_run(doc.at("run"), name, spec, in);
  read_device_fields(doc, in);
  if (doc.contains("software")) read_vision_software(doc.at("software"), in.run);
  validate(in.run);
  // The graph's own checks (a ViT's image a multiple of its patch) are errors of the document.
  (void)vision::build_graph(spec, in.run);
  in.vision = spec;
  in.model_description = name;
}

// The GPU and allocator fields of `in` into the document `j`.
inline void write_device_fields(const run_input& in, json& j) {
  if (!in.gpu.empty()) j["gpu"] = in.gpu;
  if (in.custom_gpu) j["gpu"] = {{"memory", in.custom_gpu->memory.value}, {"bf16", in.custom_gpu->bf16}};
  if (!in.gpu.empty() || in.custom_gpu) j["headroom"] = in.headroom.value_or(default_headroom);
  if (!in.alloc_conf.empty()) j["alloc_conf"] = in.alloc_conf;
  if (in.context_memory.value != 0) j["context_memory"] = in.context_memory.value;
}

}  // namespace detail

// Whether `doc` describes generate() (an "infer" object, json/inference_report.hpp) rather than a
// training step; a document with both "run" and "infer" is an error naming them.
inline bool is_inference_document(const json& doc) {
  if (!doc.is_object() || !doc.contains("infer")) return false;
  if (doc.contains("run"))
    throw error(detail::bad_run, "\"run\" and \"infer\" in one document: a run document describes a training step "
                                 "(\"run\") or a generate() call (\"infer\"), not both");
  return true;
}

// Reads the run document `doc` into `out`: {"model", "run", "gpu", "headroom"} (the result
// fields --json adds are ignored), or a ground-truth record ({"model", "train"},
// tests/data/ground-truth/SCHEMA.md). `out` changes only when the whole document is valid.
// Throws memscale::error or input_error naming the field (json::exception on a type
// mismatch nlohmann reports itself); the caller adds where the document came from.
inline void read_run_document(const json& doc, run_input& out) {
  run_input in = out;
  if (!doc.is_object()) bad_field(detail::bad_run, "the document", doc, "must be a JSON object (docs/run-json.md)");
  if (is_inference_document(doc))
    throw error(detail::bad_run, "\"infer\" describes a generate() call: read it with read_inference_document "
                                 "(memscale/json/inference_report.hpp)");
  if (doc.contains("train")) {  // a ground-truth record
    in.vision.reset();
    in.model = model_from_record(doc.at("model"));
    in.model_description = doc.at("model");
    in.run = run_from_record(doc);
    check_sequence_fits(in.model, in.run.seq_len, "train.seq");
    out = std::move(in);
    return;
  }
  // A vision model's name, looked up as memscale-plan --model looks it up (torchvision first, then timm).
  if (doc.contains("model") && doc.at("model").is_string())
    if (const auto vision = vision::presets::find(doc.at("model").get<std::string>())) {
      detail::read_vision_document(doc, *vision, in);
      out = std::move(in);
      return;
    }
  detail::require_known_keys(doc, detail::document_fields, "", detail::result_fields);
  if (!doc.contains("model")) bad_field(error_code::invalid_model, "model", json(), "is missing");
  in.vision.reset();
  in.model = detail::model_of(doc.at("model"), in);
  // The framework's defaults come before the run's own settings, which override them; a
  // lit-gpt model object without one runs under lit-gpt's scripts.
  if (doc.contains("framework") && !doc.at("framework").is_null()) read_framework(doc.at("framework"), in.run);
  else if (in.model.impl == implementation::litgpt && in.run.framework != framework_kind::litgpt)
    in.run = with_framework(in.run, framework_kind::litgpt);
  if (doc.contains("run")) detail::read_run_object(doc.at("run"), in);
  // A run that states nothing of its loss computes its script's (with_script_loss: litgpt's full.py).
  if (!doc.contains("run") || !detail::states_loss(doc.at("run"), "loss")) in.run = with_script_loss(in.run);
  detail::read_device_fields(doc, in);
  if (doc.contains("software")) read_software(doc.at("software"), in.run);
  in.run = with_current_transformers(in.run);
  in.model = model_for_framework(in.model, in.run);
  validate(in.model);
  validate(in.run);
  check_framework(in.model, in.run);
  check_sequence_fits(in.model, in.run.seq_len, "run.seq_len");
  out = std::move(in);
}

// The input part of a report: "model", "run", and with a GPU "gpu" and "headroom"; read
// back by read_run_document to the same run.
inline json run_document_json(const run_input& in) {
  json j;
  if (in.vision) {
    j["model"] = in.model_description.is_string() ? in.model_description : json(vision_lookup_name(*in.vision));
    j["run"] = vision_run_json(in.run, *in.vision);
    j["software"] = vision_software_json(in.run);
    detail::write_device_fields(in, j);
    return j;
  }
  j["model"] = in.model_description.is_null() ? json(std::string(in.model.name)) : in.model_description;
  json run = run_to_json(in.run);
  if (!is_lora(in.run)) run.erase("lora_targets");
  if (is_lora(in.run)) run["lora_targets"] = lora_targets_text(in.run.lora_targets);
  if (in.lora_alpha) run["lora_alpha"] = *in.lora_alpha;
  json offload = json::array();
  if (in.run.offload_optimizer) offload.push_back("optimizer");
  if (in.run.offload_parameters) offload.push_back("parameters");
  if (in.run.offload_activations) offload.push_back("activations");
  if (!offload.empty()) run["offload"] = offload;
  j["run"] = run;
  j["software"] = software_json(in.run);
  j["framework"] = framework_json(in.run);
  detail::write_device_fields(in, j);
  return j;
}

}  // namespace memscale::json_io
