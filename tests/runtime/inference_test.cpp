// Run-time checks of the inference estimator: the static values again with
// inputs the compiler cannot fold, the CPU traces of generate(), record reading and the
// errors for invalid input.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "error_capture.hpp"
#include "memscale/allocator/replay_generate.hpp"
#include "memscale/inference.hpp"
#include "memscale/json.hpp"
#include "memscale/presets.hpp"
#include "test_inputs.hpp"

namespace inference_test {
namespace {

using memscale_test::opaque;

using memscale_test::contains;
using memscale_test::error_message;
using namespace memscale;

nlohmann::json traced_records() {
  std::ifstream in(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_inference.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("inference: the guides' KV-cache arithmetic at run time", "[inference]") {
  const inference_spec r{.batch = opaque(1), .context = opaque(4096), .kv = dtype::fp16};
  CHECK(kv_bytes_per_token(presets::llama_2_7b, r) == bytes{524'288});
  CHECK(estimate_inference(presets::llama_2_7b, r).kv_bytes_per_token == bytes{524'288});
  // batch x (context + new tokens - 1) tokens are cached after the last step.
  const inference_spec b4{.batch = opaque(4), .context = opaque(1000), .new_tokens = opaque(25)};
  CHECK(estimate_inference(presets::llama_2_7b, b4).kv_cache_bytes == bytes{524'288ULL * 4 * 1024});
}

TEST_CASE("inference: CPU traces of generate() within 3% median, every case within [-5%, +10%]", "[inference]") {
  std::vector<double> errors;
  for (const auto& record : traced_records()) {
    const model_spec model = json_io::model_from_record(record.at("model"));
    const inference_spec run = json_io::inference_from_record(record);
    const inference_result e = estimate_inference(model, run);
    CHECK(e.parameter_count == record.at("model").at("params").get<std::uint64_t>());
    const double measured = record.at("measured_bytes").get<double>();
    const double err = (static_cast<double>(e.peak.tensor.value) - measured) / measured * 100.0;
    INFO(record.at("id").get<std::string>() << ": " << err << "%");
    CHECK(err >= -5.0);
    CHECK(err <= 10.0);
    // The phase is right too: the prefill's and the decode's own peaks.
    const auto& detail = record.at("detail");
    const double prefill = detail.at("prefill_peak").get<double>();
    CHECK(std::fabs(static_cast<double>(e.prefill.tensor.value) - prefill) / prefill <= 0.05);
    if (detail.contains("decode_peak")) {
      const double decode = detail.at("decode_peak").get<double>();
      CHECK(std::fabs(static_cast<double>(e.decode.tensor.value) - decode) / decode <= 0.05);
    }
    errors.push_back(std::fabs(err));
  }
  REQUIRE(errors.size() >= 10);
  std::sort(errors.begin(), errors.end());
  CHECK(errors[errors.size() / 2] <= 3.0);
}

TEST_CASE("inference: --cases answers infer records", "[inference]") {
  const auto records = traced_records();
  const auto answer = json_io::estimate_record(records.at(0));
  REQUIRE(answer.contains("estimated_bytes"));
  CHECK(answer.at("quantity") == "tensor");
  nlohmann::json gpu = records.at(0);
  gpu["device"] = "A100-80GB";
  gpu["measure"] = "nvidia-smi";
  gpu["infer"]["weights"] = "bnb-nf4";
  gpu["infer"]["dtype"] = "bf16";
  const auto smi = json_io::estimate_record(gpu);
  REQUIRE(smi.contains("estimated_bytes"));
  CHECK(smi.at("quantity") == "device");
  // The device total adds the CUDA context to the tensor peak.
  CHECK(smi.at("estimated_bytes").get<std::uint64_t>() > answer.at("estimated_bytes").get<std::uint64_t>() / 2);
  nlohmann::json bad = records.at(0);
  bad["infer"]["weights"] = "int3";
  CHECK(contains(json_io::estimate_record(bad).at("error").get<std::string>(), "infer.weights"));
  bad = records.at(0);
  bad["infer"]["contxt"] = 5;
  CHECK(contains(json_io::estimate_record(bad).at("error").get<std::string>(), "did you mean infer.context"));
}

TEST_CASE("inference: stored weight formats", "[inference]") {
  const auto with = [](weight_format w, bool dq = false) {
    return estimate_inference(presets::llama_2_7b,
                              inference_spec{.context = opaque(16), .new_tokens = 1, .weights = w, .double_quant = dq})
        .weight_bytes;
  };
  const bytes fp16 = with(weight_format::native);
  CHECK(fp16 == bytes{6'738'415'616ULL * 2});
  // 4-bit formats keep embeddings and the head in 16 bits: 2 x 32000 x 4096 x 2 bytes.
  const bytes unquantised = bytes{2ULL * 32000 * 4096 * 2 + 65ULL * 4096 * 2};
  const std::uint64_t block_linear = 6'738'415'616ULL - 2ULL * 32000 * 4096 - 65ULL * 4096;
  // NF4: half a byte a weight plus one fp32 absmax per 64 (bitsandbytes quantize_4bit).
  CHECK(with(weight_format::bnb_nf4).value - unquantised.value == block_linear / 2 + block_linear / 64 * 4 + 224 * 64);
  CHECK(with(weight_format::bnb_nf4, true) < with(weight_format::bnb_nf4));
  // LLM.int8: a byte a weight plus an fp32 scale per output row.
  CHECK(with(weight_format::bnb_int8) > with(weight_format::bnb_nf4));
  CHECK(with(weight_format::bnb_int8) < fp16);
  // GPTQ stores g_idx, AWQ does not; both about 4.25 bits a weight at group 128.
  CHECK(with(weight_format::gptq_4bit) > with(weight_format::awq_4bit));
  const double awq_bits = static_cast<double>((with(weight_format::awq_4bit) - unquantised).value) * 8.0 /
                          static_cast<double>(block_linear);
  CHECK(awq_bits > 4.1);
  CHECK(awq_bits < 4.3);
}

TEST_CASE("inference: static caches are preallocated, logits of 4.44 survive into decoding", "[inference]") {
  const model_spec& m = presets::llama_2_7b;
  const inference_spec dynamic{.context = opaque(100), .new_tokens = 10};
  inference_spec fixed = dynamic;
  fixed.cache = kv_cache_kind::static_preallocated;
  fixed.max_cache_len = opaque(4096);
  CHECK(estimate_inference(m, fixed).prefill.breakdown.kv_cache == kv_bytes_per_token(m, fixed) * 4096u);
  CHECK(estimate_inference(m, dynamic).prefill.breakdown.kv_cache == kv_bytes_per_token(m, dynamic) * 100u);
  inference_spec old = dynamic;
  old.transformers_version = 444;
  // 100 prompt positions x 32000 logits in fp16 and their fp32 copy, instead of the last position only.
  CHECK(estimate_inference(m, old).prefill.breakdown.logits == bytes{100ULL * 32000 * 6});
  CHECK(estimate_inference(m, dynamic).prefill.breakdown.logits <= bytes{32000ULL * 2});
  CHECK(estimate_inference(m, old).prefill.tensor > estimate_inference(m, dynamic).prefill.tensor);
  CHECK(estimate_inference(m, old).decode.breakdown.logits >= bytes{100ULL * 32000 * 4});
}

TEST_CASE("inference: before 4.42 the previous step's tuple cache lives beside the new one", "[inference]") {
  const model_spec& m = presets::llama_2_7b;
  inference_spec tuples{.batch = opaque(8), .context = opaque(1024), .new_tokens = 256, .transformers_version = 441};
  inference_spec cache_class = tuples;
  cache_class.transformers_version = 442;
  // The last decoding step caches context + new_tokens - 2 positions: DynamicCache holds one
  // layer's old value tensor during its torch.cat, the tuples hold every layer's old keys and values.
  const std::uint64_t done = 1024 + 256 - 2;
  const bytes previous = kv_cache_bytes(m, tuples, done) - kv_layer_half_bytes(m, tuples, done);
  CHECK(estimate_inference(m, tuples).decode.breakdown.kv_cache ==
        estimate_inference(m, cache_class).decode.breakdown.kv_cache + previous);
  // The step's peak grows by at least that and at most the whole previous cache (the moment
  // after the blocks, when DynamicCache holds no old tensor, may be 4.42's peak).
  const bytes grown = estimate_inference(m, tuples).decode.tensor - estimate_inference(m, cache_class).decode.tensor;
  CHECK(grown >= previous);
  CHECK(grown <= kv_cache_bytes(m, tuples, done));
  // GPT-2 kept tuples until 4.52; the flag follows the family, the release decides.
  inference_spec gpt2_new{.batch = 4, .context = 256, .new_tokens = 32, .transformers_version = 452};
  inference_spec gpt2_old = gpt2_new;
  gpt2_old.transformers_version = 451;
  CHECK(presets::gpt2.generate_tuple_cache_before == 452);
  CHECK(estimate_inference(presets::gpt2, gpt2_old).decode.breakdown.kv_cache >
        estimate_inference(presets::gpt2, gpt2_new).decode.breakdown.kv_cache);
  // The allocator's stream frees the old tuples once forward returned: its live bytes are the estimate's.
  CHECK(allocator::replay_generate(m, tuples).requested_peak == estimate_inference(m, tuples).peak.tensor);
}

TEST_CASE("inference: plan finds the largest batch and context", "[inference]") {
  const gpu_spec gpu = *find_gpu("rtx3090");
  const inference_spec r{.batch = opaque(1), .context = opaque(2048), .new_tokens = 128};
  const inference_plan p = plan_inference(presets::llama_2_7b, r, gpu);
  CHECK(p.fits);
  REQUIRE(p.max_batch > 0);
  // The searches compare the upper end of the device figure's band with the budget.
  inference_spec at = r;
  at.blas_workspace = gpu.cublas_workspace;
  at.batch = p.max_batch;
  CHECK(inference_upper_end(presets::llama_2_7b, at, gpu) <= p.budget);
  at.batch = p.max_batch + 1;
  CHECK(inference_upper_end(presets::llama_2_7b, at, gpu) > p.budget);
  inference_spec ctx = at;
  ctx.batch = r.batch;
  ctx.context = p.max_context + 1;
  CHECK(inference_upper_end(presets::llama_2_7b, ctx, gpu) > p.budget);
  CHECK_FALSE(plan_inference(presets::llama_2_70b, r, gpu).fits);
  // A 7B fp16 model serves a 4k-token conversation on an 80 GB GPU (inference_static.cpp
  // checks the same plan in constant evaluation).
  CHECK(plan_inference(presets::llama_2_7b, inference_spec{.context = opaque(4000), .new_tokens = 96},
                       *find_gpu("a100-80gb"))
            .fits);
}

TEST_CASE("inference: the plan's searches give the bisection's answers", "[inference]") {
  // The searches solve for the crossing from peak values; a bisection over fits / does not fit
  // of the same estimates must land on the same batch and prompt length.
  struct plan_case {
    model_spec model;
    inference_spec run;
    const char* gpu;
  };
  const plan_case cases[] = {
      {presets::llama_2_7b, inference_spec{.batch = 1, .context = 2048, .new_tokens = 128}, "rtx3090"},
      {presets::llama_2_7b, inference_spec{.batch = 3, .context = 512, .new_tokens = 16, .attention = attention_impl::eager},
       "a100-40gb"},
      {presets::gpt2, inference_spec{.batch = 8, .context = 256, .new_tokens = 64}, "t4"},
      {presets::llama_2_7b, inference_spec{.batch = 64, .context = 4096, .new_tokens = 512}, "rtx4090"},
      {presets::llama_2_7b, inference_spec{.batch = 2, .context = 1024, .new_tokens = 32,
                                           .weights = weight_format::bnb_nf4}, "rtx3060-12gb"},
  };
  for (const plan_case& c : cases) {
    const gpu_spec gpu = *find_gpu(c.gpu);
    const inference_plan p = plan_inference(c.model, c.run, gpu);
    auto fits_at = [&](std::uint64_t batch, std::uint64_t context) {
      inference_spec t = c.run;
      t.batch = batch;
      t.context = context;
      t.blas_workspace = gpu.cublas_workspace;
      return inference_upper_end(c.model, t, gpu) <= p.budget;
    };
    CAPTURE(c.gpu, c.run.batch, c.run.context);
    CHECK(p.max_batch == detail::largest_fitting(plan_options{}.max_batch_search,
                                                 [&](std::uint64_t b) { return fits_at(b, c.run.context); }));
    const std::uint64_t positions_left = c.model.positions == position_kind::learned
                                             ? c.model.max_positions - c.run.new_tokens
                                             : max_context_search;
    CHECK(p.max_context ==
          detail::largest_fitting(positions_left, [&](std::uint64_t ctx) { return fits_at(c.run.batch, ctx); }));
  }
}

TEST_CASE("inference: invalid input names the field", "[inference]") {
  CHECK(contains(error_message([] { estimate_inference(presets::gpt2, inference_spec{.batch = opaque(0)}); }),
                 "infer.batch must be > 0"));
  CHECK(contains(error_message([] {
                   estimate_inference(presets::gpt2, inference_spec{.cache = kv_cache_kind::sliding_window});
                 }),
                 "infer.sliding_window"));
  CHECK(contains(error_message([] { estimate_inference(presets::bert_base_uncased, inference_spec{}); }),
                 "decoder-only"));
  CHECK(contains(error_message([] { estimate_inference(presets::gpt2, inference_spec{.kv = dtype::int64}); }),
                 "infer.kv_dtype"));
  CHECK(contains(error_message([] {
                   estimate_inference(presets::gpt2, inference_spec{.context = opaque(1), .kv_lora_rank = 512});
                 }),
                 "infer.qk_rope_head_dim"));
  // transformers' DeepSeek attention caches decompressed keys and values: no latent cache in generate().
  CHECK(contains(error_message([] {
                   estimate_inference(presets::llama_2_7b, inference_spec{.kv_lora_rank = opaque(512), .qk_rope_head_dim = 64});
                 }),
                 "infer.kv_lora_rank"));
}

}  // namespace inference_test
