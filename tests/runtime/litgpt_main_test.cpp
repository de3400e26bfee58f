// litgpt main (read at v0.5.13, Lightning-AI/litgpt @ 26857050) on one device as an input:
// `--framework litgpt@main` (or @0.5, @0.5.5 to @0.5.13), a run document's or a record's
// framework.version. What differs from 0.4.9 is the attention: k and v repeated per query head
// after RoPE (repeat_interleave); the norms, loops, losses and validations are 0.4.9's
// (docs/research/frameworks.md sec. 2, "litgpt main"). Also: each litgpt script's own loss is the
// default (full.py's whole-logits loss for a full fine-tune).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "error_capture.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace litgpt_main_test {
namespace {

using namespace memscale;
using memscale_test::contains;
using memscale_test::error_message;
using nlohmann::json;

constexpr std::uint64_t layers = 2;
constexpr std::uint64_t hidden = 256;

// 8 query heads over `kv_heads` key/value groups (tools/trace/litgpt_cases.py "llama-gqa").
constexpr model_spec litgpt_llama(std::uint64_t kv_heads) {
  return as_litgpt_model(presets::llama_base("litgpt-test", layers, hidden, 8, kv_heads, 688, 16000));
}

constexpr training_spec lora_run(std::uint32_t litgpt_version) {
  training_spec run = with_framework(training_spec{.micro_batch = 2,
                                                   .seq_len = 256,
                                                   .prec = precision::pure_bf16,
                                                   .target = training_target::lora,
                                                   .lora_rank = 8,
                                                   .dropout = false,
                                                   .torch_version = 207},
                                     framework_kind::litgpt);
  run.framework_version = litgpt_version;
  return run;
}

static_assert(framework_version_modelled(framework_kind::litgpt, litgpt_main) &&
              framework_version_modelled(framework_kind::litgpt, 505) &&
              !framework_version_modelled(framework_kind::litgpt, 504) &&
              !framework_version_modelled(framework_kind::litgpt, 514));
static_assert(litgpt_repeats_kv_after_rope(lora_run(litgpt_main)) && !litgpt_repeats_kv_after_rope(lora_run(409)));
static_assert(graph_layers::attention_path_of(litgpt_llama(2), lora_run(litgpt_main)).repeats_kv &&
              !graph_layers::litgpt_expands_kv_before_rope(litgpt_llama(2), lora_run(litgpt_main)) &&
              !graph_layers::attention_path_of(litgpt_llama(8), lora_run(litgpt_main)).repeats_kv);
static_assert(with_script_loss(with_framework(training_spec{}, framework_kind::litgpt)).loss == loss_impl::standard &&
              with_script_loss(lora_run(409)).loss == loss_impl::chunked);

std::uint64_t saved(const model_spec& m, const training_spec& r) { return estimate(m, r).saved_activation_bytes.value; }

json cpu_records() {
  return json::parse(std::ifstream(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_frameworks.json"));
}


}  // namespace

TEST_CASE("litgpt main as --framework: main, 0.5 and 0.5.5 to 0.5.13 read at 26857050, bitsandbytes 0.45.2") {
  for (const char* text : {"litgpt@main", "litgpt@0.5", "litgpt@0.5.13"}) {
    training_spec run{};
    json_io::read_framework_option(text, run, "--framework");
    INFO(text);
    CHECK(run.framework_version == litgpt_main);
    CHECK(run.bitsandbytes_version == 4502);
    CHECK(json_io::framework_json(run) == json{{"name", "litgpt"}, {"version", "0.5.13"}});
    CHECK(contains(json_io::framework_text(run), "26857050"));
  }
  training_spec run{};
  json_io::read_framework(json{{"name", "litgpt"}, {"version", "0.5.7"}}, run);
  CHECK(run.framework_version == 507);
  training_spec untouched{};
  const auto option = [&](const char* text) {
    return error_message([&] { json_io::read_framework_option(text, untouched, "--framework"); });
  };
  // 0.5.0 to 0.5.4 kept 0.4's interleaved qkv under other pins; later releases are not read.
  CHECK(contains(option("litgpt@0.5.4"), "0.5.5 to 0.5.13"));
  CHECK(contains(option("litgpt@0.5.14"), "is not modelled"));
  CHECK(untouched.framework == framework_kind::hf);
}

TEST_CASE("litgpt main repeats k and v per query head after RoPE, 0.4 before it: the same tensors are saved") {
  // Multi-head: the same tensors are saved (the traces agree to the byte: sec. 2).
  CHECK(saved(litgpt_llama(8), lora_run(litgpt_main)) == saved(litgpt_llama(8), lora_run(409)));
  // Grouped queries: main rotates the kv-wide k and copies it after, 0.4 copies it first; either
  // way attention gets (and saves) heads-wide k and v: eager attention (the CPU traces' stand-in
  // for SDPA) and a fused kernel on CUDA alike.
  training_spec cpu = lora_run(litgpt_main);
  cpu.device = device_kind::cpu;
  cpu.attention = attention_impl::eager;
  training_spec cpu_0_4 = cpu;
  cpu_0_4.framework_version = 409;
  CHECK(saved(litgpt_llama(2), cpu) == saved(litgpt_llama(2), cpu_0_4));
  training_spec cuda = lora_run(litgpt_main);
  cuda.device = device_kind::cuda;
  training_spec cuda_0_4 = lora_run(409);
  cuda_0_4.device = device_kind::cuda;
  CHECK(saved(litgpt_llama(2), cuda) == saved(litgpt_llama(2), cuda_0_4));
  // A full fine-tune saves nothing else sized by the groups (the qkv linear saves its input): the
  // repeated k and v are heads wide as in multi-head attention.
  training_spec full = cpu;
  full.target = training_target::full;
  full.lora_rank = 0;
  full.loss = loss_impl::standard;
  CHECK(saved(litgpt_llama(2), full) == saved(litgpt_llama(8), full));
}

TEST_CASE("litgpt main over several devices is its LoRA script's ModelParallelStrategy, or refused by name") {
  training_spec run = lora_run(litgpt_main);
  CHECK(error_message([&] { validate(run); }) == "<no error>");
  run.data_parallel = 2;
  run.shard = sharding::full;
  const std::string refused = error_message([&] { validate(run); });
  CHECK(contains(refused, "run.data_parallel"));
  CHECK(contains(refused, "ModelParallelStrategy"));
  run.litgpt_model_parallel = true;
  run.ckpt = checkpointing::full;
  run.prec = precision::pure_bf16;
  CHECK(error_message([&] { validate(run); }) == "<no error>");
}

TEST_CASE("A litgpt full fine-tune computes full.py's loss unless told, and a conflicting loss is refused") {
  for (const char* version : {"litgpt@0.4.9", "litgpt@main", "litgpt"}) {
    INFO(version);
    json doc = {{"model", "llama-2-7b"}, {"framework", version}, {"run", {{"micro_batch", 1}, {"seq_len", 512}}}};
    json_io::run_input in;
    json_io::read_run_document(doc, in);
    CHECK(in.run.target == training_target::full);
    CHECK(in.run.loss == loss_impl::standard);
    // Written back, the loss reads back the same.
    CHECK(json_io::run_to_json(in.run).at("loss") == "standard");
    doc["run"]["lora_rank"] = 8;
    doc["run"]["target"] = "lora";
    json_io::run_input lora;
    json_io::read_run_document(doc, lora);
    CHECK(lora.run.loss == loss_impl::chunked);
  }
  json stated = {{"model", "llama-2-7b"}, {"framework", "litgpt@main"}, {"run", {{"micro_batch", 1}, {"seq_len", 512}, {"loss", "chunked"}}}};
  json_io::run_input in;
  const std::string refused = error_message([&] { json_io::read_run_document(stated, in); });
  CHECK(contains(refused, "run.loss"));
  CHECK(contains(refused, "finetune/full.py"));
  // A chunk size names the chunked loss too: refused there, not dropped.
  json chunk = {{"model", "llama-2-7b"}, {"framework", "litgpt@0.4.9"}, {"run", {{"micro_batch", 1}, {"seq_len", 512}, {"loss_chunk", 256}}}};
  CHECK(contains(error_message([&] { json_io::read_run_document(chunk, in); }), "run.loss"));
}

TEST_CASE("litgpt main's CPU traces are estimated within 1.5%, median within 1%") {
  std::vector<double> errors;
  for (const json& r : cpu_records()) {
    const std::string id = r.at("id").get<std::string>();
    if (id.rfind("cpu-litgpt-0.5.13-", 0) != 0) continue;
    const json answer = json_io::estimate_record(r);
    INFO(id << ": " << answer.dump());
    REQUIRE(answer.contains("estimated_bytes"));
    const double error = answer.at("estimated_bytes").get<double>() / r.at("measured_bytes").get<double>() - 1.0;
    UNSCOPED_INFO(id << " " << answer.at("estimated_bytes") << " / " << r.at("measured_bytes") << " " << error * 100 << "%");
    CHECK(std::abs(error) < 0.015);
    errors.push_back(std::abs(error));
  }
  REQUIRE(errors.size() == 5);
  std::sort(errors.begin(), errors.end());
  CHECK(errors[2] < 0.01);
}

}  // namespace litgpt_main_test
