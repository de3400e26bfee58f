// What lit-gpt's 2023 fine-tuning runs keep beyond the model itself: Lightning Fabric's
// fp32 cast of the logits (bf16-true) and the RMSNorm's x * x that torch < 2.2 keeps
// (docs/research/frameworks.md sec. 1.2 and 1.3). Each is checked as an exact number of bytes.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace litgpt_mechanisms_test {
namespace {

using namespace memscale;
using nlohmann::json;

constexpr std::uint64_t layers = 2;
constexpr std::uint64_t hidden = 256;
constexpr std::uint64_t vocab = 16000;
constexpr std::uint64_t batch = 2;
constexpr std::uint64_t seq = 256;
constexpr std::uint64_t tokens = batch * seq;

constexpr model_spec litgpt_llama() {
  model_spec m = presets::llama_base("litgpt-test", layers, hidden, 4, 4, 688, vocab);
  m.impl = implementation::litgpt;
  m.fused_qkv = true;
  m.upcast_logits = false;
  return m;
}

// lit-gpt finetune/lora.py as the records read it: chunked loss over 128 tokens, bf16-true.
training_spec litgpt_lora_run(std::uint32_t torch_version) {
  return training_spec{.micro_batch = batch,
                       .seq_len = seq,
                       .prec = precision::pure_bf16,
                       .target = training_target::lora,
                       .lora_rank = 8,
                       .dropout = false,
                       .loss = loss_impl::chunked,
                       .loss_chunk = 128,
                       .torch_version = torch_version};
}

// The rules themselves are constexpr (house style: the same call at compile and run time).
constexpr training_spec bf16_true_chunked{.prec = precision::pure_bf16, .loss = loss_impl::chunked};
static_assert(graph_layers::logits_output_dtype(litgpt_llama(), bf16_true_chunked, dtype::bf16) == dtype::fp32);
static_assert(graph_layers::logits_output_dtype(presets::llama_base("hf", 2, 256, 4, 4, 688, vocab), bf16_true_chunked,
                                                dtype::bf16) == dtype::bf16);
static_assert(graph_layers::mean_keeps_input(201) && !graph_layers::mean_keeps_input(202));

// lit-gpt finetune/full.py as the records read it: every weight trains, the whole-logits loss.
training_spec litgpt_full_run(output_cast_kind cast) {
  training_spec run = with_framework(training_spec{.micro_batch = batch,
                                                   .seq_len = seq,
                                                   .prec = precision::pure_bf16,
                                                   .dropout = false,
                                                   .torch_version = 211},
                                     framework_kind::litgpt);
  run.loss = loss_impl::standard;
  run.output_cast = cast;
  return run;
}

// lit-gpt attends through SDPA (lit_gpt/model.py @ 8641822): its softmax is not upcast.
static_assert(!as_litgpt_model(presets::llama_base("hf", 2, 256, 4, 4, 688, vocab)).softmax_fp32);
static_assert(graph_layers::litgpt_full_logits_loop(litgpt_llama(), training_spec{.loss = loss_impl::standard}));
static_assert(!graph_layers::litgpt_full_logits_loop(litgpt_llama(), bf16_true_chunked));

json cpu_records() {
  return json::parse(std::ifstream(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_frameworks.json"));
}

std::uint64_t saved(const model_spec& m, const training_spec& r) { return estimate(m, r).saved_activation_bytes.value; }
std::uint64_t peak(const model_spec& m, const training_spec& r) { return estimate(m, r).steady.tensor.value; }

}  // namespace

TEST_CASE("Fabric's bf16-true casts lit-gpt's logits to fp32: list, log-probabilities and chunk gradients") {
  const model_spec m = litgpt_llama();
  training_spec uncast = litgpt_lora_run(211);
  uncast.output_cast = output_cast_kind::none;
  const training_spec by_default = litgpt_lora_run(211);
  training_spec stated = litgpt_lora_run(211);
  stated.output_cast = output_cast_kind::fp32;
  // The logits list and the log-probabilities, each 2 bytes more per token x vocab element.
  CHECK(saved(m, by_default) - saved(m, uncast) == 4 * tokens * vocab);
  // At backward's start also nll_loss's and log_softmax's chunk-wide gradients in fp32:
  // A = 4 B T V + 2 x (B x 128 x V) x 2 = 4 B T V + 512 B V (frameworks.md sec. 1.2).
  CHECK(peak(m, by_default) - peak(m, uncast) == 4 * tokens * vocab + 512 * batch * vocab);
  CHECK(peak(m, stated) == peak(m, by_default));
}

TEST_CASE("lit-gpt's full fine-tune keeps the whole logits and log-probabilities in Fabric's fp32 through backward") {
  const model_spec m = litgpt_llama();
  const training_spec uncast = litgpt_full_run(output_cast_kind::none);
  const training_spec by_default = litgpt_full_run(output_cast_kind::framework_default);
  const training_spec stated = litgpt_full_run(output_cast_kind::fp32);
  const std::uint64_t shifted = (tokens - batch) * vocab;  // logits[..., :-1, :]
  // The loop's logits (B T V) and cross_entropy's log-probabilities over the shifted positions,
  // each 2 bytes wider per element in fp32.
  CHECK(saved(m, by_default) - saved(m, uncast) == 2 * tokens * vocab + 2 * shifted);
  // Backward's start also holds nll_loss's and log_softmax's gradients over the shifted positions.
  CHECK(peak(m, by_default) - peak(m, uncast) == 2 * tokens * vocab + 3 * 2 * shifted);
  CHECK(peak(m, stated) == peak(m, by_default));
  // The loop's `logits` stays bound into the next step, in the dtype the wrapper returned.
  CHECK(build(m, by_default).stack().carried.value == 4 * tokens * vocab);
  CHECK(build(m, uncast).stack().carried.value == 2 * tokens * vocab);
  // The LoRA scripts' chunk list is carried as before.
  CHECK(build(m, litgpt_lora_run(211)).stack().carried.value == 2 * tokens * vocab);
}

TEST_CASE("lit-gpt's full fine-tune copies the shifted logits only when the slice is not contiguous") {
  const model_spec m = litgpt_llama();
  training_spec one = litgpt_full_run(output_cast_kind::none);
  one.micro_batch = 1;
  training_spec two = one;
  two.micro_batch = 2;
  // One sequence: logits[..., :-1, :] is a contiguous prefix and reshape is a view.
  CHECK(build(m, two).stack().size == build(m, one).stack().size + 1);
}

TEST_CASE("The lit-gpt CPU traces are estimated within 2.5%, the full fine-tunes within 1%, median within 1%") {
  std::vector<double> errors;
  int full = 0;
  for (const json& r : cpu_records()) {
    const std::string id = r.at("id").get<std::string>();
    // The 2023 scripts' traces; litgpt 0.4.9's are litgpt_v0_4_test.cpp's, main's litgpt_main_test.cpp's.
    if (id.rfind("cpu-litgpt-", 0) != 0 || id.rfind("cpu-litgpt-0.", 0) == 0) continue;
    const json answer = json_io::estimate_record(r);
    INFO(id << ": " << answer.dump());
    REQUIRE(answer.contains("estimated_bytes"));
    const double error = answer.at("estimated_bytes").get<double>() / r.at("measured_bytes").get<double>() - 1.0;
    CHECK(std::abs(error) < 0.025);
    if (id.rfind("cpu-litgpt-full-", 0) == 0) {
      CHECK(std::abs(error) < 0.01);
      ++full;
    }
    errors.push_back(std::abs(error));
  }
  CHECK(full == 6);
  REQUIRE(errors.size() == 13);
  std::sort(errors.begin(), errors.end());
  CHECK(errors[6] < 0.01);
}

TEST_CASE("The output cast is lit-gpt's, under 16-bit true precisions only") {
  const model_spec m = litgpt_llama();
  model_spec hf = m;
  hf.impl = implementation::hf_transformers;
  training_spec cast = litgpt_lora_run(211);
  training_spec uncast = cast;
  uncast.output_cast = output_cast_kind::none;
  CHECK(peak(hf, cast) == peak(hf, uncast));  // no Fabric around a Hugging Face model
  cast.prec = uncast.prec = precision::fp32;
  CHECK(peak(m, cast) == peak(m, uncast));  // fp32 logits: nothing to cast
}

TEST_CASE("An fp32 output cast without the loop's chunked loss is refused") {
  training_spec run = litgpt_lora_run(211);
  run.loss = loss_impl::standard;
  run.output_cast = output_cast_kind::fp32;
  CHECK_THROWS_WITH(validate(run), Catch::Matchers::Contains("run.output_cast") &&
                                       Catch::Matchers::Contains("run.loss chunked"));
}

TEST_CASE("lit-gpt's 2023 RMSNorm keeps x * x in the input dtype on torch 2.1, not on 2.2") {
  const model_spec m = litgpt_llama();
  // Two norms per block and ln_f, each a bf16 tokens x hidden tensor, less the first layer's input
  // norm: under LoRA its input, the frozen embeddings' output, needs no gradient (it keeps nothing).
  CHECK(saved(m, litgpt_lora_run(201)) - saved(m, litgpt_lora_run(202)) == 2 * layers * tokens * hidden * 2);
  CHECK(saved(m, litgpt_lora_run(113)) == saved(m, litgpt_lora_run(201)));
}

TEST_CASE("Hugging Face's RMSNorm keeps its fp32 x^2 up to torch 2.1 (mean saved its input until 2.2)") {
  model_spec m = litgpt_llama();
  m.impl = implementation::hf_transformers;
  m.fused_qkv = false;
  training_spec t21{.micro_batch = batch, .seq_len = seq, .prec = precision::fp32, .dropout = false, .torch_version = 201};
  training_spec t22 = t21;
  t22.torch_version = 202;
  CHECK(saved(m, t21) - saved(m, t22) == (2 * layers + 1) * tokens * hidden * 4);
}

TEST_CASE("A record's train.output_cast is read, and a value other than none or fp32 is refused") {
  json record = {{"id", "r"},
                 {"measure", "cpu-tensor-peak"},
                 {"device", "cpu"},
                 {"model", {{"family", "llama"}, {"layers", layers}, {"hidden", hidden}, {"heads", 4},
                            {"kv_heads", 4}, {"ffn", 688}, {"vocab", vocab}, {"norm", "rmsnorm"},
                            {"activation", "swiglu"}, {"impl", "litgpt"}}},
                 {"train", {{"batch", batch}, {"seq", seq}, {"precision", "pure_bf16"}, {"lora_rank", 8},
                            {"lora_targets", "q,v"}, {"frozen", "base"}, {"output_cast", "none"}}},
                 {"measured_bytes", 1}};
  CHECK(json_io::run_from_record(record).output_cast == output_cast_kind::none);
  record["train"].erase("output_cast");
  CHECK(json_io::run_from_record(record).output_cast == output_cast_kind::framework_default);
  record["train"]["output_cast"] = "bf16";
  CHECK_THROWS_WITH(json_io::run_from_record(record), Catch::Matchers::Contains("train.output_cast") &&
                                                          Catch::Matchers::Contains("bf16"));
}

TEST_CASE("A run document's run.output_cast is read, written back when stated, and fp32 needs the chunked loss") {
  json_io::run_input in;
  json_io::read_run_document(json{{"model", "gpt2"}, {"run", {{"output_cast", "none"}}}}, in);
  CHECK(in.run.output_cast == output_cast_kind::none);
  CHECK(json_io::run_to_json(in.run).at("output_cast") == "none");
  CHECK_FALSE(json_io::run_to_json(training_spec{}).contains("output_cast"));
  CHECK_THROWS_WITH(json_io::read_run_document(json{{"model", "gpt2"}, {"run", {{"output_cast", "fp32"}}}}, in),
                    Catch::Matchers::Contains("run.output_cast") && Catch::Matchers::Contains("run.loss chunked"));
  training_spec stated = in.run;
  stated.output_cast = output_cast_kind::fp32;
  CHECK_THROWS_WITH(estimate(in.model, stated), Catch::Matchers::Contains("run.output_cast"));
}

}  // namespace litgpt_mechanisms_test
