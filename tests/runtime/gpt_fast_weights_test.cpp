// Run-time checks of gpt-fast's weight-only int8 and int4 layers (inference/gpt_fast_weights.hpp,
// quantize.py@32971d31): the stored bytes from the layers' buffer shapes, each call's copies in
// the estimate and in the allocator's stream, the CPU traces of int8
// (docs/data/cpu_traced_gptfast_weights.json) and the refusals.
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

namespace gpt_fast_weights_test {
namespace {

using memscale_test::contains;
using memscale_test::error_message;
using namespace memscale;
using nlohmann::json;

json traced_records() {
  std::ifstream in(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_gptfast_weights.json");
  REQUIRE(in.good());
  return json::parse(in);
}

model_spec model_of(const json& record) {
  json as_model = record.at("model");
  as_model["impl"] = "hf-transformers";
  return json_io::model_from_record(as_model);
}

// The traced model: hidden 512, 8 heads, ffn 1376, vocab 32000, 4 layers, untied head.
model_spec small_llama() {
  for (const json& record : traced_records())
    if (record.at("id").get<std::string>().find("-mha-") != std::string::npos) return model_of(record);
  FAIL("no multi-head record");
  return {};
}

inference_spec gpt_fast_run(weight_format w) {
  inference_spec r{.batch = 4, .context = 256, .new_tokens = 16, .compute = dtype::bf16, .weights = w,
                   .kv = dtype::bf16, .cache = kv_cache_kind::static_preallocated,
                   .attention = attention_impl::sdpa_math};
  r.loop = generate_loop::gpt_fast;
  return r;
}

// Counts the forwards' allocations of one size (setup's weights apart), and the prefill's.
struct size_count {
  std::uint64_t size = 0;
  std::uint64_t count = 0;
  std::uint64_t prefill_count = 0;
  allocator::moment at = allocator::moment::setup;
  constexpr void alloc(std::uint32_t, std::uint64_t bytes) {
    count += at != allocator::moment::setup && bytes == size ? 1 : 0;
    prefill_count += at == allocator::moment::prefill && bytes == size ? 1 : 0;
  }
  constexpr void free(std::uint32_t) {}
  constexpr void enter(std::uint32_t, allocator::moment m) { at = m; }
};

}  // namespace

TEST_CASE("gpt-fast int8: int8 weights and per-channel scales for every Linear, the head included",
          "[inference][gpt_fast][quantized]") {
  const model_spec m = small_llama();
  const inference_spec r = gpt_fast_run(weight_format::gptfast_int8);
  // WeightOnlyInt8Linear: int8 (out, in) + scales (out,) in the model dtype (bf16: 2 bytes).
  const auto linear = [](std::uint64_t out, std::uint64_t in) { return out * in + out * 2; };
  const std::uint64_t per_layer = linear(1536, 512) + linear(512, 512) + 2 * linear(1376, 512) + linear(512, 1376) +
                                  2 * 512 * 2;  // wqkv, wo, w1, w3, w2; two RMSNorm weights
  const std::uint64_t expected = 32000ULL * 512 * 2 + 4 * per_layer + 512 * 2 + linear(32000, 512);
  CHECK(estimate_inference(m, r).weight_bytes == bytes{expected});
  // The traced model's bytes once built (quantize.py's layers, torch 1.13).
  for (const json& record : traced_records())
    if (record.at("infer").at("dtype") == "bf16")
      CHECK(expected == record.at("detail").at("built").get<std::uint64_t>());
}

TEST_CASE("gpt-fast int4: packed int32 tiles and bf16 scales_and_zeros, in_features padded to 1024",
          "[inference][gpt_fast][quantized]") {
  const model_spec m = small_llama();
  for (const std::uint64_t group : {32ULL, 128ULL, 256ULL}) {
    inference_spec r = gpt_fast_run(weight_format::gptfast_int4);
    r.group_size = group;
    // WeightOnlyInt4Linear, inner_k_tiles 8: int32 (out / 8, k / (8 * 16), 32, 8 / 2) and bf16
    // (k / group, out, 2); k = in, or find_multiple(in, 1024) when group or 128 does not divide it.
    const auto linear = [group](std::uint64_t out, std::uint64_t in) {
      const std::uint64_t k = in % group == 0 && in % 128 == 0 ? in : (in + 1023) / 1024 * 1024;
      return out / 8 * (k / 128) * 32 * 4 * 4 + k / group * out * 2 * 2;
    };
    // w2's in_features 1376 is padded to 2048 whatever the group.
    CHECK(linear(512, 1376) == 512ULL * 2048 / 2 + 2048 / group * 512 * 4);
    const std::uint64_t per_layer =
        linear(1536, 512) + linear(512, 512) + 2 * linear(1376, 512) + linear(512, 1376) + 2 * 512 * 2;
    const std::uint64_t expected = 32000ULL * 512 * 2 + 4 * per_layer + 512 * 2 + linear(32000, 512);
    INFO("group " << group);
    CHECK(estimate_inference(m, r).weight_bytes == bytes{expected});
  }
}

TEST_CASE("gpt-fast int8 and int4: each call's copies in the allocator's stream and the estimate",
          "[inference][gpt_fast][quantized][allocator]") {
  const model_spec m = small_llama();
  // int8: every forward dequantizes the head's whole weight (self.weight.to(dtype=input.dtype)).
  const inference_spec int8 = gpt_fast_run(weight_format::gptfast_int8);
  size_count head{.size = storage(dtype::bf16, 32000ULL * 512).value};
  allocator::emit_generate<8192>(m, int8, head);
  CHECK(head.count == int8.new_tokens);
  // int4: w2's input padded from 1376 to 2048 columns in every layer's call (F.pad).
  const inference_spec int4 = gpt_fast_run(weight_format::gptfast_int4);
  size_count padded{.size = storage(dtype::bf16, 4ULL * 256 * 2048).value};
  allocator::emit_generate<8192>(m, int4, padded);
  CHECK(padded.prefill_count == m.layers);
  // The stream's live tensors never exceed the estimate; the replay reserves at least them.
  for (const inference_spec& r : {int8, int4}) {
    const inference_result e = estimate_inference(m, r);
    const allocator::replay_result walk = allocator::replay_generate(m, r);
    INFO(to_string(r.weights));
    CHECK(walk.requested_peak <= e.peak.tensor);
    CHECK(walk.requested_peak.value * 100 >= e.peak.tensor.value * 99);
    CHECK(walk.reserved_peak >= walk.requested_peak);
  }
  // The estimate's prefill holds the int8 head's dequantized copy beside its logits.
  inference_spec native = int8;
  native.weights = weight_format::native;
  const inference_result q = estimate_inference(m, int8);
  const inference_result n = estimate_inference(m, native);
  CHECK(q.prefill.tensor - q.weight_bytes >= n.prefill.tensor - n.weight_bytes + storage(dtype::bf16, 32000ULL * 512));
}

TEST_CASE("gpt-fast int8: the CPU traces within 2%, prefill and decode", "[inference][gpt_fast][quantized]") {
  int seen = 0;
  for (const json& record : traced_records()) {
    ++seen;
    const inference_spec run = json_io::inference_from_record(record);
    CHECK(run.weights == weight_format::gptfast_int8);
    const inference_result e = estimate_inference(model_of(record), run);
    const auto err = [](bytes est, const json& measured) {
      const double mb = measured.get<double>();
      return (static_cast<double>(est.value) - mb) / mb * 100.0;
    };
    const json& d = record.at("detail");
    INFO(record.at("id").get<std::string>() << ": prefill " << err(e.prefill.tensor, d.at("prefill_peak"))
                                            << "%, decode " << err(e.decode.tensor, d.at("decode_peak")) << "%");
    CHECK(std::fabs(err(e.prefill.tensor, d.at("prefill_peak"))) < 2.0);
    CHECK(std::fabs(err(e.decode.tensor, d.at("decode_peak"))) < 2.0);
    CHECK(e.weight_bytes.value == d.at("built").get<std::uint64_t>());
  }
  CHECK(seen == 2);
}

TEST_CASE("gpt-fast int8 and int4: what quantize.py refuses, or gpt-fast does not run, is refused by name",
          "[inference][gpt_fast][quantized]") {
  const model_spec m = small_llama();
  const auto estimate_with = [](const model_spec& model, const inference_spec& r) {
    return error_message([&] { estimate_inference(model, r); });
  };
  inference_spec r = gpt_fast_run(weight_format::gptfast_int4);
  r.group_size = 16;  // WeightOnlyInt4QuantHandler: groupsize in [32, 64, 128, 256]
  CHECK(contains(estimate_with(m, r), "infer.group_size"));
  r = gpt_fast_run(weight_format::gptfast_int4);
  r.compute = dtype::fp16;  // _weight_int4pack_mm: bf16 only
  r.kv = dtype::fp16;
  CHECK(contains(estimate_with(m, r), "infer.dtype"));
  model_spec odd = m;
  odd.vocab = 32001;  // WeightOnlyInt4Linear: out_features % 8 == 0
  CHECK(contains(estimate_with(odd, gpt_fast_run(weight_format::gptfast_int4)), "model.vocab"));
  CHECK(contains(estimate_with(odd, gpt_fast_run(weight_format::gptfast_int8)), "<no error>"));
  r = gpt_fast_run(weight_format::gptfast_int8);
  r.loop = generate_loop::transformers;
  CHECK(contains(estimate_with(m, r), "need the gpt-fast loop"));
  CHECK(contains(error_message([&] { allocator::replay_generate(m, r); }), "need the gpt-fast loop"));
  r = gpt_fast_run(weight_format::bnb_nf4);
  CHECK(contains(estimate_with(m, r), "must be native, gptfast-int8 or gptfast-int4 with gpt-fast"));
  // The names the JSON and the CLI take; gpt-fast's model dtype is bf16 (generate.py precision).
  dtype native = dtype::fp32;
  CHECK(json_io::parse_weight_format("gptfast-int4", "infer.weights", native) == weight_format::gptfast_int4);
  CHECK(native == dtype::bf16);
  CHECK(to_string(weight_format::gptfast_int8) == "gptfast-int8");
}

}  // namespace gpt_fast_weights_test
