// litgpt 0.4 (the 2024 config hub, read at v0.4.9, Lightning-AI/litgpt @ b0ea1772) as an input:
// `--framework litgpt@0.4.9`, a run document's or a record's framework.version. What differs from
// the 2023 scripts is the RMSNorm in fp32, full.py's loss chunked over the whole logits and
// fit()'s validations in the run's peak
// (docs/research/frameworks.md sec. 2).
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
#include <utility>
#include <vector>

#include "memscale/fmt.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace litgpt_v0_4_test {
namespace {

using namespace memscale;
using nlohmann::json;

constexpr std::uint64_t layers = 2;
constexpr std::uint64_t hidden = 256;
constexpr std::uint64_t tokens = 2 * 256;

constexpr model_spec litgpt_llama() {
  return as_litgpt_model(presets::llama_base("litgpt-test", layers, hidden, 4, 4, 688, 16000));
}

constexpr training_spec lora_run(std::uint32_t litgpt_version, std::uint32_t torch_version) {
  training_spec run = with_framework(training_spec{.micro_batch = 2,
                                                   .seq_len = 256,
                                                   .prec = precision::pure_bf16,
                                                   .target = training_target::lora,
                                                   .lora_rank = 8,
                                                   .dropout = false,
                                                   .torch_version = torch_version},
                                     framework_kind::litgpt);
  run.framework_version = litgpt_version;
  return run;
}

// finetune/full.py: every weight trains, the loop's loss over the whole logits (run.loss standard).
training_spec full_run(std::uint32_t litgpt_version, std::uint64_t batch, std::uint64_t seq) {
  training_spec run = lora_run(litgpt_version, 207);
  run.target = training_target::full;
  run.lora_rank = 0;
  run.loss = loss_impl::standard;
  run.micro_batch = batch;
  run.seq_len = seq;
  return run;
}

static_assert(graph_layers::loop_loss_chunk_rows(lora_run(409, 207)) == 128 &&
              graph_layers::loop_loss_chunk_rows(lora_run(0, 207)) == 0);
static_assert(litgpt_rms_norm_in_fp32(lora_run(409, 207)) && !litgpt_rms_norm_in_fp32(lora_run(0, 207)));
static_assert(framework_version_modelled(framework_kind::litgpt, 409) &&
              !framework_version_modelled(framework_kind::litgpt, 500));

std::uint64_t saved(const training_spec& r) { return estimate(litgpt_llama(), r).saved_activation_bytes.value; }

// 8 query heads over `kv_heads` key/value groups (tools/trace/litgpt_cases.py "llama-gqa-v4k").
constexpr model_spec litgpt_grouped(std::uint64_t kv_heads) {
  return as_litgpt_model(presets::llama_base("litgpt-gqa", layers, hidden, 8, kv_heads, 688, 4000));
}

static_assert(graph_layers::litgpt_expands_kv_before_rope(litgpt_grouped(2), lora_run(409, 207)) &&
              !graph_layers::litgpt_expands_kv_before_rope(litgpt_grouped(2), lora_run(litgpt_main, 207)));
// The 2023 scripts expand grouped k and v before RoPE too, but keep a multi-query model's one head.
static_assert(graph_layers::litgpt_expands_kv_before_rope(litgpt_grouped(2), lora_run(0, 207)) &&
              !graph_layers::litgpt_expands_kv_before_rope(litgpt_grouped(1), lora_run(0, 207)) &&
              graph_layers::litgpt_expands_kv_before_rope(litgpt_grouped(1), lora_run(409, 207)));
static_assert(graph_layers::attention_path_of(litgpt_grouped(2), lora_run(0, 207)).repeats_kv &&
              !graph_layers::attention_path_of(litgpt_grouped(1), lora_run(0, 207)).repeats_kv);
static_assert(graph_layers::attention_path_of(litgpt_grouped(2), lora_run(409, 207)).repeats_kv &&
              !graph_layers::attention_path_of(litgpt_grouped(8), lora_run(409, 207)).repeats_kv);

json cpu_records() {
  return json::parse(std::ifstream(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_frameworks.json"));
}

std::string error_message(const auto& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

double trace_error(const json& record) {
  const json answer = json_io::estimate_record(record);
  INFO(record.at("id").get<std::string>() << ": " << answer.dump());
  REQUIRE(answer.contains("estimated_bytes"));
  return answer.at("estimated_bytes").get<double>() / record.at("measured_bytes").get<double>() - 1.0;
}

}  // namespace

TEST_CASE("litgpt 0.4's RMSNorm keeps the fp32 x where 2023's kept the bf16 one") {
  // Under LoRA the norms are frozen and the first block's input norm keeps nothing (its input,
  // the frozen embedding's output, needs no gradient): 2 x layers norms keep tokens x hidden each.
  const std::uint64_t norms = 2 * layers;
  const std::uint64_t per_norm = tokens * hidden;
  // torch 2.7: 2023 kept x (bf16); 0.4 keeps x.float() and the weight's fp32 copy.
  CHECK(saved(lora_run(409, 207)) - saved(lora_run(0, 207)) == norms * (per_norm * 2 + hidden * 4));
  // torch 2.1: x * x too, bf16 in 2023 and fp32 in 0.4.
  CHECK(saved(lora_run(409, 201)) - saved(lora_run(0, 201)) == norms * (per_norm * 4 + hidden * 4));
  // Every 0.4 release is read as 0.4.9.
  CHECK(saved(lora_run(400, 207)) == saved(lora_run(409, 207)));
}

TEST_CASE("litgpt 0.4.9 as --framework sets the version and bitsandbytes 0.42, 0.5.0 is refused, full needs the standard loss") {
  training_spec run{};
  json_io::read_framework_option("litgpt@0.4.9", run, "--framework");
  CHECK(run.framework == framework_kind::litgpt);
  CHECK(run.framework_version == 409);
  CHECK(run.bitsandbytes_version == 4200);
  CHECK(json_io::framework_json(run) == json{{"name", "litgpt"}, {"version", "0.4.9"}});
  CHECK(contains(json_io::framework_text(run), "b0ea1772"));
  training_spec plain{};
  json_io::read_framework_option("litgpt", plain, "--framework");
  CHECK(plain.framework_version == 0);
  CHECK(json_io::framework_json(plain) == json{{"name", "litgpt"}});
  training_spec document{};
  json_io::read_framework(json{{"name", "litgpt"}, {"version", "0.4.2"}}, document);
  CHECK(document.framework_version == 402);

  training_spec untouched{};
  const auto option = [&](const char* text) {
    return error_message([&] { json_io::read_framework_option(text, untouched, "--framework"); });
  };
  // main is litgpt_main_test.cpp's; 0.5.0 to 0.5.4 are not read.
  CHECK(contains(option("litgpt@0.5.0"), "read at 0.4.9"));
  CHECK(contains(option("litgpt@x"), "must be a version"));
  CHECK(untouched.framework == framework_kind::hf);

  // full.py calls the model without lm_head_chunk_size: the framework's chunked head is not its loss.
  training_spec full = full_run(409, 2, 256);
  CHECK(error_message([&] { validate(full); }).empty());
  full.loss = loss_impl::chunked;
  full.loss_chunk = 128;
  const std::string chunked_head = error_message([&] { validate(full); });
  CHECK(contains(chunked_head, "run.loss"));
  CHECK(contains(chunked_head, "finetune/full.py"));
  training_spec v05 = lora_run(500, 207);
  CHECK(contains(error_message([&] { validate(v05); }), "litgpt is read at 0.4.9"));
}

TEST_CASE("litgpt 0.4's full.py loss: chunk-wide loss gradients over 128 flattened rows, then the slice's zeros") {
  const model_spec m = litgpt_llama();
  const std::uint64_t vocab = m.vocab;
  // Fabric's bf16-true cast: the loop's logits and the loss are fp32 (4 bytes).
  const auto loss_ops = [&](const training_spec& run) {
    const auto built = build(m, run);
    const graph& g = built.stack();
    return std::pair{g.ops[g.size - 2], g.ops[g.size - 1]};
  };
  {
    const auto [shift, loss] = loss_ops(full_run(409, 2, 256));
    // Two sequences: reshape copies logits[..., :-1, :]; its backward (the slice's) writes the
    // gradient into zeros over every position.
    CHECK(shift.out.value == 4 * (tokens - 2) * vocab);
    CHECK(shift.grad_out.value == 4 * (tokens - 2) * vocab);
    CHECK(shift.grad_in.value == 4 * tokens * vocab);
    // log_softmax keeps every row's log-probabilities; backward is one 128-row chunk wide.
    CHECK(loss.out.value == 4 * (tokens - 2) * vocab);
    CHECK(loss.grad_out.value == 4 * 128 * vocab);
    CHECK(loss.grad_in.value == 4 * 128 * vocab);
  }
  {
    // One sequence of 64: the slice is a contiguous prefix (a view), and 63 rows make one chunk.
    const auto [shift, loss] = loss_ops(full_run(409, 1, 64));
    CHECK(shift.out.value == 0);
    CHECK(shift.grad_in.value == 4 * 64 * vocab);
    CHECK(loss.grad_out.value == 4 * 63 * vocab);
  }
  // The 2023 script's chunk_size=0: one cross_entropy, whose gradients span every shifted row.
  const auto [copy, loss_2023] = loss_ops(full_run(0, 2, 256));
  CHECK(loss_2023.grad_out.value == 0);
  CHECK(loss_2023.grad_in.value == 4 * (tokens - 2) * vocab);
  CHECK(copy.grad_in.value == 4 * (tokens - 2) * vocab);
}

TEST_CASE("A record's framework.version: 0.4 releases read, the 2023 commits as the 2023 scripts, 0.5.0 refused") {
  json record;
  for (const json& r : cpu_records())
    if (r.at("id") == "cpu-litgpt-0.4.9-lora-llama-b2-s256-r8-q-v") record = r;
  REQUIRE(record.is_object());
  const std::uint64_t v0_4 = json_io::estimate_record(record).at("estimated_bytes").get<std::uint64_t>();
  record["framework"]["version"] = "8641822";
  const std::uint64_t scripts_2023 = json_io::estimate_record(record).at("estimated_bytes").get<std::uint64_t>();
  CHECK(v0_4 > scripts_2023);
  record["framework"]["version"] = "0.5.0";
  const json refused = json_io::estimate_record(record);
  REQUIRE(refused.contains("error"));
  CHECK(contains(refused.at("error").get<std::string>(), "framework.version"));
}

TEST_CASE("litgpt 0.4.9's LoRA CPU traces are estimated within 1.5%, median within 1%") {
  std::vector<double> errors;
  for (const json& r : cpu_records()) {
    const std::string id = r.at("id").get<std::string>();
    if (id.rfind("cpu-litgpt-0.4.9-lora-", 0) != 0) continue;
    const double error = trace_error(r);
    UNSCOPED_INFO(id << " " << error * 100 << "%");
    CHECK(std::abs(error) < 0.015);
    errors.push_back(std::abs(error));
  }
  REQUIRE(errors.size() == 8);  // five multi-head runs and three with grouped queries
  std::sort(errors.begin(), errors.end());
  CHECK(errors[errors.size() / 2] < 0.01);
}

TEST_CASE("litgpt 0.4.9's traces: validation is the peak with large vocabularies, the step with a small one") {
  std::size_t read = 0;
  for (const json& r : cpu_records()) {
    const std::string id = r.at("id").get<std::string>();
    if (id.rfind("cpu-litgpt-0.4.9-", 0) != 0) continue;
    INFO(id);
    const estimate_result e = estimate(json_io::model_for_record(r), json_io::run_from_record(r));
    const json& d = r.at("detail");
    // The traced moment that is the peak: the validation after step 1 or step 2.
    const bool traced_validation = d.at("validation_after_step1_peak").get<double>() > d.at("s2_peak").get<double>();
    CHECK((e.steady.at == phase::validation) == traced_validation);
    const bool small_vocabulary = id.find("-v4k-") != std::string::npos || id.find("-v1k-") != std::string::npos;
    CHECK(traced_validation == !small_vocabulary);
    // Step 1 and the sanity check before it: the step is the larger in every record (the
    // all-targets step is +1.28% on the 2023 code too, sec. 2).
    const double first = r.at("first_step_peak_bytes").get<double>();
    CHECK(e.first_step.at != phase::validation);
    ++read;
    // Where step 1 peaks inside optimizer.step() that moment holds the loop's fp32 logits and the
    // previous tensor's denom beside the current one's two temporaries (optimizer_step_live_test).
    CHECK(std::abs(static_cast<double>(e.first_step.tensor.value) / first - 1.0) < 0.015);
  }
  CHECK(read == 13);  // eight LoRA runs and five full fine-tunes
}

// validate()'s loss code over B x T x V logits (graph/layers/litgpt_validation.hpp), fp32 after
// Fabric's cast: the logits, the shifted reshape copy (B > 1) and the log-probabilities; after a
// step, the step's fp32 logits list besides.
constexpr std::uint64_t vocab = 16000;
constexpr std::uint64_t logits = tokens * vocab;
constexpr std::uint64_t shifted = (tokens - 2) * vocab;

TEST_CASE("litgpt 0.4's validation after a step is the peak of a large-vocabulary LoRA run") {
  const training_spec run = lora_run(409, 207);
  const estimate_result e = estimate(litgpt_llama(), run);
  const graph g = build(litgpt_llama(), run).stacks.decoder;
  CHECK(g.validation.value == 4 * logits + 4 * shifted + 4 * shifted);
  CHECK(g.validation_after_step.value == 4 * logits);
  CHECK(e.steady.at == phase::validation);
  CHECK(e.steady.breakdown.gradients.value == 0);
  CHECK(e.steady.breakdown.optimizer == e.optimizer_bytes);
  CHECK(e.steady.breakdown.activations.value == g.inputs.value + 8 * logits + 8 * shifted);
  // Before step 1 (the sanity check) the bare model validates: below the first step's peak here.
  CHECK(e.first_step.at != phase::validation);
  // FSDPPrecision casts too: a sharded run validates over the same fp32 logits.
  training_spec sharded = run;
  sharded.shard = sharding::full;
  sharded.data_parallel = 2;
  const graph gs = build(litgpt_llama(), sharded).stacks.decoder;
  CHECK(gs.validation == g.validation);
  CHECK(gs.validation_after_step == g.validation_after_step);
  // The 2023 scripts' validation is not modelled (sec. 1.4): their peak stays the step's.
  const training_spec scripts_2023 = lora_run(0, 207);
  CHECK(build(litgpt_llama(), scripts_2023).stacks.decoder.validation.value == 0);
  CHECK(estimate(litgpt_llama(), scripts_2023).steady.at != phase::validation);
  CHECK(fmt::format("{}", phase::validation) == "validation");
}

TEST_CASE("A CUDA run whose peak is litgpt 0.4's validation is not replayed: reserved by the rounding rule") {
  training_spec run = lora_run(409, 207);
  run.device = device_kind::cuda;
  const device_estimate d = estimate_on_device(litgpt_llama(), run);
  CHECK(d.tensors.steady.at == phase::validation);
  CHECK(d.fallback == replay_fallback::validation);
  CHECK(d.tensor == d.tensors.steady.tensor);
  CHECK(d.reserved >= d.tensor);
  // The 2023 scripts' step (no validation moment) is replayed.
  training_spec scripts_2023 = lora_run(0, 207);
  scripts_2023.device = device_kind::cuda;
  CHECK(estimate_on_device(litgpt_llama(), scripts_2023).fallback == replay_fallback::none);
}

TEST_CASE("litgpt 0.4's validation of one sequence peaks at the second batch's output cast") {
  training_spec run = lora_run(409, 207);
  run.micro_batch = 1;
  const graph g = build(litgpt_llama(), run).stacks.decoder;
  const std::uint64_t one = 256 * vocab;
  // No reshape copy: the previous batch's fp32 logits, the bf16 head output and its fp32 copy
  // (10 bytes an element) outweigh the loss's 4 + 4.
  CHECK(g.validation.value == (4 + 2 + 4) * one);
  // Without the cast the loss reads bf16 logits: the head's matmul (the previous batch's logits,
  // its input and its output) outweighs the logits and their log-probabilities (2 + 2, one short).
  const std::uint64_t head_input = 2 * 256 * hidden;
  run.output_cast = output_cast_kind::none;
  CHECK(build(litgpt_llama(), run).stacks.decoder.validation.value == (2 + 2) * one + head_input);
}

TEST_CASE("litgpt 0.4's QLoRA validation: the 4-bit head's dequantized weight beside the previous logits") {
  training_spec run = lora_run(409, 207);
  run.micro_batch = 1;
  run.target = training_target::qlora;
  const std::uint64_t one = 256 * vocab;
  const std::uint64_t dequantized = 2 * 2 * vocab * hidden;  // two bf16 copies of the V x h weight
  // The previous fp32 logits, the head's input, its dequantized weight and its bf16 output.
  CHECK(build(litgpt_llama(), run).stacks.decoder.validation.value == (4 + 2) * one + 2 * 256 * hidden + dequantized);
}

TEST_CASE("litgpt 0.4.9's full fine-tune CPU traces are estimated within 1%") {
  int full = 0;
  for (const json& r : cpu_records()) {
    const std::string id = r.at("id").get<std::string>();
    if (id.rfind("cpu-litgpt-0.4.9-full-", 0) != 0) continue;
    const double error = trace_error(r);
    INFO(id << " " << error * 100 << "%");
    CHECK(std::abs(error) < 0.01);
    ++full;
  }
  CHECK(full == 5);  // the grouped-query, 16k, 32k and wide-MLP fine-tunes
}

TEST_CASE("litgpt 0.4 expands k and v to every query head before RoPE: heads-wide k and v whatever the groups") {
  // A full fine-tune saves nothing sized by the groups but the attention's k and v (the qkv
  // linear saves its input): expanded before RoPE, they are heads wide as in multi-head attention.
  training_spec cpu = full_run(409, 2, 256);
  cpu.device = device_kind::cpu;
  cpu.attention = attention_impl::eager;  // the CPU traces' stand-in for SDPA
  const auto saved_by = [](std::uint64_t kv_heads, const training_spec& r) {
    return estimate(litgpt_grouped(kv_heads), r).saved_activation_bytes.value;
  };
  // Eager attention: RoPE's k, which the scores matmul saves, and the expanded v the context matmul saves.
  CHECK(saved_by(2, cpu) == saved_by(8, cpu));
  CHECK(saved_by(1, cpu) == saved_by(8, cpu));
  // A fused kernel on CUDA saves q, k and v as passed: with two groups three heads-wide copies; in
  // multi-head attention v is a view that keeps the whole qkv output, two q widths more.
  training_spec cuda = cpu;
  cuda.device = device_kind::cuda;
  cuda.attention = attention_impl::sdpa;
  CHECK(saved_by(8, cuda) - saved_by(2, cuda) == layers * tokens * 2 * hidden * 2);
}

TEST_CASE("litgpt 0.4.9's grouped-query CPU traces are estimated within 1%") {
  std::vector<double> errors;
  for (const json& r : cpu_records()) {
    const std::string id = r.at("id").get<std::string>();
    if (id.rfind("cpu-litgpt-0.4.9-", 0) != 0 || !contains(id, "-gqa-")) continue;
    const double error = trace_error(r);
    UNSCOPED_INFO(id << " " << error * 100 << "%");
    CHECK(std::abs(error) < 0.01);
    errors.push_back(std::abs(error));
  }
  REQUIRE(errors.size() == 5);  // LoRA on q, v (one and two sequences) and on q, k, v; two full fine-tunes
  std::sort(errors.begin(), errors.end());
  CHECK(errors[2] < 0.005);
}

}  // namespace litgpt_v0_4_test
