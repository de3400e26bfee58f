// Liger-Kernel's kernels as transformers' use_liger_kernel applies them (v0.5.10 @ 44a8f2fb;
// docs/research/frameworks.md sec. 6): the fused linear cross-entropy, RMSNorm and SwiGLU, each
// against what the modeling file's module saves, and the traced records of
// docs/data/cpu_traced_frameworks.json.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#endif

#include <cstdint>
#include <fstream>
#include <string>

#include "error_capture.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace liger_test {
namespace {

using namespace memscale;
using nlohmann::json;
using memscale_test::error_message;

constexpr std::uint64_t layers = 2;
constexpr std::uint64_t hidden = 256;
constexpr std::uint64_t ffn = 688;
constexpr std::uint64_t vocab = 16000;
constexpr std::uint64_t tokens = 2 * 256;

// The traced geometry: LLaMA with 4 heads and 2 kv heads, a Hugging Face 4.51 head.
constexpr model_spec llama() {
  model_spec m = presets::llama_base("liger-test", layers, hidden, 4, 2, ffn, vocab);
  m.upcast_logits = true;
  m.shift_labels = true;
  return m;
}

constexpr training_spec full_bf16{.micro_batch = 2,
                                  .seq_len = 256,
                                  .prec = precision::pure_bf16,
                                  .attention = attention_impl::flash,
                                  .dropout = false,
                                  .torch_version = 211};

constexpr training_spec with_liger(training_spec run) { return apply_liger(run); }

// Liger's own example (fused_linear_cross_entropy.py): BT = 4096 * 4, V = 32000, H = 4096 gives
// chunks of 2048 rows; the traced geometry gives ceil(512 / ceil(16000 / 256)) = 9, rounded to 16.
static_assert(graph_layers::liger_chunk_rows(4096 * 4, 32000, 4096) == 2048);
static_assert(graph_layers::liger_chunk_rows(tokens, vocab, hidden) == 16);
static_assert(graph_layers::liger_chunk_rows(3, 1000, 4096) == 3);  // 4 rounded, but only 3 rows exist
// The estimate with every Liger kernel is a constant expression like the others.
static_assert(estimate(llama(), with_liger(full_bf16)).steady.tensor.value > 0);

std::uint64_t saved(const training_spec& run) { return estimate(llama(), run).saved_activation_bytes.value; }

json records() {
  return json::parse(std::ifstream(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_frameworks.json"));
}

}  // namespace

TEST_CASE("Liger's RMSNorm keeps its bf16 input and one fp32 rstd per row, not Hugging Face's fp32 copy") {
  training_spec run = full_bf16;
  run.liger_rms_norm = true;
  // Hugging Face keeps hidden.to(float32) and the bf16 normalized x (the weight trains); Liger
  // keeps the bf16 input itself: 4 bytes less per element, for 2 norms a layer and the final one.
  CHECK(saved(full_bf16) - saved(run) == (2 * layers + 1) * tokens * hidden * 4);
}

TEST_CASE("Liger's SwiGLU keeps the gate and up outputs, not silu(gate)") {
  training_spec run = full_bf16;
  run.liger_swiglu = true;
  CHECK(saved(full_bf16) - saved(run) == layers * tokens * ffn * 2);
}

TEST_CASE("Liger's fused linear cross-entropy keeps the input's gradient instead of the logits") {
  training_spec run = full_bf16;
  run.loss = loss_impl::fused_linear;
  // Hugging Face's loss keeps the final norm's bf16 output for the head's weight gradient and
  // the fp32 log-probabilities of every position; the fused loss keeps grad_input (bf16, b*s*h).
  CHECK(saved(full_bf16) - saved(run) == tokens * vocab * 4);
  const estimate_result fused = estimate(llama(), run);
  const estimate_result plain = estimate(llama(), full_bf16);
  CHECK(fused.steady.tensor < plain.steady.tensor);
  // A frozen head (LoRA) makes no grad_weight: the forward peak drops by the head's V x h.
  training_spec lora = run;
  lora.target = training_target::lora;
  lora.lora_rank = 8;
  training_spec lora_plain = lora;
  lora_plain.loss = loss_impl::standard;
  CHECK(estimate(llama(), lora).steady.tensor < estimate(llama(), lora_plain).steady.tensor);
}

TEST_CASE("Liger's kernels are refused where they do not replace a module the model has") {
  training_spec norm = full_bf16;
  norm.liger_rms_norm = true;
  CHECK_THAT(error_message([&] { (void)estimate(presets::gpt2, norm); }), Catch::Matchers::Contains("run.fused_rmsnorm"));
  training_spec swiglu = full_bf16;
  swiglu.liger_swiglu = true;
  CHECK_THAT(error_message([&] { (void)estimate(presets::gpt2, swiglu); }), Catch::Matchers::Contains("run.fused_swiglu"));
  training_spec fused = full_bf16;
  fused.loss = loss_impl::fused_linear;
  CHECK_THAT(error_message([&] { (void)estimate(presets::bert_base_uncased, fused); }), Catch::Matchers::Contains("run.loss"));
  training_spec head_lora = fused;
  head_lora.target = training_target::lora;
  head_lora.lora_rank = 8;
  head_lora.lora_targets = lora_target::q | lora_target::head;
  CHECK_THAT(error_message([&] { (void)estimate(llama(), head_lora); }), Catch::Matchers::Contains("LoRA-adapted head"));
  training_spec litgpt = with_framework(full_bf16, framework_kind::litgpt);
  litgpt.liger_swiglu = true;
  CHECK_THAT(error_message([&] { (void)estimate(as_litgpt_model(llama()), litgpt); }),
             Catch::Matchers::Contains("modelled over Hugging Face models"));
}

TEST_CASE("The traced Liger steps are estimated within the CPU-trace band") {
  int checked = 0;
  for (const json& r : records()) {
    const std::string id = r.at("id").get<std::string>();
    if (id.find("liger") == std::string::npos && id != "cpu-hf-llama-b2-s256") continue;
    const json answer = json_io::estimate_record(r);
    INFO(id << ": " << answer.dump());
    REQUIRE(answer.contains("estimated_bytes"));
    const double measured = r.at("measured_bytes").get<double>();
    const double error = answer.at("estimated_bytes").get<double>() / measured - 1.0;
    CHECK(error > -0.02);
    CHECK(error < 0.02);
    ++checked;
  }
  CHECK(checked == 12);  // with liger_kernels_test's RoPE and GEGLU records, the instance-patched RMSNorms, Phi-3's SwiGLU
}

TEST_CASE("A run document's liger field applies the three kernels and is written back per kernel") {
  const json doc = json::parse(R"({"model": "llama-2-7b", "run": {"micro_batch": 1, "seq_len": 1024,
      "precision": "pure_bf16", "liger": true}})");
  json_io::run_input in;
  json_io::read_run_document(doc, in);
  CHECK(in.run.loss == loss_impl::fused_linear);
  CHECK(in.run.liger_rms_norm);
  CHECK(in.run.liger_swiglu);
  const json back = json_io::run_to_json(in.run);
  CHECK(back.at("loss") == "fused_linear_ce");
  CHECK(back.at("fused_rmsnorm") == true);
  CHECK(back.at("fused_swiglu") == true);
}

}  // namespace liger_test
