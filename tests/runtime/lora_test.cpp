// LoRA targets as module names (PEFT and lit-gpt), the adapters the builder places, the
// trainable counts the frameworks report, and the record fields that must be modelled or
// refused.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <string>

#include "error_capture.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace lora_test {
namespace {

using memscale_test::contains;
using memscale_test::error_message;

using namespace memscale;
using json_io::json;

// A lit-gpt LLaMA-2-7B LoRA record (gpu_published_dev.json "litgpt-rt2023-llama-2-7b-hf-lora-mb1-a100").
json litgpt_llama_record() {
  return json::parse(R"json({
    "id": "llama-2-7b-lora", "measure": "max_memory_allocated", "device": "A100-SXM4-40GB",
    "model": {"family": "llama", "name": "meta-llama/Llama-2-7b-hf", "params": 6738415616, "layers": 32,
              "hidden": 4096, "heads": 32, "kv_heads": 32, "ffn": 11008, "vocab": 32000,
              "tied_embeddings": false, "activation": "swiglu", "norm": "rmsnorm", "impl": "litgpt"},
    "train": {"batch": 1, "seq": 1304, "precision": "pure_bf16", "optimizer": "adamw", "checkpointing": "none",
              "attention": "sdpa", "lora_rank": 8, "frozen": "base", "lora_alpha": 16, "lora_targets": "q,v",
              "trainable_params": 4194304},
    "measured_bytes": 21300000000})json");
}

// The same model under PEFT (Hugging Face LlamaForCausalLM, separate q/k/v projections).
json peft_llama_record(const json& targets, std::uint64_t rank) {
  json r = litgpt_llama_record();
  r["model"]["impl"] = "hf-transformers+peft";
  r["train"]["lora_targets"] = targets;
  r["train"]["lora_rank"] = rank;
  r["train"].erase("trainable_params");
  return r;
}

std::uint64_t trainable_of(const json& record) {
  return trainable_parameter_count(
      build(json_io::model_from_record(record.at("model")), json_io::run_from_record(record)).stack());
}

std::uint64_t estimate_of(const json& record) {
  const json answer = json_io::estimate_record(record);
  INFO(answer.dump());
  REQUIRE(answer.contains("estimated_bytes"));
  return answer.at("estimated_bytes").get<std::uint64_t>();
}

}  // namespace

