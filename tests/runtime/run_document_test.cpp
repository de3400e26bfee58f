// The run document and its report (memscale/json/run_document.hpp, run_report.hpp), shared by
// memscale-plan --run/--json and the web calculator: round trips, sizes as typed, the report's
// parts, and the OOM cliff's micro-batches.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <string>

#include <memscale/gpus.hpp>
#include <memscale/json.hpp>
#include <memscale/presets.hpp>

namespace run_document_test {
namespace io = memscale::json_io;

namespace {

// The what() of the input_error `f` throws, or "<no error>".
template <class F>
std::string input_error_of(F&& f) {
  try {
    f();
  } catch (const io::input_error& e) {
    return e.what();
  }
  return "<no error>";
}

io::run_input read(const nlohmann::json& doc) {
  io::run_input in;
  io::read_run_document(doc, in);
  return in;
}

}  // namespace

TEST_CASE("run document: written back, it reads to the same run", "[json][run_document]") {
  const nlohmann::json doc = {
      {"model", "llama-2-7b"},
      {"run",
       {{"micro_batch", 8}, {"seq_len", 1024}, {"precision", "amp_bf16"}, {"target", "qlora"}, {"lora_rank", 16},
        {"lora_targets", "all-linear"}, {"quant", "nf4_double_quant"}, {"offload", {"optimizer"}}}},
      {"gpu", {{"memory", "24GiB"}, {"bf16", true}}},
      {"headroom", 0.12}};
  const io::run_input in = read(doc);
  CHECK(in.run.micro_batch == 8);
  CHECK(in.run.target == memscale::training_target::qlora);
  CHECK(in.run.quant == memscale::base_quant::nf4_double_quant);
  CHECK(in.run.offload_optimizer);
  REQUIRE(in.custom_gpu);
  CHECK(in.custom_gpu->memory.value == 24ULL << 30);
  CHECK(in.headroom == 0.12);

  const nlohmann::json written = io::run_document_json(in);
  CHECK(written.at("gpu").at("memory") == 24ULL << 30);
  const io::run_input again = read(written);
  CHECK(io::run_document_json(again) == written);
}

TEST_CASE("run document: a field it does not know is named with the nearest one", "[json][run_document]") {
  io::run_input in;
  const nlohmann::json doc = {{"model", "gpt2"}, {"run", {{"micro_bacth", 2}}}};
  try {
    io::read_run_document(doc, in);
    FAIL("no error");
  } catch (const memscale::error& e) {
    CHECK(std::string(e.what()).find("run.micro_bacth is not a field of a run document; did you mean micro_batch?") !=
          std::string::npos);
  }
  CHECK(in.run.micro_batch == io::default_run().micro_batch);  // unchanged by a refused document
}

TEST_CASE("run settings: sizes as typed", "[json][run_settings]") {
  CHECK(io::parse_size("24GiB", "gpu.memory") == 24ULL << 30);
  CHECK(io::parse_size("80GB", "gpu.memory") == 80'000'000'000ULL);
  CHECK(io::parse_size("23.5GiB", "gpu.memory") == 47ULL << 29);  // 23.5 x 2^30, exact
  CHECK(io::parse_size("0.1KB", "gpu.memory") == 100);
  CHECK(io::parse_size("9223372036854775807B", "gpu.memory") == 9223372036854775807ULL);  // exact, not 2^63
  CHECK(input_error_of([] { (void)io::parse_size("12.5.3GB", "--gpu-memory"); }) ==
        "--gpu-memory must be a number with a unit, such as 24GiB or 80GB (got \"12.5.3GB\")");
  CHECK(input_error_of([] { (void)io::parse_size("24", "--gpu-memory"); }).find("a size with a unit") !=
        std::string::npos);
  CHECK(input_error_of([] { (void)io::parse_size("0.1B", "--gpu-memory"); }).find("a positive size") !=
        std::string::npos);
}

TEST_CASE("run settings: offload lists and LoRA targets", "[json][run_settings]") {
  memscale::training_spec run = io::default_run();
  io::set_offload(run, "optimizer+activations", "--offload");
  CHECK(run.offload_optimizer);
  CHECK(run.offload_activations);
  CHECK_FALSE(run.offload_parameters);
  io::set_offload(run, "none", "--offload");
  CHECK_FALSE(run.offload_optimizer);
  CHECK(input_error_of([&] { io::set_offload(run, "optimzer", "--offload"); }).find("did you mean optimizer?") !=
        std::string::npos);

  const memscale::lora_modules set = io::parse_lora_target_list("q_proj,v_proj,mlp", "--lora-targets");
  CHECK(io::lora_targets_text(set) == "q,v,mlp");
  CHECK(io::parse_lora_target_list(io::lora_targets_text(memscale::lora_all_linear), "x") == memscale::lora_all_linear);
  CHECK(input_error_of([] { (void)io::parse_lora_target_list("q,vv", "--lora-targets"); })
            .find("unknown LoRA target \"vv\"; did you mean v?") != std::string::npos);
}

TEST_CASE("run report: the estimate, the run document and the plan", "[json][run_report]") {
  const io::run_input in = read({{"model", "gpt2-xl"}, {"run", {{"micro_batch", 8}}}, {"gpu", "rtx3090"}});
  const memscale::estimate_result result = io::estimate_run(in);
  const memscale::plan_result plan = io::plan_run(in, *io::gpu_of(in));
  const nlohmann::json report = io::run_report_json(in, result, &plan);
  CHECK(report.at("model") == "gpt2-xl");
  CHECK(report.at("gpu") == "rtx3090");
  CHECK(report.at("headroom") == memscale::default_headroom);
  // The tensor figure is estimate()'s; reserved and device are the allocator section's (the replay
  // and the RTX 3090's context), not the rounding rule's.
  CHECK(report.at("peak").at("tensor") == result.steady.tensor.value);
  CHECK(report.at("peak").at("device") == report.at("allocator").at("device"));
  CHECK(report.at("peak").at("device") != result.steady.device.value);
  CHECK(report.at("plan").at("changes") == io::plan_changes_text(plan));
  CHECK(report.at("plan").at("budget") == plan.budget.value);
  // Without a GPU: no plan, no GPU fields.
  const io::run_input bare = read({{"model", "gpt2"}});
  const nlohmann::json estimate_only = io::run_report_json(bare, io::estimate_run(bare), nullptr);
  CHECK_FALSE(estimate_only.contains("plan"));
  CHECK_FALSE(estimate_only.contains("headroom"));
}

TEST_CASE("OOM cliff: micro-batches double up to four times the larger of the run's and the largest that fits",
          "[json][run_report]") {
  const io::run_input in = read({{"model", "gpt2-xl"}, {"run", {{"micro_batch", 8}}}, {"gpu", "rtx3090"}});
  const memscale::gpu_spec gpu = *io::gpu_of(in);
  const memscale::plan_result plan = io::plan_run(in, gpu);
  const auto batches = io::cliff_micro_batches(in.run, plan);
  REQUIRE(batches.size() >= 4);
  CHECK(batches.front() == 1);
  for (std::size_t i = 1; i + 1 < batches.size(); ++i) CHECK(batches[i] == 2 * batches[i - 1]);
  const std::uint64_t last = std::max<std::uint64_t>(plan.max_micro_batch, 8) * 4;
  CHECK(batches.back() == std::min<std::uint64_t>(std::max<std::uint64_t>(last, 8), 1024));
  // Each mode's peak grows with the micro-batch, and at the run's own micro-batch it is the plan's.
  const nlohmann::json cliff = io::cliff_json(in, gpu, plan);
  for (const auto& mode_plan : plan.modes) {
    const auto& row = cliff.at("peak").at(std::string(memscale::to_string(mode_plan.m)));
    for (std::size_t i = 1; i < row.size(); ++i) CHECK(row[i].get<std::uint64_t>() >= row[i - 1].get<std::uint64_t>());
    CHECK(row[3].get<std::uint64_t>() == mode_plan.peak.value);  // micro-batch 8
  }
}

}  // namespace run_document_test
