// litgpt 0.4 (the 2024 config hub, read at v0.4.9, Lightning-AI/litgpt @ b0ea1772) as an input:
// `--framework litgpt@0.4.9`, a run document's or a record's framework.version. What differs from
// the 2023 scripts is the RMSNorm in fp32 and full.py's loss chunked over the whole logits
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
              !framework_version_modelled(framework_kind::litgpt, 513));

std::uint64_t saved(const training_spec& r) { return estimate(litgpt_llama(), r).saved_activation_bytes.value; }

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

TEST_CASE("--framework litgpt@0.4.9 sets the version and bitsandbytes 0.42; main is refused, full needs the standard loss") {
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
  CHECK(contains(option("litgpt@main"), "ModelParallelStrategy"));
  CHECK(contains(option("litgpt@0.5.13"), "read at 0.4.9"));
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
  training_spec v05 = lora_run(513, 207);
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

TEST_CASE("A record's framework.version: 0.4 releases read, the 2023 commits as the 2023 scripts, others refused") {
  json record;
  for (const json& r : cpu_records())
    if (r.at("id") == "cpu-litgpt-0.4.9-lora-llama-b2-s256-r8-q-v") record = r;
  REQUIRE(record.is_object());
  const std::uint64_t v0_4 = json_io::estimate_record(record).at("estimated_bytes").get<std::uint64_t>();
  record["framework"]["version"] = "8641822";
  const std::uint64_t scripts_2023 = json_io::estimate_record(record).at("estimated_bytes").get<std::uint64_t>();
  CHECK(v0_4 > scripts_2023);
  record["framework"]["version"] = "0.5.13";
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
  REQUIRE(errors.size() == 3);
  std::sort(errors.begin(), errors.end());
  CHECK(errors[1] < 0.01);
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
  CHECK(full == 2);
}

}  // namespace litgpt_v0_4_test
