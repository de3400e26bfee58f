// One planner contract for every kind of model: a vision plan's fields mean what a
// transformer plan's mean (verdict, chosen mode and status, each mode's peak, band and
// verdict, the micro-batch planned and the largest that fits), because both are filled by
// the same steps (memscale/detail/plan_steps.hpp). Also: a bf16 run on a GPU without bf16
// is refused, and the modes pick fp16 there themselves.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "error_capture.hpp"
#include "memscale/gpus.hpp"
#include "memscale/planner.hpp"
#include "memscale/presets.hpp"
#include "memscale/vision/planner.hpp"
#include "memscale/vision/presets.hpp"

namespace plan_contract_test {
namespace {

using namespace memscale;
using memscale_test::contains;
using memscale_test::error_message;

std::uint64_t runtime_value(std::uint64_t v) {
  volatile std::uint64_t x = v;
  return x;
}

gpu_spec gpu_named(const char* name) {
  const auto gpu = find_gpu(name);
  REQUIRE(gpu.has_value());
  return *gpu;
}

vision::vision_spec at_size(vision::vision_spec m, std::uint64_t side) {
  m.image_height = m.image_width = runtime_value(side);
  return m;
}

training_spec vision_run(std::uint64_t batch, precision p = precision::fp32) {
  return {.micro_batch = runtime_value(batch), .seq_len = 1, .prec = p};
}

// What every plan must say, whatever kind of model it plans. `fits_at(m, b)`: whether mode m
// fits at micro-batch b (the kind's own mode plan).
void check_contract(const plan_result& plan, std::uint64_t max_search,
                    const std::function<bool(mode, std::uint64_t)>& fits_at) {
  INFO("status " << to_string(plan.status) << ", chosen " << to_string(plan.chosen) << ", micro-batch "
                 << plan.micro_batch << " x " << plan.grad_accumulation << ", max " << plan.max_micro_batch << " ("
                 << to_string(plan.max_micro_batch_mode) << ")");
  for (const mode_plan& m : plan.modes) {
    INFO(to_string(m.m));
    CHECK(m.band.high > 0.0);
    CHECK(m.band.low < 0.0);
    CHECK(m.range.high == range_of(m.peak, m.band).high);
    CHECK(m.range.low == range_of(m.peak, m.band).low);
    CHECK(m.v == verdict_of(m.range, plan.budget));
    CHECK(m.fits == (m.v == verdict::fits));
  }
  CHECK(plan.unoptimized_peak == plan.modes[0].peak);
  CHECK(plan.fits == (plan.v == verdict::fits));
  CHECK(plan.micro_batch * plan.grad_accumulation == plan.effective_batch);
  if (plan.fits) {
    CHECK((plan.status == plan_status::no_technique_needed || plan.status == plan_status::mode_needed));
    CHECK(plan.chosen_plan().fits);
    CHECK(plan.chosen_plan().m == plan.chosen);
    CHECK(plan.next_step == advice::none);
    // The least aggressive mode that fits.
    for (const mode_plan& m : plan.modes) {
      if (m.m == plan.chosen) break;
      CHECK_FALSE(m.fits);
    }
  } else {
    CHECK(plan.status != plan_status::no_technique_needed);
    CHECK(plan.status != plan_status::mode_needed);
  }
  CHECK(plan.has_chosen_mode() ==
        (plan.status != plan_status::shorter_sequence && plan.status != plan_status::nothing_fits));
  if (plan.status == plan_status::cheaper_levers) {
    // The first lever whose point estimate fits: none before it does, and its plan is its own.
    REQUIRE(plan.levers.any_likely());
    CHECK(plan.chosen == mode::conservative);
    CHECK(plan.lever_plan.peak == plan.levers.advised().peak);
    CHECK(plan.lever_plan.peak <= plan.budget);
    CHECK(plan.lever_plan.fits == (plan.levers.advised().v == verdict::fits));
    CHECK(plan.lever_plan.cost.transfer_seconds == 0.0);
    for (std::size_t i = 0; i < plan.levers.first_likely; ++i) CHECK(plan.levers.items[i].peak > plan.budget);
    CHECK(plan.micro_batch == plan.levers.advised().run.micro_batch);
  } else if (plan.levers.count > 0) {
    // Weighed and none likely fits, or half the sequence where a longer one fits already.
    CHECK((!plan.levers.any_likely() || (plan.status == plan_status::shorter_sequence &&
                                         plan.levers.advised().what == lever::shorter_sequence)));
  }
  if (plan.status == plan_status::smaller_micro_batch) {
    CHECK(fits_at(plan.chosen, plan.micro_batch));
    CHECK(plan.effective_batch % plan.micro_batch == 0);
  }
  if (plan.max_micro_batch > 0) {
    CHECK(fits_at(plan.max_micro_batch_mode, plan.max_micro_batch));
    if (plan.max_micro_batch < max_search)
      for (const mode m : {mode::none, mode::conservative, mode::balanced, mode::aggressive})
        CHECK_FALSE(fits_at(m, plan.max_micro_batch + 1));
  } else {
    CHECK(plan.status != plan_status::smaller_micro_batch);
    for (const mode m : {mode::none, mode::conservative, mode::balanced, mode::aggressive}) CHECK_FALSE(fits_at(m, 1));
  }
  CHECK_FALSE(plan.reason.empty());
  CHECK(plan.mode_order_inverted == !plan.why_order_inverts.empty());
}

void check_vision_contract(const vision::vision_spec& model, const training_spec& run, const gpu_spec& gpu) {
  const plan_result plan = vision::make_plan(model, run, gpu);
  INFO(model.name << " " << model.image_height << " px, batch " << run.micro_batch << " on " << gpu.name);
  check_contract(plan, plan_options{}.max_batch_search, [&](mode m, std::uint64_t b) {
    training_spec t = run;
    t.micro_batch = b;
    return vision::plan_mode(model, t, gpu, m, plan.budget).fits;
  });
  CHECK(vision::fits(model, run, gpu) == plan.fits);
}

void check_transformer_contract(const model_spec& model, const training_spec& run, const gpu_spec& gpu) {
  const plan_result plan = make_plan(model, run, gpu);
  INFO(model.name << " batch " << run.micro_batch << " seq " << run.seq_len << " on " << gpu.name);
  check_contract(plan, plan_options{}.max_batch_search, [&](mode m, std::uint64_t b) {
    training_spec t = run;
    t.micro_batch = b;
    return detail::mode_fits(model, t, gpu, m, plan.budget);
  });
  CHECK(fits(model, run, gpu) == plan.fits);
}

}  // namespace

TEST_CASE("vision plan: resnet50 224 px batch 64 on an RTX 3060 12GB says fits, in mode none, with a band",
          "[vision][planner]") {
  const plan_result plan = vision::make_plan(vision::presets::resnet50, vision_run(64), gpu_named("rtx3060-12gb"));
  CHECK(plan.fits);
  CHECK(plan.v == verdict::fits);
  CHECK(plan.status == plan_status::no_technique_needed);
  CHECK(plan.chosen == mode::none);
  CHECK(plan.has_chosen_mode());
  for (const mode_plan& m : plan.modes) {
    INFO(to_string(m.m));
    CHECK(m.band.of == run_class::torchvision);
    CHECK(m.range.high > m.peak);
    CHECK(m.v == verdict::fits);
  }
  CHECK(plan.max_micro_batch > 64);
  CHECK(plan.micro_batch == 64);
}

TEST_CASE("vision plan: the same contract as a transformer plan, in every status it can reach", "[vision][planner]") {
  const gpu_spec rtx3060 = gpu_named("rtx3060-12gb");
  // fits as it is; a mode needed; a smaller micro-batch dividing the effective batch; nothing fits
  check_vision_contract(vision::presets::resnet50, vision_run(64), rtx3060);
  check_vision_contract(at_size(vision::presets::resnet50, 384), vision_run(64), rtx3060);
  check_vision_contract(vision::presets::vit_l_16, vision_run(512), rtx3060);
  check_vision_contract(vision::presets::vit_b_16, vision_run(8), gpu_named("t4"));
  check_vision_contract(at_size(vision::presets::vit_l_16, 1024), vision_run(4), custom_gpu(bytes{runtime_value(2) << 30}));

  const plan_result needs_mode = vision::make_plan(at_size(vision::presets::resnet50, 384), vision_run(64), rtx3060);
  CHECK(needs_mode.status == plan_status::mode_needed);
  CHECK(needs_mode.chosen != mode::none);

  training_spec accumulated = vision_run(384);
  accumulated.grad_accum = runtime_value(2);
  const plan_result smaller = vision::make_plan(vision::presets::vit_l_16, accumulated, rtx3060);
  REQUIRE(smaller.status == plan_status::smaller_micro_batch);
  CHECK(smaller.effective_batch == 768);
  CHECK(smaller.micro_batch * smaller.grad_accumulation == 768);
  CHECK(smaller.micro_batch <= smaller.max_micro_batch);
  CHECK(smaller.next_step == advice::smaller_micro_batch);

  const plan_result nothing = vision::make_plan(at_size(vision::presets::vit_l_16, 1024), vision_run(4),
                                                custom_gpu(bytes{runtime_value(2) << 30}));
  CHECK(nothing.status == plan_status::nothing_fits);
  CHECK_FALSE(nothing.has_chosen_mode());
  CHECK(nothing.max_micro_batch == 0);
  CHECK(nothing.next_step == advice::smaller_model_or_more_gpus);
}

TEST_CASE("transformer plan: the contract, in every status it can reach", "[planner]") {
  const gpu_spec rtx3090 = gpu_named("rtx3090");
  const auto run = [](std::uint64_t batch, std::uint64_t seq) {
    return training_spec{.micro_batch = runtime_value(batch), .seq_len = runtime_value(seq)};
  };
  check_transformer_contract(presets::bert_base_uncased, run(16, 128), rtx3090);   // fits as it is
  check_transformer_contract(presets::gpt2_xl, run(2, 1024), rtx3090);            // a mode needed
  check_transformer_contract(presets::gpt2_xl, run(61, 1024), rtx3090);           // a smaller micro-batch
  check_transformer_contract(presets::llama_2_7b, run(1, 4096), rtx3090);         // parameters streamed / shorter
  check_transformer_contract(presets::llama_2_70b, run(1, 512), custom_gpu(bytes{runtime_value(2) << 30}));
}

TEST_CASE("plans of a GPU without bf16: an explicit bf16 precision is refused, naming the GPU and the way out",
          "[planner][bf16]") {
  const gpu_spec t4 = gpu_named("t4");
  REQUIRE_FALSE(t4.bf16);
  for (const precision p : {precision::amp_bf16, precision::pure_bf16}) {
    training_spec run{.micro_batch = runtime_value(4), .seq_len = runtime_value(512), .prec = p};
    INFO(to_string(p));
    const std::string message = error_message([&] { static_cast<void>(make_plan(presets::gpt2, run, t4)); });
    CHECK(contains(message, "[memscale.invalid_run] run.precision " + std::string(to_string(p))));
    CHECK(contains(message, t4.label));
    CHECK(contains(message, "use amp_fp16"));
    CHECK(error_message([&] { static_cast<void>(fits(presets::gpt2, run, t4)); }) == message);
    run.seq_len = 1;
    CHECK(contains(error_message([&] { static_cast<void>(vision::make_plan(vision::presets::resnet18, run, t4)); }),
                   "use amp_fp16"));
  }
  // The same runs on a GPU with bf16 plan as before.
  const training_spec bf16_run{.micro_batch = runtime_value(4), .seq_len = runtime_value(512), .prec = precision::amp_bf16};
  CHECK(make_plan(presets::gpt2, bf16_run, gpu_named("a100-80gb")).fits);
  // fp16 and fp32 requests plan on the T4; the modes that switch precision pick fp16 there.
  const training_spec fp32_run{.micro_batch = runtime_value(4), .seq_len = runtime_value(512)};
  const plan_result plan = make_plan(presets::gpt2, fp32_run, t4);
  CHECK(plan.modes[3].run.prec == precision::pure_fp16);
  const plan_result vision_plan = vision::make_plan(vision::presets::resnet18, vision_run(8), t4);
  CHECK(vision_plan.modes[2].run.prec == precision::amp_fp16);
  CHECK(vision_plan.modes[3].run.prec == precision::amp_fp16);
  const training_spec fp16_run{.micro_batch = runtime_value(4), .seq_len = runtime_value(512), .prec = precision::amp_fp16};
  CHECK_NOTHROW(make_plan(presets::gpt2, fp16_run, t4));
}

}  // namespace plan_contract_test
