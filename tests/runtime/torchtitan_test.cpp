// torchtitan v0.1.0 (pytorch/torchtitan @ f7084fc7): FSDP2 with fp32 shards and bf16 compute, its
// activation checkpointing (full, every k-th block, the per-op save list), the whole-logits fp32
// loss; float8 and torch.compile refused by name. Checked against the CPU traces of
// tools/trace/torchtitan_cases.py (docs/data/cpu_traced_frameworks.json).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#endif

#include <cstdint>
#include <fstream>
#include <map>
#include <string>

#include "memscale/json.hpp"
#include "memscale/json/emit_torchtitan.hpp"
#include "memscale/memscale.hpp"
#include "titan_trace.hpp"

namespace torchtitan_test {
namespace {

using namespace memscale;
using nlohmann::json;
using titan_trace::estimated;
using titan_trace::refusal;
using titan_trace::titan_record;

json titan_records() {
  const json all = titan_trace::framework_records();
  json out = json::array();
  // The TP x FSDP2 records ("-tp2-") are checked by torchtitan_tp_test.cpp, the CP ones ("-cp")
  // by torchtitan_cp_test.cpp.
  for (const json& r : all) {
    const std::string id = r.at("id").get<std::string>();
    if (id.rfind("cpu-torchtitan-", 0) == 0 && id.find("-tp2-") == std::string::npos &&
        id.find("-cp") == std::string::npos)
      out.push_back(r);
  }
  return out;
}

// The traced model: 4 blocks of hidden 256 (4 heads, 2 kv heads, ffn 688), 2 x 256 tokens in bf16.
constexpr std::int64_t tokens = 2 * 256;
constexpr std::int64_t stream = tokens * 256 * 2;  // one bf16 (tokens x hidden) tensor

}  // namespace

TEST_CASE("The torchtitan CPU traces are estimated within their band") {
  int estimated_records = 0;
  for (const json& r : titan_records()) {
    const json answer = json_io::estimate_record(r);
    INFO(r.at("id").get<std::string>() << ": " << answer.dump());
    REQUIRE(answer.contains("estimated_bytes"));
    const double measured = r.at("measured_bytes").get<double>();
    const double error = (answer.at("estimated_bytes").get<double>() - measured) / measured;
    CHECK(error > -0.0025);
    CHECK(error < 0.0025);
    ++estimated_records;
  }
  CHECK(estimated_records == 5);
}

TEST_CASE("torchtitan's checkpointing modes differ by what each block keeps") {
  const std::int64_t none = estimated(titan_record("fsdp2r2-ac-none"));
  const std::int64_t full = estimated(titan_record("fsdp2r2-ac-full"));
  const std::int64_t every_2nd = estimated(titan_record("fsdp2r2-ac-2"));
  const std::int64_t per_op = estimated(titan_record("fsdp2r2-ac-op"));
  // Without checkpointing a block keeps, in bf16 unless said: each RMSNorm's fp32 x and x^2
  // (torch 1.13's mean keeps its input), its rsqrt, its bf16 normalized x and output; flash
  // attention's q, repeated k and v, output (which wo reads in place) and fp32 log-sum-exp; the
  // SwiGLU's w1 and w3 outputs, silu's output and the product.
  const std::int64_t norm = 2 * tokens * 256 * 4 + tokens * 4 + 2 * stream;
  const std::int64_t flash = 4 * stream + 2 * 4 * 256 * 4;
  const std::int64_t mlp = 4 * tokens * 688 * 2;
  const std::int64_t block = 2 * norm + flash + mlp;
  CHECK(block == 7024640);
  // Full checkpointing keeps the block's input only, in each of the 4 blocks.
  CHECK(none - full == 4 * (block - stream));
  // Every 2nd block (layer:2): blocks 2 and 4.
  CHECK(none - every_2nd == 2 * (block - stream));
  // The per-op save list: the input, the 1st and 3rd of each block's mm (wq, wv), the 5th and
  // 7th (w1, w2) and the flash output with its log-sum-exp.
  const std::int64_t op_kept = stream + stream + tokens * 128 * 2 + tokens * 688 * 2 + stream + stream + 2 * 4 * 256 * 4;
  CHECK(none - per_op == 4 * (block - op_kept));
  // The measured differences are the same mechanism's.
  const json none_r = titan_record("fsdp2r2-ac-none");
  CHECK(none_r.at("measured_bytes").get<std::int64_t>() - titan_record("fsdp2r2-ac-full").at("measured_bytes").get<std::int64_t>() ==
        none - full);
}

TEST_CASE("FSDP2 shards the fp32 parameters and the AdamW state over the ranks") {
  // Two ranks or four, the same per-op policy: what differs is 1/N of the fp32 parameters (4
  // bytes each) and of AdamW's two fp32 moments (and each tensor's step count).
  const json two = titan_record("fsdp2r2-ac-op");
  const json four = titan_record("fsdp2r4-ac-op");
  const std::int64_t params = two.at("model").at("params").get<std::int64_t>();
  const std::int64_t difference = estimated(two) - estimated(four);
  const std::int64_t expected = params * 4 * 3 / 2 - params * 4 * 3 / 4;
  CHECK(difference >= expected);
  CHECK(difference < expected + 1024);  // per-tensor rounding of the shards and step counts
  // Without the FSDP2 rule the ranks would keep whole bf16 parameters: 2 bytes each.
  CHECK(difference > params * 2);
}

TEST_CASE("torchtitan's float8 and torch.compile are refused naming the field") {
  const json base = titan_record("fsdp2r2-ac-none");
  json compiled = base;
  compiled["train"]["compile"] = true;
  CHECK_THAT(refusal(compiled), Catch::Matchers::Contains("train.compile") && Catch::Matchers::Contains("torch.compile"));
  json fp8 = base;
  fp8["train"]["float8"] = true;
  CHECK_THAT(refusal(fp8), Catch::Matchers::Contains("train.float8") && Catch::Matchers::Contains("Float8Linear"));
  json toml_compile = base;
  toml_compile["framework"]["toml"]["training.compile"] = true;
  CHECK_THAT(refusal(toml_compile), Catch::Matchers::Contains("framework.toml.training.compile"));
  json converters = base;
  converters["framework"]["toml"]["model.converters"] = json::array({"float8"});
  CHECK_THAT(refusal(converters), Catch::Matchers::Contains("framework.toml.model.converters") &&
                                      Catch::Matchers::Contains("float8 is not modelled"));
  // compile off is the eager run the records are.
  json eager = base;
  eager["train"]["compile"] = false;
  CHECK(estimated(eager) == estimated(base));
}

TEST_CASE("torchtitan's other inputs are modelled or refused by name") {
  const json base = titan_record("fsdp2r2-ac-none");
  const auto with = [&](const char* key, const json& value) {
    json changed = base;
    changed["train"][key] = value;
    return changed;
  };
  CHECK_THAT(refusal(with("param_dtype", "fp32")), Catch::Matchers::Contains("train.param_dtype"));
  CHECK_THAT(refusal(with("reduce_dtype", "bf16")), Catch::Matchers::Contains("train.reduce_dtype"));
  CHECK_THAT(refusal(with("reshard_after_forward", "never")), Catch::Matchers::Contains("train.reshard_after_forward"));
  CHECK_THAT(refusal(with("sac_policy", "layer:x")), Catch::Matchers::Contains("train.sac_policy"));
  CHECK_THAT(refusal(with("sac_policy", "op")), Catch::Matchers::Contains("train.checkpointing"));
  CHECK_THAT(refusal(with("grad_accum", 2)), Catch::Matchers::Contains("run.grad_accum"));
  json one_rank = base;
  one_rank["train"]["dp"] = 1;
  one_rank["train"]["zero_stage"] = 0;
  CHECK_THAT(refusal(one_rank), Catch::Matchers::Contains("torchtitan is modelled with FSDP2"));
  json release = base;
  release["framework"]["version"] = "0.2.0";
  CHECK_THAT(refusal(release), Catch::Matchers::Contains("framework.version") && Catch::Matchers::Contains("0.1.0"));
  // layer:1 is every block: the same as mode full.
  json every_block = base;
  every_block["train"]["checkpointing"] = "selective";
  every_block["train"]["sac_policy"] = "layer:1";
  CHECK(estimated(every_block) == estimated(titan_record("fsdp2r2-ac-full")));
}

TEST_CASE("The torchtitan CPU traces are classed as CPU traces, one rank each") {
  for (const json& r : titan_records()) {
    INFO(r.at("id").get<std::string>());
    // --cases answers them as the run itself, not as a layout of single-GPU runs.
    CHECK_FALSE(json_io::is_multi_gpu_record(r));
    const json answer = json_io::estimate_record(r);
    CHECK(answer.at("class") == "cpu_traced");
    CHECK(answer.at("band").at("low") == band_of(run_class::cpu_traced, band_quantity::tensor).low);
    CHECK(answer.at("band").at("high") == band_of(run_class::cpu_traced, band_quantity::tensor).high);
  }
  // The same run on a GPU has no measurement.
  json on_gpu = titan_record("fsdp2r2-ac-op");
  on_gpu["device"] = "cuda";
  CHECK(json_io::estimate_record(on_gpu).at("class") == "unmeasured");
}

json titan_document(const json& run) {
  return {{"model", titan_record("fsdp2r2-ac-none").at("model")}, {"framework", "torchtitan"}, {"run", run}};
}

std::string document_refusal(const json& doc) {
  json_io::run_input in{};
  try {
    json_io::read_run_document(doc, in);
  } catch (const memscale::error& e) {
    return e.what();
  }
  FAIL("the document was accepted: " << doc.dump());
  return {};
}

TEST_CASE("A torchtitan run document gives its ranks and policy, and reads back the same") {
  const json run = {{"micro_batch", 2},      {"seq_len", 256},          {"precision", "pure_bf16"},
                    {"data_parallel", 4},    {"checkpointing", "selective"}, {"sac_policy", "layer:2"}};
  json_io::run_input in{};
  json_io::read_run_document(titan_document(run), in);
  CHECK(in.run.framework == framework_kind::torchtitan);
  CHECK(in.run.shard == sharding::full);
  CHECK(in.run.data_parallel == 4);
  CHECK(in.run.sac == selective_ac::every_kth_block);
  CHECK(in.run.sac_every == 2);
  const json written = json_io::run_document_json(in);
  CHECK(written.at("run").at("data_parallel") == 4);
  CHECK(written.at("run").at("sac_policy") == "layer:2");
  CHECK(written.at("run").at("checkpointing") == "selective");
  json_io::run_input again{};
  json_io::read_run_document(written, again);
  CHECK(again.run.data_parallel == 4);
  CHECK(again.run.sac == selective_ac::every_kth_block);
  CHECK(overall_peak(estimate(again.model, again.run)).tensor == overall_peak(estimate(in.model, in.run)).tensor);
  // More ranks: smaller shards, a smaller step.
  json wider = run;
  wider["data_parallel"] = 8;
  json_io::run_input eight{};
  json_io::read_run_document(titan_document(wider), eight);
  CHECK(overall_peak(estimate(eight.model, eight.run)).tensor < overall_peak(estimate(in.model, in.run)).tensor);
}

TEST_CASE("A run document's compile, float8 and torchtitan fields are refused by name where not modelled") {
  const json run = {{"precision", "pure_bf16"}, {"data_parallel", 2}};
  json compiled = run;
  compiled["compile"] = true;
  CHECK_THAT(document_refusal(titan_document(compiled)),
             Catch::Matchers::Contains("run.compile") && Catch::Matchers::Contains("torch.compile is not modelled"));
  json fp8 = run;
  fp8["float8"] = true;
  CHECK_THAT(document_refusal(titan_document(fp8)),
             Catch::Matchers::Contains("run.float8") && Catch::Matchers::Contains("Float8Linear"));
  json hf_doc = titan_document({{"sac_policy", "op"}, {"checkpointing", "selective"}});
  hf_doc["framework"] = "hf";
  CHECK_THAT(document_refusal(hf_doc), Catch::Matchers::Contains("run.sac_policy"));
  hf_doc["run"] = {{"data_parallel", 2}};
  CHECK_THAT(document_refusal(hf_doc), Catch::Matchers::Contains("run.data_parallel"));
  CHECK_THAT(document_refusal(titan_document({{"precision", "pure_bf16"}})),
             Catch::Matchers::Contains("torchtitan is modelled with FSDP2"));
  CHECK_THAT(document_refusal(titan_document({{"precision", "pure_bf16"}, {"data_parallel", 2}, {"sac_policy", "op"}})),
             Catch::Matchers::Contains("run.checkpointing"));
}

training_spec titan_run(std::uint64_t ranks) {
  training_spec run = with_framework(training_spec{}, framework_kind::torchtitan);
  run.micro_batch = 2;
  run.seq_len = 8192;
  run.prec = precision::pure_bf16;
  run.shard = sharding::full;
  run.data_parallel = ranks;
  run.sac = selective_ac::op_save_list;
  return run;
}

// "section.key" -> the value's text, from the TOML the emitter writes (sections, key = value).
std::map<std::string, std::string> toml_values(const std::string& toml) {
  std::map<std::string, std::string> out;
  std::string section;
  std::size_t start = 0;
  while (start < toml.size()) {
    const std::size_t end = toml.find('\n', start);
    const std::string line = toml.substr(start, end == std::string::npos ? std::string::npos : end - start);
    start = end == std::string::npos ? toml.size() : end + 1;
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      section = line.substr(1, line.find(']') - 1);
      continue;
    }
    const std::size_t eq = line.find(" = ");
    REQUIRE(eq != std::string::npos);
    out[section + "." + line.substr(0, eq)] = line.substr(eq + 3);
  }
  return out;
}

