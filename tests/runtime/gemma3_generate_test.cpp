// generate() records of the H100 caches pass (docs/data/gpu_caches_h100.json, transformers 5.17):
// the record's GPU sets the cuBLAS workspace of the estimate, as it does for a training record.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <memory>

#include "memscale/allocator/replay_generate.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "test_inputs.hpp"

namespace gemma3_generate_test {
namespace {

using memscale::bytes;

constexpr const char* gemma3_record = "h100-infer-gemma3-1b-bf16-b4-c2048-n64-allocated";

// The same model without its sliding-window layers: what the reader gave before it read them.
memscale::model_spec without_sliding_layers(memscale::model_spec m) {
  m.sliding_window = 0;
  m.sliding_layers = 0;
  m.sliding_period = 0;
  m.rotary_per_layer_type = false;
  return m;
}

// Counts the decoding steps' allocations of one size (the generate() stream's sink).
struct size_counting_sink {
  std::uint64_t size = 0;
  std::uint64_t decoding_allocations = 0;
  bool decoding = false;
  void alloc(std::uint32_t, std::uint64_t bytes) { decoding_allocations += decoding && bytes == size ? 1 : 0; }
  void free(std::uint32_t) {}
  void enter(std::uint32_t, memscale::allocator::moment m) { decoding = m == memscale::allocator::moment::decode; }
};

TEST_CASE("An H100 generate() record holds the 32 MiB cuBLAS workspace of Hopper") {
  // Every infer-* allocator history of the pass allocates 33,554,432 bytes at the first matmul and
  // never frees them (docs/data/gpu_allocator_history/infer-gemma3-1b-bf16-b4-c2048-n64.json.gz).
  const auto record = memscale_test::data_record("gpu_caches_h100.json", "h100-infer-gemma3-1b-bf16-b4-c2048-n64-allocated");
  const memscale::inference_spec run = memscale::json_io::inference_from_record(record);
  CHECK(run.blas_workspace == memscale::pytorch_cublas_workspace_sm90_plus);
  CHECK(run.blas_workspace == bytes{32u << 20});
  const memscale::inference_result res =
      memscale::estimate_inference(memscale::json_io::inference_model_for_record(record), run);
  CHECK(res.prefill.breakdown.workspace == bytes{32u << 20});
  // A CPU record keeps no cuBLAS workspace.
  auto cpu = record;
  cpu["device"] = "cpu";
  CHECK(memscale::estimate_inference(memscale::json_io::inference_model_for_record(cpu),
                                     memscale::json_io::inference_from_record(cpu))
            .prefill.breakdown.workspace == bytes{});
}

TEST_CASE("The gpt-oss generate() record of transformers 5.17 is estimated, its peak in the prefill") {
  const auto record = memscale_test::data_record("gpu_caches_h100.json", "h100-infer-gpt_oss-l4-e8-bf16-b4-c1024-n64-allocated");
  const memscale::inference_spec run = memscale::json_io::inference_from_record(record);
  CHECK(run.transformers_version == 517);
  const memscale::inference_result res =
      memscale::estimate_inference(memscale::json_io::inference_model_for_record(record), run);
  CHECK(res.peak.at == memscale::inference_phase::prefill);
  // The decoding steps' batched_mm copies (batch 4 x top-4 rows of gate_up_proj and down_proj, bf16).
  CHECK(res.decode.breakdown.activations > bytes{16ull * (2880 * 5760 + 2880 * 2880) * 2});
}

TEST_CASE("The gemma3_text reader reads which layers slide, with Gemma3TextConfig's defaults") {
  using nlohmann::json;
  const memscale::model_spec defaults = memscale::json_io::model_from_hf_config(json{{"model_type", "gemma3_text"}});
  // sliding_window 4096, sliding_window_pattern 6: of 26 layers, 5, 11, 17 and 23 are full attention.
  CHECK(defaults.sliding_window == 4096);
  CHECK(defaults.sliding_layers == 22);
  CHECK(defaults.sliding_period == 6);
  CHECK(defaults.rotary_per_layer_type);
  const auto record = memscale_test::data_record("gpu_caches_h100.json", gemma3_record);
  const memscale::model_spec one_b = memscale::json_io::inference_model_for_record(record);
  CHECK(one_b.sliding_window == 512);
  CHECK(one_b.sliding_layers == 22);
  // The multimodal checkpoints' text_config is read the same way.
  const memscale::model_spec multimodal = memscale::json_io::model_from_hf_config(
      json{{"model_type", "gemma3"}, {"text_config", {{"sliding_window", 1024}, {"num_hidden_layers", 34}}}});
  CHECK(multimodal.sliding_window == 1024);
  CHECK(multimodal.sliding_layers == 34 - 5);
  // layer_types that do not follow the period are refused, not read as another pattern.
  json odd{{"model_type", "gemma3_text"}, {"num_hidden_layers", 2}};
  odd["layer_types"] = json::array({"full_attention", "sliding_attention"});
  CHECK_THROWS_WITH(memscale::json_io::model_from_hf_config(odd), Catch::Contains("layer_types"));
}

TEST_CASE("Gemma 3's generate() holds the sliding layers' bool mask and a second rotary pair") {
  const auto record = memscale_test::data_record("gpu_caches_h100.json", gemma3_record);
  const memscale::inference_spec run = memscale::json_io::inference_from_record(record);
  const memscale::model_spec model = memscale::json_io::inference_model_for_record(record);
  const memscale::inference_result res = memscale::estimate_inference(model, run);
  const memscale::inference_result plain = memscale::estimate_inference(without_sliding_layers(model), run);
  // The prefill's (4, 1, 2048, 2048) bool mask (keys 2048 >= window 512) and the local cos and sin,
  // 4 x 2048 x 256 bf16 each, bound through the blocks.
  CHECK(res.prefill.breakdown.activations - plain.prefill.breakdown.activations ==
        bytes{4ull * 2048 * 2048 + 2ull * 4 * 2048 * 256 * 2});
  CHECK(res.peak.at == memscale::inference_phase::prefill);
  // After the last forward (2111 positions) the 22 sliding layers keep 512 positions, the 4 full ones
  // all: 1 kv head x 256 x (k, v) x bf16 per position and sequence.
  CHECK(memscale::kv_cache_bytes(model, run, 2111) == bytes{4ull * (4 * 2111 + 22 * 512) * 1024});
  CHECK(res.decode.breakdown.kv_cache < plain.decode.breakdown.kv_cache);
}

TEST_CASE("Gemma 3's generate() stream caches a window for its sliding layers") {
  const auto record = memscale_test::data_record("gpu_caches_h100.json", gemma3_record);
  const memscale::inference_spec run = memscale::json_io::inference_from_record(record);
  const memscale::model_spec model = memscale::json_io::inference_model_for_record(record);
  // Each of the 63 decoding steps: 22 sliding layers' torch.cat of their 511 kept positions and the
  // new one, keys and values of 4 x 512 x 256 bf16 (1 MiB) each.
  size_counting_sink sink{.size = 4ull * 512 * 256 * 2};
  memscale::allocator::emit_generate<16384>(model, run, sink);
  CHECK(sink.decoding_allocations == 22u * 2u * 63u);
  // The replay holds the mask and the second rotary pair too.
  const auto replayed = std::make_unique<memscale::allocator::replay_result>(
      memscale::allocator::replay_generate<16384, 16384>(model, run));
  const auto plain = std::make_unique<memscale::allocator::replay_result>(
      memscale::allocator::replay_generate<16384, 16384>(without_sliding_layers(model), run));
  CHECK(replayed->requested_peak - plain->requested_peak == bytes{4ull * 2048 * 2048 + 2ull * 4 * 2048 * 256 * 2});
}

}  // namespace
}  // namespace gemma3_generate_test
