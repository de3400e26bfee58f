// generate() of DeepSeek-V2/V3 (inference/kv_cache.hpp, inference/generate_peak.hpp,
// allocator/generate_events.hpp): the cache holds every head's decompressed key and value, the
// prefill's value a view of kv_b_proj's output, the leading dense layers run before the sparse
// block, and the allocator's stream walks them.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <string>

#include "error_capture.hpp"
#include "memscale/allocator/replay_generate.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "test_inputs.hpp"

namespace deepseek_generate_test {
namespace {

using memscale_test::config_path;

using memscale::json_io::json;
using memscale_test::contains;
using memscale_test::error_message;

constexpr std::uint64_t hidden = 256, heads = 4, nope = 32, rope = 16, v_dim = 32, layers = 3;

memscale::model_spec small_v2(std::uint64_t dense_ffn) {
  return memscale::json_io::model_from_hf_config(json{
      {"model_type", "deepseek_v2"}, {"hidden_size", hidden}, {"num_hidden_layers", layers},
      {"num_attention_heads", heads}, {"num_key_value_heads", heads}, {"intermediate_size", dense_ffn},
      {"vocab_size", 1000}, {"q_lora_rank", nullptr}, {"kv_lora_rank", 64}, {"qk_nope_head_dim", nope},
      {"qk_rope_head_dim", rope}, {"v_head_dim", v_dim}, {"moe_intermediate_size", 128}, {"n_routed_experts", 8},
      {"num_experts_per_tok", 2}, {"n_shared_experts", 1}, {"first_k_dense_replace", 1}});
}

memscale::inference_spec cpu_run() {
  memscale::inference_spec r{};
  r.batch = 2;
  r.context = 64;
  r.new_tokens = 4;
  r.compute = memscale::dtype::fp32;
  r.kv = memscale::dtype::fp32;
  r.attention = memscale::attention_impl::eager;
  r.device = memscale::device_kind::cpu;
  return r;
}

}  // namespace

TEST_CASE("deepseek generate: the cache holds every head's decompressed key and value") {
  using memscale::json_io::load_hf_model;
  memscale::inference_spec r{};
  r.kv = memscale::dtype::bf16;
  // DeepSeek-V2-Lite: 27 layers x 16 heads x (192 key + 128 value) x 2 bytes.
  CHECK(memscale::estimate_inference(load_hf_model(config_path("deepseek-ai--DeepSeek-V2-Lite")), r).kv_bytes_per_token ==
        memscale::bytes{27 * 16 * (192 + 128) * 2});
  // DeepSeek-V3: 61 layers x 128 heads x 320 x 2 bytes, against 61 x (512 + 64) x 2 for the latent.
  CHECK(memscale::estimate_inference(load_hf_model(config_path("deepseek-ai--DeepSeek-V3")), r).kv_bytes_per_token ==
        memscale::bytes{61 * 128 * 320 * 2});
  const memscale::model_spec m = small_v2(512);
  const auto run = cpu_run();
  const memscale::inference_result e = memscale::estimate_inference(m, run);
  const std::uint64_t per_token = layers * heads * (nope + rope + v_dim) * 4;
  CHECK(e.kv_cache_bytes.value == per_token * run.batch * (run.context + run.new_tokens - 1));
  // After the prefill each layer's value is a view of kv_b_proj's output: its nope keys stay too.
  CHECK(e.prefill.breakdown.kv_cache.value ==
        per_token * run.batch * run.context + layers * run.batch * run.context * heads * nope * 4);
}

TEST_CASE("deepseek generate: the leading dense layers' moments count, before the sparse block") {
  const auto run = cpu_run();
  // A dense layer as wide as the sparse one's experts together stays below the sparse layer's
  // moment; a far wider one (its gate and up outputs, 2 x 64 tokens x 16,384 fp32) sets the prefill peak.
  const memscale::inference_result narrow = memscale::estimate_inference(small_v2(256), run);
  const memscale::inference_result wide = memscale::estimate_inference(small_v2(16'384), run);
  const std::uint64_t wider_weights = 3 * hidden * (16'384 - 256) * 4;
  CHECK(wide.weight_bytes.value - narrow.weight_bytes.value == wider_weights);
  CHECK(wide.prefill.breakdown.activations.value >
        narrow.prefill.breakdown.activations.value + 2 * run.batch * run.context * (16'384 - 256) * 4);
}

TEST_CASE("deepseek generate: the allocator stream walks the dense layers and the cache as the estimate does") {
  const memscale::model_spec m = small_v2(4096);
  auto run = cpu_run();
  run.device = memscale::device_kind::cuda;
  run.compute = memscale::dtype::bf16;
  run.kv = memscale::dtype::bf16;
  for (const auto attention : {memscale::attention_impl::eager, memscale::attention_impl::sdpa}) {
    run.attention = attention;
    const memscale::inference_result e = memscale::estimate_inference(m, run);
    const memscale::allocator::replay_result replay = memscale::allocator::replay_generate(m, run);
    // The allocator rounds each tensor to 512 bytes and the estimate does not: within 2 %.
    CHECK(replay.allocated_peak.value >= e.peak.tensor.value * 98 / 100);
    CHECK(replay.allocated_peak.value <= e.peak.tensor.value * 102 / 100);
  }
}

// Counts the prefill's allocations of one size.
struct prefill_size_sink {
  std::uint64_t size = 0;
  bool in_prefill = false;
  std::uint64_t count = 0;
  void alloc(std::uint32_t, std::uint64_t bytes) {
    if (in_prefill && bytes == size) ++count;
  }
  void free(std::uint32_t) {}
  void enter(std::uint32_t, memscale::allocator::moment m) { in_prefill = m == memscale::allocator::moment::prefill; }
};

TEST_CASE("deepseek generate: the experts interface weighs the rows in the fp32 router's dtype") {
  const memscale::model_spec m = small_v2(512);
  auto run = cpu_run();
  run.device = memscale::device_kind::cuda;
  run.compute = memscale::dtype::bf16;
  run.kv = memscale::dtype::bf16;
  run.attention = memscale::attention_impl::sdpa;
  run.transformers_version = 517;
  // The prefill's 2 x 64 tokens x top-2 rows of the hidden size, in fp32 after the routing
  // weights' product: the product and its reorder in each of the two sparse layers (the
  // DeepSeek-V2-Lite history of 5.17: two 192 MiB tensors after the 96 MiB bf16 ones).
  prefill_size_sink sink{.size = run.batch * run.context * 2 * hidden * 4};
  memscale::allocator::emit_generate<8192>(m, run, sink);
  CHECK(sink.count == 2u * (layers - 1));
}

TEST_CASE("deepseek generate: a latent cache stays a serving engine's") {
  CHECK(contains(error_message([] {
                   memscale::inference_spec r{};
                   r.kv_lora_rank = 64;
                   r.qk_rope_head_dim = rope;
                   (void)memscale::estimate_inference(small_v2(512), r);
                 }),
                 "infer.kv_lora_rank"));
}

}  // namespace deepseek_generate_test
