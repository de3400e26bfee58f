// DeepSpeed's own fp16/bf16 engine (parallel_spec::deepspeed.precision): a 16-bit module, an fp32
// master partition and fp32 optimizer state in its ZeRO optimizer, the step's fp32 gradient
// partition, the refusals of what is not modelled and the emitted ds_config block.
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

namespace deepspeed_precision_test {
namespace {
using namespace memscale;
using memscale_test::contains;
using memscale_test::error_message;

training_spec bf16_run() {
  return {.micro_batch = 1, .seq_len = 512, .prec = precision::pure_bf16, .optimizer = optimizer_kind::adamw,
          .optimizer_impl = optimizer_implementation::fused, .ckpt = checkpointing::full};
}

parallel_spec zero(strategy s, std::uint64_t gpus, engine_precision e) {
  return {.engine = s, .gpus_per_node = gpus, .deepspeed = {.precision = e}};
}

TEST_CASE("Engine precision: the optimizer holds 4 bytes of fp32 master and 8 of fp32 Adam state per parameter over N",
          "[deepspeed][precision]") {
  const model_spec& m = presets::llama_2_7b;
  training_spec r = bf16_run();
  r.optimizer_impl = optimizer_implementation::foreach;  // no step tensor on the device
  const std::uint64_t trainable = estimate(m, r).trainable_parameter_count;
  for (const strategy s : {strategy::zero1, strategy::zero2, strategy::zero3}) {
    for (const std::uint64_t n : {2U, 4U, 8U}) {
      INFO(to_string(s) << " over " << n);
      const auto engine = estimate_per_gpu(m, r, zero(s, n, engine_precision::bf16));
      const auto plain = estimate_per_gpu(m, r, zero(s, n, engine_precision::none));
      CHECK(engine.peak.breakdown.optimizer == ceil_div(bytes{12 * trainable}, n));
      CHECK(plain.peak.breakdown.optimizer == ceil_div(bytes{4 * trainable}, n));
      // The module is the same 16-bit module: parameters do not change.
      CHECK(engine.peak.breakdown.parameters == plain.peak.breakdown.parameters);
      CHECK(engine.peak.tensor > plain.peak.tensor);
    }
  }
}

TEST_CASE("Engine precision: fp16 and bf16 hold the same bytes (both keep an fp32 master)", "[deepspeed][precision]") {
  training_spec r = bf16_run();
  const auto b = estimate_per_gpu(presets::llama_2_7b, r, zero(strategy::zero2, 4, engine_precision::bf16));
  r.prec = precision::pure_fp16;
  const auto h = estimate_per_gpu(presets::llama_2_7b, r, zero(strategy::zero2, 4, engine_precision::fp16));
  CHECK(b.peak.breakdown.optimizer == h.peak.breakdown.optimizer);
  CHECK(b.peak.tensor == h.peak.tensor);
}

TEST_CASE("Engine precision: the step converts the rank's gradient partition to fp32 beside a flat 16-bit copy",
          "[deepspeed][precision]") {
  training_spec r = bf16_run();
  r.fp32_master = true;
  r.shard = sharding::gradients;
  r.data_parallel = 4;
  const std::uint64_t t = 1'000'003;
  const std::uint64_t part = detail::ceil_div(t, 4);
  // fused: no optimizer temporaries; the 16-bit gradients, their flattened copy and the fp32 conversion.
  CHECK(detail::master_step_temporaries(t, r) == bytes{8 * part});
  // for_loop Adam steps the flat partition as one tensor: two fp32 temporaries of its size beside
  // the fp32 gradient, once the 16-bit gradients are freed.
  r.optimizer_impl = optimizer_implementation::for_loop;
  CHECK(detail::master_step_temporaries(t, r) == bytes{4 * part + 8 * part});
  // Llama-2-7B with full checkpointing peaks in that step: the 16-bit gradients are inside the
  // step's temporaries, beside the cuBLAS workspace and the reduce bucket; ZeRO keeps no fp32
  // gradient accumulation buffer (grad_accum_dtype defaults to the model dtype under ZeRO,
  // engine.py get_data_types).
  const training_spec plain = bf16_run();
  const parallel_spec z2 = zero(strategy::zero2, 4, engine_precision::bf16);
  const auto e = estimate_per_gpu(presets::llama_2_7b, plain, z2);
  REQUIRE(e.peak.at == phase::optimizer_step);
  CHECK(e.peak.breakdown.gradients == bytes{});
  const std::uint64_t whole = estimate(presets::llama_2_7b, plain).trainable_parameter_count;
  CHECK(e.peak.breakdown.workspace ==
        plain.blas_workspace + engines::zero_reduce_bucket_bytes(z2, 2) + bytes{8 * detail::ceil_div(whole, 4)});
}

TEST_CASE("Engine precision: what is not modelled is refused naming the field", "[deepspeed][precision]") {
  const model_spec& m = presets::llama_2_7b;
  const training_spec r = bf16_run();
  auto refused = [&](const training_spec& run, const parallel_spec& p) {
    return error_message([&] { (void)estimate_per_gpu(m, run, p); });
  };
  CHECK(contains(refused(r, zero(strategy::ddp, 4, engine_precision::bf16)), "parallel.deepspeed.precision"));
  CHECK(contains(refused(r, zero(strategy::fsdp_full, 4, engine_precision::bf16)), "parallel.deepspeed.precision"));
  training_spec amp = r;
  amp.prec = precision::amp_bf16;
  CHECK(contains(refused(amp, zero(strategy::zero2, 4, engine_precision::bf16)), "run.precision"));
  CHECK(contains(refused(r, zero(strategy::zero2, 4, engine_precision::fp16)), "run.precision"));
  parallel_spec off = zero(strategy::zero2, 4, engine_precision::bf16);
  off.offload_optimizer = true;
  CHECK(contains(refused(r, off), "parallel.offload_optimizer"));
  parallel_spec tp = zero(strategy::zero1, 4, engine_precision::bf16);
  tp.tp = 2;
  CHECK(contains(refused(r, tp), "parallel.tp * parallel.pp"));
  training_spec lora = r;
  lora.target = training_target::lora;
  lora.lora_rank = 8;
  CHECK(contains(refused(lora, zero(strategy::zero2, 4, engine_precision::bf16)), "run.target"));
  training_spec bnb = r;
  bnb.optimizer = optimizer_kind::adamw_8bit;
  CHECK(contains(refused(bnb, zero(strategy::zero2, 4, engine_precision::bf16)), "run.optimizer"));
  // Without the engine precision the same layouts stay accepted.
  CHECK(refused(amp, zero(strategy::zero2, 4, engine_precision::none)) == "<no error>");
}

TEST_CASE("Engine precision: the emitted ds_config enables the matching 16-bit block", "[deepspeed][precision][emit]") {
  training_spec r = bf16_run();
  const auto b = json_io::emit_deepspeed_config(r, zero(strategy::zero2, 4, engine_precision::bf16));
  CHECK(b.at("bf16").at("enabled").get<bool>());
  CHECK_FALSE(b.at("fp16").at("enabled").get<bool>());
  CHECK(b.at("zero_optimization").at("stage").get<int>() == 2);
  r.prec = precision::pure_fp16;
  const auto h = json_io::emit_deepspeed_config(r, zero(strategy::zero3, 4, engine_precision::fp16));
  CHECK(h.at("fp16").at("enabled").get<bool>());
  CHECK_FALSE(h.at("bf16").at("enabled").get<bool>());
}

}  // namespace
TEST_CASE("Engine precision: the CPU traces of the engine's buffers, read per GPU with the release's loss rules",
          "[deepspeed][precision][records]") {
  // docs/data/cpu_traced_deepspeed.json (transformers 4.51's loss: upcast logits, shifted labels).
  // Read without the release, the rank's loss made a contiguous copy of the shifted logits: +8.4%.
  std::ifstream in(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_deepspeed.json");
  REQUIRE(in.good());
  const nlohmann::json records = nlohmann::json::parse(in);
  int zero_records = 0;
  for (const auto& record : records) {
    if (record.at("train").at("zero_stage").get<int>() == 0) continue;  // stage 0: deepspeed_stage0_test.cpp
    ++zero_records;
    const nlohmann::json answer = json_io::estimate_parallel_record(record);
    INFO(answer.dump());
    REQUIRE(answer.contains("estimated_bytes"));
    const double error = answer.at("estimated_bytes").get<double>() / record.at("measured_bytes").get<double>() - 1.0;
    CHECK(std::abs(error) < 0.02);
  }
  CHECK(zero_records == 6);
}

}  // namespace deepspeed_precision_test
