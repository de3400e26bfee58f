// memscale/json/parallel_record.hpp: ground-truth records of multi-GPU runs (SCHEMA.md's
// multi-GPU train fields: dp, nodes, zero_stage, fsdp, offload, tp, pp, sp) answered per GPU,
// for the rank the record measured.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <string>

#include "memscale/json/framework_fields.hpp"
#include "memscale/json/records.hpp"
#include "memscale/parallel/per_gpu.hpp"

namespace memscale::json_io {

// Whether a record's run spans several GPUs (then estimate_parallel_record answers it).
inline bool is_multi_gpu_record(const json& record) {
  if (!record.is_object() || !record.contains("train") || !record.at("train").is_object()) return false;
  // torchtitan's and torchtune's FSDP2 steps are one rank's estimate of the run itself
  // (estimate/fsdp2.hpp), not a layout.
  try {
    const framework_kind f = detail::framework_of_record(record);
    if (f == framework_kind::torchtitan || f == framework_kind::torchtune) return false;
    if (detail::record_runs_litgpt_model_parallel(record)) return false;  // litgpt's FSDP2 likewise
  } catch (const error&) {
    return false;  // estimate_record names the framework field that is wrong
  }
  const json& t = record.at("train");
  auto above_one = [&](const char* key) { return t.contains(key) && t.at(key).is_number() && t.at(key).get<double>() > 1; };
  return above_one("dp") || above_one("tp") || above_one("pp") || above_one("nodes");
}

// The layout of a record's run. The engine: train.fsdp when given; else a ZeRO stage runs
// DeepSpeed when the record's software names it, otherwise PyTorch FSDP (stage 3 = FULL_SHARD,
// 2 = SHARD_GRAD_OP, as Lightning and lit-gpt records describe their FSDP runs); DDP without either.
inline parallel_spec parallel_from_record(const json& record) {
  const std::string path = "train";
  constexpr auto bad = error_code::invalid_run;
  const json& t = record.at("train");
  parallel_spec p{};
  const auto dp = get_count(t, "dp", path, 1, bad);
  p.tp = get_count(t, "tp", path, 1, bad);
  p.pp = get_count(t, "pp", path, 1, bad);
  p.nodes = get_count(t, "nodes", path, 1, bad);
  p.sp = t.contains("sp") && t.at("sp").is_boolean() && t.at("sp").get<bool>();
  const std::uint64_t world = memscale::detail::checked_mul(dp, p.tp, p.pp);
  if (world % p.nodes != 0) bad_field(bad, path + ".nodes", t.at("nodes"), "must divide dp x tp x pp");
  p.gpus_per_node = world / p.nodes;
  const auto zero = get_count(t, "zero_stage", path, 0, bad);
  const std::string fsdp = get_string(t, "fsdp", path, "", bad);
  const bool deepspeed = detail::record_runs_deepspeed(record);
  if (fsdp == "full_shard") p.engine = strategy::fsdp_full;
  else if (fsdp == "shard_grad_op") p.engine = strategy::fsdp_grad_op;
  else if (fsdp == "hybrid_shard") p.engine = strategy::hsdp;
  else if (fsdp == "no_shard") p.engine = strategy::ddp;
  else if (!fsdp.empty()) bad_field(bad, path + ".fsdp", t.at("fsdp"), "must be full_shard, shard_grad_op, hybrid_shard or no_shard");
  else if (zero == 1) p.engine = strategy::zero1;
  else if (zero == 2) p.engine = deepspeed ? strategy::zero2 : strategy::fsdp_grad_op;
  else if (zero == 3) p.engine = deepspeed ? strategy::zero3 : strategy::fsdp_full;
  const std::string offload = get_string(t, "offload", path, "none", bad);
  if (offload == "optimizer") p.offload_optimizer = true;
  else if (offload == "optimizer+params") p.offload_optimizer = p.offload_parameters = true;
  else if (offload != "none") bad_field(bad, path + ".offload", t.at("offload"), "must be none, optimizer or optimizer+params");
  // DeepSpeed's own 16-bit engine (ds_config "fp16"/"bf16" enabled): parallel_spec::deepspeed.precision.
  const std::string ds_precision = get_string(t, "ds_precision", path, "none", bad);
  if (const auto e = engine_precision_from_string(ds_precision)) p.deepspeed.precision = *e;
  else bad_field(bad, path + ".ds_precision", t.at("ds_precision"), "must be none, fp16 or bf16");
  // Stage 0 with the 16-bit engine runs BF16_Optimizer / FP16_Optimizer; without it (older
  // records) a stage-0 DeepSpeed run stays read as DDP.
  if (fsdp.empty() && zero == 0 && deepspeed && p.deepspeed.precision != engine_precision::none)
    p.engine = strategy::zero0;
  // zero_optimization.reduce_bucket_size in elements (the IPG bucket: parallel/deepspeed_zero.hpp).
  p.deepspeed.reduce_bucket_size = get_count(t, "reduce_bucket_size", path, p.deepspeed.reduce_bucket_size, bad);
  return validate(p);
}

// Like estimate_record, for a multi-GPU record: the peak rank's figure, and which rank it is.
// The record as the single-GPU reader sees it: the run without its layout fields, which the
// layout (parallel_from_record) carries.
inline json single_gpu_view(const json& record) {
  json single = record;
  for (const char* key : {"dp", "tp", "pp", "sp", "nodes", "zero_stage", "fsdp", "offload", "ds_precision",
                          "reduce_bucket_size", "micro_batches_in_flight"})
    single.at("train").erase(key);
  return single;
}

inline json estimate_parallel_record(const json& record) {
  const std::string id = record.is_object() && record.contains("id") && record.at("id").is_string()
                             ? record.at("id").get<std::string>()
                             : std::string();
  try {
    // The release's loss rules (upcast logits, shifted labels) as for a single-GPU record.
    const model_spec model = model_for_record(record);
    training_spec run = run_from_record(single_gpu_view(record));
    const parallel_spec p = parallel_from_record(record);
    // A loop's no_sync (lit-gpt's no_backward_sync, run_from_record) is a no-op under DeepSpeed:
    // Fabric's DeepSpeed strategy has no backward-sync control and the engine reduces itself.
    if (is_deepspeed(p.engine) || p.engine == strategy::zero0) run.no_sync = false;
    const quantity q = quantity_of(record.value("measure", std::string("max_memory_allocated")));
    const per_gpu_estimate e = estimate_per_gpu(model, run, p);
    return {{"id", id},
            {"estimated_bytes", pick(e.peak, q).value},
            {"quantity", std::string(to_string(q))},
            {"per_gpu", {{"strategy", std::string(to_string(p.engine))},
                         {"peak_rank", e.peak_rank},
                         {"peak_role", std::string(e.peak_role)},
                         {"host_per_node", e.host.per_node.value}}}};
  } catch (const error& e) {
    return {{"id", id}, {"error", e.what()}};
  } catch (const json::exception& e) {
    return {{"id", id}, {"error", std::string("[memscale.invalid_record] ") + e.what()}};
  }
}

}  // namespace memscale::json_io
