// The capped replay (memscale/allocator/replay.hpp replay_training_capped) against runs measured
// under torch.cuda.set_per_process_memory_fraction (docs/data/gpu_allocator_runs/capped_h100.json,
// H100, torch 2.11): the allocator may hold at most cap_bytes of segments; past it, it frees its
// cached whole segments, retries once and else raises OutOfMemoryError.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include "memscale/allocator/replay.hpp"
#include "memscale/allocator/replay_vision.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "memscale/vision/estimate.hpp"

namespace allocator_capped_test {
namespace {

using namespace memscale;
using namespace memscale::allocator;

// The max_memory_allocated record of the capped run `id` (it carries cap_bytes and outcome).
nlohmann::json capped_record(const std::string& id) {
  std::ifstream in(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/gpu_allocator_runs/capped_h100.json");
  REQUIRE(in);
  for (const nlohmann::json& r : nlohmann::json::parse(in))
    if (r.at("id") == "h100-" + id + "-allocated") return r;
  FAIL("no capped record " << id);
  return {};
}

replay_result replay_at_cap(const nlohmann::json& r) {
  const bytes cap{r.at("cap_bytes").get<std::uint64_t>()};
  if (json_io::is_vision_record(r)) {
    const vision::vision_spec model = json_io::vision_model_from_record(r);
    const training_spec run = json_io::run_from_record(json_io::vision_run_record(r));
    const auto g = std::make_unique<vision::layer_graph>(vision::build_graph(model, run));
    return replay_vision_training<16384, 16384>(*g, run, {}, cap);
  }
  const auto built = std::make_unique<model_graph>(build(json_io::model_for_record(r), json_io::run_from_record(r)));
  return replay_training_capped<16384, 16384, 16384>(built->stack(), built->run, cap);
}

bool measured_oom(const nlohmann::json& r) { return r.at("outcome") == "oom"; }

}  // namespace

TEST_CASE("capped replay: transformer runs capped below their reserved peak run out of memory", "[allocator][capped]") {
  // Measured: OutOfMemoryError on the fp32 logits (1000 MiB) and the qwen2 logits (2.32 GiB);
  // the retry's release of whole cached segments did not free enough. The replay runs out at the
  // same request in step 2.
  for (const char* id : {"cap50-llama-small-b8-s1024-fp32-sdpa", "cap50-qwen2-0.5b-b4-s1024-amp_bf16-sdpa",
                         "cap50-heldout-qwen2-0.5b-b8-s1024-pure_bf16-sdpa-sgd_momentum"}) {
    CAPTURE(id);
    const nlohmann::json r = capped_record(id);
    REQUIRE(measured_oom(r));
    const replay_result capped = replay_at_cap(r);
    CHECK(capped.out_of_memory);
    CHECK(capped.oom_step == 2);
    CHECK(capped.reserved_peak.value <= r.at("cap_bytes").get<std::uint64_t>());
  }
  const replay_result llama = replay_at_cap(capped_record("cap50-llama-small-b8-s1024-fp32-sdpa"));
  CHECK(llama.first_oom.tried == bytes{1000ULL << 20});
}

TEST_CASE("capped replay: a run capped at 1.02 x its reserved peak fits", "[allocator][capped]") {
  for (const char* id : {"capR102-llama-small-b8-s1024-fp32-sdpa", "capR102-qwen2-0.5b-b4-s1024-amp_bf16-sdpa"}) {
    CAPTURE(id);
    const nlohmann::json r = capped_record(id);
    REQUIRE_FALSE(measured_oom(r));
    CHECK_FALSE(replay_at_cap(r).out_of_memory);
  }
}

TEST_CASE("capped replay: releasing whole cached segments at the cap lets resnet50 fit", "[allocator][capped]") {
  // Measured: resnet50 b64 fp32 fits at allocated + 30% and + 50% of (reserved - allocated),
  // with 2 retries each; without the release and retry the first failed cudaMalloc would be fatal.
  for (const char* id : {"cap30-resnet50-b64-224-fp32-sgd_momentum", "cap50-resnet50-b64-224-fp32-sgd_momentum"}) {
    CAPTURE(id);
    const nlohmann::json r = capped_record(id);
    REQUIRE_FALSE(measured_oom(r));
    const replay_result capped = replay_at_cap(r);
    CHECK_FALSE(capped.out_of_memory);
    CHECK(capped.alloc_retries >= 1);
    CHECK(capped.reserved_peak.value <= r.at("cap_bytes").get<std::uint64_t>());
  }
}

TEST_CASE("records: a run's alloc_conf reaches the replay of its --cases answer", "[allocator][capped]") {
  // alloc_conf_h100.json: llama-small b8 s1024 fp32 with expandable segments reserved 14,984 MiB
  // against 15,706 MiB without (gpu_measured_h100.json); the answer's replay follows the option.
  std::ifstream in(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/gpu_allocator_runs/alloc_conf_h100.json");
  REQUIRE(in);
  nlohmann::json with_option;
  for (const nlohmann::json& r : nlohmann::json::parse(in))
    if (r.at("id") == "h100-expandable_segments-llama-small-b8-s1024-fp32-sdpa-reserved") with_option = r;
  REQUIRE(with_option.is_object());
  nlohmann::json without = with_option;
  without.erase("alloc_conf");
  const nlohmann::json a = json_io::estimate_record(with_option);
  const nlohmann::json b = json_io::estimate_record(without);
  REQUIRE(a.contains("replay"));
  CHECK(a.at("replay").at("alloc_conf") == "expandable_segments:True");
  CHECK(a.at("replay").at("reserved").get<std::uint64_t>() < b.at("replay").at("reserved").get<std::uint64_t>());
  nlohmann::json bad = with_option;
  bad["alloc_conf"] = "expandable_segments:maybe";
  const std::string refused = json_io::estimate_record(bad).at("error").get<std::string>();
  CAPTURE(refused);
  CHECK(refused.find("alloc_conf") != std::string::npos);
  CHECK(refused.find("maybe") != std::string::npos);
}

}  // namespace allocator_capped_test
