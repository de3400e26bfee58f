// The allocator's generate() stream of gpt-oss (allocator/generate_events.hpp): the sink attention, the
// experts (every-expert bmm before 5.0, grouped_mm and batched_mm from 5.0, MXFP4's matmul_ogs) and the
// alternating sliding and full cache layers walked tensor by tensor, against estimate_inference and the
// CPU traces of tools/trace/gpt_oss_generate.py.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <algorithm>
#include <cstdint>
#include <vector>

#include "error_capture.hpp"
#include "memscale/allocator/replay_generate.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "test_inputs.hpp"

namespace gpt_oss_generate_stream_test {
namespace {

using memscale::inference_spec;
using memscale::model_spec;
using memscale::weight_format;
using memscale::json_io::json;
using memscale_test::contains;
using memscale_test::error_message;

constexpr const char* h100_record = "h100-infer-gpt_oss-l4-e8-bf16-b4-c1024-n64-allocated";

// The live bytes of the stream, their largest per phase (setup, the prefill, the decoding steps).
struct phase_peaks {
  std::vector<std::uint64_t> sizes = std::vector<std::uint64_t>(16384, 0);
  std::uint64_t live = 0;
  std::uint64_t prefill = 0;
  std::uint64_t decode = 0;
  memscale::allocator::moment at = memscale::allocator::moment::setup;
  void alloc(std::uint32_t id, std::uint64_t size) {
    sizes.at(id) = size;
    live += size;
    if (at == memscale::allocator::moment::prefill && live > prefill) prefill = live;
    if (at == memscale::allocator::moment::decode && live > decode) decode = live;
  }
  void free(std::uint32_t id) { live -= sizes.at(id); }
  void enter(std::uint32_t, memscale::allocator::moment m) { at = m; }
};

// Counts the allocations of one size in one moment (setup, the prefill, the decoding steps).
struct size_count {
  std::uint64_t size = 0;
  memscale::allocator::moment counted = memscale::allocator::moment::setup;
  std::uint64_t count = 0;
  memscale::allocator::moment at = memscale::allocator::moment::setup;
  void alloc(std::uint32_t, std::uint64_t b) { count += at == counted && b == size ? 1 : 0; }
  void free(std::uint32_t) {}
  void enter(std::uint32_t, memscale::allocator::moment m) { at = m; }
};

phase_peaks walk(const model_spec& m, const inference_spec& r) {
  phase_peaks p;
  memscale::allocator::emit_generate<16384>(m, r, p);
  return p;
}

TEST_CASE("The gpt-oss reader states the alternation of sliding and full layers as a period of 2") {
  const auto record = memscale_test::data_record("gpu_caches_h100.json", h100_record);
  const model_spec m = memscale::json_io::inference_model_for_record(record);
  CHECK(m.sliding_period == 2);
  CHECK(memscale::is_sliding_layer(m, 0));
  CHECK(!memscale::is_sliding_layer(m, 3));
  // layer_types without it name no period: the estimate models them, the walk refuses them by name.
  json config = record.at("model").at("hf_config");
  config["layer_types"] = {"sliding_attention", "sliding_attention", "full_attention", "full_attention"};
  const model_spec unordered = memscale::json_io::model_from_hf_config(config);
  CHECK(unordered.sliding_layers == 2);
  CHECK(unordered.sliding_period == 0);
  const inference_spec run = memscale::json_io::inference_from_record(record);
  CHECK(error_message([&] { static_cast<void>(memscale::estimate_inference(unordered, run)); }) == "<no error>");
  CHECK(contains(error_message([&] { static_cast<void>(walk(unordered, run)); }), "model.sliding_period"));
  CHECK(!memscale::estimate_inference_on_device(unordered, run).replayed());
}

TEST_CASE("gpt-oss generate()'s stream peaks at the estimate's tensor peak") {
  const auto record = memscale_test::data_record("gpu_caches_h100.json", h100_record);
  const model_spec m = memscale::json_io::inference_model_for_record(record);
  // The record's call (5.17: grouped_mm, batched_mm), the 4.55-4.57 every-expert bmm, MXFP4's matmul_ogs;
  // a prompt within the window and one eight windows long.
  for (const weight_format weights : {weight_format::native, weight_format::mxfp4})
    for (const std::uint32_t release : {457u, 517u})
      for (const std::uint64_t context : {16u, 1024u}) {
        inference_spec r = memscale::json_io::inference_from_record(record);
        r.weights = weights;
        r.transformers_version = release;
        r.context = context;
        CAPTURE(static_cast<int>(weights), release, context);
        const memscale::inference_result e = memscale::estimate_inference(m, r);
        const phase_peaks p = walk(m, r);
        CHECK(p.prefill == e.prefill.tensor.value);
        // The estimate adds the last layer's old cache tensor to the layer's largest moment, and at the
        // first decoding step a full layer's new key beside every prefill storage: the upper side of
        // moments the walk takes one at a time.
        CHECK(p.decode <= e.decode.tensor.value);
        CHECK(p.decode >= e.decode.tensor.value * 99 / 100);
        if (e.peak.at == memscale::inference_phase::prefill) CHECK(std::max(p.prefill, p.decode) == e.peak.tensor.value);
      }
}

TEST_CASE("gpt-oss's attention weights stay one tensor until the MLP returns") {
  const auto record = memscale_test::data_record("gpu_caches_h100.json", h100_record);
  const model_spec m = memscale::json_io::inference_model_for_record(record);
  const inference_spec r = memscale::json_io::inference_from_record(record);
  // (4, 64, 1024, 1025) bf16: the scores with the sink column, less their row max, and the softmax,
  // per layer; the softmax's tensor is what the layer binds (the H100 history: three 512.5 MiB
  // allocations per layer of the prefill).
  size_count widened{.size = 4ull * 64 * 1024 * 1025 * 2, .counted = memscale::allocator::moment::prefill};
  memscale::allocator::emit_generate<16384>(m, r, widened);
  CHECK(widened.count == 3u * 4u);
}

TEST_CASE("gpt-oss generate()'s stream holds the CPU traces' decoding peaks") {
  // tools/trace/gpt_oss_generate.py's records: the prompts of 256 and 200 tokens are longer than the
  // window of 128, the 96-token one crosses it while decoding. The prefill is the estimate's; the
  // decoding steps' peak the trace's within 0.01% (the walk rounds nothing).
  for (const char* id : {"cpu-infer-gpt_oss-small-b1-c256-n8-fp32", "cpu-infer-gpt_oss-small-b2-c96-n48-fp32",
                         "cpu-infer-gpt_oss-small-b4-c200-n4-fp32"}) {
    const auto record = memscale_test::data_record("cpu_traced_inference.json", id);
    const model_spec m = memscale::json_io::inference_model_for_record(record);
    const inference_spec r = memscale::json_io::inference_from_record(record);
    CAPTURE(id);
    const phase_peaks p = walk(m, r);
    CHECK(p.prefill == memscale::estimate_inference(m, r).prefill.tensor.value);
    const double traced = record.at("detail").at("decode_peak").get<double>();
    const double walked = static_cast<double>(p.decode);
    CHECK(walked >= traced * 0.9999);
    CHECK(walked <= traced * 1.0001);
  }
}

TEST_CASE("The H100 gpt-oss generate() record is replayed, in the band of replayed generate() under 5.x") {
  const auto record = memscale_test::data_record("gpu_caches_h100.json", h100_record);
  const model_spec m = memscale::json_io::inference_model_for_record(record);
  const inference_spec r = memscale::json_io::inference_from_record(record);
  const memscale::inference_device_estimate d = memscale::estimate_inference_on_device(m, r);
  REQUIRE(d.replayed());
  // max_memory_reserved 6,593,445,888 measured (the rounding rule gave 6,085,935,104, -7.70%).
  const double measured = record.at("detail").at("allocator_stats").at("reserved_bytes.all.peak").get<double>();
  CHECK(static_cast<double>(d.reserved.value) >= measured * 0.98);
  CHECK(static_cast<double>(d.reserved.value) <= measured * 1.02);
  CHECK(&memscale::inference_band_of(m, r, d) == &memscale::replayed_generate_band);
  // Before 5.0 (no gpt-oss run measured) and under MXFP4 (matmul_ogs, not measured): the policy band.
  inference_spec older = r;
  older.transformers_version = 457;
  const memscale::inference_device_estimate o = memscale::estimate_inference_on_device(m, older);
  CHECK(o.replayed());
  CHECK(&memscale::inference_band_of(m, older, o) == &memscale::band_of(memscale::run_class::unmeasured, memscale::band_quantity::device));
  inference_spec mx = r;
  mx.weights = weight_format::mxfp4;
  const memscale::inference_device_estimate x = memscale::estimate_inference_on_device(m, mx);
  CHECK(x.replayed());
  CHECK(&memscale::inference_band_of(m, mx, x) == &memscale::band_of(memscale::run_class::unmeasured, memscale::band_quantity::device));
}

TEST_CASE("MXFP4's stream stores each expert projection as uint8 blocks and scales") {
  const auto record = memscale_test::data_record("gpu_caches_h100.json", h100_record);
  const model_spec m = memscale::json_io::inference_model_for_record(record);
  inference_spec r = memscale::json_io::inference_from_record(record);
  r.weights = weight_format::mxfp4;
  // down_proj's scales: 8 experts x 2880 rows x 2880 / 32 bytes, one per layer (4 layers).
  size_count scales{.size = 8ull * 2880 * 90, .counted = memscale::allocator::moment::setup};
  memscale::allocator::emit_generate<16384>(m, r, scales);
  CHECK(scales.count == 4);
  // gate_up_proj's blocks: 8 experts x 5760 rows x 2880 / 32 x 16 bytes.
  size_count blocks{.size = 8ull * 5760 * 90 * 16, .counted = memscale::allocator::moment::setup};
  memscale::allocator::emit_generate<16384>(m, r, blocks);
  CHECK(blocks.count == 4);
}

TEST_CASE("An H100 plan of gpt-oss-20b's generate() searches its batch and prompt") {
  // The searches probe batches and prompts whose attention weights exceed 2 TiB, the frame locals an
  // op places as one block (graph.hpp op::frame_locals_blocks): the rest are its temporaries.
  const model_spec m = memscale::json_io::load_hf_model(memscale_test::config_path("openai--gpt-oss-20b"));
  const memscale::gpu_spec gpu = *memscale::find_gpu("h100-80gb");
  for (const weight_format weights : {weight_format::native, weight_format::mxfp4}) {
    inference_spec r{};
    r.batch = 4;
    r.compute = memscale::dtype::bf16;
    r.kv = memscale::dtype::bf16;
    r.attention = memscale::attention_impl::eager;
    r.transformers_version = 456;
    r.weights = weights;
    CAPTURE(static_cast<int>(weights));
    const memscale::inference_plan p = memscale::plan_inference(m, r, gpu);
    CHECK(p.device.replayed());
    CHECK(p.max_batch > 0);
    CHECK(p.max_context > 0);
  }
}

}  // namespace
}  // namespace gpt_oss_generate_stream_test
