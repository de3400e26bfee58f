// The tensor / reserved / device figures with the allocator replay and the context model, the
// point verdict of the capped replay (memscale/device_peak.hpp), and how run documents and
// reports carry the allocator settings and the software stack (json/software_stack.hpp,
// json/device_report.hpp).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <string>

#include "error_capture.hpp"
#include "memscale/device_peak.hpp"
#include "memscale/json.hpp"
#include "memscale/plan_result.hpp"
#include "memscale/presets.hpp"

namespace device_peak_test {
namespace {

using namespace memscale;
using memscale_test::error_message;

constexpr std::uint64_t MiB = 1ULL << 20;

const gpu_spec& h100() {
  static const gpu_spec g = *find_gpu("h100-80gb");
  return g;
}

training_spec llama_small_run() {
  return on_gpu(training_spec{.micro_batch = 2, .seq_len = 512, .prec = precision::amp_bf16,
                              .attention = attention_impl::sdpa},
                h100());
}

}  // namespace

TEST_CASE("device peak: reserved from the replay, device = reserved + the GPU's context", "[device_peak]") {
  const training_spec run = llama_small_run();
  const device_estimate d = estimate_on_device(presets::gpt2_medium, run, &h100());
  REQUIRE(d.replayed());
  CHECK(d.tensor == overall_peak(estimate(presets::gpt2_medium, run)).tensor);
  CHECK(d.reserved >= d.replay_allocated);
  CHECK(d.replay_allocated >= d.tensor);
  // H100 (132 SMs x 2048 threads): 528 MiB base + 148 forward + 64 training + 18 flash attention kernels.
  CHECK(d.context_from == context_source::model);
  CHECK(d.context.total().value == 758 * MiB);
  CHECK(d.device == d.reserved + d.context.total());
  // The estimate's peaks carry the replay's figures.
  CHECK(d.tensors.steady.reserved == d.reserved);
  CHECK(d.tensors.first_step.device == d.device);
}

TEST_CASE("device peak: a measured context replaces the model, no GPU takes the flat figure", "[device_peak]") {
  const training_spec run = llama_small_run();
  const device_estimate measured = estimate_on_device(presets::gpt2, run, &h100(), {.context_override = bytes{900 * MiB}});
  CHECK(measured.context_from == context_source::measured);
  CHECK(measured.device == measured.reserved + bytes{900 * MiB});
  const device_estimate flat = estimate_on_device(presets::gpt2, run);
  CHECK(flat.context_from == context_source::flat);
  CHECK(flat.context.total() == cuda_context_bytes(true));
}

TEST_CASE("device peak: runs the stream does not describe fall back to the rounding rule and say why",
          "[device_peak]") {
  training_spec run = llama_small_run();
  run.offload_optimizer = true;
  CHECK(estimate_on_device(presets::gpt2, run, &h100()).fallback == replay_fallback::offloaded);
  run = llama_small_run();
  run.data_parallel = 2;
  run.shard = sharding::full;
  CHECK(estimate_on_device(presets::gpt2, run, &h100()).fallback == replay_fallback::distributed);
  run = llama_small_run();
  const device_estimate t5 = estimate_on_device(presets::t5_small, run, &h100());
  CHECK(t5.fallback == replay_fallback::encoder_decoder);
  CHECK(t5.reserved == overall_peak(estimate(presets::t5_small, run)).reserved);
  CHECK(!std::string(explain(t5.fallback)).empty());
  run.device = device_kind::cpu;
  const device_estimate cpu = estimate_on_device(presets::gpt2, run);
  CHECK(cpu.fallback == replay_fallback::not_cuda);
  CHECK(cpu.device == cpu.tensor);
}

TEST_CASE("device peak: expandable segments change the replay", "[device_peak]") {
  const training_spec run = llama_small_run();
  const device_estimate plain = estimate_on_device(presets::gpt2_medium, run, &h100());
  allocator::options expandable{};
  expandable.expandable_segments = true;
  const device_estimate grown = estimate_on_device(presets::gpt2_medium, run, &h100(), {.allocator = expandable});
  CHECK(grown.reserved != plain.reserved);
  CHECK(grown.tensor == plain.tensor);
}

TEST_CASE("device fit: the verdict by tensors, reserved and the capped replay", "[device_peak]") {
  const training_spec run = llama_small_run();
  const device_estimate d = estimate_on_device(presets::gpt2_medium, run, &h100());
  const bytes ctx = d.context.total();
  const device_fit roomy = fit_on_device(presets::gpt2_medium, run, d, d.device);
  CHECK(roomy.fits);
  CHECK(roomy.basis == fit_basis::reserved_under);
  const device_fit tight = fit_on_device(presets::gpt2_medium, run, d, ctx + d.replay_allocated - bytes{MiB});
  CHECK(!tight.fits);
  CHECK(tight.basis == fit_basis::tensors_over);
  CHECK(fit_on_device(presets::gpt2_medium, run, d, ctx).basis == fit_basis::context_over);
  // Between the allocated and the reserved peak the capped replay decides, and a run whose
  // allocated peak + context exceeds the budget is never "fits".
  REQUIRE(d.reserved > d.replay_allocated);
  const bytes middle = ctx + d.replay_allocated + bytes{(d.reserved - d.replay_allocated).value / 2};
  const device_fit between = fit_on_device(presets::gpt2_medium, run, d, middle);
  CHECK(between.basis == fit_basis::capped_replay);
  CHECK(between.capacity == middle - ctx);
  if (between.fits) CHECK(between.capped.reserved_peak <= between.capacity);
  if (!between.fits) CHECK(between.fragmentation);
  // The same through the GPU overload.
  CHECK(fit_on_device(presets::gpt2_medium, run, h100(), middle).fits == between.fits);
  // With the band: a run that reaches the budget only by releasing the cache is never "fits", and
  // the band is applied to what it reserves there, not to the unconstrained peak.
  const device_verdict v = verdict_on_device(presets::gpt2_medium, run, d, middle);
  CHECK(v.v != verdict::fits);
  CHECK(v.at_budget <= d.device);
  if (between.fits) CHECK(v.at_budget == between.capped.reserved_peak + ctx);
  CHECK(verdict_on_device(presets::gpt2_medium, run, d, d.device).at_budget == d.device);
}

TEST_CASE("software stack: run documents and --stack read it, name bad fields, write it back", "[json][software]") {
  namespace io = memscale::json_io;
  training_spec run{};
  io::read_stack_option("torch=2.1,transformers=4.46,bitsandbytes=0.43.2", run, "--stack");
  CHECK(run.torch_version == 201);
  CHECK(run.transformers_version == 446);
  CHECK(run.bitsandbytes_version == 4302);
  CHECK(io::software_text(run) ==
        "torch 2.1, transformers 4.46, bitsandbytes 0.43.2, CUDA modules loaded lazily");
  training_spec back{};
  io::read_software(io::software_json(run), back);
  CHECK(back.torch_version == 201);
  CHECK(back.transformers_version == 446);
  CHECK(back.bitsandbytes_version == 4302);
  io::read_stack_option("torch=1.12", run, "--stack");
  CHECK(!run.cuda_lazy_loading);
  CHECK(run.optimizer_impl == optimizer_implementation::for_loop);

  CHECK(error_message([] {
          training_spec r{};
          io::read_stack_option("torch=two", r, "--stack");
        }).find("--stack torch") != std::string::npos);
  CHECK(error_message([] {
          training_spec r{};
          io::read_stack_option("jax=0.4", r, "--stack");
        }).find("expected torch, transformers, bitsandbytes or cuda") != std::string::npos);
  CHECK(error_message([] {
          training_spec r{};
          io::read_stack_option("torch", r, "--stack");
        }).find("must be package=version") != std::string::npos);
  CHECK(error_message([] {
          training_spec r{};
          io::read_software(nlohmann::json{{"torch", 2.5}}, r);
        }).find("software.torch") != std::string::npos);
}

TEST_CASE("run document: alloc_conf, context_memory and software are read, checked and written back",
          "[json][run_document][device_peak]") {
  namespace io = memscale::json_io;
  const auto doc = nlohmann::json::parse(R"({"model": "gpt2", "gpu": "h100-80gb",
      "alloc_conf": "expandable_segments:True", "context_memory": 805306368,
      "software": {"torch": "2.4", "transformers": "4.46"}})");
  io::run_input in{};
  io::read_run_document(doc, in);
  CHECK(in.alloc_conf == "expandable_segments:True");
  CHECK(in.context_memory == bytes{805306368});
  CHECK(in.run.torch_version == 204);
  const nlohmann::json written = io::run_document_json(in);
  CHECK(written.at("alloc_conf") == "expandable_segments:True");
  CHECK(written.at("context_memory") == 805306368);
  CHECK(written.at("software").at("transformers") == "4.46");
  io::run_input again{};
  io::read_run_document(written, again);
  CHECK(again.alloc_conf == in.alloc_conf);
  CHECK(again.run.torch_version == 204);

