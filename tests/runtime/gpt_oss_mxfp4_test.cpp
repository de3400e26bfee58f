// generate() of gpt-oss over MXFP4 experts through triton_kernels' routing and matmul_ogs
// (graph/layers/gpt_oss_mxfp4.hpp): the stored weights, the MoE's tensors, the CPU re-implementation
// of the allocation sequence (tools/trace/gpt_oss_mxfp4_generate.py) and the refusals kept.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <fstream>
#include <string>

#include "error_capture.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "test_inputs.hpp"

namespace gpt_oss_mxfp4_test {
namespace {

using memscale::bytes;
using memscale::dtype;
using memscale::inference_spec;
using memscale::model_spec;
using memscale::weight_format;
using memscale::json_io::json;
using memscale_test::contains;
using memscale_test::error_message;

constexpr std::uint64_t hidden = 256, ffn = 256, layers = 4, experts = 8, top_k = 2;

json small_config() {
  return json{{"model_type", "gpt_oss"},
              {"hidden_size", hidden},
              {"num_hidden_layers", layers},
              {"num_attention_heads", 8},
              {"num_key_value_heads", 2},
              {"head_dim", 32},
              {"intermediate_size", ffn},
              {"vocab_size", 4096},
              {"num_local_experts", experts},
              {"num_experts_per_tok", top_k},
              {"sliding_window", 128},
              {"layer_types", {"sliding_attention", "full_attention", "sliding_attention", "full_attention"}}};
}

model_spec small_model() { return memscale::json_io::model_from_hf_config(small_config()); }

// A bf16 generate() on CUDA without the cuBLAS workspace: what the CPU re-implementation allocates.
inference_spec run_of(weight_format w, std::uint64_t batch, std::uint64_t context, std::uint64_t new_tokens) {
  inference_spec r{};
  r.batch = batch;
  r.context = context;
  r.new_tokens = new_tokens;
  r.compute = dtype::bf16;
  r.kv = dtype::bf16;
  r.attention = memscale::attention_impl::eager;
  r.transformers_version = 456;
  r.blas_workspace = bytes{};
  r.weights = w;
  return r;
}

// The MoE block's largest moment over MXFP4 experts, at the down matmul_ogs's scratchpad: the block's
// input, the router logits, the routing survivors, the gate_up output, the down bias's fp32 copy,
// the output and the scratchpad (bf16 unless stated).
std::uint64_t moe_moment(std::uint64_t tokens) {
  const std::uint64_t gates = tokens * top_k;
  // hist, token_offs_combined (5 x pad512(experts + 1)) and block_pid_map (4 x pad512(max tiles)), int32.
  const std::uint64_t expt_data = (experts + 5 * 512 + 4 * 512) * 4;
  return tokens * hidden * 2 + tokens * experts * 2 + gates * 2 * 4 + gates * 2 + expt_data + gates * ffn * 2 +
         experts * hidden * 4 + tokens * hidden * 2 + gates * hidden * 2;
}

TEST_CASE("MXFP4 generate() keeps the experts at their stored bytes") {
  const model_spec m = small_model();
  const auto native = memscale::estimate_inference(m, run_of(weight_format::native, 2, 96, 8));
  const auto mx = memscale::estimate_inference(m, run_of(weight_format::mxfp4, 2, 96, 8));
  // blocks and scales: 17 bytes per 32 weights instead of 2 bytes a weight (the bf16 biases as they are).
  const std::uint64_t expert_weights = layers * experts * (hidden * 2 * ffn + ffn * hidden);
  CHECK(native.weight_bytes - mx.weight_bytes == bytes{expert_weights * 2 - expert_weights * 17 / 32});
  CHECK(mx.kv_cache_bytes == native.kv_cache_bytes);
}

TEST_CASE("MXFP4 generate()'s MoE holds tokens x top-k rows, not every expert's") {
  const model_spec m = small_model();
  const std::uint64_t batch = 4, context = 200;
  const auto mx = memscale::estimate_inference(m, run_of(weight_format::mxfp4, batch, context, 1));
  const auto native = memscale::estimate_inference(m, run_of(weight_format::native, batch, context, 1));
  // The every-expert bmm holds experts x tokens x (hidden + 7 ffn); matmul_ogs tokens x k x (ffn + hidden).
  CHECK(mx.prefill.breakdown.activations < native.prefill.breakdown.activations);
  // The MoE's moment is in the prefill's largest layer moment (the residual stream besides).
  CHECK(mx.prefill.breakdown.activations.value >= moe_moment(batch * context));
  // Its graph: the one layer's moment at the scratchpad, the residual (bf16 tokens x hidden) besides.
  inference_spec r = run_of(weight_format::mxfp4, batch, context, 1);
  const std::uint64_t tokens = batch * context;
  const bytes peak = memscale::detail::layer_peak(m, r, context, context);
  CHECK(peak.value >= moe_moment(tokens) + tokens * hidden * 2);
}

// The CPU re-implementation's records (tools/trace/gpt_oss_mxfp4_generate.py): the same tensors in
// the same order as mlp_forward over triton_kernels, the rest of the model as the bf16 trace.
TEST_CASE("The MXFP4 estimate is within 2% of the CPU re-implementation of its allocations") {
  std::ifstream in(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_mxfp4.json");
  REQUIRE(in.good());
  const json records = json::parse(in);
  REQUIRE(records.size() >= 3);
  for (const json& rec : records) {
    const model_spec m = memscale::json_io::model_from_hf_config(rec.at("model").at("hf_config"));
    const json& infer = rec.at("infer");
    const inference_spec r = run_of(weight_format::mxfp4, infer.at("batch").get<std::uint64_t>(),
                                    infer.at("context").get<std::uint64_t>(),
                                    infer.at("new_tokens").get<std::uint64_t>());
    const auto res = memscale::estimate_inference(m, r);
    const double measured = rec.at("measured_bytes").get<double>();
    const double estimated = static_cast<double>(res.peak.tensor.value);
    INFO(rec.at("id").get<std::string>() << ": estimate " << estimated << " measured " << measured);
    CHECK(estimated >= measured * 0.98);
    CHECK(estimated <= measured * 1.02);
    const double prefill = rec.at("detail").at("prefill_peak").get<double>();
    CHECK(static_cast<double>(res.prefill.tensor.value) >= prefill * 0.98);
    CHECK(static_cast<double>(res.prefill.tensor.value) <= prefill * 1.02);
    // Decoding: never below; within 2% while the prompt is at most two windows long (beyond, the first
    // step's sliding layers shrink, which forward_peak writes on the upper side).
    const double decode = rec.at("detail").at("decode_peak").get<double>();
    CHECK(static_cast<double>(res.decode.tensor.value) >= decode * 0.98);
    if (r.context <= 2 * m.sliding_window) CHECK(static_cast<double>(res.decode.tensor.value) <= decode * 1.02);
  }
}

TEST_CASE("MXFP4 generate() refuses what does not run matmul_ogs") {
  const model_spec m = small_model();
  const auto refusal = [&m](const inference_spec& r) {
    return error_message([&] { static_cast<void>(memscale::estimate_inference(m, r)); });
  };
  inference_spec r = run_of(weight_format::mxfp4, 2, 64, 4);
  CHECK(refusal(r) == "<no error>");
  r.transformers_version = 500;  // mlp_forward replaces the experts interface too
  CHECK(refusal(r) == "<no error>");
  r.device = memscale::device_kind::cpu;  // transformers dequantizes on a CPU
  CHECK(contains(refusal(r), "runs on CUDA only"));
  r = run_of(weight_format::mxfp4, 2, 64, 4);
  r.attention = memscale::attention_impl::flash;
  CHECK(contains(refusal(r), "infer.attention"));
  r = run_of(weight_format::mxfp4, 2, 64, 4);
  r.cache = memscale::kv_cache_kind::static_preallocated;
  CHECK(contains(refusal(r), "infer.kv_cache"));
  // The allocator's event walk covers gpt-oss with its alternating layers (gpt_oss_generate_stream_test.cpp).
  CHECK(error_message([&m] { memscale::detail::require_generate_modelled(m); }) == "<no error>");
  const model_spec llama = memscale::json_io::load_hf_model(memscale_test::config_path("meta-llama--Llama-2-7b-hf"));
  CHECK(contains(error_message([&] {
                   static_cast<void>(memscale::estimate_inference(llama, run_of(weight_format::mxfp4, 1, 64, 4)));
                 }),
                 "mxfp4 stores gpt-oss's 3-D experts"));
}

}  // namespace
}  // namespace gpt_oss_mxfp4_test
