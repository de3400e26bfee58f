// A vision step on a CUDA device (memscale/vision/device.hpp): the H100 runs' reserved and
// nvidia-smi figures from the replay and the context model, the replayed band, stage
// checkpointing walked by the allocator stream, the planner reading the same figures, and
// --cases answering reserved and nvidia-smi with them; the replay's properties (reserved over allocated,
// the cap deciding at its ends, expandable segments reserving no more).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <memory>
#include <string>

#include "memscale/allocator/replay_vision.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "memscale/vision/device.hpp"
#include "memscale/vision/planner.hpp"
#include "memscale/vision/presets.hpp"
#include "test_inputs.hpp"

namespace vision_device_test {
namespace {

using namespace memscale;

nlohmann::json h100_record(const std::string& id) {
  return memscale_test::data_record("gpu_measured_h100.json", "h100-" + id);
}

double error_of(std::uint64_t predicted, const nlohmann::json& r) {
  const auto actual = static_cast<double>(r.at("measured_bytes").get<std::uint64_t>());
  return (static_cast<double>(predicted) - actual) / actual;
}

const gpu_spec& h100() {
  static const gpu_spec gpu = *find_gpu("h100-80gb");
  return gpu;
}

training_spec cuda_run(std::uint64_t batch, precision p, checkpointing c) {
  training_spec run{.micro_batch = batch, .seq_len = 1};
  run.device = device_kind::cuda;
  run.prec = p;
  run.ckpt = c;
  return on_gpu(run, h100());
}

}  // namespace

TEST_CASE("vision on the device: the H100 steps' reserved and nvidia-smi within the replayed band",
          "[vision][allocator]") {
  for (const std::string run_id :
       {"resnet50-b64-224-fp32-sgd_momentum", "resnet50-b64-224-amp_bf16-adamw", "vit_b_16-b32-224-amp_bf16-adamw"}) {
    const nlohmann::json reserved = h100_record(run_id + "-reserved");
    const nlohmann::json smi = h100_record(run_id + "-smi");
    const vision::vision_spec model = json_io::vision_model_from_record(reserved);
    const training_spec run = on_gpu(json_io::run_from_record(json_io::vision_run_record(reserved)), h100());
    const device_estimate d = vision::estimate_on_device(model, run, &h100());
    INFO(run_id);
    REQUIRE(d.replayed());
    CHECK(d.context_from == context_source::model);
    CHECK(d.device == d.reserved + d.context.total());
    CHECK(d.tensors.steady.reserved == d.reserved);
    const error_band& band = vision::device_band_of(model, run, d);
    CHECK(band.of == run_class::torchvision);
    for (const double e : {error_of(d.reserved.value, reserved), error_of(d.device.value, smi)}) {
      CAPTURE(e);
      CHECK(e >= band.low);
      CHECK(e <= band.high);
    }
    // --cases answers the same figures.
    CHECK(json_io::estimate_record(reserved).at("estimated_bytes").get<std::uint64_t>() == d.reserved.value);
    CHECK(json_io::estimate_record(smi).at("estimated_bytes").get<std::uint64_t>() == d.device.value);
  }
}

TEST_CASE("vision on the device: checkpointed stages are replayed, the stream's allocated peak near the estimate",
          "[vision][allocator]") {
  for (const vision::vision_spec& model :
       {vision::presets::resnet50, vision::presets::vit_b_16, vision::presets::mobilenet_v3_large,
        vision::presets::convnext_tiny, vision::presets::efficientnet_b0}) {
    for (const precision p : {precision::fp32, precision::amp_bf16}) {
      const device_estimate plain = vision::estimate_on_device(model, cuda_run(32, p, checkpointing::none), &h100());
      const device_estimate ckpt = vision::estimate_on_device(model, cuda_run(32, p, checkpointing::full), &h100());
      INFO(model.name << " " << to_string(p));
      REQUIRE(ckpt.replayed());
      // The walk and vision::estimate describe the same tensors: the stream's peak adds block
      // rounding and the cuDNN calls' workspaces (within 3% on these networks).
      const double walk_error = (static_cast<double>(ckpt.replay_allocated.value) - static_cast<double>(ckpt.tensor.value)) /
                                static_cast<double>(ckpt.tensor.value);
      CAPTURE(walk_error);
      CHECK(walk_error >= 0.0);
      CHECK(walk_error < 0.03);
      CHECK(ckpt.reserved >= ckpt.replay_allocated);
      CHECK(ckpt.reserved < plain.reserved);  // at batch 32 checkpointing saves memory on every one of them
    }
  }
}

TEST_CASE("vision replays: reserved >= allocated, the cap decides at its ends, expandable segments reserve no more",
          "[vision][allocator][replay]") {
  for (const vision::vision_spec& model : {vision::presets::resnet18, vision::presets::vit_b_32}) {
    for (const precision p : {precision::fp32, precision::amp_bf16}) {
      for (const checkpointing c : {checkpointing::none, checkpointing::full}) {
        const training_spec run = cuda_run(16, p, c);
        const auto g = std::make_unique<vision::layer_graph>(vision::build_graph(model, run));
        const allocator::replay_result free_run = allocator::replay_vision_training<16384, 16384>(*g, run);
        INFO(model.name << " " << to_string(p) << " " << to_string(c));
        CHECK(free_run.reserved_peak >= free_run.allocated_peak);
        CHECK(free_run.allocated_peak >= free_run.requested_peak);
        const allocator::replay_result roomy =
            allocator::replay_vision_training<16384, 16384>(*g, run, {}, free_run.reserved_peak);
        CHECK_FALSE(roomy.out_of_memory);
        CHECK(roomy.reserved_peak == free_run.reserved_peak);
        const allocator::replay_result tight =
            allocator::replay_vision_training<16384, 16384>(*g, run, {}, free_run.allocated_peak - bytes{1 << 20});
        CHECK(tight.out_of_memory);
        allocator::options expandable{};
        expandable.expandable_segments = true;
        CHECK(allocator::replay_vision_training<16384, 16384>(*g, run, expandable).reserved_peak <= free_run.reserved_peak);
      }
    }
  }
}

TEST_CASE("vision on the device: the plan reads the device estimate, its verdict the capped replay's",
          "[vision][allocator][planner]") {
  const training_spec run = cuda_run(64, precision::fp32, checkpointing::none);
  const device_estimate d = vision::estimate_on_device(vision::presets::resnet50, run, &h100());
  const plan_result plan = vision::make_plan(vision::presets::resnet50, run, h100());
  const mode_plan& none = plan.modes[0];
  CHECK(none.peak == d.device);
  CHECK(none.band.low == vision::replayed_vision_band.low);
  CHECK(none.band.high == vision::replayed_vision_band.high);
  // A budget between the allocated and the reserved peak (less the context) is the capped replay's call.
  const bytes budget = d.replay_allocated + d.context.total() + bytes{(d.reserved - d.replay_allocated).value / 2};
  const device_verdict v = vision::verdict_on_device(vision::presets::resnet50, run, d, budget);
  CHECK(v.point.basis == fit_basis::capped_replay);
  CHECK(v.v != verdict::fits);  // the band's upper end is above the reserved figure, itself above the budget
  // The context alone over the budget.
  CHECK(vision::verdict_on_device(vision::presets::resnet50, run, d, bytes{d.context.total().value / 2}).point.basis ==
        fit_basis::context_over);
}

TEST_CASE("vision on the device: a CPU run has no allocator, an offloaded one keeps the rounding rule",
          "[vision][allocator]") {
  training_spec cpu{.micro_batch = 8, .seq_len = 1};
  cpu.device = device_kind::cpu;
  const device_estimate on_cpu = vision::estimate_on_device(vision::presets::resnet18, cpu, nullptr);
  CHECK(on_cpu.fallback == replay_fallback::not_cuda);
  CHECK(on_cpu.reserved == on_cpu.tensors.steady.reserved);
  training_spec sharded = cuda_run(8, precision::fp32, checkpointing::none);
  sharded.offload_optimizer = true;
  CHECK(vision::detail::replay_precondition(sharded) == replay_fallback::offloaded);
}

}  // namespace vision_device_test
