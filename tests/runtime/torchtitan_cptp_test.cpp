// torchtitan's context parallelism composed with tensor parallelism (the 3-D mesh dp_shard x cp x tp,
// ParallelDims.build_mesh @ f7084fc7): each CP rank's seq_len / cp positions sequence-parallel over
// its TP group, ring attention over the rank's local heads, loss parallelism over the vocabulary,
// FSDP2 over dp_shard x cp. Checked against the CPU traces of tools/trace/torchtitan_cases.py
// (docs/data/cpu_traced_frameworks.json, the "-tp2-cp2-" records).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#endif

#include <cstdint>
#include <memory>
#include <string>

#include "memscale/json.hpp"
#include "memscale/json/emit_torchtitan.hpp"
#include "memscale/memscale.hpp"
#include "titan_trace.hpp"

namespace torchtitan_cptp_test {

using namespace memscale;
using nlohmann::json;
using titan_trace::estimated;
using titan_trace::refusal;
using titan_trace::titan_record;

TEST_CASE("The torchtitan CP x TP CPU traces are estimated within 0.5%") {
  int traced = 0;
  for (const json& r : titan_trace::framework_records()) {
    const std::string id = r.at("id").get<std::string>();
    if (id.rfind("cpu-torchtitan-", 0) != 0 || id.find("-tp2-cp2-") == std::string::npos) continue;
    const double measured = r.at("measured_bytes").get<double>();
    const double error = (static_cast<double>(estimated(r)) - measured) / measured;
    INFO(id << ": error " << error);
    CHECK(error > -0.005);
    CHECK(error < 0.005);
    ++traced;
  }
  CHECK(traced == 3);
}

// The attention op of the first block of a llama-3-8b rank.
op attention_op(const training_spec& run) {
  const auto built = std::make_unique<model_graph>(build(presets::llama_3_8b, run));
  return titan_trace::first_attention(built->stack());
}

TEST_CASE("CP x TP is the two paths composed: the CP rank's sequence, the TP rank's heads") {
  training_spec run{.micro_batch = 1, .seq_len = 8192, .prec = precision::pure_bf16, .framework = framework_kind::torchtitan};
  run.shard = sharding::full;
  run.data_parallel = 2;
  training_spec cp = run;
  cp.context_parallel = 2;
  training_spec tp = run;
  tp.tensor_parallel = 2;
  training_spec both = cp;
  both.tensor_parallel = 2;
  // The ring's buffers per layer are CP's with the local heads: CP 2 over 32 / 2 heads holds half
  // of what CP 2 over all 32 holds (llama-3-8b: 32 heads, 8 key/value heads; tp 2 divides both).
  const op o_cp = attention_op(cp);
  const op o_both = attention_op(both);
  CHECK(o_both.out * 2U == o_cp.out);
  CHECK(o_both.fwd_temp * 2U == o_cp.fwd_temp);
  CHECK(o_both.bwd_temp * 2U == o_cp.bwd_temp);
  // TP alone over the same seq_len / cp positions has no ring: same output, no gathered keys/values.
  training_spec tp_short = tp;
  tp_short.seq_len = run.seq_len / 2;
  const op o_tp = attention_op(tp_short);
  CHECK(o_tp.out == o_both.out);
  CHECK(o_tp.fwd_temp < o_both.fwd_temp);

  // Per GPU: CP x TP holds less than either alone (its parameters are sharded over dp x cp and tp,
  // its activations over the sequence twice and the heads).
  const auto peak = [](const training_spec& r) { return overall_peak(estimate(presets::llama_3_8b, r)).tensor; };
  CHECK(peak(both) < peak(cp));
  CHECK(peak(both) < peak(tp));
}

TEST_CASE("The CP x TP traces' estimates move with each degree") {
  const json both = titan_record("fsdp2r2-tp2-cp2-ac-none");
  json no_cp = both;
  no_cp["train"]["cp"] = 1;
  no_cp["framework"]["toml"].erase("parallelism.context_parallel_degree");
  CHECK(estimated(no_cp) == estimated(titan_record("fsdp2r2-tp2-ac-none")));
  json no_tp = both;
  no_tp["train"]["tp"] = 1;
  no_tp["framework"]["toml"].erase("parallelism.tensor_parallel_degree");
  CHECK(estimated(no_tp) == estimated(titan_record("fsdp2r2-cp2-ac-none")));
  CHECK(estimated(both) < estimated(no_cp));
  CHECK(estimated(both) < estimated(no_tp));
}

TEST_CASE("CP x TP keeps refusing what torchtitan or the model does not allow, naming the field") {
  const json base = titan_record("fsdp2r2-tp2-cp2-ac-none");
  // 262 / cp = 131 positions per CP rank: not a multiple of tp, nor of the 2 x cp round-robin chunks.
  json uneven = base;
  uneven["train"]["seq"] = 262;
  CHECK_THAT(refusal(uneven), Catch::Matchers::Contains("run.seq_len"));
  json alltoall = base;
  alltoall["framework"]["toml"]["parallelism.context_parallel_rotate_method"] = "alltoall";
  CHECK_THAT(refusal(alltoall), Catch::Matchers::Contains("context_parallel_rotate_method"));
  json pp = base;
  pp["framework"]["toml"]["parallelism.pipeline_parallel_degree"] = 2;
  CHECK_THAT(refusal(pp), Catch::Matchers::Contains("pipeline_parallel_degree"));
  json eager = base;
  eager["train"]["attention"] = "eager";
  CHECK_THAT(refusal(eager), Catch::Matchers::Contains("run.attention"));
}

TEST_CASE("The torchtitan job config carries both degrees") {
  training_spec run{.micro_batch = 1, .seq_len = 8192, .prec = precision::pure_bf16, .framework = framework_kind::torchtitan};
  run.shard = sharding::full;
  run.data_parallel = 2;
  run.context_parallel = 2;
  run.tensor_parallel = 2;
  const std::string job = json_io::emit_torchtitan_job(presets::llama_3_8b, run, "cptp");
  CHECK_THAT(job, Catch::Matchers::Contains("data_parallel_shard_degree = 2"));
  CHECK_THAT(job, Catch::Matchers::Contains("tensor_parallel_degree = 2"));
  CHECK_THAT(job, Catch::Matchers::Contains("context_parallel_degree = 2"));
  CHECK_THAT(json_io::framework_text(run), Catch::Matchers::Contains("FSDP2 over 2 x CP 2 ranks x TP 2"));
}

}  // namespace torchtitan_cptp_test
