// Run-time checks for memscale/json.hpp (memscale::json_io): ground-truth records in,
// model/run specs and estimates out; invalid fields are errors that name the field.
// The records are copies of entries of shared/ground-truth/*.json (source/notes removed).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <string>
#include <string_view>

#include "memscale/json.hpp"
#include "error_capture.hpp"

namespace json_test {
namespace {

using memscale_test::contains;
using memscale_test::error_code_of;
using memscale_test::error_message;

using namespace memscale;
using json_io::json;

// cpu_traced_dev.json "cpu-gpt2-b1-s128-adamw" (measured peak 2,312,401,504 B).
json gpt2_cpu_record() {
  return json::parse(R"json({
    "id": "cpu-gpt2-b1-s128-adamw", "measure": "cpu-tensor-peak", "device": "cpu",
    "model": {"family": "gpt2", "name": "gpt2", "params": 124439808, "layers": 12, "hidden": 768, "heads": 12,
              "kv_heads": 12, "ffn": 3072, "vocab": 50257, "max_pos": 1024, "tied_embeddings": true,
              "activation": "gelu", "norm": "layernorm", "impl": "hf-transformers"},
    "train": {"batch": 1, "seq": 128, "image": null, "precision": "fp32", "optimizer": "adamw",
              "optimizer_impl": "single_tensor (torch 1.13 CPU default)", "checkpointing": "none",
              "attention": "eager", "grad_accum": 1, "lora_rank": 0, "frozen": "none", "zero_stage": 0,
              "dp": 1, "tp": 1, "dropout": "train mode (HF/torchvision defaults)"},
    "measured_bytes": 2312401504, "torch": "1.13.0a0"})json");
}

// cpu_traced_dev.json "cpu-resnet18-b1-224px-adamw": a torchvision CNN, not a transformer.
json resnet_record() {
  return json::parse(R"json({
    "id": "cpu-resnet18-b1-224px-adamw", "measure": "cpu-tensor-peak", "device": "cpu",
    "model": {"family": "resnet", "name": "torchvision.models.resnet18", "params": 11689512, "layers": null,
              "hidden": null, "heads": null, "kv_heads": null, "ffn": null, "vocab": null, "max_pos": null,
              "tied_embeddings": null, "activation": "relu", "norm": "batchnorm", "impl": "torchvision"},
    "train": {"batch": 1, "seq": null, "image": 224, "precision": "fp32", "optimizer": "adamw",
              "optimizer_impl": "single_tensor (torch 1.13 CPU default)", "checkpointing": "none",
              "attention": null, "grad_accum": 1, "lora_rank": 0, "frozen": "none", "zero_stage": 0,
              "dp": 1, "tp": 1},
    "measured_bytes": 206549552, "torch": "1.13.0a0"})json");
}

// gpu_published_dev.json "hf-bertL-vanilla-b4": bert-large with a 2-label classifier.
json bert_classifier_record() {
  return json::parse(R"json({
    "id": "hf-bertL-vanilla-b4", "measure": "nvidia-smi", "device": "V100-SXM2-16GB",
    "model": {"family": "bert", "name": "bert-large-uncased (AutoModelForSequenceClassification, num_labels=2)",
              "params": 335143938, "layers": 24, "hidden": 1024, "heads": 16, "kv_heads": 16, "ffn": 4096,
              "vocab": 30522, "max_pos": 512, "tied_embeddings": true, "activation": "gelu", "norm": "layernorm",
              "impl": "hf-transformers"},
    "train": {"batch": 4, "seq": 512, "precision": "fp32", "optimizer": "adamw", "checkpointing": "none",
              "attention": "eager", "grad_accum": 1, "lora_rank": 0, "frozen": "none", "zero_stage": 0,
              "dp": 1, "tp": 1},
    "measured_bytes": 15675162624})json");
}

// gpu_published_dev.json "litgpt-rt2023-llama-2-7b-hf-lora-mb1-a100" (trainable_params 4,194,304).
json llama_lora_record() {
  return json::parse(R"json({
    "id": "litgpt-rt2023-llama-2-7b-hf-lora-mb1-a100", "measure": "max_memory_allocated",
    "device": "A100-SXM4-40GB",
    "model": {"family": "llama", "name": "meta-llama/Llama-2-7b-hf", "params": 6738415616, "layers": 32,
              "hidden": 4096, "heads": 32, "kv_heads": 32, "ffn": 11008, "vocab": 32000, "max_pos": 4096,
              "tied_embeddings": false, "activation": "swiglu", "norm": "rmsnorm", "impl": "litgpt"},
    "train": {"batch": 1, "seq": 1304, "precision": "pure_bf16", "optimizer": "adamw", "checkpointing": "none",
              "attention": "sdpa", "grad_accum": 128, "lora_rank": 8, "frozen": "base", "zero_stage": 0, "dp": 1,
              "tp": 1, "lora_alpha": 16, "lora_targets": "q,v", "trainable_params": 4194304},
    "measured_bytes": 21300000000})json");
}


}  // namespace

