// Error bands by class and quantity (error_band.hpp): a class's tensor figure (max_memory_allocated,
// a CPU trace) and its device figure (max_memory_reserved, nvidia-smi) are measured apart, and a
// record's answer carries the band of the quantity it measured.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <fstream>
#include <string>

#include "memscale/device_peak.hpp"
#include "memscale/json.hpp"
#include "memscale/presets.hpp"

namespace error_band_quantity_test {
namespace {

using namespace memscale;
using nlohmann::json;

static_assert(band_of(run_class::gpu_published, band_quantity::tensor).quantity == band_quantity::tensor);
static_assert(band_of(run_class::gpu_published, band_quantity::device).quantity == band_quantity::device);
// A CPU trace has no device figure: the unmeasured band of the device quantity.
static_assert(band_of(run_class::cpu_traced, band_quantity::device).of == run_class::unmeasured);
static_assert(!band_of(run_class::cpu_traced, band_quantity::device).measured);

json record_with_id(const std::string& id) {
  std::ifstream in(std::string(MEMSCALE_GROUND_TRUTH_DIR) + "/gpu_published_dev.json");
  REQUIRE(in.good());
  const json file = json::parse(in);
  const json& records = file.is_array() ? file : file.at("records");
  for (const json& r : records)
    if (r.at("id") == id) return r;
  FAIL("no record " << id);
  return {};
}

}  // namespace

TEST_CASE("the published GPU class's tensors are measured much closer than its rounding-rule device figure",
          "[bands]") {
  const error_band& tensor = band_of(run_class::gpu_published, band_quantity::tensor);
  const error_band& device = band_of(run_class::gpu_published, band_quantity::device);
  CHECK(tensor.measured);
  CHECK(device.measured);
  CHECK(tensor.low > device.low);
  CHECK(tensor.high < device.high);
  // Every class has its own band for each quantity or falls back to the unmeasured one, never to
  // another measured class's.
  for (const run_class c : {run_class::cpu_traced, run_class::gpu_published, run_class::memscale_mode,
                            run_class::torchvision, run_class::unmeasured})
    for (const band_quantity q : {band_quantity::tensor, band_quantity::device}) {
      const error_band& b = band_of(c, q);
      CHECK(b.quantity == q);
      CHECK((b.of == c || b.of == run_class::unmeasured));
    }
}

TEST_CASE("a CPU run's verdict takes its class's tensor band: a CPU holds no allocator cache and no context",
          "[bands]") {
  training_spec cpu{.micro_batch = 2, .seq_len = 512};
  cpu.device = device_kind::cpu;
  CHECK(verdict_quantity_of(cpu) == band_quantity::tensor);
  const device_estimate not_replayed{.fallback = replay_fallback::not_cuda};
  REQUIRE_FALSE(not_replayed.replayed());
  const error_band& on_cpu = device_band_of(presets::gpt2, cpu, not_replayed);
  CHECK(on_cpu.of == run_class::cpu_traced);
  CHECK(on_cpu.quantity == band_quantity::tensor);
  training_spec gpu = cpu;
  gpu.device = device_kind::cuda;
  CHECK(device_band_of(presets::gpt2, gpu, not_replayed).quantity == band_quantity::device);
}

TEST_CASE("a record's answer carries the band of the quantity it measured", "[bands][records]") {
  const json smi = json_io::estimate_record(record_with_id("hf-bertL-vanilla-b4"));
  CHECK(smi.at("class") == "gpu_published");
  CHECK(smi.at("band").at("quantity") == "device");
  CHECK(smi.at("band").at("low") == band_of(run_class::gpu_published, band_quantity::device).low);
  const json allocated = json_io::estimate_record(record_with_id("memscale-baseline-bert-large-uncased-b16-s128-rtx3090"));
  CHECK(allocated.at("class") == "gpu_published");
  CHECK(allocated.at("band").at("quantity") == "tensor");
  CHECK(allocated.at("band").at("low") == band_of(run_class::gpu_published, band_quantity::tensor).low);
  // The replay's verdict weighs the device figure, whatever the record measured.
  REQUIRE(allocated.contains("replay"));
  CHECK(allocated.at("replay").at("band").at("quantity") == "device");
  CHECK(allocated.at("replay").at("band").at("class") == "gpu_published");
}

}  // namespace error_band_quantity_test