TEST_CASE("PEFT module names put adapters exactly where named", "[lora][json]") {
  // "q_proj,v_proj" adapts q and v only (read one character at a time it also turned on o).
  const training_spec qv = json_io::run_from_record(peft_llama_record("q_proj,v_proj", 8));
  CHECK(qv.lora_targets == (lora_target::q | lora_target::v));
  // PEFT's arithmetic: r * (in + out) per adapted Linear. 32 * 2 * 8 * (4096 + 4096) = 4,194,304.
  CHECK(trainable_of(peft_llama_record("q_proj,v_proj", 8)) == 4'194'304);
  // "all-linear", r = 16, by hand: per layer q, k, v, o: 4 * 16 * (4096 + 4096) = 524,288;
  // gate and up: 2 * 16 * (4096 + 11008) = 483,328; down: 16 * (11008 + 4096) = 241,664;
  // 1,249,280 per layer * 32 = 39,976,960 (lm_head excluded) — what PEFT prints for Llama-2-7B.
  CHECK(trainable_of(peft_llama_record("all-linear", 16)) == 39'976'960);
  // Naming the head too adds 16 * (4096 + 32000) = 577,536.
  const json every = json::array({"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
                                  "lm_head"});
  CHECK(trainable_of(peft_llama_record(every, 16)) == 39'976'960 + 577'536);
  // Only the MLP: 32 * 16 * (2 * 15,104 + 15,104) = 23,199,744.
  CHECK(trainable_of(peft_llama_record("gate_proj,up_proj,down_proj", 16)) == 23'199'744);
}

TEST_CASE("a list and a comma-separated string give the same graph", "[lora][json]") {
  const json list = peft_llama_record(json::array({"q_proj", "k_proj", "v_proj", "o_proj", "lm_head"}), 8);
  const json text = peft_llama_record("q_proj, k_proj, v_proj, o_proj, lm_head", 8);
  const training_spec a = json_io::run_from_record(list);
  const training_spec b = json_io::run_from_record(text);
  CHECK(a.lora_targets == b.lora_targets);
  CHECK(trainable_of(list) == trainable_of(text));
  CHECK(estimate_of(list) == estimate_of(text));
  const json lit_list = [] {
    json r = litgpt_llama_record();
    r["train"]["lora_targets"] = json::array({"q", "v"});
    return r;
  }();
  CHECK(estimate_of(lit_list) == estimate_of(litgpt_llama_record()));
}

TEST_CASE("lit-gpt names and lit-gpt's fused-qkv arithmetic", "[lora][json]") {
  // lit-gpt LoRAQKVLinear: lora_A (r * enabled parts, in), lora_B (enabled widths, r).
  // q and v: 32 * (16 * 4096 + 8192 * 8) = 4,194,304, the record's own trainable_params.
  CHECK(trainable_of(litgpt_llama_record()) == 4'194'304);
  CHECK(json_io::estimate_record(litgpt_llama_record()).contains("estimated_bytes"));
  json q_only = litgpt_llama_record();
  q_only["train"]["lora_targets"] = "q";
  q_only["train"].erase("trainable_params");
  CHECK(trainable_of(q_only) == 32 * 8 * (4096 + 4096));
  // Everything, head included (lit-gpt lora_query/key/value/projection/mlp/head): per layer
  // qkv 2 * 3 * 8 * 4096 = 196,608, proj 65,536, fc_1 + fc_2 241,664, mlp proj 120,832
  // (624,640 * 32 = 19,988,480) + head 8 * (4096 + 32000) = 288,768.
  json all = q_only;
  all["train"]["lora_targets"] = "q,k,v,proj,mlp,head";
  CHECK(trainable_of(all) == 19'988'480 + 288'768);
  // Adapters on the MLP and head take memory: the estimate grows.
  CHECK(estimate_of(all) > estimate_of(q_only));
}

TEST_CASE("stated parameter counts are checked against the model", "[lora][json]") {
  json wrong = litgpt_llama_record();
  wrong["train"]["lora_targets"] = "q,k,v";  // 6,291,456 trainable, the record says 4,194,304
  const std::string message = json_io::estimate_record(wrong).value("error", std::string());
  CHECK(contains(message, "train.trainable_params"));
  CHECK(contains(message, "4194304"));
  CHECK(contains(message, "6291456"));
  json params = litgpt_llama_record();
  params["model"]["params"] = 7'000'000'000;
  const std::string p = json_io::estimate_record(params).value("error", std::string());
  CHECK(contains(p, "model.params"));
  CHECK(contains(p, "6738415616"));
  // Within 0.5% is accepted (published totals are often rounded).
  params["model"]["params"] = 6'760'000'000;
  CHECK(json_io::estimate_record(params).contains("estimated_bytes"));
}

TEST_CASE("an unknown module, or a field that is not modelled, is an error naming it", "[lora][json]") {
  CHECK(contains(error_message([] { (void)json_io::run_from_record(peft_llama_record("q_proj,qproj", 8)); }),
                 "\"qproj\""));
  CHECK(contains(error_message([] { (void)json_io::run_from_record(peft_llama_record("q_proj,qproj", 8)); }),
                 "train.lora_targets"));
  CHECK(contains(error_message([] { (void)parse_lora_targets("q,,v"); }), "lora_targets"));
  const auto refused = [](const char* key, const json& value) {
    json r = litgpt_llama_record();
    r["train"][key] = value;
    return json_io::estimate_record(r).value("error", std::string());
  };
  CHECK(contains(refused("quant", "bnb.int8"), "train.quant"));
  CHECK(contains(refused("trainable_dtype", "fp16"), "train.trainable_dtype"));
  CHECK(refused("trainable_dtype", "fp32").empty());  // fp32 adapters over the bf16 base: modelled
  CHECK(contains(refused("lora_variant", "vera"), "train.lora_variant"));
  CHECK(contains(refused("lora_dropout", 1.5), "train.lora_dropout"));
  CHECK(contains(refused("frozen", "none"), "train.frozen"));
  CHECK(contains(refused("dropout", "eval"), "train.dropout"));
  CHECK(refused("dropout", false).empty());
  CHECK(refused("steps", 20).empty());  // no memory effect
  CHECK(refused("trainable_dtype", "bf16").empty());  // the precision's own dtype: modelled
  // 16-bit adapters under autocast: modelled for LoRA, refused by name for QLoRA
  // (lora_autocast_adapters_test.cpp).
  json autocast = peft_llama_record("q_proj,v_proj", 8);
  autocast["train"]["precision"] = "amp_bf16";
  autocast["train"]["trainable_dtype"] = "bf16";
  CHECK(json_io::estimate_record(autocast).contains("estimated_bytes"));
  autocast["train"]["quant"] = "bnb.nf4";
  const std::string under_autocast = json_io::estimate_record(autocast).value("error", std::string());
  CHECK(contains(under_autocast, "train.trainable_dtype"));
  CHECK(contains(under_autocast, "QLoRA under autocast"));
  CHECK(refused("quant", "bnb.nf4").empty());
}

TEST_CASE("PEFT variants and dropout", "[lora]") {
  const training_spec base{.micro_batch = 1, .seq_len = 512, .prec = precision::pure_bf16,
                           .target = training_target::lora, .lora_rank = 8};
  const auto peak = [](const training_spec& t) { return estimate(presets::llama_2_7b, t).steady.tensor; };
  // rsLoRA changes only the scaling.
  training_spec rs = base;
  rs.lora_kind = lora_variant::rslora;
  CHECK(peak(rs) == peak(base));
  // DoRA: a magnitude per output row (32 * 2 * 4096) and more activations.
  training_spec dora = base;
  dora.lora_kind = lora_variant::dora;
  CHECK(trainable_parameter_count(build(presets::llama_2_7b, dora).stack()) == 4'194'304 + 32 * 2 * 4096);
  CHECK(peak(dora) > peak(base));
  // lora_dropout == 0: nn.Identity keeps no mask.
  training_spec no_dropout = base;
  no_dropout.lora_dropout = false;
  CHECK(peak(no_dropout) < peak(base));
}

TEST_CASE("QLoRA: no 16-bit weight copy under autocast, bitsandbytes version decides the saved input", "[lora]") {
  training_spec pure{.micro_batch = 1, .seq_len = 512, .prec = precision::pure_bf16,
                     .target = training_target::qlora, .lora_rank = 16};
  training_spec amp = pure;
  amp.prec = precision::amp_bf16;
  const bytes p = estimate(presets::llama_2_7b, pure).steady.tensor;
  const bytes a = estimate(presets::llama_2_7b, amp).steady.tensor;
  // Under amp the unquantised parts are fp32 (embeddings, head: 2 * 131M * 4 B) and the
  // residual stream is fp32, but no 16-bit copy of the 6.5B 4-bit weights (13 GB) is kept.
  CHECK(a < p + bytes{4'000'000'000});
  // bitsandbytes < 0.43.2 keeps each 4-bit matmul's input for backward.
  training_spec old = pure;
  old.bitsandbytes_version = 4200;
  CHECK(estimate(presets::llama_2_7b, old).steady.tensor > p);
  json r = litgpt_llama_record();
  r["train"]["quant"] = "bnb.nf4";
  r["software"] = {{"bitsandbytes", "0.42.0"}};
  CHECK(json_io::run_from_record(r).bitsandbytes_version == 4200);
  r["software"] = {{"bitsandbytes", "0.43.2"}};
  CHECK(json_io::run_from_record(r).bitsandbytes_version == 4302);
  r["software"] = {{"bitsandbytes", "new"}};
  CHECK(contains(error_message([&] { (void)json_io::run_from_record(r); }), "software.bitsandbytes"));
}

}  // namespace lora_test
