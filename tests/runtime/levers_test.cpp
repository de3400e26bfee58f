// The cheaper levers offered before streaming parameters (memscale/levers.hpp), on the two runs
// that got "stream parameters from the host" although cheaper techniques fit or likely fit.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include "memscale/json.hpp"
#include "memscale/levers.hpp"
#include "memscale/planner.hpp"
#include "memscale/presets.hpp"

namespace levers_test {
namespace {

using namespace memscale;

// Llama-3-8B, LoRA r16 on every linear layer, pure bf16, 1 x 2048, on an RTX 4090.
constexpr training_spec llama3_lora{.micro_batch = 1, .seq_len = 2048, .prec = precision::pure_bf16,
                                    .attention = attention_impl::sdpa, .target = training_target::lora,
                                    .lora_rank = 16, .lora_targets = lora_all_linear};
// Mixtral 8x7B QLoRA r16, amp bf16, 1 x 2048, on an RTX A6000.
constexpr training_spec mixtral_qlora{.micro_batch = 1, .seq_len = 2048, .prec = precision::amp_bf16,
                                      .attention = attention_impl::sdpa, .target = training_target::qlora,
                                      .lora_rank = 16};

}  // namespace

TEST_CASE("levers: Llama-3-8B LoRA on an RTX 4090 is planned with checkpointing and a chunked loss, not parameter streaming",
          "[levers]") {
  const gpu_spec gpu = *find_gpu("rtx4090");
  const plan_result plan = make_plan(presets::llama_3_8b, llama3_lora, gpu);
  // CONSERVATIVE's device estimate (the allocator replay and the RTX 4090's context: 20.93 GiB) is
  // over the 19.99 GiB budget; with a chunked loss it is 18.48 GiB, and the replayed band's upper
  // end (19.98 GiB) is within it too: fits. QLoRA, further down, changes the model and costs
  // dequantization: not advised.
  REQUIRE(plan.status == plan_status::cheaper_levers);
  CHECK(plan.next_step == advice::switch_on_levers);
  CHECK(plan.chosen == mode::conservative);
  CHECK(plan.parameter_offload.fits);  // what the planner chose before the levers
  const lever_list& levers = plan.levers;
  REQUIRE(levers.any_likely());
  const lever_option& advised = levers.advised();
  CHECK(advised.what == lever::chunked_loss);
  CHECK(advised.v == verdict::fits);
  CHECK(advised.run.ckpt == checkpointing::full);
  CHECK(advised.run.loss == loss_impl::chunked);
  CHECK(advised.run.target == training_target::lora);  // the adapters stay LoRA over a 16-bit base
  CHECK(advised.peak <= plan.budget);
  CHECK(plan.chosen_plan().peak == advised.peak);
  CHECK(plan.chosen_plan().fits);
  // The lever before it is checkpointing alone, CONSERVATIVE's own peak, over the budget.
  CHECK(levers.items[0].what == lever::checkpointing);
  CHECK(levers.items[0].peak == plan.modes[1].peak);
  CHECK(levers.items[0].peak > plan.budget);
  // The advised lever is the first whose band's upper end fits as well.
  REQUIRE(levers.any_fits());
  CHECK(levers.items[levers.first_fitting].what == lever::chunked_loss);
  CHECK(levers.items[levers.first_fitting].range.high <= plan.budget);
}

TEST_CASE("levers: Mixtral QLoRA on an RTX A6000 is planned with checkpointing, likely fits", "[levers]") {
  const gpu_spec gpu = *find_gpu("rtx-a6000");
  const plan_result plan = make_plan(presets::mixtral_8x7b, mixtral_qlora, gpu);
  REQUIRE(plan.status == plan_status::cheaper_levers);
  const lever_option& likely = plan.levers.advised();
  CHECK(likely.what == lever::checkpointing);
  CHECK(likely.peak <= plan.budget);
  CHECK(likely.v == verdict::borderline);  // an unmeasured path: its upper end is over the budget
  CHECK(!likely.band.measured);
  CHECK(plan.micro_batch == 1);
  CHECK(plan.chosen_plan().cost.transfer_seconds == 0.0);
}

TEST_CASE("levers: the JSON report lists them with the advised lever's plan", "[levers][json]") {
  namespace io = memscale::json_io;
  io::run_input in{};
  in.model = presets::llama_3_8b;
  in.run = llama3_lora;
  in.gpu = "rtx4090";
  const plan_result plan = io::plan_run(in, *io::gpu_of(in));
  const nlohmann::json report = io::run_report_json(in, io::estimate_run(in), &plan);
  const nlohmann::json& j = report.at("plan");
  CHECK(j.at("status") == "cheaper_levers");
  CHECK(j.at("mode") == "conservative");
  CHECK(j.at("levers").at("advice") == "chunked_loss");
  CHECK(j.at("levers").at("first_fitting") == "chunked_loss");
  CHECK(j.at("levers").at("options").at(0).at("lever") == "checkpointing");
  CHECK(j.at("lever_plan").at("peak") == plan.lever_plan.peak.value);
  CHECK(j.at("lever_plan").at("run_settings").at("loss") == "chunked");
  CHECK(j.at("changes") == "switch on checkpointing, chunked_loss; micro-batch 1 x gradient accumulation 1 = effective "
                           "batch 1 (kept)");
  // A run that fits as it is weighs none.
  io::run_input small{};
  small.gpu = "h100-80gb";
  const plan_result fits = io::plan_run(small, *io::gpu_of(small));
  CHECK(!io::run_report_json(small, io::estimate_run(small), &fits).at("plan").contains("levers"));
}

}  // namespace levers_test
