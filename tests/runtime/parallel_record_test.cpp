// Multi-GPU ground-truth records answered per GPU (json/parallel_record.hpp).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <string>

#include "error_capture.hpp"
#include "memscale/json.hpp"

namespace parallel_record_test {
namespace {
using namespace memscale;
using json_io::json;

// gpu_published_dev.json "litgpt-rt2023-llama-2-13b-hf-lora-fsdp4-mb1-a100" (source, notes removed).
json fsdp_record() {
  return json::parse(R"json({"id": "litgpt-rt2023-llama-2-13b-hf-lora-fsdp4-mb1-a100", "measure": "max_memory_allocated",
    "device": "4xA100-SXM4-40GB", "model": {"family": "llama", "name": "meta-llama/Llama-2-13b-hf", "params": 13015864320,
    "layers": 40, "hidden": 5120, "heads": 40, "kv_heads": 40, "ffn": 13824, "vocab": 32000, "max_pos": 4096,
    "tied_embeddings": false, "activation": "swiglu", "norm": "rmsnorm", "impl": "litgpt"},
    "train": {"batch": 1, "seq": 1304, "precision": "pure_bf16", "optimizer": "adamw", "checkpointing": "full",
    "attention": "sdpa", "grad_accum": 128, "lora_rank": 8, "frozen": "base", "zero_stage": 3, "dp": 4, "tp": 1,
    "lora_alpha": 16, "lora_targets": "q,v", "trainable_params": 6553600}, "measured_bytes": 35570000000})json");
}
}  // namespace

TEST_CASE("Multi-GPU records: an FSDP record gives the single-GPU reader's figure, rank 0", "[parallel][records]") {
  const json r = fsdp_record();
  REQUIRE(json_io::is_multi_gpu_record(r));
  const json per_gpu = json_io::estimate_parallel_record(r);
  const json single = json_io::estimate_record(r);
  REQUIRE_FALSE(per_gpu.contains("error"));
  CHECK(per_gpu.at("estimated_bytes") == single.at("estimated_bytes"));
  CHECK(per_gpu.at("per_gpu").at("strategy") == "fsdp-full");
  CHECK(per_gpu.at("per_gpu").at("peak_rank") == 0);
}

TEST_CASE("Multi-GPU records: DeepSpeed, tensor and pipeline layouts are read", "[parallel][records]") {
  json r = fsdp_record();
  r["software"] = {{"deepspeed", "0.14.0"}};
  r["train"]["lora_rank"] = 0;
  r["train"].erase("lora_targets");
  r["train"].erase("trainable_params");  // a full fine-tune trains every weight
  r["train"]["frozen"] = "none";
  r["train"]["offload"] = "optimizer";
  CHECK(json_io::parallel_from_record(r).engine == strategy::zero3);
  CHECK(json_io::estimate_parallel_record(r).at("per_gpu").at("strategy") == "zero3");
  r["train"]["zero_stage"] = 1;
  r["train"]["offload"] = "none";
  r["train"]["tp"] = 2;
  r["train"]["pp"] = 2;
  r["train"]["sp"] = true;
  r["train"]["nodes"] = 2;
  r["train"]["checkpointing"] = "none";  // without recomputation the first stage holds the most
  const auto p = json_io::parallel_from_record(r);
  CHECK(world_size(p) == 16);
  CHECK(p.gpus_per_node == 8);
  const json answer = json_io::estimate_parallel_record(r);
  REQUIRE_FALSE(answer.contains("error"));
  CHECK(answer.at("per_gpu").at("peak_role") == "first pipeline stage");
  r["train"]["fsdp"] = "half_shard";
  CHECK(memscale_test::contains(json_io::estimate_parallel_record(r).at("error").get<std::string>(),
                                "train.fsdp must be full_shard, shard_grad_op, hybrid_shard or no_shard"));
}

}  // namespace parallel_record_test