  // The report: the allocator object, with the capped replay's verdict at the plan's budget.
  const gpu_spec gpu = *io::gpu_of(in);
  const plan_result plan = io::plan_run(in, gpu);
  const nlohmann::json report = io::run_report_json(in, io::estimate_run(in), &plan);
  const nlohmann::json& a = report.at("allocator");
  CHECK(a.at("replayed") == true);
  CHECK(a.at("alloc_conf") == "expandable_segments:True");
  CHECK(a.at("context").at("source") == "measured");
  CHECK(a.at("device").get<std::uint64_t>() == a.at("reserved").get<std::uint64_t>() + 805306368ULL);
  CHECK(a.at("fit").at("budget").get<std::uint64_t>() == plan.budget.value);
  // One reserved and one device figure in a report: the peaks' are the allocator section's.
  for (const nlohmann::json* peak : {&report.at("peak"), &report.at("first_step").at("peak")}) {
    CHECK(peak->at("reserved") == a.at("reserved"));
    CHECK(peak->at("device") == a.at("device"));
  }
  // A report reads back as its run document.
  io::run_input from_report{};
  io::read_run_document(report, from_report);
  CHECK(from_report.context_memory == in.context_memory);

  const auto bad = [](const char* text) {
    return error_message([&] {
      io::run_input r{};
      io::read_run_document(nlohmann::json::parse(text), r);
    });
  };
  CHECK(bad(R"({"model": "gpt2", "alloc_conf": "expandable_segment:True"})").find("alloc_conf") != std::string::npos);
  CHECK(bad(R"({"model": "gpt2", "alloc_conf": 3})").find("alloc_conf") != std::string::npos);
  CHECK(bad(R"({"model": "gpt2", "context_memory": 0})").find("context_memory") != std::string::npos);
  CHECK(bad(R"({"model": "gpt2", "context_memory": "1GiB"})").find("context_memory") != std::string::npos);
  CHECK(bad(R"({"model": "gpt2", "software": {"torch": "latest"}})").find("software.torch") != std::string::npos);
  CHECK(bad(R"({"model": "gpt2", "software": {"pytorch": "2.5"}})").find("software.pytorch") != std::string::npos);
}

