// Run-time checks of Hugging Face's QuantizedCache in generate(): its packed storage, the
// residual window's schedule, the dequantised copy at the decode peak, the CPU trace of
// docs/data/cpu_traced_transformers_versions.json, the allocator stream and the errors.
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

namespace quantized_kv_cache_test {
namespace {

using memscale_test::opaque;

using memscale_test::contains;
using memscale_test::error_message;
using namespace memscale;
using nlohmann::json;

json traced(const std::string& id) { return memscale_test::data_record("cpu_traced_transformers_versions.json", id); }

inference_spec quantized_run(std::uint64_t context, std::uint64_t new_tokens, std::uint64_t residual) {
  inference_spec r{.batch = opaque(2), .context = opaque(context), .new_tokens = opaque(new_tokens),
                   .cache = kv_cache_kind::quantized};
  r.kv_residual = residual;
  return r;
}

constexpr const char* quantized_id = "cpu-infer-tf4442-llama-v4k-quantized-b8-c64-n48-fp32";

}  // namespace

TEST_CASE("quantized cache: packed codes and a scale and zero point per group", "[inference][quantized]") {
  inference_spec r{.compute = dtype::fp16, .kv = dtype::fp16, .cache = kv_cache_kind::quantized};
  // 1024 values at 4 bits: 512 bytes of codes, 16 groups of 64 with two fp16 numbers each.
  CHECK(quantized_kv_bytes(r, opaque(1024)) == bytes{512 + 16 * 2 * 2});
  r.kv_bits = 2;
  r.kv_group = 32;
  CHECK(quantized_kv_bytes(r, opaque(1024)) == bytes{256 + 32 * 2 * 2});
  // Llama-2-7B: 2 x 32 layers x 4096 values a token; 4-bit in groups of 64 is 9/32 of fp16.
  const inference_spec q = quantized_run(512, 128, 128);
  CHECK(kv_bytes_per_token(presets::llama_2_7b, q).value * 32 == 524'288ULL * 9);
}

TEST_CASE("quantized cache: the residual window fills and is re-quantised every residual_length steps",
          "[inference][quantized]") {
  const inference_spec r = quantized_run(64, 100, 32);
  CHECK(split_quantized(r, 64).packed == 64);
  CHECK(split_quantized(r, 64).residual == 0);
  CHECK(split_quantized(r, 64 + 31).residual == 31);
  CHECK(split_quantized(r, 64 + 32).residual == 0);
  CHECK(split_quantized(r, 64 + 32).packed == 96);
  CHECK(split_quantized(r, 64 + 33).residual == 1);
  CHECK_FALSE(requantizes(r, 64 + 30));
  CHECK(requantizes(r, 64 + 31));
  // residual_length 1: the step after a re-quantisation finds a 0-element window (not 4-D) and appends.
  const inference_spec one = quantized_run(64, 100, 1);
  CHECK(split_quantized(one, 65).residual == 1);
  CHECK(split_quantized(one, 66).residual == 0);
  // The stored cache is the packed part and the window in the compute dtype.
  const model_spec& m = presets::llama_2_7b;
  CHECK(kv_cache_bytes(m, r, 64 + 40) ==
        (quantized_kv_bytes(r, kv_layer_half_elements(m, r, 96)) + kv_layer_half_bytes(m, r, 8)) * 2u * m.layers);
}

TEST_CASE("quantized cache: the decode peak holds one layer's dequantised keys and values and their concatenation",
          "[inference][quantized]") {
  const model_spec& m = presets::llama_2_7b;
  const inference_spec q = quantized_run(4000, 64, 128);
  const inference_result e = estimate_inference(m, q);
  // 4-bit storage is far below the fp16 cache...
  inference_spec dynamic = q;
  dynamic.cache = kv_cache_kind::dynamic;
  const inference_result d = estimate_inference(m, dynamic);
  CHECK(e.kv_cache_bytes.value * 3 < d.kv_cache_bytes.value);
  // ...but every decoding step dequantises the layer: two packed-length and two full-length
  // tensors in fp16 beside the stored cache.
  const std::uint64_t total = 4000 + 63;
  const bytes copies = (kv_layer_half_bytes(m, q, 4000) + kv_layer_half_bytes(m, q, total)) * 2u;
  CHECK(e.decode.breakdown.kv_cache >= e.kv_cache_bytes + copies);
  CHECK(e.decode.breakdown.kv_cache - e.kv_cache_bytes < copies + kv_layer_half_bytes(m, q, total) * 4u);
}

TEST_CASE("quantized cache: the CPU trace of QuantizedCache within 1%", "[inference][quantized]") {
  const json record = traced(quantized_id);
  const inference_spec run = json_io::inference_from_record(record);
  CHECK(run.cache == kv_cache_kind::quantized);
  CHECK(run.kv_bits == 4);
  CHECK(run.kv_residual == 32);
  CHECK(run.kv == dtype::fp32);
  const inference_result e = estimate_inference(json_io::model_for_record(record), run);
  const auto err = [](bytes est, const json& measured) {
    const double m = measured.get<double>();
    return (static_cast<double>(est.value) - m) / m * 100.0;
  };
  INFO("peak " << err(e.peak.tensor, record.at("measured_bytes")) << "%, decode "
               << err(e.decode.tensor, record.at("detail").at("decode_peak")) << "%");
  CHECK(std::fabs(err(e.peak.tensor, record.at("measured_bytes"))) < 1.0);
  CHECK(std::fabs(err(e.decode.tensor, record.at("detail").at("decode_peak"))) < 1.0);
  // --cases answers it.
  const json answer = json_io::estimate_record(record);
  REQUIRE(answer.contains("estimated_bytes"));
  CHECK(answer.at("estimated_bytes").get<std::uint64_t>() == e.peak.tensor.value);
}

TEST_CASE("quantized cache: the allocator stream's live bytes follow the estimate", "[inference][quantized][allocator]") {
  const json record = traced(quantized_id);
  inference_spec run = json_io::inference_from_record(record);
  run.device = device_kind::cuda;
  const model_spec m = json_io::model_for_record(record);
  const inference_result e = estimate_inference(m, run);
  const allocator::replay_result r = allocator::replay_generate(m, run);
  const double ratio = static_cast<double>(r.allocated_peak.value) / static_cast<double>(e.peak.tensor.value);
  INFO("replayed " << r.allocated_peak.value << " estimated " << e.peak.tensor.value);
  CHECK(ratio > 0.97);
  CHECK(ratio < 1.03);
  // A longer run re-quantises within it: the stream walks every step.
  run.new_tokens = 100;
  CHECK(allocator::replay_generate(m, run).allocated_peak >= r.allocated_peak);
}

TEST_CASE("quantized cache: invalid and unmodelled settings name the field", "[inference][quantized]") {
  const auto estimate_with = [](inference_spec r) {
    return error_message([&] { estimate_inference(presets::llama_2_7b, r); });
  };
  inference_spec r = quantized_run(64, 8, 128);
  r.kv_bits = static_cast<std::uint32_t>(opaque(3));
  CHECK(contains(estimate_with(r), "infer.kv_bits must be 2 or 4"));
  r = quantized_run(64, 8, 128);
  r.kv_backend = kv_quant_backend::hqq;
  CHECK(contains(estimate_with(r), "infer.kv_quant_backend"));
  CHECK(contains(estimate_with(r), "optimize_weights_proximal"));
  r = quantized_run(64, 8, 128);
  r.kv = dtype::int8;
  CHECK(contains(estimate_with(r), "infer.kv_dtype"));
  r = quantized_run(64, 8, 128);
  r.transformers_version = 441;
  CHECK(contains(estimate_with(r), "4.42"));
  // Records: the packed width is kv_dtype; the quantized settings apply to that cache only.
  json record = traced(quantized_id);
  record["infer"]["kv_dtype"] = "int3";
  CHECK(contains(json_io::estimate_record(record).at("error").get<std::string>(), "infer.kv_dtype"));
  record = traced(quantized_id);
  record["infer"]["kv_cache"] = "dynamic";
  record["infer"]["kv_dtype"] = "fp32";
  CHECK(contains(json_io::estimate_record(record).at("error").get<std::string>(),
                 "infer.kv_group_size applies to kv_cache quantized only"));
}

}  // namespace quantized_kv_cache_test
