// DeepSpeed's engine without ZeRO (strategy zero0): BF16_Optimizer's whole fp32 gradient buffer
// and partitioned master, FP16_Optimizer's unpartitioned master and flattened fp32 gradients,
// the refusals, and the CPU traces of one rank in docs/data/cpu_traced_deepspeed.json.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cmath>
#include <fstream>
#include <string>

#include "error_capture.hpp"
#include "memscale/json.hpp"
#include "memscale/json/emit_deepspeed.hpp"
#include "memscale/parallel/per_gpu.hpp"
#include "memscale/presets.hpp"

namespace deepspeed_stage0_test {
namespace {
using namespace memscale;
using memscale_test::contains;
using memscale_test::error_message;

training_spec run_of(precision prec) {
  return {.micro_batch = 1, .seq_len = 512, .prec = prec, .optimizer = optimizer_kind::adamw,
          .optimizer_impl = optimizer_implementation::fused, .ckpt = checkpointing::full};
}

parallel_spec stage0(std::uint64_t gpus, engine_precision e) {
  return {.engine = strategy::zero0, .gpus_per_node = gpus, .deepspeed = {.precision = e}};
}

TEST_CASE("Stage 0 bf16: 16-bit gradients, a whole fp32 gradient buffer and a partitioned fp32 master",
          "[deepspeed][stage0]") {
  const model_spec& m = presets::llama_2_7b;
  const training_spec r = run_of(precision::pure_bf16);
  const std::uint64_t t = estimate(m, r).trainable_parameter_count;
  for (const std::uint64_t n : {2U, 4U, 8U}) {
    INFO("over " << n);
    const auto e = estimate_per_gpu(m, r, stage0(n, engine_precision::bf16));
    const std::uint64_t flat = (t + 2 * n - 1) / (2 * n) * (2 * n);  // aligned to 2 x ranks
    // Checkpointed Llama-2-7B peaks after backward: 2 bytes of bf16 gradients and 4 of fp32
    // buffer per parameter, 12 of master and Adam state over N, and the all-reduce's bf16 copy
    // of the fp32 buffer (fused Adam: no step temporaries).
    REQUIRE(e.peak.at == phase::optimizer_step);
    CHECK(e.peak.breakdown.gradients == bytes{2 * t + 4 * flat});
    // Beside the partition: fused AdamW's step counters (a few bytes per tensor).
    CHECK(e.peak.breakdown.optimizer >= ceil_div(bytes{12 * t}, n));
    CHECK(e.peak.breakdown.optimizer < ceil_div(bytes{12 * t}, n) + bytes{4096});
    CHECK(e.peak.breakdown.workspace == r.blas_workspace + bytes{2 * flat});
    CHECK(e.peak_role == "every rank alike");
  }
}

TEST_CASE("Stage 0 fp16: an unpartitioned fp32 master and the step's flattened fp32 gradients", "[deepspeed][stage0]") {
  const model_spec& m = presets::llama_2_7b;
  const training_spec r = run_of(precision::pure_fp16);
  const std::uint64_t t = estimate(m, r).trainable_parameter_count;
  for (const std::uint64_t n : {2U, 8U}) {
    INFO("over " << n);
    const auto e = estimate_per_gpu(m, r, stage0(n, engine_precision::fp16));
    REQUIRE(e.peak.at == phase::optimizer_step);
    // Every rank keeps 4 bytes of master and 8 of Adam state per parameter.
    CHECK(e.peak.breakdown.optimizer >= bytes{12 * t});
    CHECK(e.peak.breakdown.optimizer < bytes{12 * t + 4096});
    // The fp16 gradients beside their fp32 copies and the flat fp32 tensor made of them.
    CHECK(e.peak.breakdown.gradients == bytes{2 * t});
    CHECK(e.peak.breakdown.workspace == r.blas_workspace + bytes{8 * t});
  }
}

TEST_CASE("Stage 0: what is not modelled is refused naming the field", "[deepspeed][stage0]") {
  const model_spec& m = presets::llama_2_7b;
  auto refused = [&](const training_spec& run, const parallel_spec& p) {
    return error_message([&] { (void)estimate_per_gpu(m, run, p); });
  };
  const training_spec bf16 = run_of(precision::pure_bf16);
  CHECK(contains(refused(bf16, stage0(4, engine_precision::none)), "parallel.deepspeed.precision"));
  training_spec accum = bf16;
  accum.grad_accum = 4;
  CHECK(contains(refused(accum, stage0(4, engine_precision::bf16)), "run.grad_accum"));
  training_spec unfused = run_of(precision::pure_fp16);
  unfused.optimizer_impl = optimizer_implementation::foreach;
  CHECK(contains(refused(unfused, stage0(4, engine_precision::fp16)), "run.optimizer_impl"));
  parallel_spec off = stage0(4, engine_precision::bf16);
  off.offload_optimizer = true;
  CHECK(contains(refused(bf16, off), "parallel.offload_optimizer"));
  parallel_spec tp = stage0(4, engine_precision::bf16);
  tp.tp = 2;
  CHECK(contains(refused(bf16, tp), "parallel.tp * parallel.pp"));
  CHECK(contains(refused(run_of(precision::amp_bf16), stage0(4, engine_precision::bf16)), "run.precision"));
  CHECK(contains(refused(bf16, stage0(1, engine_precision::bf16)), "parallel.engine"));
  // DDP and FSDP still refuse the engine precision.
  CHECK(contains(refused(bf16, {.engine = strategy::ddp, .gpus_per_node = 4, .deepspeed = {.precision = engine_precision::bf16}}),
                 "parallel.deepspeed.precision"));
}

TEST_CASE("Stage 0: the strategy's name, and the emitted ds_config's stage", "[deepspeed][stage0][emit]") {
  CHECK(strategy_from_string("zero0") == strategy::zero0);
  CHECK(to_string(strategy::zero0) == "zero0");
  const auto b = json_io::emit_deepspeed_config(run_of(precision::pure_bf16), stage0(4, engine_precision::bf16));
  CHECK(b.at("zero_optimization").at("stage").get<int>() == 0);
  CHECK(b.at("bf16").at("enabled").get<bool>());
}

}  // namespace

TEST_CASE("Stage 0: the CPU traces of BF16_Optimizer's buffers, read per GPU", "[deepspeed][stage0][records]") {
  std::ifstream in(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_deepspeed.json");
  REQUIRE(in.good());
  const nlohmann::json records = nlohmann::json::parse(in);
  int stage0_records = 0;
  for (const auto& record : records) {
    if (record.at("train").at("zero_stage").get<int>() != 0) continue;
    ++stage0_records;
    const nlohmann::json answer = json_io::estimate_parallel_record(record);
    INFO(answer.dump());
    REQUIRE(answer.contains("estimated_bytes"));
    CHECK(answer.at("per_gpu").at("strategy").get<std::string>() == "zero0");
    const double error = answer.at("estimated_bytes").get<double>() / record.at("measured_bytes").get<double>() - 1.0;
    CHECK(std::abs(error) < 0.02);
  }
  CHECK(stage0_records == 6);
}

}  // namespace deepspeed_stage0_test
