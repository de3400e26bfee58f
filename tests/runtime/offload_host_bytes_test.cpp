// torchtune's optimizer_in_bwd beside fsdp_cpu_offload and activation offloading (v0.6.1), and the
// host bytes every offloading estimate reports (estimate/host_bytes.hpp). Checked against the
// "-cpuoffload-optim-in-bwd" and "-ac-offload-optim-in-bwd" CPU traces of
// tools/trace/torchtune_distributed_cases.py and torchtune_cases.py (docs/data/cpu_traced_frameworks.json).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "torchtune_distributed_runs.hpp"

namespace offload_host_bytes_test {
namespace {

using namespace memscale;
using nlohmann::json;

constexpr model_spec llama3_8b = presets::llama_3_8b;

constexpr training_spec distributed(std::uint64_t ranks) { return memscale_test::torchtune_distributed(ranks); }

constexpr training_spec cpu_offloaded(training_spec r) {
  r.offload_optimizer = r.offload_parameters = true;
  return r;
}

constexpr training_spec in_backward(training_spec r) {
  r.optimizer_in_backward = true;
  return r;
}

constexpr training_spec activations_offloaded(training_spec r) {
  r.offload_activations = true;
  return r;
}

// Under fsdp_cpu_offload the hook steps a host shard with its host gradient: the device peaks
// exactly as without optimizer_in_bwd, step 1 included.
static_assert(estimate(llama3_8b, in_backward(cpu_offloaded(distributed(8)))).steady.tensor.value ==
              estimate(llama3_8b, cpu_offloaded(distributed(8))).steady.tensor.value);
static_assert(estimate(llama3_8b, in_backward(cpu_offloaded(distributed(8)))).first_step.tensor.value ==
              estimate(llama3_8b, cpu_offloaded(distributed(8))).first_step.tensor.value);

// Llama-3-8B's pinned shards over 8 ranks, one power-of-two block per tensor (CachingHostAllocator):
// q and o 512 x 4096 (4 MiB), k and v 128 x 4096 (1 MiB), w1, w2 and w3 1792 x 4096 (14 MiB -> 16),
// the norms 512 elements (1 KiB), the embedding and the output 16032 x 4096 (125.25 MiB -> 128).
constexpr std::uint64_t MiB = 1024 * 1024;
constexpr std::uint64_t pinned_layer = (4 + 1 + 1 + 4 + 3 * 16) * MiB + 2 * 1024;
constexpr std::uint64_t pinned_root = 2 * 128 * MiB + 1024;
constexpr std::uint64_t pinned_8b_shards = 32 * pinned_layer + pinned_root;

std::vector<json> records_ending(const std::string& suffix) {
  std::vector<json> out;
  for (const json& r : memscale_test::framework_trace_records()) {
    const std::string id = r.at("id").get<std::string>();
    if (id.rfind("cpu-torchtune-", 0) == 0 && id.size() > suffix.size() &&
        id.compare(id.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(r);
  }
  return out;
}

double estimated(const json& record) {
  const json answer = json_io::estimate_record(record);
  INFO(answer.dump());
  REQUIRE(answer.contains("estimated_bytes"));
  return answer.at("estimated_bytes").get<double>();
}

json with_train(json record, const char* key, bool value) {
  record["train"][key] = value;
  return record;
}

}  // namespace

// The traces peak where their twins without optimizer_in_bwd would (nothing of the step is on
// the device) and memscale says the same. Under activation offloading a CPU trace also moves what
// the CUDA stash keeps (torchtune_distributed_offload_test), hence the wider bound for those.
TEST_CASE("optimizer_in_bwd with fsdp_cpu_offload: the CPU traces within 1% median, as without the hook") {
  std::vector<double> errors;
  int twins = 0;
  for (const json& r : records_ending("-cpuoffload-optim-in-bwd")) {
    const std::string id = r.at("id").get<std::string>();
    INFO(id);
    REQUIRE(r.at("train").at("optimizer_in_backward").get<bool>());
    REQUIRE(r.at("train").at("offload").get<std::string>() == "optimizer+params");
    const double measured = r.at("measured_bytes").get<double>();
    const double error = estimated(r) / measured - 1.0;
    CHECK(std::abs(error) < (id.find("-ac-offload-") != std::string::npos ? 0.03 : 0.01));
    errors.push_back(error);
    CHECK(estimated(with_train(r, "optimizer_in_backward", false)) == estimated(r));
    for (const json& t : memscale_test::framework_trace_records())
      if (t.at("id") == id.substr(0, id.size() - std::string("-optim-in-bwd").size())) {
        CHECK(t.at("measured_bytes").get<double>() == measured);
        ++twins;
      }
  }
  REQUIRE(errors.size() == 10);
  CHECK(twins == 4);
  std::sort(errors.begin(), errors.end());
  CHECK(std::abs((errors[4] + errors[5]) / 2) < 0.01);
}

// full_finetune_single_device refuses neither pairing: offloading the checkpointed inputs takes
// the same bytes off the estimate with and without optimizer_in_bwd where both peak among the
// activations (the wide model's plain run peaks in its optimizer step instead).
TEST_CASE("optimizer_in_bwd with activation offloading on one device: the two compose") {
  const std::vector<json> combined = records_ending("-ac-offload-optim-in-bwd");
  REQUIRE(combined.size() == 2);
  int composed = 0;
  for (const json& r : combined) {
    INFO(r.at("id").get<std::string>());
    const json kept = with_train(r, "activation_offload", false);
    const double drop = estimated(kept) - estimated(r);
    CHECK(drop > 0);
    const double plain_drop = estimated(with_train(kept, "optimizer_in_backward", false)) -
                              estimated(with_train(r, "optimizer_in_backward", false));
    if (plain_drop > 0) {
      CHECK(drop == plain_drop);
      ++composed;
    }
    // Within 1.5%: the llama record over by what a CPU trace moves that the CUDA stash keeps
    // (docs/estimators.md), the wide one within 0.2% since its head's chunked backward is modelled.
    CHECK(std::abs(estimated(r) / r.at("measured_bytes").get<double>() - 1.0) < 0.015);
  }
  CHECK(composed == 1);
}

TEST_CASE("host bytes: torchtune's fsdp_cpu_offload holds the rank's pinned shards and gradients, and AdamW state") {
  const estimate_result plain = estimate(llama3_8b, distributed(8));
  CHECK(plain.host_bytes == bytes{});
  const training_spec offloaded = cpu_offloaded(distributed(8));
  const graph g = build(llama3_8b, offloaded).stacks.decoder;
  const pinned_shards pinned = pinned_fsdp2_shards(g, offloaded);
  CHECK(pinned.parameters.value == pinned_8b_shards);
  CHECK(pinned.gradients.value == pinned_8b_shards);
  // The root unit (embedding, final norm, output) is larger than a layer.
  CHECK(pinned.largest_unit_gradients.value == pinned_root);
  // Rounding: above the exact 1/8 shards, by less than twice.
  CHECK(pinned.parameters > ceil_div(plain.parameter_bytes, std::uint64_t{8}));
  CHECK(pinned.parameters < ceil_div(plain.parameter_bytes, std::uint64_t{4}));
  // The AdamW state is built by zeros_like, unpinned: its exact 1/8.
  const estimate_result host = estimate(llama3_8b, offloaded);
  CHECK(host.host_bytes.value == 2 * pinned_8b_shards + ceil_div(plain.optimizer_bytes, std::uint64_t{8}).value);
  // Under optimizer_in_bwd each gradient's block returns to the allocator after its step: one
  // unit's gradient blocks stay cached.
  CHECK(host.host_bytes.value - estimate(llama3_8b, in_backward(offloaded)).host_bytes.value ==
        pinned_8b_shards - pinned_root);
  // Offloaded activations add every block's checkpointed input, each a pinned block.
  const estimate_result both = estimate(llama3_8b, activations_offloaded(offloaded));
  const bytes input = section_saved_bytes(g, block_of(g), distributed(8), true);
  CHECK(input.value > 0);
  const bytes inputs = pinned_block(input) * llama3_8b.layers;
  CHECK(both.host_bytes == host.host_bytes + inputs);
  CHECK(estimate(llama3_8b, activations_offloaded(distributed(8))).host_bytes == inputs);
}

TEST_CASE("host bytes: torchtune's offloaded activations are pinned blocks, rounded to a power of two") {
  // Hidden 3072 (Llama-3.2-3B's width): a 2 x 4096 x 3072 bf16 block input is 48 MiB, pinned in 64.
  training_spec run = activations_offloaded(distributed(8));
  run.shard = sharding::none;
  run.data_parallel = 1;
  run.ckpt = checkpointing::full;
  const model_spec m = presets::llama_base("hidden-3072", 4, 3072, 24, 8, 8192, 128256);
  const graph g = build(m, run).stacks.decoder;
  const bytes input = section_saved_bytes(g, block_of(g), run, true);
  REQUIRE(input.value == 2 * 4096 * 3072 * 2);
  CHECK(estimate(m, run).host_bytes.value == 4 * 64 * MiB);
  // Outside torchtune (the modes' offload_activations) the copies are counted exact.
  run.framework = framework_kind::hf;
  run.loss = loss_impl::standard;
  run.loss_chunks = 0;
  CHECK(estimate(m, run).host_bytes.value == 4 * input.value);
}

TEST_CASE("host bytes: ZeRO-Offload's partition and streamed parameters on one GPU") {
  training_spec run{.micro_batch = 1, .seq_len = 512, .prec = precision::pure_bf16};
  const estimate_result plain = estimate(presets::gpt2_xl, run);
  run.offload_optimizer = true;
  const estimate_result offloaded = estimate(presets::gpt2_xl, run);
  // The state, an fp32 master and an fp32 gradient copy.
  CHECK(offloaded.host_bytes ==
        plain.optimizer_bytes + storage(dtype::fp32, plain.trainable_parameter_count * 2));
  run.offload_parameters = true;
  CHECK(estimate(presets::gpt2_xl, run).host_bytes == offloaded.host_bytes + plain.parameter_bytes);
}

TEST_CASE("host bytes in the JSON report and the BALANCED mode's cost") {
  const json none = json_io::estimate_to_json(estimate(llama3_8b, distributed(8)));
  CHECK_FALSE(none.at("static").contains("host_memory"));
  const estimate_result host = estimate(llama3_8b, cpu_offloaded(distributed(8)));
  CHECK(json_io::estimate_to_json(host).at("static").at("host_memory").get<std::uint64_t>() == host.host_bytes.value);
  const auto gpu = find_gpu("rtx3090");
  REQUIRE(gpu.has_value());
  const plan_result plan = make_plan(presets::gpt2_xl, training_spec{.micro_batch = 1, .seq_len = 512}, *gpu);
  const mode_plan& balanced = plan.modes[static_cast<std::size_t>(mode::balanced)];
  REQUIRE(balanced.run.offload_optimizer);
  CHECK(balanced.cost.host_memory.value > 0);
  CHECK(balanced.cost.host_memory == estimate(presets::gpt2_xl, balanced.run).host_bytes);
}

TEST_CASE("optimizer_in_backward with offload: accepted under torchtune's FSDP2 only") {
  CHECK_NOTHROW(estimate(llama3_8b, in_backward(cpu_offloaded(distributed(8)))));
  CHECK_NOTHROW(estimate(llama3_8b, in_backward(activations_offloaded(distributed(8)))));
  training_spec one_gpu{.micro_batch = 1, .seq_len = 512, .prec = precision::pure_bf16};
  one_gpu.optimizer_in_backward = one_gpu.offload_optimizer = true;
  CHECK_THROWS_WITH(estimate(presets::gpt2_xl, one_gpu), Catch::Matchers::Contains("run.optimizer_in_backward"));
}

}  // namespace offload_host_bytes_test