TEST_CASE("The torchtitan job config has JobConfig's keys and types, and its batches multiply out") {
  const std::string toml = json_io::emit_torchtitan_job(presets::llama_3_8b, titan_run(8), "llama-3-8b");
  INFO(toml);
  const auto values = toml_values(toml);
  for (const auto& [name, value] : values) {
    INFO(name << " = " << value);
    const json_io::engine_keys::toml_key* found = nullptr;
    for (const auto& k : json_io::engine_keys::torchtitan_job)
      if (std::string(k.section) + "." + std::string(k.key) == name) found = &k;
    REQUIRE(found != nullptr);
    using json_io::engine_keys::toml_type;
    if (found->type == toml_type::string) CHECK((value.size() >= 2 && value.front() == '"' && value.back() == '"'));
    if (found->type == toml_type::boolean) CHECK((value == "true" || value == "false"));
    if (found->type == toml_type::integer) CHECK(value.find_first_not_of("0123456789") == std::string::npos);
  }
  CHECK(values.at("model.flavor") == "\"8B\"");
  CHECK(values.at("parallelism.data_parallel_shard_degree") == "8");
  CHECK(values.at("training.local_batch_size") == "2");
  CHECK(values.at("training.global_batch_size") == "16");  // local x data_parallel_shard_degree
  CHECK(values.at("training.seq_len") == "8192");
  CHECK(values.at("activation_checkpoint.mode") == "\"selective\"");
  CHECK(values.at("activation_checkpoint.selective_ac_option") == "\"op\"");
  training_spec every_second = titan_run(4);
  every_second.sac = selective_ac::every_kth_block;
  every_second.sac_every = 2;
  const auto layer = toml_values(json_io::emit_torchtitan_job(presets::llama_3_8b, every_second, "x"));
  CHECK(layer.at("activation_checkpoint.selective_ac_option") == "\"2\"");
  CHECK(layer.at("training.global_batch_size") == "8");
  // A model that is not one of torchtitan's llama3 flavors has no job config.
  try {
    (void)json_io::emit_torchtitan_job(presets::llama_2_7b, titan_run(8), "llama-2-7b");
    FAIL("llama-2-7b was emitted");
  } catch (const memscale::error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Matchers::Contains("no torchtitan llama3 flavor"));
  }
}

}  // namespace torchtitan_test
