// litgpt's finetune/lora.py over several devices (Lightning-AI/litgpt @ 26857050, from v0.5.11):
// Lightning Fabric's ModelParallelStrategy with the script's parallelize_fn, one rank's FSDP2 step
// (parallel/litgpt_fsdp2.hpp): every Block and the root fully_shard'ed in bf16, resharded after
// forward, every Block checkpointed; the loop's logits list bound through backward and fit()'s
// validations beside the shards and the gathered root. Checked against the CPU traces of
// tools/trace/litgpt_fsdp2_cases.py (docs/data/cpu_traced_frameworks.json).
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

namespace litgpt_fsdp2_test {
namespace {

using namespace memscale;
using nlohmann::json;

constexpr model_spec litgpt_llama() {
  return as_litgpt_model(presets::llama_base("litgpt-test", 4, 256, 4, 4, 688, 16000));
}

// finetune/lora.py's run at litgpt main (v0.5.13), as the traces run it.
constexpr training_spec lora_run() {
  training_spec run = with_framework(training_spec{.micro_batch = 2,
                                                   .seq_len = 256,
                                                   .prec = precision::pure_bf16,
                                                   .ckpt = checkpointing::full,
                                                   .target = training_target::lora,
                                                   .lora_rank = 8},
                                     framework_kind::litgpt);
  run.framework_version = litgpt_main;
  return run;
}

// One rank of N under ModelParallelStrategy.
constexpr training_spec model_parallel(std::uint64_t ranks) {
  training_spec run = lora_run();
  run.shard = sharding::full;
  run.data_parallel = ranks;
  run.litgpt_model_parallel = true;
  return run;
}

// One rank's AdamW state: two bf16 moments of its 1/N share of the adapters only.
static_assert(estimate(litgpt_llama(), model_parallel(4)).steady.breakdown.optimizer.value ==
              (estimate(litgpt_llama(), lora_run()).steady.breakdown.optimizer.value + 3) / 4);
// Without the flag the same run is FSDP1's layout (FSDPStrategy, litgpt 0.4): a different walk.
static_assert(runs_fsdp2(model_parallel(2)) && !runs_fsdp2([] {
  training_spec r = model_parallel(2);
  r.litgpt_model_parallel = false;
  return r;
}()));

std::string refusal_of(const training_spec& run) {
  try {
    validate(litgpt_llama(), run);
  } catch (const error& e) {
    return e.what();
  }
  return "accepted";
}

json records() {
  const json all = json::parse(std::ifstream(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_frameworks.json"));
  json out = json::array();
  for (const json& r : all)
    if (r.at("id").get<std::string>().rfind("cpu-fsdp2-litgpt-", 0) == 0) out.push_back(r);
  return out;
}

}  // namespace

// Traced with FSDP2's kept forward all-gather output and backward prefetch emulated: where fit()'s
// validation after step 1 is the peak (every case but the 1,000-token vocabulary) and where the top
// block's backward is, within 0.5% (what remains is the trace's stand-in causal mask, 64 KB).
TEST_CASE("litgpt's LoRA under ModelParallelStrategy: CPU traces within 0.5%, median 0.2%") {
  std::vector<double> errors;
  for (const json& r : records()) {
    const std::string id = r.at("id").get<std::string>();
    const json answer = json_io::estimate_record(r);
    INFO(id << ": " << answer.dump());
    REQUIRE(answer.contains("estimated_bytes"));
    const double error = answer.at("estimated_bytes").get<double>() / r.at("measured_bytes").get<double>() - 1.0;
    CHECK(std::abs(error) < 0.005);
    errors.push_back(std::abs(error));
  }
  REQUIRE(errors.size() == 8);
  std::sort(errors.begin(), errors.end());
  CHECK((errors[3] + errors[4]) / 2 < 0.002);
}

// FSDP2's overlap of all-gathers with compute (fsdp2_units::overlapped_all_gathers): with a small
// vocabulary the top block's backward is the rank's peak, and it runs beside the flat all-gather
// output its pre-backward prefetched for the block below: one block's unsharded parameters more.
TEST_CASE("FSDP2's backward prefetch: the top block's backward beside the next block's all-gather output") {
  const model_spec small_vocabulary = as_litgpt_model(presets::llama_base("litgpt-v1k", 4, 256, 4, 4, 688, 1000));
  const model_graph built = build(small_vocabulary, model_parallel(2));
  const graph& g = built.stacks.decoder;
  const detail::graph_totals t = detail::totals_of(g, built.run);
  detail::fsdp2_units units{.block = t.params_b,
                            .root = t.params_p + t.params_e,
                            .block_grads = t.grads_b,
                            .block_grads_fp32 = t.grads_b,
                            .head_grads = t.grads_e,
                            .root_grads = t.grads_p + t.grads_e,
                            .root_grads_fp32 = t.grads_p + t.grads_e,
                            .ranks = 2,
                            .last_block_kept = false};
  const detail::fsdp2_moment serial = detail::fsdp2_largest_moment(g, built.run, units);
  units.overlapped_all_gathers = true;
  const detail::fsdp2_moment overlapped = detail::fsdp2_largest_moment(g, built.run, units);
  REQUIRE(serial.backward);
  REQUIRE(overlapped.backward);
  CHECK(overlapped.gathered.value - serial.gathered.value == t.params_b.value);
  CHECK(overlapped.activations == serial.activations);
}

// framework.strategy names the layout: ModelParallelStrategy is one rank's FSDP2 step (estimate_record),
// FSDPStrategy the multi-GPU FSDP1 layout (estimate_parallel_record).
TEST_CASE("the records' strategy is read: FSDPStrategy is FSDP1's layout, another name is refused") {
  for (const json& r : records()) {
    INFO(r.at("id").get<std::string>());
    CHECK(r.at("framework").at("strategy") == "ModelParallelStrategy");
    CHECK(json_io::run_from_record(r).litgpt_model_parallel);
    CHECK_FALSE(json_io::is_multi_gpu_record(r));
    json fsdp1 = r;
    fsdp1.at("framework").at("strategy") = "FSDPStrategy";
    CHECK(json_io::is_multi_gpu_record(fsdp1));
    json other = r;
    other.at("framework").at("strategy") = "DDPStrategy";
    const json answer = json_io::estimate_record(other);
    REQUIRE(answer.contains("error"));
    CHECK(answer.at("error").get<std::string>().find("framework.strategy") != std::string::npos);
  }
}

// The layout through the API: parallel.fsdp fsdp2 with --strategy fsdp-full gives the rank the
// flag, and the per-GPU peak is that rank's FSDP2 step.
TEST_CASE("estimate_per_gpu: fsdp-full with fsdp2 under litgpt is one rank's ModelParallelStrategy step") {
  const parallel_spec p{.engine = strategy::fsdp_full, .gpus_per_node = 4, .fsdp = fsdp_api::fsdp2};
  const per_gpu_estimate e = estimate_per_gpu(litgpt_llama(), lora_run(), p);
  const estimate_result rank = estimate(litgpt_llama(), model_parallel(4));
  CHECK(e.peak.tensor == rank.steady.tensor);
  CHECK(e.peak.breakdown.optimizer == rank.steady.breakdown.optimizer);
  // Main's lora.py never runs FSDPStrategy: FSDP1 of the same run is refused by name. 0.4's
  // FSDPStrategy (FSDP1's walk) peaks in validate() after a step too, with the shards and the
  // gathered root and no block (estimate/single_graph.hpp): the same bytes.
  const parallel_spec fsdp1_layout{.engine = strategy::fsdp_full, .gpus_per_node = 4};
  std::string fsdp1_refusal = "accepted";
  try {
    estimate_per_gpu(litgpt_llama(), lora_run(), fsdp1_layout);
  } catch (const error& err) {
    fsdp1_refusal = err.what();
  }
  CHECK_THAT(fsdp1_refusal, Catch::Matchers::Contains("run.data_parallel"));
  training_spec release_0_4 = lora_run();
  release_0_4.framework_version = 409;
  const per_gpu_estimate fsdp1 = estimate_per_gpu(litgpt_llama(), release_0_4, fsdp1_layout);
  CHECK(fsdp1.peak.at == phase::validation);
  CHECK(fsdp1.peak.tensor == e.peak.tensor);
  // A full fine-tune runs finetune/full.py, which keeps FSDPStrategy: refused under fsdp2.
  training_spec full = lora_run();
  full.target = training_target::full;
  full.lora_rank = 0;
  full.loss = loss_impl::standard;
  CHECK_THROWS_WITH(estimate_per_gpu(litgpt_llama(), full, p), Catch::Matchers::Contains("run.target"));
}

TEST_CASE("what ModelParallelStrategy is not modelled for is refused by name") {
  CHECK(refusal_of(model_parallel(2)) == "accepted");
  training_spec one = model_parallel(2);
  one.data_parallel = 1;
  one.shard = sharding::none;
  CHECK_THAT(refusal_of(one), Catch::Matchers::Contains("run.data_parallel"));
  training_spec no_ckpt = model_parallel(2);
  no_ckpt.ckpt = checkpointing::none;
  CHECK_THAT(refusal_of(no_ckpt), Catch::Matchers::Contains("run.ckpt"));
  training_spec amp = model_parallel(2);
  amp.prec = precision::amp_bf16;
  CHECK_THAT(refusal_of(amp), Catch::Matchers::Contains("run.prec"));
  training_spec accum = model_parallel(2);
  accum.grad_accum = 2;
  CHECK_THAT(refusal_of(accum), Catch::Matchers::Contains("run.grad_accum"));
  training_spec offload = model_parallel(2);
  offload.offload_optimizer = offload.offload_parameters = true;
  CHECK_THAT(refusal_of(offload), Catch::Matchers::Contains("run.litgpt_model_parallel"));
  training_spec scripts_2023 = model_parallel(2);
  scripts_2023.framework_version = 0;
  CHECK_THAT(refusal_of(scripts_2023), Catch::Matchers::Contains("run.framework_version"));
  training_spec release_0_4 = model_parallel(2);
  release_0_4.framework_version = 409;
  CHECK_THAT(refusal_of(release_0_4), Catch::Matchers::Contains("run.framework_version"));
  training_spec hf = model_parallel(2);
  hf.framework = framework_kind::hf;
  CHECK_THAT(refusal_of(hf), Catch::Matchers::Contains("litgpt"));
}

}  // namespace litgpt_fsdp2_test
