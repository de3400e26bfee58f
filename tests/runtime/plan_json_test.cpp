// The plan as JSON (json_io::plan_to_json): distinct answers for "no technique needed" and
// "nothing fits", what each mode switches on, and the verdict with its error band.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <string>

#include <memscale/gpus.hpp>
#include <memscale/json.hpp>
#include <memscale/planner.hpp>
#include <memscale/presets.hpp>

namespace plan_json_test {
namespace {

std::uint64_t runtime_value(std::uint64_t v) {
  volatile std::uint64_t x = v;
  return x;
}

memscale::training_spec run_of(std::uint64_t batch, std::uint64_t seq) {
  return {.micro_batch = runtime_value(batch), .seq_len = runtime_value(seq)};
}

}  // namespace

TEST_CASE("plan JSON: no technique needed vs nothing fits", "[planner][json]") {
  const auto rtx3090 = *memscale::find_gpu("rtx3090");
  const auto fits = memscale::json_io::plan_to_json(
      memscale::make_plan(memscale::presets::bert_base_uncased, run_of(16, 128), rtx3090));
  CHECK(fits.at("status") == "no_technique_needed");
  CHECK(fits.at("mode") == "none");
  CHECK(fits.at("verdict") == "fits");
  CHECK(fits.at("fits") == true);
  CHECK(fits.at("micro_batch").get<std::uint64_t>() * fits.at("grad_accumulation").get<std::uint64_t>() ==
        fits.at("effective_batch").get<std::uint64_t>());

  const auto none = memscale::json_io::plan_to_json(memscale::make_plan(
      memscale::presets::llama_2_70b, run_of(1, 512), memscale::custom_gpu(memscale::bytes{runtime_value(2ULL << 30)})));
  CHECK(none.at("status") == "nothing_fits");
  CHECK(none.at("mode").is_null());
  CHECK(none.at("fits") == false);
  CHECK(none.at("verdict") != "fits");
}

TEST_CASE("plan JSON: each mode shows what it switches on and its error band", "[planner][json]") {
  const auto plan = memscale::json_io::plan_to_json(
      memscale::make_plan(memscale::presets::gpt2_xl, run_of(1, 512), *memscale::find_gpu("rtx3090")));
  const auto& modes = plan.at("modes");
  REQUIRE(modes.size() == 4);
  CHECK(modes[0].at("switches_on").empty());
  CHECK(modes[1].at("switches_on") == nlohmann::json::array({"checkpointing"}));
  const auto& aggressive = modes[3];
  CHECK(aggressive.at("run").at("precision") == "pure_bf16");
  CHECK(aggressive.at("run").at("optimizer") == "adamw_8bit");
  CHECK(aggressive.at("run").at("offload_activations") == true);
  CHECK(aggressive.at("band").at("class") == "memscale_mode");
  CHECK(modes[2].at("band").at("class") == "unmeasured");
  CHECK(modes[2].at("band").at("measured") == false);
  for (const auto& m : modes) {
    CHECK(m.at("band").at("quantity") == "device");  // the plan weighs the device figure against the budget
    CHECK(m.at("peak_range").at("high").get<std::uint64_t>() >= m.at("peak").get<std::uint64_t>());
    if (m.at("verdict") == "fits")
      CHECK(m.at("peak_range").at("high").get<std::uint64_t>() <= plan.at("budget").get<std::uint64_t>());
  }
}

}  // namespace plan_json_test
