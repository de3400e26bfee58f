// Run-time checks of gpt-fast's generate() (inference/gpt_fast.hpp): its static cache length,
// the whole-length copies of every decoding step, torchao's int8 cache, the CPU traces of
// docs/data/cpu_traced_transformers_versions.json and the refusals.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>

#include "error_capture.hpp"
#include "memscale/allocator/replay_generate.hpp"
#include "memscale/inference.hpp"
#include "memscale/json.hpp"
#include "memscale/presets.hpp"
#include "test_inputs.hpp"

namespace gpt_fast_test {
namespace {

using memscale_test::opaque;

using memscale_test::contains;
using memscale_test::error_message;
using namespace memscale;
using nlohmann::json;

json traced_records() {
  std::ifstream in(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_transformers_versions.json");
  REQUIRE(in.good());
  return json::parse(in);
}

inference_spec gpt_fast_run(std::uint64_t context, std::uint64_t new_tokens) {
  inference_spec r{.batch = opaque(4), .context = opaque(context), .new_tokens = opaque(new_tokens),
                   .compute = dtype::bf16, .kv = dtype::bf16, .cache = kv_cache_kind::static_preallocated,
                   .attention = attention_impl::sdpa_math};
  r.loop = generate_loop::gpt_fast;
  return r;
}

}  // namespace

TEST_CASE("gpt-fast: setup_caches rounds prompt + new tokens up to 8, at most block_size", "[inference][gpt_fast]") {
  const model_spec& m = presets::llama_2_7b;  // block_size 4096
  CHECK(gpt_fast_cache_length(m, gpt_fast_run(256, 16)) == 272);
  CHECK(gpt_fast_cache_length(m, gpt_fast_run(250, 3)) == 256);
  CHECK(gpt_fast_cache_length(m, gpt_fast_run(4000, 96)) == 4096);
  // The cache is allocated whole before the prefill: per layer (batch, kv_heads, M, head_dim) in bf16.
  const inference_result e = estimate_inference(m, gpt_fast_run(256, 16));
  CHECK(e.kv_cache_bytes == bytes{2ULL * 32 * 4 * 32 * 272 * 128 * 2});
  // torchao's int8 cache: int8 values and a per-token scale per kv head in bf16.
  inference_spec int8 = gpt_fast_run(256, 16);
  int8.kv = dtype::int8;
  CHECK(kv_bytes_per_token(m, int8) == bytes{2ULL * 32 * 32 * 128 + 2ULL * 32 * 32 * 2});
}

TEST_CASE("gpt-fast: every decoding step copies the whole cache length per query head", "[inference][gpt_fast]") {
  const model_spec& m = presets::llama_2_7b;  // multi-head: repeat_interleave(1) still copies
  const inference_spec r = gpt_fast_run(4000, 64);
  const inference_result e = estimate_inference(m, r);
  const bytes half = storage(dtype::bf16, 4ULL * 4064 * 32 * 128);
  // Repeated keys and values, and the math kernel's scaled keys, beside the static cache and tables.
  CHECK(e.decode.breakdown.kv_cache >= e.kv_cache_bytes + half * 3u);
  // The int8 cache stores less, but the step multiplies each layer back to bf16 before repeating it.
  inference_spec int8 = r;
  int8.kv = dtype::int8;
  const inference_result q = estimate_inference(m, int8);
  CHECK(q.kv_cache_bytes < e.kv_cache_bytes);
  CHECK(q.decode.tensor < e.decode.tensor);
  CHECK(e.decode.tensor - q.decode.tensor == e.kv_cache_bytes - q.kv_cache_bytes);
}

TEST_CASE("gpt-fast: the CPU traces within 1%, prefill and decode", "[inference][gpt_fast]") {
  int seen = 0;
  for (const json& record : traced_records()) {
    if (!json_io::gpt_fast_record(record)) continue;
    ++seen;
    const inference_spec run = json_io::inference_from_record(record);
    CHECK(run.loop == generate_loop::gpt_fast);
    json as_model = record.at("model");
    as_model["impl"] = "hf-transformers";
    const inference_result e = estimate_inference(json_io::model_from_record(as_model), run);
    const auto err = [](bytes est, const json& measured) {
      const double m = measured.get<double>();
      return (static_cast<double>(est.value) - m) / m * 100.0;
    };
    INFO(record.at("id").get<std::string>() << ": prefill " << err(e.prefill.tensor, record.at("detail").at("prefill_peak"))
                                            << "%, decode " << err(e.decode.tensor, record.at("detail").at("decode_peak"))
                                            << "%");
    CHECK(std::fabs(err(e.prefill.tensor, record.at("detail").at("prefill_peak"))) < 1.0);
    CHECK(std::fabs(err(e.decode.tensor, record.at("detail").at("decode_peak"))) < 1.0);
    CHECK(e.parameter_count == record.at("model").at("params").get<std::uint64_t>());
    const json answer = json_io::estimate_record(record);
    REQUIRE(answer.contains("estimated_bytes"));
    CHECK(answer.at("estimated_bytes").get<std::uint64_t>() == e.peak.tensor.value);
  }
  CHECK(seen == 5);
}

TEST_CASE("gpt-fast: what it does not have, or is not modelled, is refused by name", "[inference][gpt_fast]") {
  const auto estimate_with = [](const model_spec& m, inference_spec r) {
    return error_message([&] { estimate_inference(m, r); });
  };
  inference_spec r = gpt_fast_run(256, 16);
  r.cache = kv_cache_kind::dynamic;
  CHECK(contains(estimate_with(presets::llama_2_7b, r), "infer.kv_cache must be static with gpt-fast"));
  r = gpt_fast_run(256, 16);
  r.kv = dtype::fp8_e4m3;
  CHECK(contains(estimate_with(presets::llama_2_7b, r), "infer.kv_dtype"));
  r = gpt_fast_run(256, 16);
  r.weights = weight_format::bnb_int8;
  // The value is echoed by its name, as the run's JSON and the CLI spell it.
  CHECK(contains(estimate_with(presets::llama_2_7b, r), "must be native, gptfast-int8 or gptfast-int4"));
  CHECK(contains(estimate_with(presets::llama_2_7b, r), "(got bnb-int8)"));
  CHECK(contains(estimate_with(presets::gpt2, gpt_fast_run(256, 16)), "LLaMA-style decoder"));
  CHECK(contains(estimate_with(presets::gpt2, gpt_fast_run(256, 16)), "(got learned)"));
  // The allocator's stream walks gpt-fast's loop (inference_device_test checks it against the
  // H100 runs): its live tensors never exceed the estimate's peak.
  CHECK(allocator::replay_generate(presets::llama_2_7b, gpt_fast_run(64, 4)).requested_peak <=
        estimate_inference(presets::llama_2_7b, gpt_fast_run(64, 4)).peak.tensor);
  r = gpt_fast_run(64, 4);
  r.weights = weight_format::bnb_int8;
  CHECK(contains(error_message([&] { allocator::replay_generate(presets::llama_2_7b, r); }), "infer.weights"));
  // Training with gpt-fast stays refused, with the reason.
  training_spec run{};
  CHECK(contains(error_message([&] { json_io::read_framework_option("gpt-fast", run, "--framework"); }),
                 "training is not modelled"));
  for (json record : traced_records()) {
    if (!json_io::gpt_fast_record(record)) continue;
    record.erase("infer");
    record["train"] = {{"batch", 1}, {"seq", 64}};
    CHECK(contains(json_io::estimate_record(record).at("error").get<std::string>(), "training is not modelled"));
    break;
  }
}

}  // namespace gpt_fast_test

namespace gpt_fast_test {
namespace {

// Counts the prefill's allocations of one size.
struct prefill_size_count {
  std::uint64_t size = 0;
  std::uint64_t count = 0;
  bool prefill = false;
  constexpr void alloc(std::uint32_t, std::uint64_t bytes) { count += prefill && bytes == size ? 1 : 0; }
  constexpr void free(std::uint32_t) {}
  constexpr void enter(std::uint32_t, allocator::moment m) { prefill = m == allocator::moment::prefill; }
};

}  // namespace

TEST_CASE("gpt-fast: RMSNorm and RoPE make their fp32 tensors one by one in the allocator stream",
          "[inference][gpt_fast][allocator]") {
  // model.py@32971d31: each RMSNorm's x.float(), x * x and the product by rsqrt; apply_rotary_emb's
  // x.float() and torch.stack of q and of k (multi-head: k is q's size); the final norm's three.
  const model_spec m = presets::llama_2_7b;
  const inference_spec r = gpt_fast_run(256, 4);
  prefill_size_count c{.size = storage(dtype::fp32, r.batch * r.context * m.hidden).value};
  allocator::emit_generate<8192>(m, r, c);
  CHECK(c.count == m.layers * (2 * 3 + 2 * 2) + 3);
}

}  // namespace gpt_fast_test

namespace gpt_fast_test {

TEST_CASE("gpt-fast: a plan's longest prompt stops at block_size less the new tokens", "[inference][gpt_fast][plan]") {
  // model.py@32971d31 setup_caches: freqs_cis and the causal mask have block_size rows (the
  // model's positions); the search once probed past them and the plan failed.
  const gpu_spec gpu = *find_gpu("h100-80gb");
  const inference_spec r = gpt_fast_run(512, 64);
  const inference_plan p = plan_inference(presets::llama_2_7b, r, gpu);
  CHECK(p.max_context == sequence_limit_of(presets::llama_2_7b).tokens - r.new_tokens);
}

}  // namespace gpt_fast_test
