// torchtitan's context parallelism composed with FSDP2 (train.py's context_parallel around the
// step, apply_fsdp over the dp_shard_cp mesh, @ f7084fc7): one rank's seq_len / cp positions, the
// ring attention's gathered keys and values and fp32 merge buffers, parameters sharded over
// dp_shard x cp. Checked against the CPU traces of tools/trace/torchtitan_cases.py
// (docs/data/cpu_traced_frameworks.json, the "-cp" records).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#endif

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "memscale/json.hpp"
#include "memscale/json/emit_torchtitan.hpp"
#include "memscale/json/run_document.hpp"
#include "memscale/memscale.hpp"
#include "titan_trace.hpp"

namespace torchtitan_cp_test {

using namespace memscale;
using nlohmann::json;
using titan_trace::estimated;
using titan_trace::refusal;
using titan_trace::titan_record;

// The s256 records peak outside the attention (the logits, the root's reduce-scatter); the
// long-sequence small-vocabulary ones ("-v512-b2-s1024-") at the loss's backward or, checkpointed, at
// the ring attention's backward in a block beside the block below's prefetched all-gather output.
TEST_CASE("The torchtitan CP x FSDP2 CPU traces are estimated within 1%") {
  int traced = 0;
  for (const json& r : titan_trace::framework_records()) {
    const std::string id = r.at("id").get<std::string>();
    if (id.rfind("cpu-torchtitan-", 0) != 0 || id.find("-cp") == std::string::npos || id.find("-tp") != std::string::npos)
      continue;
    const double measured = r.at("measured_bytes").get<double>();
    const double error = (static_cast<double>(estimated(r)) - measured) / measured;
    INFO(id << ": error " << error);
    CHECK(error > -0.01);
    CHECK(error < 0.01);
    ++traced;
  }
  CHECK(traced == 5);
}

// FSDP2's default backward prefetch (apply_fsdp sets none): each block's pre-backward all-gathers the
// block below, whose flat bf16 output waits beside this block's backward; the root's targets the top
// block, which apply_fsdp keeps gathered (a no-op). The checkpointed cp 4 x 1 record peaks in a
// block's backward, whose moment holds one block's bf16 parameters more (at another moment of the
// walk than the serial one's peak): without them the estimate is over 2% under the trace.
TEST_CASE("torchtitan's CP blocks run their backward beside the prefetched block below") {
  json r;
  for (const json& each : titan_trace::framework_records())
    if (each.at("id") == "cpu-torchtitan-llama-v512-b2-s1024-fsdp2r1-cp4-ac-full") r = each;
  REQUIRE(r.is_object());
  const training_spec run = json_io::run_from_record(r);
  const model_graph built = build(json_io::model_for_record(r), run);
  const graph& g = built.stacks.decoder;
  const detail::graph_totals t = detail::totals_of(g, run);
  training_spec fp32_run = run;
  fp32_run.prec = precision::fp32;
  const detail::graph_totals t32 = detail::totals_of(g, fp32_run);
  detail::fsdp2_units units{.block = t.params_b,
                            .root = t.params_p + t.params_e,
                            .block_grads = t.grads_b,
                            .block_grads_fp32 = t32.grads_b,
                            .head_grads = t.grads_e,
                            .root_grads = t.grads_p + t.grads_e,
                            .root_grads_fp32 = t32.grads_p + t32.grads_e,
                            .ranks = run.data_parallel * run.context_parallel,
                            .last_block_kept = true};
  const detail::fsdp2_moment serial = detail::fsdp2_largest_moment(g, run, units);
  units.overlapped_all_gathers = true;
  const detail::fsdp2_moment overlapped = detail::fsdp2_largest_moment(g, run, units);
  REQUIRE(serial.backward);
  REQUIRE(overlapped.backward);
  CHECK(overlapped.gathered.value - serial.gathered.value == t.params_b.value);
  const std::uint64_t rise = overlapped.ranked().value - serial.ranked().value;
  CHECK(rise > 0);
  CHECK(rise < t.params_b.value);
  const double measured = r.at("measured_bytes").get<double>();
  const double with_prefetch = static_cast<double>(estimated(r));
  CHECK(std::abs(with_prefetch / measured - 1.0) < 0.01);
  CHECK((with_prefetch - static_cast<double>(rise)) / measured - 1.0 < -0.02);
}

TEST_CASE("Context parallelism shards the sequence and the parameters, and adds the ring's buffers") {
  const json cp = titan_record("fsdp2r2-cp2-ac-none");
  json without = cp;
  without["train"]["cp"] = 1;
  without["framework"]["toml"].erase("parallelism.context_parallel_degree");
  CHECK(estimated(without) == estimated(titan_record("fsdp2r2-ac-none")));
  CHECK(estimated(cp) < estimated(without) * 6 / 10);
  // The same 4 FSDP2 ranks with the sequence split 4 ways instead of 2: fewer activations.
  const json cp4 = titan_record("fsdp2r1-cp4-ac-none");
  CHECK(estimated(cp4) < estimated(cp));

  // The ring attention's buffers, graph level: the all-gathered keys and values and the fp32
  // merge of the output in forward, more in backward.
  training_spec run{.micro_batch = 1, .seq_len = 4096, .prec = precision::pure_bf16, .framework = framework_kind::torchtitan};
  run.data_parallel = 2;
  run.shard = sharding::full;
  run.context_parallel = 4;
  const auto built = std::make_unique<model_graph>(build(presets::llama_3_8b, run));
  const op o = titan_trace::first_attention(built->stack());
  // q: 1024 local positions x 4096; k and v after repeat_kv the same; gathered: 4 x (k + v) bf16.
  const bytes gathered = storage(dtype::bf16, 4ULL * 2 * 1024 * 4096);
  CHECK(o.out == storage(dtype::bf16, 1024ULL * 4096));
  CHECK(o.fwd_temp == gathered + storage(dtype::fp32, 1024ULL * 4096) * 4U);
  CHECK(o.bwd_temp > gathered + storage(dtype::fp32, 1024ULL * 4096) * 9U);

  // On CPU the first step's `grad_query += grad_query_` promotes the bf16 kernel gradient into an
  // fp32 temporary while that step's full-length key/value gradients and contiguous copies are
  // live: 4 q - 2 k bytes above a later step's send (q = k elements here, after repeat_kv).
  training_spec on_cpu = run;
  on_cpu.device = device_kind::cpu;
  const auto cpu_built = std::make_unique<model_graph>(build(presets::llama_3_8b, on_cpu));
  const op on_cpu_core = titan_trace::first_attention(cpu_built->stack());
  CHECK(on_cpu_core.fwd_temp == o.fwd_temp);
  CHECK(on_cpu_core.bwd_temp == o.bwd_temp + storage(dtype::bf16, 1024ULL * 4096));
}

TEST_CASE("torchtitan's CP refuses what it does not model, naming the field") {
  const json base = titan_record("fsdp2r2-cp2-ac-none");
  json alltoall = base;
  alltoall["framework"]["toml"]["parallelism.context_parallel_rotate_method"] = "alltoall";
  CHECK_THAT(refusal(alltoall), Catch::Matchers::Contains("context_parallel_rotate_method"));
  json disagree = base;
  disagree["train"]["cp"] = 4;
  CHECK_THAT(refusal(disagree), Catch::Matchers::Contains("train.cp"));
  json uneven = base;
  uneven["train"]["seq"] = 258;
  CHECK_THAT(refusal(uneven), Catch::Matchers::Contains("2 x run.context_parallel"));
  json eager = base;
  eager["train"]["attention"] = "eager";
  CHECK_THAT(refusal(eager), Catch::Matchers::Contains("run.attention"));
  json hf = base;
  hf.erase("framework");
  hf["model"]["impl"] = "hf-transformers";
  hf["train"]["precision"] = "pure_bf16";
  CHECK_THAT(refusal(hf), Catch::Matchers::Contains("context parallelism is modelled for torchtitan only"));
}

TEST_CASE("A torchtitan run document gives its CP degree, reads back the same, and the job config writes it") {
  const json doc = {{"model", titan_record("fsdp2r2-ac-none").at("model")},
                    {"framework", "torchtitan"},
                    {"run", {{"micro_batch", 2}, {"seq_len", 256}, {"precision", "pure_bf16"}, {"data_parallel", 1},
                             {"context_parallel", 4}}}};
  json_io::run_input in{};
  json_io::read_run_document(doc, in);
  CHECK(in.run.context_parallel == 4);
  CHECK(in.run.shard == sharding::full);
  const json written = json_io::run_document_json(in);
  CHECK(written.at("run").at("context_parallel") == 4);
  json_io::run_input again{};
  json_io::read_run_document(written, again);
  CHECK(overall_peak(estimate(again.model, again.run)).tensor == overall_peak(estimate(in.model, in.run)).tensor);
  training_spec run = in.run;
  run.micro_batch = 1;
  run.seq_len = 8192;
  const std::string job = json_io::emit_torchtitan_job(presets::llama_3_8b, run, "cp");
  CHECK_THAT(job, Catch::Matchers::Contains("context_parallel_degree = 4"));
  CHECK_THAT(job, Catch::Matchers::Contains("context_parallel_rotate_method = \"allgather\""));
  CHECK_THAT(job, Catch::Matchers::Contains("data_parallel_shard_degree = 1"));
  json hf = doc;
  hf["framework"] = "hf";
  hf["run"].erase("data_parallel");
  json_io::run_input refused{};
  CHECK_THROWS_WITH(json_io::read_run_document(hf, refused), Catch::Matchers::Contains("run.context_parallel"));
}

}  // namespace torchtitan_cp_test
