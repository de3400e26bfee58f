// torchtitan's tensor parallelism composed with FSDP2 (apply_tp over the dp_shard x tp mesh,
// models/llama3/infra/parallelize.py @ f7084fc7): one rank's heads, MLP columns and vocabulary
// rows, sharded again by FSDP2; the residual stream sequence-sharded between the branches; the
// loss on vocabulary-sharded logits (loss_parallel). Checked against the CPU traces of
// tools/trace/torchtitan_cases.py (docs/data/cpu_traced_frameworks.json, the "-tp2-" records).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#endif

#include <cstdint>
#include <fstream>
#include <memory>
#include <utility>
#include <string>

#include "memscale/json.hpp"
#include "memscale/json/emit_torchtitan.hpp"
#include "memscale/json/run_document.hpp"
#include "memscale/memscale.hpp"
#include "titan_trace.hpp"

namespace torchtitan_tp_test {
namespace {

using namespace memscale;
using nlohmann::json;
using titan_trace::estimated;
using titan_trace::refusal;
using titan_trace::titan_record;

}  // namespace

TEST_CASE("The torchtitan TP x FSDP2 CPU traces are estimated within 0.5%") {
  int traced = 0;
  for (const json& r : titan_trace::framework_records()) {
    const std::string id = r.at("id").get<std::string>();
    if (id.rfind("cpu-torchtitan-", 0) != 0 || id.find("-tp2-") == std::string::npos ||
        id.find("-cp") != std::string::npos)
      continue;
    const double measured = r.at("measured_bytes").get<double>();
    const double error = (static_cast<double>(estimated(r)) - measured) / measured;
    INFO(id << ": error " << error);
    CHECK(error > -0.005);
    CHECK(error < 0.005);
    ++traced;
  }
  CHECK(traced == 3);
}

TEST_CASE("Tensor parallelism shrinks a rank's share, and the run without it is the FSDP2-only one") {
  const json tp = titan_record("fsdp2r2-tp2-ac-none");
  json without = tp;
  without["train"]["tp"] = 1;
  without["framework"]["toml"].erase("parallelism.tensor_parallel_degree");
  const json fsdp_only = titan_record("fsdp2r2-ac-none");
  CHECK(estimated(without) == estimated(fsdp_only));
  // Its parameters, gradients, AdamW state, block activations and logits are each halved or less.
  CHECK(estimated(tp) < estimated(fsdp_only) * 6 / 10);
}

TEST_CASE("With one key/value head per TP rank, torchtitan's repeat_kv is a view") {
  // llama-3-8b: 32 heads, 8 key/value heads of 128. TP 4 leaves 2 per rank (repeat_kv copies them
  // to the rank's 8 query heads); TP 8 leaves 1, whose expand + reshape is a view.
  const auto repeat_ops = [](std::uint64_t tp) {
    training_spec run{.micro_batch = 1, .seq_len = 4096, .prec = precision::pure_bf16,
                      .framework = framework_kind::torchtitan};
    run.shard = sharding::full;
    run.data_parallel = 2;
    run.tensor_parallel = tp;
    const auto built = std::make_unique<model_graph>(build(presets::llama_3_8b, run));
    const graph& g = built->stack();
    for (std::size_t i = g.block_begin + 2; i < g.block_end; ++i)
      if (g.ops[i].kind == op_kind::attention) return std::pair{g.ops[i - 2], g.ops[i - 1]};  // k's, v's
    FAIL("no attention op");
    return std::pair<op, op>{};
  };
  const bytes repeated_at_tp4 = storage(dtype::bf16, 4096ULL * 8 * 128);
  const auto [k4, v4] = repeat_ops(4);
  CHECK(k4.out == repeated_at_tp4);
  CHECK(v4.out == repeated_at_tp4);
  const auto [k8, v8] = repeat_ops(8);
  CHECK(k8.out == bytes{});
  CHECK(v8.out == bytes{});
  // Its backward still takes the 4 query heads' gradient and sums it onto the one head.
  CHECK(k8.grad_out == storage(dtype::bf16, 4096ULL * 4 * 128));
  CHECK(k8.grad_in == storage(dtype::bf16, 4096ULL * 128));
}

TEST_CASE("torchtitan's TP refuses what it does not model, naming the field") {
  const json base = titan_record("fsdp2r2-tp2-ac-none");
  json pp = base;
  pp["framework"]["toml"]["parallelism.pipeline_parallel_degree"] = 2;
  CHECK_THAT(refusal(pp), Catch::Matchers::Contains("framework.toml.parallelism.pipeline_parallel_degree") &&
                              Catch::Matchers::Contains("pipeline parallelism is not modelled"));
  json no_loss_parallel = base;
  no_loss_parallel["framework"]["toml"]["parallelism.disable_loss_parallel"] = true;
  CHECK_THAT(refusal(no_loss_parallel), Catch::Matchers::Contains("disable_loss_parallel"));
  json async_tp = base;
  async_tp["framework"]["toml"]["parallelism.enable_async_tensor_parallel"] = true;
  CHECK_THAT(refusal(async_tp), Catch::Matchers::Contains("framework.toml.parallelism.enable_async_tensor_parallel") &&
                                    Catch::Matchers::Contains("async TP needs torch.compile"));
  json odd = base;
  odd["train"]["tp"] = 3;
  CHECK_THAT(refusal(odd), Catch::Matchers::Contains("run.seq_len") || Catch::Matchers::Contains("model.heads"));
  json hf = base;
  hf.erase("framework");
  hf["model"]["impl"] = "hf-transformers";
  hf["train"]["precision"] = "pure_bf16";
  CHECK_THAT(refusal(hf), Catch::Matchers::Contains("tensor parallelism is modelled for torchtitan only"));
}

TEST_CASE("A torchtitan run document gives its TP degree, reads back the same, and the job config writes it") {
  const json doc = {{"model", titan_record("fsdp2r2-ac-none").at("model")},
                    {"framework", "torchtitan"},
                    {"run", {{"micro_batch", 2}, {"seq_len", 256}, {"precision", "pure_bf16"}, {"data_parallel", 2},
                             {"tensor_parallel", 2}}}};
  json_io::run_input in{};
  json_io::read_run_document(doc, in);
  CHECK(in.run.tensor_parallel == 2);
  CHECK(in.run.data_parallel == 2);
  const json written = json_io::run_document_json(in);
  CHECK(written.at("run").at("tensor_parallel") == 2);
  json_io::run_input again{};
  json_io::read_run_document(written, again);
  CHECK(overall_peak(estimate(again.model, again.run)).tensor == overall_peak(estimate(in.model, in.run)).tensor);
  training_spec without = in.run;
  without.tensor_parallel = 1;
  CHECK(overall_peak(estimate(in.model, in.run)).tensor < overall_peak(estimate(in.model, without)).tensor);
  training_spec run = in.run;
  run.micro_batch = 1;
  run.seq_len = 8192;
  const std::string job = json_io::emit_torchtitan_job(presets::llama_3_8b, run, "tp");
  CHECK_THAT(job, Catch::Matchers::Contains("tensor_parallel_degree = 2"));
  CHECK_THAT(job, Catch::Matchers::Contains("data_parallel_shard_degree = 2"));
  json hf = doc;
  hf["framework"] = "hf";
  hf["run"].erase("data_parallel");
  json_io::run_input refused{};
  CHECK_THROWS_WITH(json_io::read_run_document(hf, refused), Catch::Matchers::Contains("run.tensor_parallel"));
}

}  // namespace torchtitan_tp_test
