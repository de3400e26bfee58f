// memscale/json/records.hpp: ground-truth records (shared/ground-truth/SCHEMA.md) as
// model and run descriptions, and the answer `memscale-plan --cases` gives for each.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "memscale/allocator/alloc_conf.hpp"
#include "memscale/device_peak.hpp"
#include "memscale/error_band.hpp"
#include "memscale/liger.hpp"
#include "memscale/estimate.hpp"
#include "memscale/gpus.hpp"
#include "memscale/inference/device.hpp"
#include "memscale/plan_result.hpp"
#include "memscale/json/device_report.hpp"
#include "memscale/json/fields.hpp"
#include "memscale/json/framework_fields.hpp"
#include "memscale/json/inference.hpp"
#include "memscale/json/lora_fields.hpp"
#include "memscale/json/hf/quantization.hpp"
#include "memscale/json/hf_config.hpp"
#include "memscale/json/image_fields.hpp"
#include "memscale/json/vision_records.hpp"
#include "memscale/model.hpp"
#include "memscale/presets.hpp"
#include "memscale/training.hpp"
#include "memscale/vision/device.hpp"

namespace memscale::json_io {

namespace detail {

// Whether a record's software names DeepSpeed: its ZeRO stage is then DeepSpeed's, otherwise
// PyTorch FSDP's (as Lightning and lit-gpt records describe their FSDP runs).
inline bool record_runs_deepspeed(const json& record) {
  return record.contains("software") && record.at("software").is_object() &&
         record.at("software").contains("deepspeed");
}

inline mlp_kind parse_activation(const std::string& s, const std::string& field) {
  if (s == "gelu" || s == "gelu_pytorch_tanh") return mlp_kind::gelu;
  if (s == "gelu_new" || s == "gelu_python") return mlp_kind::gelu_tanh;
  if (s == "gelu_fast") return mlp_kind::gelu_fast;
  if (s == "relu") return mlp_kind::relu;
  if (s == "swiglu" || s == "silu") return mlp_kind::swiglu;
  if (s == "geglu") return mlp_kind::geglu;
  if (s == "gated-gelu") return mlp_kind::geglu;  // T5 v1.1 feed_forward_proj (gelu_new gate)
  bad_field(error_code::invalid_model, field, s, "must be one of gelu, gelu_new, relu, swiglu, geglu");
}

// The registry row of a record's family (json/hf_config.hpp hf::families): its defaults,
// sized by the record afterwards, and how the record's other fields read for it.
inline const hf::record_rules& record_rules_of(const std::string& family, const std::string& path) {
  for (const auto& f : hf::families)
    if (f.model_type == family && f.records.defaults != nullptr) return f.records;
  bad_field(error_code::unsupported, path + ".family", family, "is not a transformer family memscale models yet");
}

// model.experts / model.experts_per_token, for every family whose block can route: a
// mixture of experts replaces a decoder's gated MLP by routed copies of it (HF
// modeling_mixtral.py MixtralSparseMoeBlock, lit-gpt LLaMAMoE). A family that routes by
// default (its registry row: Mixtral 8 experts, 2 per token) does so unless the record says
// otherwise. A family without a gated-MLP decoder block has
// no such copies to route to, so the fields are refused by name there, never ignored.
inline void read_experts(const json& m, const std::string& family, const hf::record_rules& rules,
                         const std::string& path, model_spec& spec) {
  const bool routes_by_default = rules.experts > 0;
  const auto present = [&](const char* key) { return m.contains(key) && !m.at(key).is_null(); };
  if (!routes_by_default && !present("experts") && !present("experts_per_token")) return;
  if (spec.arch != architecture::decoder || !gated_mlp(spec)) {
    const char* key = present("experts") ? "experts" : "experts_per_token";
    bad_field(error_code::unsupported, path + "." + key, m.at(key),
              "needs a decoder with a gated MLP (a mixture of experts routes each token to copies of it, HF "
              "MixtralSparseMoeBlock); the " + family + " family has none");
  }
  spec.experts = get_count(m, "experts", path, rules.experts, error_code::invalid_model);
  spec.experts_per_token = get_count(m, "experts_per_token", path, rules.experts_per_token, error_code::invalid_model);
}

// A record's "software" object ({"torch": "2.1.0", "bitsandbytes": "0.42.0", ...}), if any.
inline const json* software_of(const json& record) {
  if (!record.contains("software") || record.at("software").is_null()) return nullptr;
  const json& s = record.at("software");
  if (!s.is_object()) bad_field(error_code::invalid_run, "software", s, "must be an object of version strings");
  return &s;
}

// "1.13.0a0" -> 113, "11.2" -> 1102; 0 when the record does not name the field.
inline std::uint32_t version_field(const json& record, const char* key) {
  if (!record.contains(key) || record.at(key).is_null()) {
    const json* software = software_of(record);
    return software != nullptr ? version_field(*software, key) : 0;
  }
  const json& value = record.at(key);
  if (!value.is_string()) bad_field(error_code::invalid_run, key, value, "must be a version string like \"2.1.0\"");
  const std::string v = value.get<std::string>();
  std::uint32_t major = 0;
  std::uint32_t minor = 0;
  std::size_t i = 0;
  for (; i < v.size() && v[i] >= '0' && v[i] <= '9' && major < 100; ++i) major = major * 10 + static_cast<std::uint32_t>(v[i] - '0');
  const bool dot = i < v.size() && v[i] == '.';
  std::size_t j = i + 1;
  for (; dot && j < v.size() && v[j] >= '0' && v[j] <= '9' && minor < 100; ++j) minor = minor * 10 + static_cast<std::uint32_t>(v[j] - '0');
  if (i == 0 || !dot || j == i + 1 || minor >= 100) bad_field(error_code::invalid_run, key, value, "must be a version string like \"2.1.0\"");
  return major * 100 + minor;
}

}  // namespace detail

// A model from a ground-truth record's "model" object: the family picks the
// architecture, the numeric fields size it, "activation" and "norm" override.
inline model_spec model_from_record(const json& m) {
  const std::string path = "model";
  constexpr auto bad = error_code::invalid_model;
  if (m.is_object() && m.contains("hf_config")) {
    // {"hf_config": {...config.json...}, "impl": ...}: read by the config.json reader.
    // vision_tower_params: a multimodal record's tower alone, for the reader; the total (model.params)
    // is what detail::check_parameter_counts compares.
    reject_misspelt_keys(m, {"hf_config", "impl", "name", "params", "vision_tower_params"}, path, bad);
    model_spec spec = model_from_hf_config(m.at("hf_config"));
    // The stored format belongs to the record's run (train.quant), which says how it trained.
    if (const auto q = hf::quantization_of(m.at("hf_config")))
      bad_field(error_code::unsupported, path + ".hf_config.quantization_config.quant_method", q->method,
                "is not read from a record's config: give the run's train.quant and leave the quantization_config out");
    if (parse_impl(get_string(m, "impl", path, "hf-transformers", bad), path + ".impl") == implementation::litgpt)
      spec = as_litgpt_model(spec);
    return validate(spec);
  }
  reject_misspelt_keys(m,
                       {"family", "name", "params", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab",
                        "max_pos", "tied_embeddings", "activation", "norm", "impl", "experts", "experts_per_token",
                        "rotary_pct", "parallel_residual", "qkv_bias"},
                       path, bad);
  const std::string family = get_string(m, "family", path, "", bad);
  const std::string name = get_string(m, "name", path, "", bad);
  std::string impl_name = get_string(m, "impl", path, "hf-transformers", bad);
  // PEFT wraps a Hugging Face model: the model code is transformers', the adapters PEFT's.
  if (impl_name == "hf-transformers+peft" || impl_name == "hf+peft" || impl_name == "peft")
    impl_name = "hf-transformers";
  // torchtune's builders make the family's modules (separate q/k/v, no fused qkv); what its code
  // keeps differently is the run's framework (training_spec::framework, run_from_record).
  if (impl_name == "torchtune") impl_name = "hf-transformers";
  // torchtitan's Llama has the same modules (wq/wk/wv/wo, w1/w3/w2, repeat_kv copies:
  // models/llama3/model/model.py @ f7084fc7); its loss and FSDP2 follow the run's framework.
  if (impl_name == "torchtitan") impl_name = "hf-transformers";
  const implementation impl = parse_impl(impl_name, path + ".impl");
  const hf::record_model sizes{.layers = get_count(m, "layers", path, 0, bad),
                               .hidden = get_count(m, "hidden", path, 0, bad),
                               .heads = get_count(m, "heads", path, 0, bad),
                               .class_name = name};
  const hf::record_rules& rules = detail::record_rules_of(family, path);
  model_spec spec = rules.defaults(sizes);
  spec.impl = impl;
  spec.liger = liger_patch_of_model_type(family);  // the family is the model_type (hf_config.hpp families)
  spec.kv_heads = get_count(m, "kv_heads", path, 0, bad);
  spec.head_dim = get_count(m, "head_dim", path, 0, bad);
  spec.ffn = get_count(m, "ffn", path, 0, bad);
  spec.vocab = get_count(m, "vocab", path, 0, bad);
  if (spec.positions == position_kind::learned) {
    spec.max_positions = get_count(m, "max_pos", path, 0, bad);
    spec.max_positions += rules.position_offset;
  }
  spec.tied_embeddings = get_bool(m, "tied_embeddings", path, spec.tied_embeddings, bad) &&
                         spec.head != head_kind::sequence_classification;
  const std::string norm = get_string(m, "norm", path, "", bad);
  if (norm == "rmsnorm") spec.norm = norm_kind::rmsnorm;
  else if (norm == "layernorm") spec.norm = norm_kind::layernorm;
  else if (!norm.empty()) bad_field(bad, path + ".norm", norm, "must be layernorm or rmsnorm");
  const std::string act = get_string(m, "activation", path, "", bad);
  if (!act.empty() && !rules.activation_label_kept) {
    const mlp_kind k = detail::parse_activation(act, path + ".activation");
    const bool was_gated = gated_mlp(spec);
    spec.mlp = k;
    // A gated family stays gated for "gelu" (Gemma's GeGLU is labelled gelu).
    if (was_gated && k == mlp_kind::gelu) spec.mlp = mlp_kind::geglu;
    if (spec.mlp == mlp_kind::swiglu && rules.swiglu_is_sequential && impl == implementation::hf_transformers)
      spec.layout = block_layout::sequential;
  }
  detail::read_experts(m, family, rules, path, spec);  // after the activation: it decides whether the MLP is gated
  if (impl == implementation::litgpt) spec = as_litgpt_model(spec);
  detail::check_litgpt_model_fields(m, spec);
  return validate(spec);
}

// A run from a ground-truth record's "train" object (and the record's device).
inline training_spec run_from_record(const json& record) {
  const std::string path = "train";
  constexpr auto bad = error_code::invalid_run;
  const json& t = record.at("train");
  reject_misspelt_keys(t,
                       {"batch", "seq", "image", "precision", "optimizer", "optimizer_impl", "checkpointing",
                        "attention", "grad_accum", "lora_rank", "lora_alpha", "lora_targets", "frozen", "quant",
                        "zero_stage", "dp", "tp", "cp", "dropout", "trainable_params", "zero_grad", "target_seq",
                        "lora_variant", "lora_dropout", "trainable_dtype", "steps", "padding", "output_cast",
                        // the framework's loss and knobs (json/framework_fields.hpp)
                        "loss_impl", "loss_chunk", "loss_chunks", "logits_upcast", "optimizer_in_backward",
                        "paged_optimizer",
                        "activation_offload", "sac_policy", "fused_rmsnorm", "fused_swiglu", "fused_geglu", "fused_rope",
                        "fused_layernorm", "liger_patching", "param_dtype",
                        "reduce_dtype", "reshard_after_forward", "custom_sharded_layers",
                        // the state-space kernels (training.hpp ssm_kernel_choice)
                        "ssm_path",
                        // the model's use_cache argument (training.hpp cache_setting)
                        "use_cache",
                        // which torch.utils.checkpoint wraps each block (training.hpp checkpoint_variant)
                        "use_reentrant",
                        // how examples become rows (training.hpp batch_packing)
                        "packing", "example_tokens", "padded",
                        // multi-GPU layout (SCHEMA.md), read by json/parallel_record.hpp
                        "nodes", "fsdp", "offload", "pp", "sp", "micro_batches_in_flight",
                        // a multimodal run's images (json/image_fields.hpp)
                        "images_per_sample", "min_pixels", "max_pixels"},
                       path, bad);
  // DeepSpeed's own precision engine lives on the layout (parallel_spec::deepspeed): only the
  // multi-GPU reader (json/parallel_record.hpp estimate_parallel_record) applies it.
  for (const char* key : {"ds_precision", "reduce_bucket_size"})
    if (t.contains(key))
      bad_field(error_code::unsupported, path + "." + key, t.at(key),
                "is read with the multi-GPU layout only (a record with train.dp > 1 and train.zero_stage, estimated "
                "per GPU by --cases)");
  training_spec run = with_framework(training_spec{}, detail::framework_of_record(record));
  if (run.framework == framework_kind::litgpt) run.framework_version = detail::litgpt_version_of_record(record);
  read_images(t, run);
  run.micro_batch = get_count(t, "batch", path, 1, bad);
  run.seq_len = get_count(t, "seq", path, 0, bad);
  if (run.seq_len == 0) bad_field(error_code::unsupported, path + ".seq", t.value("seq", json()),
                                  "is missing: only sequence models are modelled yet");
  run.target_len = get_count(t, "target_seq", path, 0, bad);  // encoder-decoder decoder tokens
  run.prec = detail::parse_record_precision(get_string(t, "precision", path, "fp32", bad), path + ".precision", run);
  run.optimizer = parse_optimizer(get_string(t, "optimizer", path, "adamw", bad), path + ".optimizer");
  run.grad_accum = get_count(t, "grad_accum", path, 1, bad);
  run.ckpt = parse_checkpointing(get_string(t, "checkpointing", path, "none", bad), path + ".checkpointing");
  const std::string attention = get_string(t, "attention", path, "sdpa", bad);
  run.attention = parse_attention(attention, path + ".attention");
  run.flash_attention_2 = names_flash_attention_2(attention);
  detail::read_adapters(t, run);
  detail::read_dropout_field(t, run);
  const auto dp = get_count(t, "dp", path, 1, bad);
  const auto zero = get_count(t, "zero_stage", path, 0, bad);
  if (zero > 3) bad_field(bad, path + ".zero_stage", t.at("zero_stage"), "must be 0, 1, 2 or 3");
  // torchtitan's CP ranks join the FSDP2 mesh (dp_shard_cp): dp 1 with cp > 1 still shards.
  const std::uint64_t cp = detail::read_context_parallel(record, t, path);
  if (zero > 0 && dp * cp < 2)
    bad_field(bad, path + ".dp", t.value("dp", json()), "must be > 1 with train.zero_stage > 0 (or train.cp > 1)");
  const auto tp = get_count(t, "tp", path, 1, bad);
  // torchtitan's tensor_parallel_degree (apply_tp); elsewhere a record's TP is not modelled.
  if (tp > 1 && detail::framework_of_record(record) != framework_kind::torchtitan)
    bad_field(error_code::unsupported, path + ".tp", t.at("tp"), "tensor parallelism is modelled for torchtitan only");
  run.data_parallel = dp;
  run.shard = zero == 3 ? sharding::full : zero == 2 ? sharding::gradients : zero == 1 ? sharding::optimizer_state
                                                                                     : sharding::none;
  // A stage 2 or 3 outside DeepSpeed is FSDP1's, as json/parallel_record.hpp parallel_from_record
  // reads the layout (torchtitan and torchtune shard with FSDP2).
  run.litgpt_model_parallel = detail::record_runs_litgpt_model_parallel(record);
  run.fsdp_flat_views = zero >= 2 && !detail::record_runs_deepspeed(record) && !runs_fsdp2(run);
  const std::string device = record.value("device", std::string("cuda"));
  run.device = device == "cpu" ? device_kind::cpu : device_kind::cuda;
  // The software stack, when the record names it ("torch": "1.13.0", "cuda": "11.2"):
  // several allocation behaviours changed between releases.
  const std::uint32_t torch = detail::version_field(record, "torch");
  const std::uint32_t cuda = detail::version_field(record, "cuda");
  if (torch != 0) {
    run.torch_version = torch;
    // foreach became the default on CUDA in 2.0 (torch/optim/optimizer.py
    // _default_to_fused_or_foreach); before, every optimizer looped per parameter.
    if (torch < 200) run.optimizer_impl = optimizer_implementation::for_loop;
    // CUDA_MODULE_LOADING=LAZY is set by PyTorch from 1.13 (pytorch PR #86509).
    if (torch < 113) run.cuda_lazy_loading = false;
  }
  run.bitsandbytes_version = detail::read_bitsandbytes_version(record);
  run.transformers_version = detail::version_field(record, "transformers");
  // The record's GPU, when the table knows it, sets the BLAS workspace (32 MiB on Hopper).
  if (const auto gpu = find_gpu(device); gpu && run.device == device_kind::cuda) run.blas_workspace = gpu->cublas_workspace;
  // Lazy module loading needs CUDA 11.7 (CUDA C++ Programming Guide, "Lazy Loading").
  if (cuda != 0 && cuda < 1107) run.cuda_lazy_loading = false;
  // "zero": gradients are zeroed in place between steps and stay allocated through the
  // next forward (Module.zero_grad() before PyTorch 2.0, as the HF Trainer of 2022 called
  // it); "none": freed (set_to_none=True, the default from 2.0).
  const std::string zero_grad = get_string(t, "zero_grad", path, "none", bad);
  if (zero_grad != "none" && zero_grad != "zero") bad_field(bad, path + ".zero_grad", zero_grad, "must be none or zero");
  run.zero_grad_to_none = zero_grad == "none";
  const std::string opt_impl = get_string(t, "optimizer_impl", path, "", bad);
  if (!opt_impl.empty()) run.optimizer_impl = parse_optimizer_impl(opt_impl, path + ".optimizer_impl");
  if (!detail::states_loss(t, "loss_impl")) run = with_script_loss(run);
  detail::read_loss_fields(t, run);
  detail::read_framework_knobs(t, run);
  detail::read_torchtitan_fields(t, run);
  run.tensor_parallel = tp;
  run.context_parallel = cp;
  detail::refuse_unmodelled_fsdp2_fields(t, run);
  detail::read_fsdp2_offload(t, run);
  run.custom_sharded = detail::read_custom_sharded_layers(t, "custom_sharded_layers", path);
  run.ssm_kernels = parse_ssm_kernels(get_string(t, "ssm_path", path, "default", bad), path + ".ssm_path");
  run.output_cast = parse_output_cast(get_string(t, "output_cast", path, "", bad), path + ".output_cast");
  // What the script passed as use_cache; without it, the model's config.json (model.hf_config).
  if (t.contains("use_cache") && !t.at("use_cache").is_null())
    run.use_cache = get_bool(t, "use_cache", path, true, bad) ? cache_setting::on : cache_setting::off;
  if (t.contains("use_reentrant") && !t.at("use_reentrant").is_null())
    run.ckpt_variant = get_bool(t, "use_reentrant", path, false, bad) ? checkpoint_variant::reentrant
                                                                      : checkpoint_variant::non_reentrant;
  read_packing_fields(t, path, run);
  return validate(run);
}


// The estimate quantity a record's "measure" names.
enum class quantity : std::uint8_t { tensor, allocated, reserved, device };

inline quantity quantity_of(const std::string& measure) {
  if (measure == "cpu-tensor-peak") return quantity::tensor;
  if (measure == "max_memory_allocated") return quantity::allocated;
  if (measure == "max_memory_reserved") return quantity::reserved;
  if (measure == "nvidia-smi") return quantity::device;
  bad_field(error_code::invalid_run, "measure", measure,
            "must be one of cpu-tensor-peak, max_memory_allocated, max_memory_reserved, nvidia-smi");
}

inline std::string_view to_string(quantity q) {
  switch (q) {
    case quantity::tensor: return "tensor";
    case quantity::allocated: return "allocated";
    case quantity::reserved: return "reserved";
    case quantity::device: return "device";
  }
  return "tensor";
}

inline bytes pick(const peak_estimate& p, quantity q) {
  switch (q) {
    case quantity::tensor:
    case quantity::allocated: return p.tensor;
    case quantity::reserved: return p.reserved;
    case quantity::device: return p.device;
  }
  return p.tensor;
}

namespace detail {

// A run measured with PYTORCH_CUDA_ALLOC_CONF options (the record's "alloc_conf") replays with them.
inline device_options record_device_options(const json& record) {
  device_options o{};
  if (record.contains("alloc_conf")) {
    const json& c = record.at("alloc_conf");
    if (!c.is_string())
      bad_field(error_code::invalid_run, "alloc_conf", c, "must be a PYTORCH_CUDA_ALLOC_CONF string like \"expandable_segments:True\"");
    o.allocator = allocator::parse_alloc_conf(c.get<std::string>()).settings;  // its errors name the option
  }
  return o;
}

// The GPU a record ran on, when the catalog has it.
inline std::optional<gpu_spec> record_gpu(const json& record) {
  return find_gpu(record.value("device", std::string("cuda")));
}

// A record's reserved or device figure as a report on its GPU states it (memscale/device_peak.hpp:
// the allocator replay and the context model, or the rounding rule where the replay does not
// reach); `d` is the path's device estimate of the run on that GPU.
template <class DeviceEstimate>
bytes device_quantity(const DeviceEstimate& d, quantity q) {
  return q == quantity::reserved ? d.reserved : d.device;
}

// A training record's class of run and error band (memscale/error_band.hpp), and, when its
// device is a GPU of the catalog, the verdict the planner's rule gives at that GPU's budget
// (default headroom) and the allocator replay's figures with the capped replay's point verdict.
inline void add_class_and_verdict(json& out, const json& record, const model_spec& model, const training_spec& run) {
  // The band of the quantity the record measured: its tensors, or what the card held.
  const quantity measured = quantity_of(record.value("measure", std::string("max_memory_allocated")));
  const bool tensors = measured == quantity::tensor || measured == quantity::allocated;
  const run_class of = class_of(model, run);
  const error_band& band = band_of(of, tensors ? band_quantity::tensor : band_quantity::device);
  out["class"] = std::string(to_string(band.of));
  out["band"] = {{"low", band.low},
                 {"high", band.high},
                 {"measured", band.measured},
                 {"quantity", std::string(to_string(band.quantity))}};
  const auto gpu = find_gpu(record.value("device", std::string("cuda")));
  if (!gpu || run.device != device_kind::cuda) {
    out["verdict"] = nullptr;
    return;
  }
  const training_spec on_device = on_gpu(run, *gpu);
  const bytes budget = budget_of(*gpu);
  const estimate_result e = estimate(model, on_device);
  out["verdict"] = {{"gpu", std::string(gpu->name)},
                    {"budget", budget.value},
                    {"peak", overall_peak(e).device.value},
                    {"verdict", std::string(to_string(verdict_of(
                                    range_of(overall_peak(e).device, band_of(of, band_quantity::device)), budget)))}};
  const device_options o = record_device_options(record);
  try {  // the replay's own limits must not turn a modelled record into an error
    const device_estimate d = estimate_on_device(model, on_device, &*gpu, o);
    const device_verdict v = verdict_on_device(model, on_device, d, budget, o);
    out["replay"] = {{"replayed", d.replayed()},
                     {"fallback", std::string(to_string(d.fallback))},
                     {"reserved", d.reserved.value},
                     {"device", d.device.value},
                     {"band", band_json(v.band)},
                     {"verdict", std::string(to_string(v.v))},
                     {"basis", std::string(to_string(v.point.basis))},
                     {"context", context_json(d)}};
    if (record.contains("alloc_conf")) out["replay"]["alloc_conf"] = record.at("alloc_conf");
  } catch (const error& refused) {
    out["replay"] = {{"error", refused.what()}};
  }
}

}  // namespace detail

// One --cases answer: {"id", "estimated_bytes", "quantity"} or {"id", "error"}; training
// records add "class", "band", "verdict" and "replay" (detail::add_class_and_verdict). A CUDA
// record measured as reserved or nvidia-smi is answered with the figure a report shows: the
// device estimate on the record's GPU (training, generate() and vision alike).
// The model a record ran, with what its stated transformers release changes to the causal-LM
// loss. From 4.46 every causal LM computes it in loss_function, loss/loss_utils.py ForCausalLMLoss,
// which upcasts the logits (logits.float()) first (huggingface/transformers PR #34147, 4.46); before,
// GPT-2, GPT-NeoX and OPT took the loss on the logits in their compute dtype and only the LLaMA
// family's own head upcast them (the readers' upcast_logits, unconditional up to 4.45). From 4.48
// the labels are padded and shifted instead of a shifted copy of the logits (transformers d0fed636).
inline model_spec model_for_record(const json& record) {
  model_spec model = model_from_record(record.at("model"));
  const std::uint32_t release = detail::version_field(record, "transformers");
  if (model.head == head_kind::causal_lm && release >= 446) model.upcast_logits = true;
  if (model.head == head_kind::causal_lm && release >= 448) model.shift_labels = true;
  return model;
}

// The model of a generate() record. gpt-fast's records name its model code (model.impl "gpt-fast"),
// the LLaMA layout the Hugging Face reader builds; the run's loop applies gpt-fast's differences
// (inference/gpt_fast.hpp). Its training stays refused by the framework field.
inline model_spec inference_model_for_record(const json& record) {
  if (!gpt_fast_record(record)) return model_for_record(record);
  json as_transformers = record;
  as_transformers["model"]["impl"] = "hf-transformers";
  return model_for_record(as_transformers);
}

inline json estimate_record(const json& record) {
  const std::string id = record.is_object() && record.contains("id") && record.at("id").is_string()
                             ? record.at("id").get<std::string>()
                             : std::string();
  try {
    const quantity q = quantity_of(record.value("measure", std::string("max_memory_allocated")));
    const bool device_figure = q == quantity::reserved || q == quantity::device;
    const std::optional<gpu_spec> gpu = detail::record_gpu(record);
    if (is_vision_record(record)) {
      const vision::vision_spec model = vision_model_from_record(record);
      const training_spec run = run_from_record(vision_run_record(record));
      const estimate_result r = vision::estimate(model, run);
      bytes b = pick(r.steady, q);
      if (device_figure && run.device == device_kind::cuda)
        b = detail::device_quantity(vision::estimate_on_device(model, gpu ? on_gpu(run, *gpu) : run,
                                                               gpu ? &*gpu : nullptr, detail::record_device_options(record)),
                                    q);
      return {{"id", id}, {"estimated_bytes", b.value}, {"quantity", std::string(to_string(q))}};
    }
    const model_spec model = record.contains("infer") ? inference_model_for_record(record) : model_for_record(record);
    if (record.contains("infer")) {  // an inference record: json/inference.hpp
      inference_spec spec = inference_from_record(record);
      const inference_peak p = estimate_inference(model, spec).peak;
      bytes b = q == quantity::reserved ? p.reserved : q == quantity::device ? p.device : p.tensor;
      if (device_figure && spec.device == device_kind::cuda) {
        if (gpu) spec.blas_workspace = gpu->cublas_workspace;  // as plan_inference runs it on the GPU
        b = detail::device_quantity(
            estimate_inference_on_device(model, spec, gpu ? &*gpu : nullptr, detail::record_device_options(record)), q);
      }
      return {{"id", id}, {"estimated_bytes", b.value}, {"quantity", std::string(to_string(q))}};
    }
    const training_spec run = run_from_record(record);
    detail::check_logits_upcast(record, model, run);
    check_sequence_fits(model, run.seq_len, "train.seq");
    const estimate_result r = estimate(model, run);
    detail::check_parameter_counts(record, model, r.trainable_parameter_count);
    json out{{"id", id}, {"estimated_bytes", pick(r.steady, q).value}, {"quantity", std::string(to_string(q))}};
    detail::add_class_and_verdict(out, record, model, run);
    if (device_figure && run.device == device_kind::cuda)
      out["estimated_bytes"] = detail::device_quantity(
          estimate_on_device(model, gpu ? on_gpu(run, *gpu) : run, gpu ? &*gpu : nullptr, detail::record_device_options(record)),
          q).value;
    return out;
  } catch (const error& e) {
    return {{"id", id}, {"error", e.what()}};
  } catch (const json::exception& e) {
    return {{"id", id}, {"error", std::string("[memscale.invalid_record] ") + e.what()}};
  }
}


}  // namespace memscale::json_io
