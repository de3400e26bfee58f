// torchtune's distributed recipes (v0.6.1) with enable_activation_offloading and fsdp_cpu_offload:
// OffloadActivations moves each checkpointed block's input to the host as on one device;
// CPUOffloadPolicy keeps the shards, their gradients and AdamW's state on the host, so the device
// holds the gathered units, the unsharded gradients and the reduce-scatter buffers only.
// Checked against the "-offload" / "-cpuoffload" CPU traces of
// tools/trace/torchtune_distributed_cases.py (docs/data/cpu_traced_frameworks.json).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#endif

#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "torchtune_distributed_runs.hpp"

namespace torchtune_distributed_offload_test {
namespace {

using namespace memscale;
using nlohmann::json;

constexpr model_spec llama3_8b = presets::llama_3_8b;

constexpr training_spec distributed(std::uint64_t ranks) { return memscale_test::torchtune_distributed(ranks); }

constexpr training_spec activations_offloaded(training_spec r) {
  r.offload_activations = true;
  return r;
}

constexpr training_spec cpu_offloaded(training_spec r) {
  r.offload_optimizer = r.offload_parameters = true;
  return r;
}

// Offloaded block inputs leave the device (less the four the CUDA stash keeps while a block runs).
static_assert(estimate(llama3_8b, activations_offloaded(distributed(8))).steady.tensor.value <
              estimate(llama3_8b, distributed(8)).steady.tensor.value);
// Under fsdp_cpu_offload no shard, sharded gradient or AdamW state is on the device.
static_assert(estimate(llama3_8b, cpu_offloaded(distributed(8))).steady.breakdown.optimizer.value == 0);
static_assert(estimate(llama3_8b, cpu_offloaded(distributed(8))).steady.tensor.value <
              estimate(llama3_8b, distributed(8)).steady.tensor.value -
                  estimate(llama3_8b, distributed(8)).steady.breakdown.optimizer.value);

std::vector<json> offload_records() {
  std::vector<json> out;
  for (const json& r : memscale_test::framework_trace_records()) {
    const std::string id = r.at("id").get<std::string>();
    if (id.rfind("cpu-torchtune-", 0) == 0 && id.find("-distributed-") != std::string::npos &&
        id.find("offload") != std::string::npos)
      out.push_back(r);
  }
  return out;
}

}  // namespace

// Both offloads add no error of their own: each record is over by its twin's bytes without the
// offload (the FSDP2 walk's), except that a CPU trace has no CUDA stash, so under activation
// offloading the final norm's saved fp32 input and rsqrt go to the host too, while
// memscale keeps them on the device as the stash does (offload_stashed_blocks). LoRA's peak is
// elsewhere (backward), so its records match their twins. The "-cpuoffload-optim-in-bwd" records'
// twins are the "-optim-in-bwd" ones: the host step adds nothing either.
TEST_CASE("torchtune distributed offload traces: over by their twins' bytes") {
  int n = 0;
  for (const json& r : offload_records()) {
    const std::string id = r.at("id").get<std::string>();
    const json answer = json_io::estimate_record(r);
    INFO(id << ": " << answer.dump());
    REQUIRE(answer.contains("estimated_bytes"));
    const double estimated = answer.at("estimated_bytes").get<double>();
    const double measured = r.at("measured_bytes").get<double>();
    CHECK(std::abs(estimated / measured - 1.0) < 0.03);  // 2.5%: the stash difference on the units' 28 MB
    std::string twin_id = id;
    for (const std::string part : {"-offload", "-cpuoffload"})
      if (const auto at = twin_id.find(part); at != std::string::npos) twin_id.erase(at, part.size());
    json twin;
    for (const json& t : memscale_test::framework_trace_records())
      if (t.at("id") == twin_id) twin = t;
    REQUIRE(twin.is_object());
    const double twin_over =
        json_io::estimate_record(twin).at("estimated_bytes").get<double>() - twin.at("measured_bytes").get<double>();
    const bool norm_on_host = id.find("-full-") != std::string::npos && id.find("-ac-offload") != std::string::npos;
    const double tokens = r.at("train").at("batch").get<double>() * r.at("train").at("seq").get<double>();
    // RMSNorm's fp32 copy of its input and its fp32 rsqrt (modules/rms_norm.py @ v0.6.1).
    const double norm_saved = norm_on_host ? tokens * r.at("model").at("hidden").get<double>() * 4 + tokens * 4 : 0.0;
    CHECK(std::abs((estimated - measured) - twin_over - norm_saved) < 4096.0);
    ++n;
  }
  CHECK(n == 24);
}

TEST_CASE("fsdp_cpu_offload leaves no shard, sharded gradient or optimizer state on the device") {
  const estimate_result on_device = estimate(llama3_8b, distributed(8));
  const estimate_result host = estimate(llama3_8b, cpu_offloaded(distributed(8)));
  CHECK(host.steady.breakdown.optimizer.value == 0);
  CHECK(host.steady.tensor < on_device.steady.tensor);
  // The gathered units stay: more ranks shrink only what was on the device at 1/N.
  CHECK(estimate(llama3_8b, cpu_offloaded(distributed(16))).steady.tensor == host.steady.tensor);
}

TEST_CASE("torchtune distributed offload: refusals and the emitted key") {
  training_spec half = distributed(8);
  half.offload_optimizer = true;
  CHECK_THROWS_WITH(estimate(llama3_8b, half), Catch::Matchers::Contains("run.offload"));
  training_spec uncheckpointed = activations_offloaded(distributed(8));
  uncheckpointed.ckpt = checkpointing::none;
  CHECK_THROWS_WITH(estimate(llama3_8b, uncheckpointed), Catch::Matchers::Contains("run.offload_activations"));
  json record = offload_records().front();
  record["train"]["offload"] = "optimizer";
  CHECK_THAT(json_io::estimate_record(record).at("error").get<std::string>(), Catch::Matchers::Contains("train.offload"));
}

}  // namespace torchtune_distributed_offload_test
