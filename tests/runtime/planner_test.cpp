// Planner: MemScale scenarios, mode ordering over every preset, monotonicity properties
// and the advice given when nothing fits. Inputs come from volatiles so that the checks
// run the planner at run time, not in the constant evaluator.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstddef>
#include <cstdint>
#include <string>

#include <memscale/gpus.hpp>
#include <memscale/planner.hpp>
#include <memscale/presets.hpp>
#include <memscale/training.hpp>

namespace planner_test {
namespace {

using memscale::mode;
using memscale::training_spec;

// Run-time copies the compiler cannot fold.
std::uint64_t runtime_value(std::uint64_t v) {
  volatile std::uint64_t x = v;
  return x;
}

memscale::gpu_spec gpu_named(const char* name) {
  const auto gpu = memscale::find_gpu(name);
  REQUIRE(gpu.has_value());
  return *gpu;
}

training_spec fp32_adamw(std::uint64_t micro_batch, std::uint64_t seq_len) {
  return {.micro_batch = runtime_value(micro_batch), .seq_len = runtime_value(seq_len)};
}

constexpr std::size_t index_of(mode m) { return static_cast<std::size_t>(m); }

}  // namespace

TEST_CASE("planner: BERT-base 16x128 fp32 AdamW fits an RTX 3090 without any mode", "[planner]") {
  const auto plan = memscale::make_plan(memscale::presets::bert_base_uncased, fp32_adamw(16, 128), gpu_named("rtx3090"));
  CHECK(plan.fits);
  CHECK(plan.chosen == mode::none);
  CHECK(plan.modes[index_of(mode::none)].fits);
  CHECK(plan.next_step == memscale::advice::none);
  CHECK(plan.max_micro_batch >= 16);
  CHECK(plan.grad_accumulation == 1);
}

TEST_CASE("planner: GPT-2 XL 1x512 fp32 AdamW needs a MemScale mode on an RTX 3090", "[planner]") {
  const auto plan = memscale::make_plan(memscale::presets::gpt2_xl, fp32_adamw(1, 512), gpu_named("rtx3090"));
  CHECK_FALSE(plan.modes[index_of(mode::none)].fits);
  CHECK(plan.unoptimized_peak > plan.budget);
  CHECK(plan.fits);
  CHECK(plan.chosen != mode::none);
  CHECK(plan.chosen_plan().fits);
  CHECK(plan.chosen_plan().peak <= plan.budget);
  CHECK(plan.max_micro_batch >= 1);
}

TEST_CASE("planner: every preset gets the least aggressive mode that fits, and inversions are flagged", "[planner]") {
  // Mode peaks are not ordered (AGGRESSIVE keeps 8-bit state on the GPU, BALANCED
  // offloads 32-bit state); each mode has its own peak.
  const auto gpu = gpu_named("a100-80gb");
  for (const auto& model : memscale::presets::all) {
    const std::uint64_t seq = model.max_positions > 0 && model.max_positions < 512 ? model.max_positions : 512;
    const auto plan = memscale::make_plan(model, fp32_adamw(1, seq), gpu);
    const auto& m = plan.modes;
    INFO(std::string(model.name) << " seq " << seq << ": none " << m[0].peak.value << ", conservative "
                                 << m[1].peak.value << ", balanced " << m[2].peak.value << ", aggressive "
                                 << m[3].peak.value << ", status " << std::string(memscale::to_string(plan.status)));
    bool inverted = false;
    for (std::size_t i = 1; i < m.size(); ++i)
      for (std::size_t j = i + 1; j < m.size(); ++j) inverted = inverted || m[j].peak > m[i].peak;
    CHECK(plan.mode_order_inverted == inverted);
    CHECK(plan.unoptimized_peak == m[0].peak);
    if (plan.fits) {
      for (std::size_t i = 0; i < index_of(plan.chosen); ++i) CHECK_FALSE(m[i].fits);
      CHECK(plan.chosen_plan().fits);
    } else {
      for (const auto& p : m) CHECK_FALSE(p.fits);
    }
  }
}

TEST_CASE("planner: AGGRESSIVE keeps 16-bit weights, 16-bit gradients and 8-bit Adam state on the GPU", "[planner]") {
  const auto plan = memscale::make_plan(memscale::presets::gpt2_xl, fp32_adamw(1, 512), gpu_named("rtx3090"));
  const auto& a = plan.modes[index_of(mode::aggressive)];
  CHECK(a.run.prec == memscale::precision::pure_bf16);
  CHECK(a.run.optimizer == memscale::optimizer_kind::adamw_8bit);
  CHECK_FALSE(a.run.offload_optimizer);
  CHECK(a.run.offload_activations);
  CHECK(a.switched_on.has(memscale::technique::half_precision));
  CHECK(a.switched_on.has(memscale::technique::optimizer_8bit));
  CHECK_FALSE(a.switched_on.has(memscale::technique::offload_optimizer));
  // About 6 bytes per parameter at the peak: parameters + gradients + state.
  const auto per_param = static_cast<double>((a.breakdown.parameters + a.breakdown.gradients + a.breakdown.optimizer).value) /
                         static_cast<double>(memscale::parameter_count(memscale::presets::gpt2_xl));
  CHECK(per_param > 5.5);
  CHECK(per_param < 6.5);
  // BALANCED offloads its 32-bit state and needs less here: the order is inverted and said so.
  CHECK(plan.modes[index_of(mode::balanced)].peak < a.peak);
  CHECK(plan.mode_order_inverted);
}

TEST_CASE("planner: techniques the run already uses are not charged again", "[planner]") {
  training_spec run = fp32_adamw(1, 512);
  run.ckpt = memscale::checkpointing::full;
  run.prec = memscale::precision::pure_bf16;
  run.optimizer = memscale::optimizer_kind::sgd;
  const auto plan = memscale::make_plan(memscale::presets::gpt2_medium, run, gpu_named("rtx3090"));
  for (const auto& p : plan.modes) {
    INFO(std::string(memscale::to_string(p.m)));
    CHECK(p.cost.recompute_fraction == 0.0);
    CHECK_FALSE(p.switched_on.has(memscale::technique::checkpointing));
    CHECK_FALSE(p.switched_on.has(memscale::technique::half_precision));
    CHECK(p.run.optimizer == memscale::optimizer_kind::sgd);  // SGD keeps less state than 8-bit Adam
    CHECK(p.run.prec == memscale::precision::pure_bf16);
  }
  run.offload_optimizer = true;  // already offloaded: BALANCED moves nothing more for the optimizer
  const auto offloaded = memscale::make_plan(memscale::presets::gpt2_medium, run, gpu_named("rtx3090"));
  CHECK_FALSE(offloaded.modes[index_of(mode::balanced)].switched_on.has(memscale::technique::offload_optimizer));
  CHECK(offloaded.modes[index_of(mode::aggressive)].run.offload_optimizer);  // a mode never switches a technique off
}

namespace {

struct property_case {
  const char* label;
  memscale::model_spec model;
  training_spec run;  // batch sweeps start from this run; seq sweeps use its micro_batch
  const char* gpu;
  std::uint64_t max_batch;
  std::uint64_t max_seq;
  std::uint64_t seq_step;
};

training_spec llama_lora_r8() {
  training_spec r = fp32_adamw(1, 512);
  r.target = memscale::training_target::lora;
  r.lora_rank = runtime_value(8);
  return r;
}

}  // namespace

TEST_CASE("planner: fitting is monotone in micro-batch and sequence length", "[planner][property]") {
  const property_case cases[] = {
      {"gpt2-medium on rtx3090", memscale::presets::gpt2_medium, fp32_adamw(8, 512), "rtx3090", 96, 1024, 16},
      {"llama-2-7b LoRA r8 on a100-40gb", memscale::presets::llama_2_7b, llama_lora_r8(), "a100-40gb", 64, 4096, 64},
      {"bert-large on t4", memscale::presets::bert_large_uncased, fp32_adamw(32, 128), "t4", 64, 512, 16},
  };
  for (const auto& c : cases) {
    const auto gpu = gpu_named(c.gpu);
    const auto budget = memscale::budget_of(gpu);
    for (const mode m : {mode::none, mode::conservative, mode::balanced, mode::aggressive}) {
      const auto fits_at = [&](std::uint64_t batch, std::uint64_t seq) {
        training_spec t = c.run;
        t.micro_batch = batch;
        t.seq_len = seq;
        return memscale::detail::mode_fits(c.model, t, gpu, m, budget);
      };
      bool above = fits_at(runtime_value(1), c.run.seq_len);
      for (std::uint64_t b = 1; b < c.max_batch; ++b) {
        const bool at_b = above;
        above = fits_at(b + 1, c.run.seq_len);
        INFO(c.label << ", mode " << std::string(memscale::to_string(m)) << ", micro-batch " << b << " -> " << b + 1
                     << ", seq " << c.run.seq_len);
        CHECK((!above || at_b));
      }
      above = fits_at(c.run.micro_batch, c.seq_step);
      for (std::uint64_t s = c.seq_step; s + c.seq_step <= c.max_seq; s += c.seq_step) {
        const bool at_s = above;
        above = fits_at(c.run.micro_batch, s + c.seq_step);
        INFO(c.label << ", mode " << std::string(memscale::to_string(m)) << ", seq " << s << " -> " << s + c.seq_step
                     << ", micro-batch " << c.run.micro_batch);
        CHECK((!above || at_s));
      }
    }
    // The same property through make_plan, for the mode it reports at a fixed index.
    const std::size_t k = index_of(mode::conservative);
    bool above = memscale::make_plan(c.model, c.run, gpu).modes[k].fits;
    for (std::uint64_t b = c.run.micro_batch; b > 1; --b) {
      training_spec t = c.run;
      t.micro_batch = b - 1;
      const bool below = memscale::make_plan(c.model, t, gpu).modes[k].fits;
      INFO(c.label << ", make_plan modes[" << k << "], micro-batch " << b - 1 << " -> " << b);
      CHECK((!above || below));
      above = below;
    }
  }
}

TEST_CASE("planner: headroom bounds and overrides", "[planner][property]") {
  const double h05 = static_cast<double>(runtime_value(5)) / 100.0;
  const double h10 = static_cast<double>(runtime_value(10)) / 100.0;
  const double h15 = static_cast<double>(runtime_value(15)) / 100.0;
  const double h50 = static_cast<double>(runtime_value(50)) / 100.0;
  for (const char* name : {"rtx3090", "a100-40gb", "t4"}) {
    const auto gpu = gpu_named(name);
    INFO(name);
    CHECK(memscale::budget_of(gpu, {.headroom = h10}) >= memscale::budget_of(gpu, {.headroom = h15}));
    CHECK(memscale::budget_of(gpu, {.headroom = h15}) == memscale::budget_of(gpu));
    CHECK(memscale::budget_of(gpu, {.headroom = h10}) <= gpu.memory);

    CHECK_THROWS_AS(memscale::budget_of(gpu, {.headroom = h05}), memscale::error);
    CHECK_THROWS_AS(memscale::make_plan(memscale::presets::gpt2, fp32_adamw(1, 128), gpu, {.headroom = h05}),
                    memscale::error);
    CHECK_NOTHROW(memscale::budget_of(gpu, {.headroom = h05, .headroom_override = true}));

    CHECK_NOTHROW(memscale::budget_of(gpu, {.headroom = h50, .headroom_override = true}));
    const auto plan =
        memscale::make_plan(memscale::presets::gpt2, fp32_adamw(1, 128), gpu, {.headroom = h50, .headroom_override = true});
    CHECK(plan.headroom == h50);
    CHECK(plan.budget < memscale::budget_of(gpu));
    CHECK(memscale::budget_of(gpu, {.headroom = h50, .headroom_override = true}) == plan.budget);
  }
}

TEST_CASE("planner: advice when nothing fits", "[planner]") {
  SECTION("llama-2-70b fp32 on an RTX 3090: only streaming the parameters from the host fits") {
    const auto plan = memscale::make_plan(memscale::presets::llama_2_70b, fp32_adamw(1, 512), gpu_named("rtx3090"));
    CHECK_FALSE(plan.fits);
    for (const auto& p : plan.modes) CHECK_FALSE(p.fits);
    CHECK(plan.status == memscale::plan_status::parameter_offload);
    CHECK(plan.next_step == memscale::advice::offload_parameters);
    CHECK(plan.chosen_plan().range.high <= plan.budget);
    CHECK(plan.parameter_offload.fits);
    CHECK(plan.parameter_offload.peak < plan.modes[3].peak);
    CHECK(plan.parameter_offload.cost.host_memory > plan.modes[3].cost.host_memory);
  }
  SECTION("llama-2-70b fp32 on a 2 GiB device: smaller model or more GPUs") {
    const auto plan = memscale::make_plan(memscale::presets::llama_2_70b, fp32_adamw(1, 512),
                                          memscale::custom_gpu(memscale::bytes{runtime_value(2ULL << 30)}));
    CHECK_FALSE(plan.fits);
    CHECK_FALSE(plan.parameter_offload.fits);
    CHECK(plan.max_micro_batch == 0);
    CHECK(plan.max_seq_len == 0);
    CHECK(plan.status == memscale::plan_status::nothing_fits);
    CHECK(plan.next_step == memscale::advice::smaller_model_or_more_gpus);
  }
  SECTION("gpt2-xl 64x1024 (grad_accum 2) on an RTX 3090: a smaller micro-batch that divides the effective batch") {
    training_spec run = fp32_adamw(64, 1024);
    run.grad_accum = runtime_value(2);
    const auto gpu = gpu_named("rtx3090");
    const auto plan = memscale::make_plan(memscale::presets::gpt2_xl, run, gpu);
    INFO("micro_batch " << plan.micro_batch << ", grad_accumulation " << plan.grad_accumulation << ", max "
                        << plan.max_micro_batch);
    CHECK_FALSE(plan.fits);
    CHECK(plan.status == memscale::plan_status::smaller_micro_batch);
    CHECK(plan.next_step == memscale::advice::smaller_micro_batch);
    REQUIRE(plan.max_micro_batch > 0);
    CHECK(plan.max_micro_batch < run.micro_batch);
    CHECK(plan.micro_batch <= plan.max_micro_batch);
    CHECK(plan.micro_batch * plan.grad_accumulation == run.micro_batch * run.grad_accum);
    // The largest micro-batch fits in its mode, one more fits in none.
    training_spec t = run;
    t.micro_batch = plan.max_micro_batch;
    CHECK(memscale::detail::mode_fits(memscale::presets::gpt2_xl, t, gpu, plan.max_micro_batch_mode, plan.budget));
    t.micro_batch = plan.max_micro_batch + 1;
    for (const mode m : {mode::none, mode::conservative, mode::balanced, mode::aggressive})
      CHECK_FALSE(memscale::detail::mode_fits(memscale::presets::gpt2_xl, t, gpu, m, plan.budget));
    // The planned micro-batch fits in the chosen mode.
    t.micro_batch = plan.micro_batch;
    CHECK(memscale::detail::mode_fits(memscale::presets::gpt2_xl, t, gpu, plan.chosen, plan.budget));
  }
}

}  // namespace planner_test
