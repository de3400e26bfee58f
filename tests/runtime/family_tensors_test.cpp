// Tensors of the 2025-26 families as the H100 listing of saved tensors shows them
// (docs/research/gpu/saved_tensors_families_h100.json, docs/gpu-measurements.md "The 2025-26
// families, held out"): each mechanism is checked as an exact difference in saved bytes, or as
// the op the graph writes.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstddef>
#include <cstdint>

#include "memscale/graph/model_graph.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace family_tensors_test {
namespace {

using namespace memscale;

constexpr std::uint64_t layers = 2;
constexpr std::uint64_t hidden = 256;
constexpr std::uint64_t heads = 8;
constexpr std::uint64_t ffn = 688;
constexpr model_spec small_llama = presets::llama_base("family-test", layers, hidden, heads, 2, ffn, 1000);
constexpr std::uint64_t tokens = 2 * 64;

training_spec cuda_run(precision prec) {
  return training_spec{.micro_batch = 2, .seq_len = 64, .prec = prec, .dropout = false, .device = device_kind::cuda,
                       .torch_version = 211};
}

std::uint64_t saved(const model_spec& m, const training_spec& r) { return estimate(m, r).saved_activation_bytes.value; }

}  // namespace

TEST_CASE("Gemma's RMSNorm keeps its normalized x in fp32 and an fp32 copy of 1 + weight") {
  model_spec gemma_norms = small_llama;
  gemma_norms.rms_norm_fp32_scale = true;
  // Two norms per layer and the final norm over the hidden width.
  constexpr std::uint64_t norms = 2 * layers + 1;
  // pure bf16: LLaMA's norm keeps the normalized x in bf16 (x.to(dtype) * w), Gemma's in fp32
  // ((x * (1 + w.float())).type_as(x)), beside the fp32 1 + weight.
  const training_spec bf16 = cuda_run(precision::pure_bf16);
  CHECK(saved(gemma_norms, bf16) - saved(small_llama, bf16) == norms * (tokens * hidden * (4 - 2) + hidden * 4));
  // fp32: the same tensors but the 1 + weight vector.
  const training_spec fp32 = cuda_run(precision::fp32);
  CHECK(saved(gemma_norms, fp32) - saved(small_llama, fp32) == norms * hidden * 4);
}

TEST_CASE("Gemma 3's reader sets Gemma's RMSNorm") {
  const auto config = nlohmann::json::parse(R"({"model_type": "gemma3_text", "hidden_size": 256,
      "intermediate_size": 688, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1,
      "head_dim": 64, "vocab_size": 1000})");
  CHECK(json_io::model_from_hf_config(config).rms_norm_fp32_scale);
}

TEST_CASE("transformers 5 multiplies gpt-oss experts by the whole parameters: no weight copies") {
  model_spec experts = small_llama;
  experts.kv_heads = heads;  // no grouped k and v: transformers 5 changes their SDPA call too
  experts.experts = 4;
  experts.experts_per_token = 2;
  experts.mlp = mlp_kind::clamped_swiglu;
  experts.expert_weight_copies = true;
  training_spec v4 = cuda_run(precision::pure_bf16);
  v4.transformers_version = 456;
  training_spec v5 = v4;
  v5.transformers_version = 517;
  // Before 5.0 each hit expert's gate_up (hidden x 2 ffn) and down (ffn x hidden) weight is
  // copied by indexing and saved by its matmul: all 4 experts are hit by 256 routed rows. The
  // weighted rows index_add_ kept go too (the next case).
  constexpr std::uint64_t routed_rows = tokens * 2;
  CHECK(saved(experts, v4) - saved(experts, v5) ==
        layers * (4 * (hidden * 2 * ffn + ffn * hidden) * 2 + routed_rows * hidden * 2));
}

TEST_CASE("transformers 5 sums the weighted expert rows instead of index_add_: they are not kept") {
  model_spec experts = small_llama;
  experts.kv_heads = heads;  // no grouped k and v: transformers 5 changes their SDPA call too
  experts.experts = 4;
  experts.experts_per_token = 2;
  training_spec v4 = cuda_run(precision::pure_bf16);
  v4.transformers_version = 456;
  training_spec v5 = v4;
  v5.transformers_version = 517;
  // index_add_ keeps its source, the weighted rows (tokens x top-k x hidden); grouped_mm's
  // view(tokens, top_k, hidden).sum(1) keeps nothing.
  constexpr std::uint64_t routed_rows = tokens * 2;
  CHECK(saved(experts, v4) - saved(experts, v5) == layers * routed_rows * hidden * 2);
  // GraniteMoE's experts in one pass keep their own code.
  experts.experts_in_one_pass = true;
  CHECK(saved(experts, v4) == saved(experts, v5));
}

TEST_CASE("Hugging Face's fused SDPA output feeds o_proj without a merged copy") {
  training_spec run = cuda_run(precision::pure_bf16);
  run.attention = attention_impl::sdpa;
  const model_graph built = build(small_llama, run);
  const graph& g = built.stack();
  std::size_t attention = g.size;
  for (std::size_t i = g.block_begin; i < g.block_end; ++i)
    if (g.ops[i].kind == op_kind::attention) attention = i;
  REQUIRE(attention + 1 < g.block_end);
  CHECK(g.ops[attention + 1].kind == op_kind::linear);
  // The math kernel's context is a (b, h, s, d) tensor: transpose(1, 2).contiguous() copies it.
  run.attention = attention_impl::sdpa_math;
  const model_graph math = build(small_llama, run);
  const graph& m = math.stack();
  std::size_t core = m.size;
  for (std::size_t i = m.block_begin; i < m.block_end; ++i)
    if (m.ops[i].kind == op_kind::attention) core = i;
  REQUIRE(core + 1 < m.block_end);
  CHECK(m.ops[core + 1].kind == op_kind::elementwise);
}

}  // namespace family_tensors_test
