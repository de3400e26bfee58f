// generate() of the Hugging Face MoE families under transformers 5.x (graph/layers/mlp.hpp
// experts_interface_without_grad): grouped_mm over tokens x top-k rows in the prefill, batched_mm's
// per-row expert weight copies in CUDA decoding steps, and the allocator's generate() stream of them.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <string>

#include "memscale/allocator/replay_generate.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace moe_generate_test {
namespace {

using memscale::bytes;
using memscale::dtype;
using memscale::inference_spec;
using memscale::model_spec;
using memscale::json_io::json;

constexpr std::uint64_t hidden = 256, ffn = 512, experts = 8, top_k = 2, batch = 2;

json mixtral_config() {
  return json{{"model_type", "mixtral"},         {"hidden_size", hidden},       {"intermediate_size", ffn},
              {"num_hidden_layers", 2},          {"num_attention_heads", 8},    {"num_key_value_heads", 2},
              {"num_local_experts", experts},    {"num_experts_per_tok", top_k}, {"vocab_size", 4096},
              {"tie_word_embeddings", false}};
}

json olmoe_config() {
  return json{{"model_type", "olmoe"},          {"hidden_size", hidden},       {"intermediate_size", ffn},
              {"num_hidden_layers", 2},         {"num_attention_heads", 8},    {"num_key_value_heads", 8},
              {"num_experts", experts},         {"num_experts_per_tok", top_k}, {"vocab_size", 4096},
              {"norm_topk_prob", false},        {"tie_word_embeddings", false}};
}

json qwen2_moe_config() {
  return json{{"model_type", "qwen2_moe"},      {"hidden_size", hidden},       {"intermediate_size", 4 * ffn},
              {"moe_intermediate_size", ffn},   {"shared_expert_intermediate_size", 4 * ffn},
              {"num_hidden_layers", 2},         {"num_attention_heads", 8},    {"num_key_value_heads", 8},
              {"num_experts", experts},         {"num_experts_per_tok", top_k}, {"vocab_size", 4096},
              {"decoder_sparse_step", 1},       {"norm_topk_prob", false},     {"tie_word_embeddings", false}};
}

model_spec model_of(const json& config) { return memscale::json_io::model_from_hf_config(config); }

inference_spec cuda_run(std::uint64_t context, std::uint64_t new_tokens, std::uint32_t transformers) {
  inference_spec r{};
  r.batch = batch;
  r.context = context;
  r.new_tokens = new_tokens;
  r.compute = dtype::bf16;
  r.kv = dtype::bf16;
  r.attention = memscale::attention_impl::sdpa;
  r.device = memscale::device_kind::cuda;
  r.transformers_version = transformers;
  return r;
}

// self.gate_up_proj[expert_ids] (rows x h x 2f) and self.down_proj[expert_ids] (rows x f x h),
// both alive while the second is made: batch x top-k rows, bf16.
constexpr bytes batched_mm_copies{batch * top_k * (hidden * 2 * ffn + ffn * hidden) * 2};

TEST_CASE("5.x decoding steps on CUDA copy each routed row's expert matrices (batched_mm)") {
  for (const json& config : {mixtral_config(), olmoe_config(), qwen2_moe_config()}) {
    const model_spec m = model_of(config);
    const memscale::inference_result five = memscale::estimate_inference(m, cuda_run(64, 8, 517));
    const memscale::inference_result four = memscale::estimate_inference(m, cuda_run(64, 8, 457));
    CAPTURE(config.at("model_type").get<std::string>());
    CHECK(five.decode.breakdown.activations >= batched_mm_copies);
    CHECK(four.decode.breakdown.activations < batched_mm_copies);
    inference_spec on_cpu = cuda_run(64, 8, 517);
    on_cpu.device = memscale::device_kind::cpu;
    CHECK(memscale::estimate_inference(m, on_cpu).decode.breakdown.activations < batched_mm_copies);
  }
}

TEST_CASE("5.x prefill holds four tokens x top-k x hidden tensors at the experts' reorder") {
  // The gathered rows, the weighted down output, the inv_perm reorder and the tensor made from it
  // (integrations/moe.py of 5.17.0, lines 394, 465, 468, 473): a wide hidden makes them the layer's peak.
  json wide = olmoe_config();
  wide["hidden_size"] = 2048;
  wide["intermediate_size"] = 128;
  wide["num_attention_heads"] = 16;
  wide["num_key_value_heads"] = 16;
  const model_spec m = model_of(wide);
  const std::uint64_t context = 512;
  const std::uint64_t rows = batch * context * top_k;
  const memscale::inference_result five = memscale::estimate_inference(m, cuda_run(context, 1, 517));
  const std::uint64_t tokens = batch * context;
  // ... beside the block's input and the residual stream (tokens x hidden each).
  CHECK(five.prefill.breakdown.activations >= bytes{(4 * rows + 2 * tokens) * 2048 * 2});
}

TEST_CASE("The allocator's 5.x generate() stream walks the batched_mm copies as the estimate does") {
  // Wide experts and a short prompt: the decoding steps' copies (over 100 MB) dominate.
  constexpr std::uint64_t wide_hidden = 1024, wide_ffn = 4096;
  constexpr bytes copies{batch * top_k * (wide_hidden * 2 * wide_ffn + wide_ffn * wide_hidden) * 2};
  for (json config : {mixtral_config(), qwen2_moe_config()}) {
    config["hidden_size"] = wide_hidden;
    config[config.contains("moe_intermediate_size") ? "moe_intermediate_size" : "intermediate_size"] = wide_ffn;
    const model_spec m = model_of(config);
    const inference_spec run = cuda_run(4, 8, 517);
    const memscale::inference_result e = memscale::estimate_inference(m, run);
    const memscale::allocator::replay_result replay = memscale::allocator::replay_generate(m, run);
    CAPTURE(config.at("model_type").get<std::string>());
    CHECK(replay.allocated_peak.value >= e.weight_bytes.value + copies.value);
    // The allocator rounds each tensor to 512 bytes and the estimate does not: within 2 %.
    CHECK(replay.allocated_peak.value >= e.peak.tensor.value * 98 / 100);
    CHECK(replay.allocated_peak.value <= e.peak.tensor.value * 102 / 100);
  }
}

}  // namespace
}  // namespace moe_generate_test
