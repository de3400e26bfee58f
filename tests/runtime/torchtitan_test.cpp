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
#include "memscale/memscale.hpp"

namespace torchtitan_test {
namespace {

using namespace memscale;
using nlohmann::json;

json titan_records() {
  const json all = json::parse(std::ifstream(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_frameworks.json"));
  json out = json::array();
  for (const json& r : all)
    if (r.at("id").get<std::string>().rfind("cpu-torchtitan-", 0) == 0) out.push_back(r);
  return out;
}

json titan_record(const std::string& suffix) {
  for (const json& r : titan_records())
    if (r.at("id").get<std::string>() == "cpu-torchtitan-llama-b2-s256-" + suffix) return r;
  FAIL("no record " << suffix);
  return {};
}

std::int64_t estimated(const json& record) {
  const json answer = json_io::estimate_record(record);
  INFO(answer.dump());
  REQUIRE(answer.contains("estimated_bytes"));
  return answer.at("estimated_bytes").get<std::int64_t>();
}

std::string refusal(const json& record) {
  const json answer = json_io::estimate_record(record);
  INFO(answer.dump());
  REQUIRE(answer.contains("error"));
  return answer.at("error").get<std::string>();
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

}  // namespace torchtitan_test
