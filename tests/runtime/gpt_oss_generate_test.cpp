// generate() of gpt-oss (inference/kv_cache.hpp, inference/generate_peak.hpp, inference/weights.hpp):
// the sliding-window layers' bounded cache, MXFP4 expert weights, the every-expert bmm and sink
// attention of the forward graph, and the refusals that remain.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <string>

#include "error_capture.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "test_inputs.hpp"

namespace gpt_oss_generate_test {
namespace {

using memscale::bytes;
using memscale::dtype;
using memscale::inference_spec;
using memscale::model_spec;
using memscale::weight_format;
using memscale::json_io::json;
using memscale_test::contains;
using memscale_test::error_message;

constexpr std::uint64_t hidden = 256, ffn = 256, heads = 8, kv_heads = 2, head_dim = 32, layers = 4, experts = 8,
                        window = 128;

json small_config() {
  return json{{"model_type", "gpt_oss"},
              {"hidden_size", hidden},
              {"num_hidden_layers", layers},
              {"num_attention_heads", heads},
              {"num_key_value_heads", kv_heads},
              {"head_dim", head_dim},
              {"intermediate_size", ffn},
              {"vocab_size", 4096},
              {"num_local_experts", experts},
              {"num_experts_per_tok", 2},
              {"sliding_window", window},
              {"layer_types", {"sliding_attention", "full_attention", "sliding_attention", "full_attention"}}};
}

model_spec small_model() { return memscale::json_io::model_from_hf_config(small_config()); }

inference_spec cpu_run(std::uint64_t context, std::uint64_t new_tokens) {
  inference_spec r{};
  r.batch = 2;
  r.context = context;
  r.new_tokens = new_tokens;
  r.compute = dtype::fp32;
  r.kv = dtype::fp32;
  r.attention = memscale::attention_impl::eager;
  r.device = memscale::device_kind::cpu;
  r.transformers_version = 456;
  return r;
}

// One layer's keys and values per position, both halves, the batch of 2, fp32.
constexpr std::uint64_t per_position = 2 * 2 * kv_heads * head_dim * 4;

TEST_CASE("gpt-oss reads its sliding layers and window from layer_types") {
  const model_spec m = small_model();
  CHECK(m.sliding_window == window);
  CHECK(m.sliding_layers == 2);
  json alternating = small_config();
  alternating.erase("layer_types");  // None: even layers sliding (configuration_gpt_oss.py)
  CHECK(memscale::json_io::model_from_hf_config(alternating).sliding_layers == 2);
  json ends_sliding = small_config();
  ends_sliding["layer_types"] = {"full_attention", "sliding_attention", "full_attention", "sliding_attention"};
  CHECK(contains(error_message([&] { static_cast<void>(memscale::json_io::model_from_hf_config(ends_sliding)); }),
                 "must end with full_attention"));
}

TEST_CASE("The sliding layers' cache holds the prompt after the prefill and the window once decoding") {
  const model_spec m = small_model();
  const inference_spec r = cpu_run(300, 16);
  // After the prefill every layer holds the prompt's torch.cat (the sliding keys are a view of it).
  CHECK(memscale::kv_cache_bytes(m, r, 300) == bytes{300 * per_position * layers});
  // After a decoding step the sliding layers hold the cat of window - 1 positions and the new one.
  CHECK(memscale::kv_cache_bytes(m, r, 301) == bytes{(301 * 2 + window * 2) * per_position});
  CHECK(memscale::kv_cache_bytes(m, r, 315) == bytes{(315 * 2 + window * 2) * per_position});
  // A short prompt: the sliding layers grow with the full ones up to the window.
  const inference_spec shorter = cpu_run(40, 200);
  CHECK(memscale::kv_cache_bytes(m, shorter, 100) == bytes{100 * per_position * layers});
  CHECK(memscale::kv_cache_bytes(m, shorter, 239) == bytes{(239 * 2 + window * 2) * per_position});
  const memscale::inference_result res = memscale::estimate_inference(m, r);
  CHECK(res.kv_cache_bytes == memscale::kv_cache_bytes(m, r, 315));
}

TEST_CASE("MXFP4 stores gpt-oss's experts at 17 bytes per 32 weights and nothing else") {
  const model_spec m = small_model();
  const memscale::model_graph built = memscale::detail::weights_graph(m);
  const memscale::graph& g = built.stack();
  inference_spec native{};
  native.compute = dtype::bf16;
  inference_spec mx = native;
  mx.weights = weight_format::mxfp4;
  // blocks uint8 (out, in / 32, 16) and scales uint8 (out, in / 32) (integrations/mxfp4.py).
  CHECK(memscale::quantized_linear_bytes({.method = memscale::quant_method::mxfp4}, 2 * ffn, hidden) ==
        bytes{2 * ffn * hidden * 17 / 32});
  const std::uint64_t expert_weights = layers * experts * (hidden * 2 * ffn + ffn * hidden);
  const bytes saved = memscale::inference_weight_bytes(g, native) - memscale::inference_weight_bytes(g, mx);
  CHECK(saved == bytes{expert_weights * 2 - expert_weights * 17 / 32});
}

TEST_CASE("The mxfp4 quantization_config reads as MXFP4 experts or, dequantized, as bf16") {
  inference_spec r{};
  memscale::json_io::hf::apply_quantization(
      *memscale::json_io::hf::quantization_of(json{{"quantization_config", {{"quant_method", "mxfp4"}}}}), r);
  CHECK(r.weights == weight_format::mxfp4);
  CHECK(r.compute == dtype::bf16);
  inference_spec d{};
  memscale::json_io::hf::apply_quantization(
      *memscale::json_io::hf::quantization_of(
          json{{"quantization_config", {{"quant_method", "mxfp4"}, {"dequantize", true}}}}),
      d);
  CHECK(d.weights == weight_format::native);
  CHECK(d.compute == dtype::bf16);
}

TEST_CASE("The prefill holds every expert's rows: experts x tokens x (hidden + 7 ffn) at (up + 1) * glu") {
  const model_spec m = small_model();
  const inference_spec r = cpu_run(256, 1);
  const memscale::inference_result res = memscale::estimate_inference(m, r);
  const std::uint64_t tokens = 2 * 256;
  const bytes bmm_rows{experts * tokens * (hidden + 7 * ffn) * 4};
  CHECK(res.prefill.breakdown.activations > bmm_rows);
  // Twice the experts: the layer's largest moment grows by the every-expert rows.
  json more = small_config();
  more["num_local_experts"] = 2 * experts;
  const memscale::inference_result wider = memscale::estimate_inference(memscale::json_io::model_from_hf_config(more), r);
  CHECK(wider.prefill.breakdown.activations - res.prefill.breakdown.activations >= bmm_rows);
}

TEST_CASE("From transformers 5.0 the prefill runs grouped_mm over tokens x top-k rows, not every expert") {
  inference_spec r = cpu_run(256, 1);
  r.transformers_version = 517;
  const memscale::inference_result res = memscale::estimate_inference(small_model(), r);
  inference_spec before = r;
  before.transformers_version = 456;
  const memscale::inference_result bmm = memscale::estimate_inference(small_model(), before);
  CHECK(res.prefill.breakdown.activations < bmm.prefill.breakdown.activations);
  // At (up + 1) * glu: the gathered rows, the grouped_mm output and its biased sum, gate, up, glu,
  // up + 1 and the product, over tokens x top-k rows.
  const std::uint64_t rows = 2 * 256 * 2;
  CHECK(res.prefill.breakdown.activations >= bytes{rows * (hidden + 4 * ffn + 5 * ffn) * 4});
  // Twice the experts: no expert-sized rows appear, only the router's wider logits.
  json more = small_config();
  more["num_local_experts"] = 2 * experts;
  const memscale::inference_result wider = memscale::estimate_inference(memscale::json_io::model_from_hf_config(more), r);
  CHECK(wider.prefill.breakdown.activations - res.prefill.breakdown.activations < bytes{2 * 256 * experts * 4 * 8});
}

TEST_CASE("On CUDA the decoding steps of 5.x copy each routed row's expert matrices (batched_mm)") {
  inference_spec cpu = cpu_run(256, 8);
  cpu.transformers_version = 517;
  inference_spec cuda = cpu;
  cuda.device = memscale::device_kind::cuda;
  const memscale::inference_result on_cpu = memscale::estimate_inference(small_model(), cpu);
  const memscale::inference_result on_cuda = memscale::estimate_inference(small_model(), cuda);
  // self.gate_up_proj[expert_ids] and self.down_proj[expert_ids]: batch x top-k rows, fp32.
  const bytes copies{2 * 2 * (hidden * 2 * ffn + ffn * hidden) * 4};
  CHECK(on_cpu.decode.breakdown.activations < copies);
  CHECK(on_cuda.decode.breakdown.activations >= copies);
  CHECK(on_cuda.decode.breakdown.activations > on_cpu.decode.breakdown.activations);
}

TEST_CASE("gpt-oss generate() refuses what it does not model") {
  const model_spec m = small_model();
  const auto refusal = [&m](inference_spec r) {
    return error_message([&] { static_cast<void>(memscale::estimate_inference(m, r)); });
  };
  inference_spec r = cpu_run(64, 4);
  CHECK(refusal(r) == "<no error>");
  r.transformers_version = 500;  // the experts interface (grouped_mm) is modelled from 5.0
  CHECK(refusal(r) == "<no error>");
  r = cpu_run(64, 4);
  r.attention = memscale::attention_impl::flash;
  CHECK(contains(refusal(r), "infer.attention"));
  r = cpu_run(64, 4);
  r.cache = memscale::kv_cache_kind::static_preallocated;
  CHECK(contains(refusal(r), "infer.kv_cache"));
  r = cpu_run(64, 4);
  r.weights = weight_format::bnb_nf4;
  CHECK(contains(refusal(r), "must be native or mxfp4"));
  r = cpu_run(64, 4);
  r.weights = weight_format::mxfp4;  // transformers dequantizes MXFP4 on a CPU (gpt_oss_mxfp4_test.cpp: CUDA)
  r.compute = dtype::bf16;
  r.kv = dtype::bf16;
  CHECK(contains(refusal(r), "runs on CUDA only"));
  // The allocator's event walk covers gpt-oss with its alternating layers (gpt_oss_generate_stream_test.cpp).
  CHECK(error_message([&m] { memscale::detail::require_generate_modelled(m); }) == "<no error>");
  // MXFP4 stores gpt-oss's experts only.
  const model_spec llama = memscale::json_io::load_hf_model(memscale_test::config_path("meta-llama--Llama-2-7b-hf"));
  inference_spec mx{};
  mx.weights = weight_format::mxfp4;
  CHECK(contains(error_message([&] { static_cast<void>(memscale::estimate_inference(llama, mx)); }),
                 "mxfp4 stores gpt-oss's 3-D experts"));
}

}  // namespace
}  // namespace gpt_oss_generate_test