TEST_CASE("model_from_record builds the published architectures", "[json]") {
  const model_spec gpt2 = json_io::model_from_record(gpt2_cpu_record().at("model"));
  CHECK(parameter_count(gpt2) == 124'439'808);
  CHECK(gpt2.layers == 12);
  CHECK(gpt2.hidden == 768);
  CHECK(gpt2.tied_embeddings);
  CHECK(gpt2.max_positions == 1024);

  // bert-large + pooler (335,141,888) + classifier 1024 * 2 + 2 = 335,143,938 (the record's params).
  const json bert = bert_classifier_record();
  const model_spec bert_large = json_io::model_from_record(bert.at("model"));
  CHECK(bert_large.head == head_kind::sequence_classification);
  CHECK(parameter_count(bert_large) == bert.at("model").at("params").get<std::uint64_t>());
  CHECK(parameter_count(bert_large) == 335'143'938);

  const json llama = llama_lora_record();
  const model_spec llama_7b = json_io::model_from_record(llama.at("model"));
  CHECK(parameter_count(llama_7b) == 6'738'415'616);
  CHECK(llama_7b.impl == implementation::litgpt);
}

TEST_CASE("run_from_record reads the training setup", "[json]") {
  const training_spec run = json_io::run_from_record(gpt2_cpu_record());
  CHECK(run.micro_batch == 1);
  CHECK(run.seq_len == 128);
  CHECK(run.prec == precision::fp32);
  CHECK(run.optimizer == optimizer_kind::adamw);
  CHECK(run.optimizer_impl == optimizer_implementation::for_loop);
  CHECK(run.attention == attention_impl::eager);
  CHECK(run.device == device_kind::cpu);
  CHECK(run.torch_version == 113);

  const json llama = llama_lora_record();
  const training_spec lora = json_io::run_from_record(llama);
  CHECK(lora.target == training_target::lora);
  CHECK(lora.lora_rank == 8);
  CHECK(lora.grad_accum == 128);
  CHECK(lora.prec == precision::pure_bf16);
  const estimate_result r = estimate(json_io::model_from_record(llama.at("model")), lora);
  CHECK(r.trainable_parameter_count == llama.at("train").at("trainable_params").get<std::uint64_t>());
  CHECK(r.trainable_parameter_count == 4'194'304);

  json quantised = llama;
  quantised["train"]["quant"] = "bnb.nf4";
  CHECK(json_io::run_from_record(quantised).target == training_target::qlora);
  CHECK(json_io::run_from_record(quantised).quant == base_quant::nf4);
  quantised["train"]["quant"] = "bnb.nf4-dq";
  CHECK(json_io::run_from_record(quantised).quant == base_quant::nf4_double_quant);
}

TEST_CASE("run_from_record rejects unknown enum strings, naming field and value", "[json][error]") {
  json record = gpt2_cpu_record();
  record["train"]["precision"] = "fp9";
  const std::string msg = error_message([&] { (void)json_io::run_from_record(record); });
  CHECK(contains(msg, "train.precision"));
  CHECK(contains(msg, "fp9"));
  CHECK(error_code_of([&] { (void)json_io::run_from_record(record); }) == error_code::invalid_run);

  json optimizer = gpt2_cpu_record();
  optimizer["train"]["optimizer"] = "adamm";
  const std::string opt_msg = error_message([&] { (void)json_io::run_from_record(optimizer); });
  CHECK(contains(opt_msg, "train.optimizer"));
  CHECK(contains(opt_msg, "adamm"));

  json checkpointing = gpt2_cpu_record();
  checkpointing["train"]["checkpointing"] = "partial";
  CHECK(contains(error_message([&] { (void)json_io::run_from_record(checkpointing); }), "train.checkpointing"));

  json negative = gpt2_cpu_record();
  negative["train"]["batch"] = -1;
  const std::string neg_msg = error_message([&] { (void)json_io::run_from_record(negative); });
  CHECK(contains(neg_msg, "train.batch"));
  CHECK(contains(neg_msg, "non-negative integer"));

  json zero_batch = gpt2_cpu_record();
  zero_batch["train"]["batch"] = 0;
  CHECK(contains(error_message([&] { (void)json_io::run_from_record(zero_batch); }), "run.micro_batch"));

  json wrong_type = gpt2_cpu_record();
  wrong_type["train"]["precision"] = 16;
  CHECK(contains(error_message([&] { (void)json_io::run_from_record(wrong_type); }), "train.precision"));
}

TEST_CASE("model_from_record rejects invalid models", "[json][error]") {
  json zero_layers = gpt2_cpu_record().at("model");
  zero_layers["layers"] = 0;
  CHECK(contains(error_message([&] { (void)json_io::model_from_record(zero_layers); }), "model.layers"));

  json bad_kv = llama_lora_record().at("model");
  bad_kv["kv_heads"] = 5;
  CHECK(contains(error_message([&] { (void)json_io::model_from_record(bad_kv); }), "model.kv_heads"));

  json unknown_family = gpt2_cpu_record().at("model");
  unknown_family["family"] = "rwkv";
  const std::string msg = error_message([&] { (void)json_io::model_from_record(unknown_family); });
  CHECK(contains(msg, "model.family"));
  CHECK(contains(msg, "rwkv"));
  CHECK(error_code_of([&] { (void)json_io::model_from_record(unknown_family); }) == error_code::unsupported);
}

TEST_CASE("estimate_record answers with an estimate or an error", "[json]") {
  // GPT-2 on the CPU: the peak is in optimizer.step():
  // 4P + 12 MiB buffers + 4P + (8P + 4 * 148) + 2,048 inputs + 2 * 4 * 38,597,376 = 2,312,401,488.
  const json answer = json_io::estimate_record(gpt2_cpu_record());
  REQUIRE(answer.contains("estimated_bytes"));
  CHECK_FALSE(answer.contains("error"));
  CHECK(answer.at("id") == "cpu-gpt2-b1-s128-adamw");
  CHECK(answer.at("quantity") == "tensor");
  CHECK(answer.at("estimated_bytes").get<std::uint64_t>() == 2'312'401'488);

  // A torchvision CNN (memscale/vision): on the CPU with batch 1 the peak is in
  // optimizer.step(): params 46,758,048 + BN buffers 38,560 + grads 46,758,048 + AdamW
  // state 93,516,344 (8P + 4 B x 62 step counters) + inputs 602,120 + the for-loop
  // temporaries 2 x 9,437,184 (layer4's 512x512x3x3 weight) and the previous tensor's denom
  // still bound (its BatchNorm bias, 2,048) = 206,549,536 (traced: 206,549,552).
  const json resnet = json_io::estimate_record(resnet_record());
  REQUIRE(resnet.contains("estimated_bytes"));
  CHECK(resnet.at("id") == "cpu-resnet18-b1-224px-adamw");
  CHECK(resnet.at("estimated_bytes").get<std::uint64_t>() == 206'549'536);

  // A torchvision model memscale has no graph for: an "error" naming the field.
  json alexnet = resnet_record();
  alexnet["model"]["name"] = "torchvision.models.alexnet";
  const json unknown = json_io::estimate_record(alexnet);
  REQUIRE(unknown.contains("error"));
  CHECK_FALSE(unknown.contains("estimated_bytes"));
  const std::string unknown_error = unknown.at("error").get<std::string>();
  CHECK(contains(unknown_error, "[memscale.unsupported]"));
  CHECK(contains(unknown_error, "model.name"));
  CHECK(contains(unknown_error, "alexnet"));

  // A record without "train" is malformed: nlohmann's exception becomes an error answer.
  json no_train = gpt2_cpu_record();
  no_train.erase("train");
  const json malformed = json_io::estimate_record(no_train);
  REQUIRE(malformed.contains("error"));
  CHECK(contains(malformed.at("error").get<std::string>(), "[memscale.invalid_record]"));

  // An invalid field is reported, not thrown.
  json fp9 = gpt2_cpu_record();
  fp9["train"]["precision"] = "fp9";
  const json rejected = json_io::estimate_record(fp9);
  REQUIRE(rejected.contains("error"));
  CHECK(contains(rejected.at("error").get<std::string>(), "train.precision"));
}

TEST_CASE("estimate_to_json reports the same numbers as the estimate", "[json]") {
  const json record = gpt2_cpu_record();
  const estimate_result r = estimate(json_io::model_from_record(record.at("model")), json_io::run_from_record(record));
  const json out = json_io::estimate_to_json(r);
  CHECK(out.at("parameters").get<std::uint64_t>() == 124'439'808);
  CHECK(out.at("static").at("optimizer").get<std::uint64_t>() == 995'519'056);
  CHECK(out.at("peak").at("tensor").get<std::uint64_t>() == r.steady.tensor.value);
  CHECK(out.at("peak").at("phase") == "optimizer_step");
}

}  // namespace json_test
