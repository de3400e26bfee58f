// Vision models (memscale/vision): properties of the estimates and plans over every
// torchvision preset, the records reader, the data set's bands, and invalid input.
// Inputs pass through volatiles so the checks run at run time.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <array>
#include <cstdint>
#include <fstream>
#include <string>

#include "error_capture.hpp"
#include "memscale/allocator/options.hpp"
#include "memscale/gpus.hpp"
#include "memscale/json.hpp"
#include "memscale/vision/estimate.hpp"
#include "memscale/vision/planner.hpp"
#include "memscale/vision/presets.hpp"

namespace vision_test {
namespace {

using memscale_test::contains;
using memscale_test::error_message;
using namespace memscale;

std::uint64_t runtime_value(std::uint64_t v) {
  volatile std::uint64_t x = v;
  return x;
}

vision::vision_spec at_size(vision::vision_spec m, std::uint64_t height, std::uint64_t width) {
  m.image_height = runtime_value(height);
  m.image_width = runtime_value(width);
  return m;
}

training_spec run_of(std::uint64_t batch, device_kind device, precision prec, checkpointing ckpt) {
  return training_spec{.micro_batch = runtime_value(batch), .seq_len = 1, .prec = prec, .ckpt = ckpt, .device = device};
}

}  // namespace

TEST_CASE("vision: peaks never decrease with batch or image size, for every preset and setting",
          "[vision][property]") {
  for (const auto& preset : vision::presets::all) {
    for (const auto device : {device_kind::cpu, device_kind::cuda}) {
      for (const auto prec : {precision::fp32, precision::amp_bf16}) {
        for (const auto ckpt : {checkpointing::none, checkpointing::full}) {
          INFO(std::string(preset.name) << " device " << static_cast<int>(device) << " prec " << to_string(prec)
                                        << " ckpt " << to_string(ckpt));
          estimate_result previous{};
          for (const std::uint64_t batch : std::array<std::uint64_t, 8>{1, 2, 3, 4, 6, 8, 16, 32}) {
            const auto e = vision::estimate(preset, run_of(batch, device, prec, ckpt));
            INFO("batch " << batch);
            CHECK(e.steady.tensor >= previous.steady.tensor);
            CHECK(e.steady.device >= previous.steady.device);
            CHECK(e.first_step.tensor >= previous.first_step.tensor);
            CHECK(e.saved_activation_bytes >= previous.saved_activation_bytes);
            previous = e;
          }
          previous = {};
          for (std::uint64_t side = 64; side <= 512; side += 32) {
            const auto e = vision::estimate(at_size(preset, side, side), run_of(4, device, prec, ckpt));
            INFO("image " << side);
            CHECK(e.steady.tensor >= previous.steady.tensor);
            CHECK(e.steady.device >= previous.steady.device);
            previous = e;
          }
        }
      }
    }
  }
}

TEST_CASE("vision: checkpointing stages never raises the peak and keeps fewer tensors", "[vision][property]") {
  for (const auto& preset : vision::presets::all) {
    for (const std::uint64_t batch : std::array<std::uint64_t, 3>{1, 8, 32}) {
      INFO(std::string(preset.name) << " batch " << batch);
      const auto plain = vision::estimate(preset, run_of(batch, device_kind::cuda, precision::fp32, checkpointing::none));
      const auto ckpt = vision::estimate(preset, run_of(batch, device_kind::cuda, precision::fp32, checkpointing::full));
      CHECK(ckpt.steady.tensor <= plain.steady.tensor);
      CHECK(ckpt.saved_activation_bytes < plain.saved_activation_bytes);
    }
  }
}

// The caching allocator's segment for allocations of 1 to 10 MiB (allocator/options.hpp large_buffer).
constexpr bytes large_segment{allocator::large_buffer};

TEST_CASE("vision planner: modes are ordered, and the plan is monotone in batch and image size",
          "[vision][planner][property]") {
  const gpu_spec gpu = *find_gpu("rtx3060-12gb");
  for (const auto& preset : vision::presets::all) {
    INFO(preset.name);
    const auto plan = vision::make_plan(preset, run_of(32, device_kind::cuda, precision::fp32, checkpointing::none), gpu);
    // Checkpointing and the 8-bit optimizer never cost tensor memory; mixed precision may (ViT).
    // The device figure is the allocator replay's: best fit packs other sizes into other
    // segments, so it may move against the tensors by up to a segment of the large pool.
    CHECK(plan.modes[0].tensor_peak >= plan.modes[1].tensor_peak);
    CHECK(plan.modes[2].tensor_peak >= plan.modes[3].tensor_peak);
    CHECK(plan.modes[0].peak + large_segment >= plan.modes[1].peak);
    CHECK(plan.modes[2].peak + large_segment >= plan.modes[3].peak);
    // The largest batch never grows with the image; each mode's peak never shrinks with the batch.
    std::uint64_t previous_max = ~std::uint64_t{0};
    for (const std::uint64_t side : std::array<std::uint64_t, 4>{128, 224, 320, 448}) {
      const auto p = vision::make_plan(at_size(preset, side, side),
                                       run_of(8, device_kind::cuda, precision::fp32, checkpointing::none), gpu);
      INFO("image " << side);
      CHECK(p.max_micro_batch <= previous_max);
      previous_max = p.max_micro_batch;
    }
    bytes previous{};
    bytes previous_tensor{};
    for (const std::uint64_t batch : std::array<std::uint64_t, 4>{1, 4, 16, 64}) {
      const auto p = vision::make_plan(preset, run_of(batch, device_kind::cuda, precision::fp32, checkpointing::none), gpu);
      INFO("batch " << batch);
      CHECK(p.chosen_plan().peak >= bytes{});
      CHECK(p.modes[3].tensor_peak >= previous_tensor);
      CHECK(p.modes[3].peak + large_segment >= previous);
      previous = p.modes[3].peak;
      previous_tensor = p.modes[3].tensor_peak;
    }
  }
}

TEST_CASE("vision planner: resnet50 on an RTX 3060 12GB, 224 and 384 px", "[vision][planner]") {
  const gpu_spec gpu = *find_gpu("rtx3060-12gb");
  const auto run = run_of(64, device_kind::cuda, precision::fp32, checkpointing::none);
  const auto p224 = vision::make_plan(vision::presets::resnet50, run, gpu);
  CHECK(p224.fits);
  CHECK(p224.chosen == mode::none);
  CHECK(p224.max_micro_batch >= 64);
  const auto p384 = vision::make_plan(at_size(vision::presets::resnet50, 384, 384), run, gpu);
  CHECK(p384.fits);
  CHECK(p384.chosen != mode::none);  // about 16 GiB unoptimised
  CHECK(p384.max_micro_batch < p224.max_micro_batch);
  // The largest batch is the largest: one more fits in no mode.
  auto over = run;
  over.micro_batch = p384.max_micro_batch + 1;
  for (const mode m : {mode::none, mode::conservative, mode::balanced, mode::aggressive})
    CHECK_FALSE(vision::plan_mode(at_size(vision::presets::resnet50, 384, 384), over, gpu, m, p384.budget).fits);
}

TEST_CASE("vision records: every traced torchvision case is within the CPU band", "[vision][json]") {
  std::ifstream in(MEMSCALE_SOURCE_DIR "/docs/data/cpu_traced_vision.json");
  REQUIRE(in);
  const auto records = json_io::json::parse(in);
  REQUIRE(records.size() >= 20);
  for (const auto& record : records) {
    INFO(record.at("id").get<std::string>());
    const auto answer = json_io::estimate_record(record);
    REQUIRE(answer.contains("estimated_bytes"));
    const double measured = record.at("measured_bytes").get<double>();
    const double error = (answer.at("estimated_bytes").get<double>() - measured) / measured * 100.0;
    CHECK(error >= -5.0);
    CHECK(error <= 10.0);
  }
}

TEST_CASE("vision: invalid input is an error naming the field", "[vision][error]") {
  CHECK(contains(error_message([] { (void)vision::estimate(at_size(vision::presets::resnet18, 16, 16), training_spec{}); }),
                 "image size"));
  CHECK(contains(error_message([] { (void)vision::estimate(at_size(vision::presets::vit_b_16, 100, 100), training_spec{}); }),
                 "patch"));
  CHECK(contains(error_message([] { (void)vision::estimate(at_size(vision::presets::resnet18, 9000, 224), training_spec{}); }),
                 "image size"));
  json_io::json record = json_io::json::parse(R"json({"id": "x", "measure": "cpu-tensor-peak", "device": "cpu",
    "model": {"name": "torchvision.models.resnet18", "impl": "torchvision"},
    "train": {"batch": 1, "image": "224y224"}, "measured_bytes": 1})json");
  auto answer = json_io::estimate_record(record);
  REQUIRE(answer.contains("error"));
  CHECK(contains(answer.at("error").get<std::string>(), "train.image"));
  record["train"]["image"] = "320x256";
  answer = json_io::estimate_record(record);
  CHECK(answer.contains("estimated_bytes"));
  record["train"]["memory_format"] = "nchw";
  answer = json_io::estimate_record(record);
  REQUIRE(answer.contains("error"));
  CHECK(contains(answer.at("error").get<std::string>(), "train.memory_format"));
}

}  // namespace vision_test
