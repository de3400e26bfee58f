// 16-bit LoRA adapters under autocast over a model loaded in the autocast dtype (training.hpp
// adapter_dtype::autocast_dtype: PEFT's autocast_adapter_dtype=False, TRL's --bf16): the policy,
// the record field that states it, what is still refused, and the CPU traces
// (docs/data/cpu_traced_lora.json, "-bf16-base-adapters").
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <fstream>
#include <map>
#include <string>

#include "error_capture.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace lora_autocast_adapters_test {
namespace {

using namespace memscale;
using json_io::json;
using memscale_test::contains;
using memscale_test::error_message;

constexpr training_spec bf16_adapters_under_autocast{.micro_batch = 1,
                                                     .seq_len = 512,
                                                     .prec = precision::amp_bf16,
                                                     .attention = attention_impl::eager,
                                                     .target = training_target::lora,
                                                     .lora_rank = 8,
                                                     .adapters = adapter_dtype::autocast_dtype};

// Every weight is bf16 and autocast stays on: nothing is cast per matmul.
constexpr precision_policy policy = precision_policy_of(bf16_adapters_under_autocast);
static_assert(policy.param == dtype::bf16 && policy.trainable == dtype::bf16 && policy.autocast);
static_assert(!policy.casts_weights());
static_assert(precision_policy_of(training_spec{.prec = precision::amp_bf16}).casts_weights());
// Outside LoRA the value changes nothing (validate refuses it).
static_assert(precision_policy_of(training_spec{.prec = precision::amp_bf16, .adapters = adapter_dtype::autocast_dtype})
                  .param == dtype::fp32);

json peft_record() {
  return json::parse(R"json({
    "id": "llama-2-7b-peft-bf16-adapters", "measure": "max_memory_allocated", "device": "H100-80GB",
    "model": {"family": "llama", "name": "meta-llama/Llama-2-7b-hf", "params": 6738415616, "layers": 32,
              "hidden": 4096, "heads": 32, "kv_heads": 32, "ffn": 11008, "vocab": 32000,
              "tied_embeddings": false, "activation": "swiglu", "norm": "rmsnorm", "impl": "hf-transformers+peft"},
    "train": {"batch": 1, "seq": 1024, "precision": "amp_bf16", "optimizer": "adamw", "checkpointing": "none",
              "attention": "sdpa", "lora_rank": 8, "frozen": "base", "lora_targets": "q_proj,v_proj",
              "trainable_dtype": "bf16"},
    "measured_bytes": 20000000000})json");
}

}  // namespace

