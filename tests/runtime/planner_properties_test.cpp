// Planner properties: the largest micro-batch never falls when VRAM grows,
// micro-batch x accumulation is always the requested effective batch, a "fits" verdict
// implies the error band's upper end is within the budget, distinct answers for "nothing
// fits" and "no technique needed", and the plan's unoptimized peak is the report's peak.
// Inputs come from volatiles so that the planner runs at run time.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <string>
#include <vector>

#include <memscale/device_peak.hpp>
#include <memscale/error_band.hpp>
#include <memscale/gpus.hpp>
#include <memscale/planner.hpp>
#include <memscale/presets.hpp>
#include <memscale/training.hpp>

namespace planner_properties_test {
namespace {

using memscale::training_spec;

std::uint64_t runtime_value(std::uint64_t v) {
  volatile std::uint64_t x = v;
  return x;
}

memscale::gpu_spec gpu_named(const char* name) {
  const auto gpu = memscale::find_gpu(name);
  REQUIRE(gpu.has_value());
  return *gpu;
}

memscale::gpu_spec gib_gpu(std::uint64_t gib) { return memscale::custom_gpu(memscale::bytes{runtime_value(gib) << 30}); }

struct sweep_case {
  const char* label;
  memscale::model_spec model;
  training_spec run;
};

training_spec run_of(std::uint64_t batch, std::uint64_t seq, memscale::precision p = memscale::precision::fp32) {
  return {.micro_batch = runtime_value(batch), .seq_len = runtime_value(seq), .prec = p};
}

std::vector<sweep_case> sweep_cases() {
  return {{"llama-2-7b pure fp16 1x512", memscale::presets::llama_2_7b, run_of(1, 512, memscale::precision::pure_fp16)},
          {"gpt2-medium fp32 8x512", memscale::presets::gpt2_medium, run_of(8, 512)},
          {"bert-large fp32 32x128", memscale::presets::bert_large_uncased, run_of(32, 128)}};
}

}  // namespace

TEST_CASE("planner property: the largest micro-batch never falls when VRAM grows", "[planner][property]") {
  for (const auto& c : sweep_cases()) {
    std::uint64_t previous = 0;
    for (std::uint64_t gib = 4; gib <= 160; gib += 4) {
      const auto plan = memscale::make_plan(c.model, c.run, gib_gpu(gib));
      INFO(c.label << ": " << gib << " GiB gives " << plan.max_micro_batch << " after " << previous);
      CHECK(plan.max_micro_batch >= previous);
      previous = plan.max_micro_batch;
    }
  }
  // A case that once broke the property: Llama-2-7B pure fp16, micro-batch 1, RTX A6000 vs A100 80GB.
  const training_spec run = run_of(1, 512, memscale::precision::pure_fp16);
  const auto a6000 = memscale::make_plan(memscale::presets::llama_2_7b, run, gpu_named("rtx-a6000"));
  const auto a100 = memscale::make_plan(memscale::presets::llama_2_7b, run, gpu_named("a100-80gb"));
  INFO("rtx-a6000 " << a6000.max_micro_batch << ", a100-80gb " << a100.max_micro_batch);
  CHECK(a100.max_micro_batch >= a6000.max_micro_batch);
}

TEST_CASE("planner property: micro-batch x accumulation is the requested effective batch", "[planner][property]") {
  const memscale::model_spec models[] = {memscale::presets::gpt2_xl, memscale::presets::llama_2_7b};
  for (const auto& model : models) {
    for (const std::uint64_t gib : {6U, 12U, 24U, 48U}) {
      const auto gpu = gib_gpu(gib);
      for (const std::uint64_t batch : {1U, 3U, 7U, 12U, 32U, 64U}) {
        for (const std::uint64_t accum : {1U, 2U, 5U}) {
          training_spec run = run_of(batch, 512, memscale::precision::pure_bf16);
          run.grad_accum = runtime_value(accum);
          const auto plan = memscale::make_plan(model, run, gpu);
          INFO(std::string(model.name) << " " << batch << " x " << accum << " on " << gib << " GiB: "
                                       << plan.micro_batch << " x " << plan.grad_accumulation << ", status "
                                       << std::string(memscale::to_string(plan.status)));
          CHECK(plan.effective_batch == batch * accum);
          CHECK(plan.micro_batch * plan.grad_accumulation == plan.effective_batch);
          if (plan.status == memscale::plan_status::smaller_micro_batch) {
            CHECK(plan.micro_batch < batch);
            CHECK(plan.micro_batch <= plan.max_micro_batch);
            // The largest divisor that fits: no divisor between it and the maximum.
            for (std::uint64_t d = plan.micro_batch + 1; d <= plan.max_micro_batch; ++d)
              CHECK(plan.effective_batch % d != 0);
            if (plan.rounded_micro_batch > 0) {
              CHECK(plan.rounded_micro_batch <= plan.max_micro_batch);
              CHECK(plan.rounded_micro_batch * plan.rounded_grad_accumulation != plan.effective_batch);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("planner property: a fits verdict implies the band's upper end is within the budget", "[planner][property]") {
  for (const auto& c : sweep_cases()) {
    for (std::uint64_t gib = 4; gib <= 96; gib += 8) {
      const auto gpu = gib_gpu(gib);
      const auto plan = memscale::make_plan(c.model, c.run, gpu);
      INFO(c.label << " on " << gib << " GiB");
      for (const auto& m : plan.modes) {
        CHECK(m.range.low <= m.peak);
        CHECK(m.range.high >= m.peak);
        CHECK(m.fits == (m.v == memscale::verdict::fits));
        if (m.v == memscale::verdict::fits) CHECK(m.range.high <= plan.budget);
        if (m.v == memscale::verdict::does_not_fit) CHECK(m.range.low > plan.budget);
      }
      CHECK(memscale::fits(c.model, c.run, gpu) == plan.fits);
      CHECK(plan.fits == (plan.v == memscale::verdict::fits));
      if (plan.fits) CHECK(plan.chosen_plan().range.high <= plan.budget);
    }
  }
}

TEST_CASE("planner: nothing fits and no technique needed are different answers", "[planner]") {
  const auto small = memscale::make_plan(memscale::presets::bert_base_uncased, run_of(16, 128), gpu_named("rtx3090"));
  CHECK(small.status == memscale::plan_status::no_technique_needed);
  CHECK(small.fits);
  const auto huge = memscale::make_plan(memscale::presets::llama_2_70b, run_of(1, 512), gib_gpu(2));
  CHECK(huge.status == memscale::plan_status::nothing_fits);
  CHECK_FALSE(huge.fits);
  CHECK(memscale::to_string(small.status) != memscale::to_string(huge.status));
}

TEST_CASE("planner: the unoptimized peak is the device estimate's peak for the same GPU", "[planner]") {
  for (const char* name : {"rtx3090", "h100-80gb", "t4", "mi300x"}) {
    const auto found = memscale::find_gpu(name);
    REQUIRE(found.has_value());
    const training_spec run = run_of(4, 512);
    const auto plan = memscale::make_plan(memscale::presets::gpt2_medium, run, *found);
    const auto report = memscale::estimate_on_device(memscale::presets::gpt2_medium, memscale::on_gpu(run, *found), &*found);
    INFO(name);
    CHECK(plan.unoptimized_peak == report.device);
    CHECK(report.replayed());
  }
}

TEST_CASE("planner: every mode's peak is the device estimate of the mode's run, LoRA adapters included",
          "[planner]") {
  // PEFT keeps LoRA adapters over a 16-bit base in fp32 (build() resolves it); the planner
  // once estimated its modes with the adapters in the base dtype, below the report's peak.
  const auto gpu = gpu_named("a100-80gb");
  for (const auto p : {memscale::precision::pure_bf16, memscale::precision::amp_bf16, memscale::precision::fp32}) {
    training_spec run = run_of(4, 1024, p);
    run.target = memscale::training_target::lora;
    run.lora_rank = runtime_value(16);
    const auto plan = memscale::make_plan(memscale::presets::llama_2_7b, run, gpu);
    for (const auto& m : plan.modes) {
      const auto report = memscale::estimate_on_device(memscale::presets::llama_2_7b, m.run, &gpu);
      INFO(memscale::to_string(p) << " " << memscale::to_string(m.m));
      CHECK(m.peak == report.device);
      CHECK(m.tensor_peak == report.tensor);
    }
  }
}

TEST_CASE("error bands: measured bands contain zero, the unmeasured band is the widest", "[planner][bands]") {
  const auto& unmeasured = memscale::band_of(memscale::run_class::unmeasured, memscale::band_quantity::device);
  CHECK_FALSE(unmeasured.measured);
  for (const auto& b : memscale::error_bands) {
    INFO(std::string(memscale::to_string(b.of)));
    CHECK(b.low <= 0.0);
    CHECK(b.high >= 0.0);
    CHECK(b.low >= unmeasured.low);
    CHECK(b.high <= unmeasured.high);
    CHECK_FALSE(b.source.empty());
  }
  // Classes of typical runs.
  training_spec cpu = run_of(2, 512);
  cpu.device = memscale::device_kind::cpu;
  CHECK(memscale::class_of(memscale::presets::gpt2, cpu) == memscale::run_class::cpu_traced);
  // lit-gpt full fine-tunes are traced on CPU (tools/trace/litgpt_cases.py); on a GPU they are not measured.
  const memscale::model_spec litgpt = memscale::as_litgpt_model(memscale::presets::llama_2_7b);
  CHECK(memscale::class_of(litgpt, cpu) == memscale::run_class::cpu_traced);
  CHECK(memscale::class_of(litgpt, run_of(1, 512)) == memscale::run_class::unmeasured);
  CHECK(memscale::class_of(memscale::presets::bert_large_uncased, run_of(4, 512)) == memscale::run_class::gpu_published);
  CHECK(memscale::class_of(memscale::presets::mixtral_8x7b, run_of(1, 512)) == memscale::run_class::unmeasured);
  training_spec offloaded = run_of(1, 512);
  offloaded.offload_optimizer = true;
  CHECK(memscale::class_of(memscale::presets::gpt2, offloaded) == memscale::run_class::unmeasured);
}

TEST_CASE("error bands: the verdict of a peak range against a budget", "[planner][bands]") {
  const auto& band = memscale::band_of(memscale::run_class::gpu_published, memscale::band_quantity::device);
  const memscale::bytes peak{runtime_value(10'000'000'000)};
  const auto r = memscale::range_of(peak, band);
  CHECK(r.low < peak);
  CHECK(r.high > peak);
  CHECK(memscale::verdict_of(r, r.high) == memscale::verdict::fits);
  CHECK(memscale::verdict_of(r, peak) == memscale::verdict::borderline);  // the estimate alone is not enough
  CHECK(memscale::verdict_of(r, memscale::bytes{r.low.value - 1}) == memscale::verdict::does_not_fit);
}

TEST_CASE("planner: a prime effective batch is kept exactly and the rounded alternative is named", "[planner]") {
  // GPT-2 XL 61 x 1024 on an RTX 3090: no mode fits 61; 61's only divisors are 1 and 61.
  const auto plan = memscale::make_plan(memscale::presets::gpt2_xl, run_of(61, 1024), gpu_named("rtx3090"));
  INFO("max " << plan.max_micro_batch << ", rounded " << plan.rounded_micro_batch << " x "
              << plan.rounded_grad_accumulation);
  REQUIRE(plan.status == memscale::plan_status::smaller_micro_batch);
  CHECK(plan.micro_batch == 1);
  CHECK(plan.grad_accumulation == 61);
  REQUIRE(plan.max_micro_batch > 2);
  REQUIRE(plan.rounded_micro_batch > 0);
  CHECK(plan.rounded_micro_batch <= plan.max_micro_batch);
  CHECK(plan.rounded_grad_accumulation == (61 + plan.max_micro_batch - 1) / plan.max_micro_batch);
  CHECK(plan.rounded_micro_batch * plan.rounded_grad_accumulation != 61);
}

}  // namespace planner_properties_test
