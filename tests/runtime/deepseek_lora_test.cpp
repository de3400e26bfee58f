// LoRA on DeepSeek-V2/V3 (graph/layers/latent_attention.hpp, graph/layers/mlp.hpp, validate.hpp
// check_latent_attention_targets and check_deepseek_lora): PEFT's trainable counts, the tensors an
// adapter on a latent-attention projection and on the routed experts keeps, and the targets refused.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <memory>
#include <string>

#include "error_capture.hpp"
#include "memscale/inference.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "test_inputs.hpp"

namespace deepseek_lora_test {
namespace {

using memscale_test::config_path;

using memscale::json_io::json;
using memscale_test::contains;
using memscale_test::error_message;

// A small DeepSeek (q_proj without a latent, as DeepSeek-V2-Lite), V2 or V3.
constexpr std::uint64_t hidden = 64, heads = 4, nope = 16, rope = 8, qk = nope + rope, v_dim = 16, kv_rank = 32,
                        experts = 8, per_token = 2, moe_ffn = 24, dense_ffn = 96, rank = 4;
constexpr std::uint64_t batch = 2, seq = 32, tokens = batch * seq, routed = tokens * per_token;

memscale::model_spec small(const char* model_type) {
  return memscale::json_io::model_from_hf_config(json{
      {"model_type", model_type}, {"hidden_size", hidden}, {"num_hidden_layers", 3}, {"num_attention_heads", heads},
      {"num_key_value_heads", heads}, {"intermediate_size", dense_ffn}, {"vocab_size", 512}, {"q_lora_rank", nullptr},
      {"kv_lora_rank", kv_rank}, {"qk_nope_head_dim", nope}, {"qk_rope_head_dim", rope}, {"v_head_dim", v_dim},
      {"moe_intermediate_size", moe_ffn}, {"n_routed_experts", experts}, {"num_experts_per_tok", per_token},
      {"n_shared_experts", 1}, {"n_group", 4}, {"topk_group", 2}, {"first_k_dense_replace", 1}});
}

memscale::training_spec lora_run(const char* targets) {
  memscale::training_spec run{};
  run.micro_batch = batch;
  run.seq_len = seq;
  run.prec = memscale::precision::fp32;
  run.attention = memscale::attention_impl::eager;
  run.torch_version = 113;
  run.target = memscale::training_target::lora;
  run.lora_rank = rank;
  run.lora_targets = memscale::parse_lora_targets(targets);
  run.lora_dropout = true;  // lora_dropout > 0: lora_A reads dropout(x), which keeps a bool mask
  return run;
}

std::uint64_t trainable(const memscale::model_spec& m, const memscale::training_spec& run) {
  const auto g = std::make_unique<memscale::model_graph>(memscale::build(m, run));
  return memscale::trainable_parameter_count(g->stack());
}

std::uint64_t block_saved_bytes(const memscale::model_spec& m, const memscale::training_spec& run) {
  const auto g = std::make_unique<memscale::model_graph>(memscale::build(m, run));
  std::uint64_t total = 0;
  for (std::size_t i = g->stack().block_begin; i < g->stack().block_end; ++i)
    total += memscale::op_saved_bytes(g->stack().ops[i]).value;
  return total;
}

}  // namespace

TEST_CASE("deepseek lora: trainable parameters are PEFT's r x (in + out) per wrapped linear") {
  using memscale::json_io::load_hf_model;
  // DeepSeek-V2-Lite, r = 8 on q_proj, kv_a_proj_with_mqa, kv_b_proj, o_proj and every MLP linear
  // (the routed experts are per-expert nn.Linear before transformers 5.0):
  //   attention per layer: (2048 + 3072) + (2048 + 576) + (512 + 4096) + (2048 + 2048) = 16,448
  //   the dense layer's MLP: 3 x (2048 + 10,944) = 38,976
  //   a sparse layer: 64 experts x 3 x (2048 + 1408) + the shared expert 3 x (2048 + 2816) = 678,144
  //   8 x (27 x 16,448 + 38,976 + 26 x 678,144) = 144,918,528.
  auto run = lora_run("q_proj,kv_a_proj_with_mqa,kv_b_proj,o_proj,gate_proj,up_proj,down_proj");
  run.lora_rank = 8;
  CHECK(trainable(load_hf_model(config_path("deepseek-ai--DeepSeek-V2-Lite")), run) == 144'918'528ULL);
  // DeepSeek-V3, r = 16 on its attention: q_a (7168 + 1536), q_b (1536 + 24,576), kv_a (7168 + 576),
  // kv_b (512 + 32,768), o (16,384 + 7168): 16 x 61 x 99,392 = 97,006,592.
  run = lora_run("q_a_proj,q_b_proj,kv_a_proj_with_mqa,kv_b_proj,o_proj");
  run.lora_rank = 16;
  CHECK(trainable(load_hf_model(config_path("deepseek-ai--DeepSeek-V3")), run) == 97'006'592ULL);
}

TEST_CASE("deepseek lora: all-linear on V3 adapts every linear it has, not the router parameter") {
  const memscale::model_spec m = small("deepseek_v3");
  const std::uint64_t named = trainable(m, lora_run("q_proj,kv_a_proj_with_mqa,kv_b_proj,o_proj,gate_proj,up_proj,down_proj"));
  CHECK(trainable(m, lora_run("all-linear")) == named);
  const std::uint64_t attention = rank * ((hidden + heads * qk) + (hidden + kv_rank + rope) +
                                          (kv_rank + heads * (nope + v_dim)) + (heads * v_dim + hidden));
  const std::uint64_t dense = rank * 3 * (hidden + dense_ffn);
  const std::uint64_t sparse = rank * 3 * (hidden + moe_ffn) * (experts + 1);
  CHECK(named == 3 * attention + dense + 2 * sparse);
}

TEST_CASE("deepseek lora: an adapter keeps lora_A's input and output, on routed rows for the experts") {
  const memscale::model_spec m = small("deepseek_v3");
  const std::uint64_t base = block_saved_bytes(m, lora_run("kv_b_proj"));
  // o_proj's adapter: dropout(merged heads) (the frozen base keeps no input), its bool mask and
  // lora_A's output.
  CHECK(block_saved_bytes(m, lora_run("kv_b_proj,o_proj")) - base ==
        4 * (tokens * heads * v_dim + tokens * rank) + tokens * heads * v_dim);
  // down_proj's adapters: in each routed expert over the tokens x top-k rows, in the shared expert over
  // every token: dropout(SwiGLU product), its mask and lora_A's output.
  CHECK(block_saved_bytes(m, lora_run("kv_b_proj,down_proj")) - base ==
        4 * (routed * moe_ffn + routed * rank + tokens * moe_ffn + tokens * rank) + (routed + tokens) * moe_ffn);
  // kv_a_proj_with_mqa's adapter: dropout(the layer's normed input), its mask and lora_A's output.
  CHECK(block_saved_bytes(m, lora_run("kv_b_proj,kv_a_proj_with_mqa")) - base ==
        4 * (tokens * hidden + tokens * rank) + tokens * hidden);
}

TEST_CASE("deepseek lora: targets the model lacks and the router are refused by name") {
  const memscale::model_spec v3 = small("deepseek_v3");
  const memscale::model_spec v2 = small("deepseek_v2");
  const auto refusal = [](const memscale::model_spec& m, const memscale::training_spec& run) {
    return error_message([&] { (void)memscale::estimate(m, run); });
  };
  CHECK(contains(refusal(v3, lora_run("q_proj,v_proj")), "run.lora_targets names a key or value projection"));
  CHECK(contains(refusal(v3, lora_run("q_a_proj")), "without q_lora_rank"));
  memscale::model_spec latent_q = v3;
  latent_q.q_lora_rank = 16;
  CHECK(contains(refusal(latent_q, lora_run("q_proj")), "with q_lora_rank"));
  CHECK(trainable(latent_q, lora_run("q_a_proj,q_b_proj")) ==
        3 * rank * ((hidden + 16) + (16 + heads * qk)));
  CHECK(contains(refusal(memscale::presets::llama_2_7b, lora_run("kv_b_proj")), "only multi-head latent attention"));
  CHECK(contains(refusal(v3, lora_run("o_proj,gate")), "adapts DeepSeek's router"));
  CHECK(contains(refusal(v2, lora_run("all-linear")), "adapts DeepSeek's router"));
  auto qlora = lora_run("o_proj");
  qlora.target = memscale::training_target::qlora;
  CHECK(contains(refusal(v2, qlora), "qlora of DeepSeek-V2"));
  CHECK_NOTHROW(memscale::estimate(v3, qlora));
  auto experts_interface = lora_run("o_proj,down_proj");
  experts_interface.transformers_version = 500;
  CHECK(contains(refusal(v3, experts_interface), "3-D parameters"));
  experts_interface.lora_targets = memscale::parse_lora_targets("o_proj");
  CHECK_NOTHROW(memscale::estimate(v3, experts_interface));
}


// DeepSeek's gate is a bare nn.Parameter (DeepseekV3TopkRouter), not an nn.Linear: a QLoRA load and
// a 4-bit inference checkpoint leave it in 16 bits, as every linear they do replace is 4-bit.
TEST_CASE("deepseek qlora: the router's weight is not quantized") {
  const memscale::model_spec v3 = small("deepseek_v3");
  auto qlora = lora_run("o_proj");
  qlora.target = memscale::training_target::qlora;
  qlora.prec = memscale::precision::pure_bf16;
  const auto g = std::make_unique<memscale::model_graph>(memscale::build(v3, qlora));
  const memscale::graph& stack = g->stack();
  std::size_t routers = 0, quantized = 0;
  for (std::size_t i = stack.block_begin; i < stack.block_end; ++i) {
    const memscale::op& o = stack.ops[i];
    if (o.role != memscale::param_role::matmul || !o.frozen) continue;
    const bool is_router = o.weight.rows == experts && o.weight.cols == hidden && o.weight.count == 1;
    if (is_router) {
      ++routers;
      CHECK_FALSE(memscale::quantized_base(o, qlora));
    } else if (memscale::quantized_base(o, qlora)) {
      ++quantized;
    }
  }
  CHECK(routers == 1);
  CHECK(quantized > 0);

  memscale::inference_spec served{.weights = memscale::weight_format::bnb_nf4};
  const auto weights = memscale::detail::weights_graph(v3);
  const memscale::graph& w = weights.stack();
  std::size_t served_routers = 0;
  for (std::size_t i = w.block_begin; i < w.block_end; ++i) {
    const memscale::op& o = w.ops[i];
    if (o.kind != memscale::op_kind::linear || o.weight.rows != experts || o.weight.cols != hidden || o.weight.count != 1)
      continue;
    ++served_routers;
    CHECK(memscale::inference_op_weight_bytes(w, i, served) == memscale::storage(served.compute, experts * hidden));
  }
  CHECK(served_routers == 1);
}

}  // namespace deepseek_lora_test
