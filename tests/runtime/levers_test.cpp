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

TEST_CASE("levers: Llama-3-8B LoRA on an RTX 4090 is advised QLoRA, not parameter streaming", "[levers]") {
  const gpu_spec gpu = *find_gpu("rtx4090");
  const plan_result plan = make_plan(presets::llama_3_8b, llama3_lora, gpu);
  REQUIRE(plan.status == plan_status::parameter_offload);  // what the planner alone says
  const lever_list levers = cheaper_levers(presets::llama_3_8b, llama3_lora, gpu, plan.budget);
  REQUIRE(levers.any_fits());
  const lever_option& best = levers.items[levers.first_fitting];
  CHECK(best.what == lever::qlora);
  CHECK(best.run.ckpt == checkpointing::full);
  CHECK(best.run.micro_batch == 1);
  CHECK(best.run.seq_len == 2048);  // the sequence is kept: the shorter one comes later
  CHECK(best.range.high <= plan.budget);
  // Every lever before it was estimated with its peak; none of them fits.
  for (std::size_t i = 0; i < levers.first_fitting; ++i) CHECK(levers.items[i].v != verdict::fits);
  CHECK(levers.items[0].what == lever::checkpointing);
  CHECK(levers.items[0].peak == plan.modes[1].peak);  // checkpointing alone is CONSERVATIVE's peak
}

TEST_CASE("levers: Mixtral QLoRA on an RTX A6000 likely fits with checkpointing", "[levers]") {
  const gpu_spec gpu = *find_gpu("rtx-a6000");
  const plan_result plan = make_plan(presets::mixtral_8x7b, mixtral_qlora, gpu);
  const lever_list levers = cheaper_levers(presets::mixtral_8x7b, mixtral_qlora, gpu, plan.budget);
  REQUIRE(levers.any_likely());
  const lever_option& likely = levers.items[levers.first_likely];
  CHECK(likely.what == lever::checkpointing);
  CHECK(likely.peak <= plan.budget);
  CHECK(likely.v == verdict::borderline);  // an unmeasured path: its upper end is over the budget
  CHECK(!likely.band.measured);
}

TEST_CASE("levers: the JSON report lists them when the plan would stream parameters", "[levers][json]") {
  namespace io = memscale::json_io;
  io::run_input in{};
  in.model = presets::llama_3_8b;
  in.run = llama3_lora;
  in.gpu = "rtx4090";
  const plan_result plan = io::plan_run(in, *io::gpu_of(in));
  const nlohmann::json report = io::run_report_json(in, io::estimate_run(in), &plan);
  const nlohmann::json& levers = report.at("plan").at("levers");
  CHECK(levers.at("advice") == "qlora");
  CHECK(levers.at("options").at(0).at("lever") == "checkpointing");
  // A run that fits as it is lists none.
  io::run_input small{};
  small.gpu = "h100-80gb";
  const plan_result fits = io::plan_run(small, *io::gpu_of(small));
  CHECK(!io::run_report_json(small, io::estimate_run(small), &fits).at("plan").contains("levers"));
}

}  // namespace levers_test