TEST_CASE("bf16 adapters under autocast: a bf16 base, bf16 adapter state, no weight copies", "[lora][autocast]") {
  const model_spec& m = presets::llama_2_7b;
  const estimate_result ours = estimate(m, bf16_adapters_under_autocast);
  training_spec pure = bf16_adapters_under_autocast;
  pure.prec = precision::pure_bf16;
  pure.adapters = adapter_dtype::as_base;
  const estimate_result without_autocast = estimate(m, pure);
  // Parameters, gradients and AdamW state as a bf16 model with bf16 adapters (torch.optim.AdamW
  // keeps exp_avg / exp_avg_sq in the parameter's dtype: zeros_like(p)).
  CHECK(ours.parameter_bytes == without_autocast.parameter_bytes);
  CHECK(ours.gradient_bytes == without_autocast.gradient_bytes);
  CHECK(ours.optimizer_bytes == without_autocast.optimizer_bytes);
  // LLaMA already upcasts its softmax and logits itself, so autocast's fp32 list adds nothing ...
  CHECK(ours.saved_activation_bytes == without_autocast.saved_activation_bytes);
  // ... while GPT-2's eager softmax runs in fp32 under CUDA autocast (autocast_mode.cpp fp32 list).
  CHECK(estimate(presets::gpt2, bf16_adapters_under_autocast).saved_activation_bytes >
        estimate(presets::gpt2, pure).saved_activation_bytes);
  // Far less than autocast over the fp32 model, whose 16-bit weight copies alone are 13 GB.
  training_spec fp32_model = bf16_adapters_under_autocast;
  fp32_model.adapters = adapter_dtype::framework_default;
  CHECK(estimate(m, fp32_model).steady.tensor > ours.steady.tensor + bytes{13'000'000'000});
}

TEST_CASE("bf16 adapters under autocast: AGGRESSIVE's pure bf16 keeps them as the base's", "[lora][autocast][modes]") {
  const training_spec aggressive =
      apply_mode(bf16_adapters_under_autocast, mode::aggressive, custom_gpu(bytes{24'000'000'000}));
  CHECK(aggressive.prec == precision::pure_bf16);
  CHECK(aggressive.adapters == adapter_dtype::as_base);
  CHECK_NOTHROW(validate(aggressive));
}

TEST_CASE("bf16 adapters under autocast: the record field, and what stays refused", "[lora][autocast][json]") {
  const training_spec run = json_io::run_from_record(peft_record());
  CHECK(run.adapters == adapter_dtype::autocast_dtype);
  CHECK(json_io::estimate_record(peft_record()).contains("estimated_bytes"));
  const auto refusal = [](const char* key, const json& value, const char* dtype) {
    json r = peft_record();
    r["train"][key] = value;
    r["train"]["trainable_dtype"] = dtype;
    return json_io::estimate_record(r).value("error", std::string());
  };
  // The other 16-bit dtype than autocast's is not a cast any framework makes.
  CHECK(contains(refusal("precision", "amp_bf16", "fp16"), "train.trainable_dtype"));
  CHECK(refusal("precision", "amp_fp16", "fp16").empty());
  // A 4-bit base under autocast leaves the dtype of its other weights open.
  const std::string qlora = refusal("quant", "bnb.nf4", "bf16");
  CHECK(contains(qlora, "train.trainable_dtype"));
  CHECK(contains(qlora, "QLoRA under autocast"));
  training_spec full = bf16_adapters_under_autocast;
  full.target = training_target::full;
  full.lora_rank = 0;
  CHECK(contains(error_message([&] { (void)validate(full); }), "run.adapter_dtype"));
  training_spec no_autocast = bf16_adapters_under_autocast;
  no_autocast.prec = precision::pure_bf16;
  CHECK(contains(error_message([&] { (void)validate(no_autocast); }), "autocast"));
}

TEST_CASE("bf16 adapters under autocast: run.adapter_dtype is read, checked and written back", "[lora][autocast][json]") {
  const auto doc = json::parse(R"({"model": "llama-2-7b",
      "run": {"precision": "amp_bf16", "target": "lora", "lora_rank": 8, "adapter_dtype": "autocast"}})");
  json_io::run_input in{};
  json_io::read_run_document(doc, in);
  CHECK(in.run.adapters == adapter_dtype::autocast_dtype);
  const json written = json_io::run_document_json(in);
  CHECK(written.at("run").at("adapter_dtype") == "autocast");
  json_io::run_input again{};
  json_io::read_run_document(written, again);
  CHECK(again.run.adapters == adapter_dtype::autocast_dtype);
  // torchtune's own default (adapters in the base dtype) is not written back.
  CHECK_FALSE(json_io::run_to_json(with_framework(bf16_adapters_under_autocast, framework_kind::torchtune))
                  .contains("adapter_dtype"));
  const auto refused = [](const char* run_object) {
    json d = json::parse(R"({"model": "llama-2-7b"})");
    d["run"] = json::parse(run_object);
    return error_message([&] {
      json_io::run_input r{};
      json_io::read_run_document(d, r);
    });
  };
  CHECK(contains(refused(R"({"adapter_dtype": "autocast"})"), "needs run.target lora or qlora"));
  CHECK(contains(refused(R"({"target": "lora", "lora_rank": 8, "adapter_dtype": "bf16"})"),
                 "must be base, fp32 or autocast"));
}

TEST_CASE("bf16 adapters under autocast: the CPU traces", "[lora][autocast][records]") {
  std::ifstream in(MEMSCALE_SOURCE_DIR "/docs/data/cpu_traced_lora.json");
  REQUIRE(in);
  std::map<std::string, std::pair<double, double>> by_id;  // measured, estimated
  for (const auto& record : json::parse(in)) {
    const json answer = json_io::estimate_record(record);
    REQUIRE(answer.contains("estimated_bytes"));
    by_id[record.at("id").get<std::string>()] = {record.at("measured_bytes").get<double>(),
                                                  answer.at("estimated_bytes").get<double>()};
  }
  const char* const llama_cases[] = {"cpu-lora-llama-small-b1-s512-r8-q_proj-v_proj",
                                     "cpu-lora-llama-small-b1-s512-r16-all-linear"};
  for (const std::string name : llama_cases) {
    INFO(name);
    const auto& ours = by_id.at(name + "-amp_bf16-bf16-base-adapters");
    const auto& pure = by_id.at(name + "-pure_bf16");
    // CPU autocast (torch 1.13) has no softmax entry and the harness's loss upcasts its logits
    // itself: over a bf16 model the traced step is pure bf16's, byte for byte, and so is the graph.
    CHECK(ours.first == pure.first);
    CHECK(ours.second == pure.second);
    CHECK(ours.second < 1.045 * ours.first);
    CHECK(ours.second > 0.985 * ours.first);
  }
  // GPT-2's LayerNorm stays bf16 under CPU autocast (no layer_norm entry); its cross_entropy is fp32.
  const auto& gpt2 = by_id.at("cpu-lora-gpt2-b2-s512-r16-all-linear-amp_bf16-bf16-base-adapters");
  CHECK(gpt2.second < 1.01 * gpt2.first);
  CHECK(gpt2.second > 0.99 * gpt2.first);
}

}  // namespace lora_autocast_adapters_test