TEST_CASE("device verdict: the replayed band from torch 2.0, the class band before", "[device_peak]") {
  const training_spec run = llama_small_run();
  const device_estimate d = estimate_on_device(presets::gpt2_medium, run, &h100());
  const device_verdict roomy = verdict_on_device(presets::gpt2_medium, run, d, d.device + d.device);
  CHECK(roomy.v == verdict::fits);
  CHECK(roomy.band.source == replayed_device_band.source);
  CHECK(roomy.range.high <= d.device + d.device);
  const device_verdict over = verdict_on_device(presets::gpt2_medium, run, d, roomy.range.low - bytes{1});
  CHECK(over.v == verdict::does_not_fit);
  // Between the band's ends: borderline, whatever the point estimate says.
  const device_verdict edge = verdict_on_device(presets::gpt2_medium, run, d, d.device);
  CHECK(edge.v == verdict::borderline);
  CHECK(edge.point.fits);
  training_spec old = run;
  old.torch_version = 113;
  const device_estimate d_old = estimate_on_device(presets::gpt2_medium, old, &h100());
  CHECK(verdict_on_device(presets::gpt2_medium, old, d_old, d_old.device).band.source ==
        band_of(run_class::gpu_published, band_quantity::device).source);
}

}  // namespace device_peak_test
