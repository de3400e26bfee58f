// Weights a bitsandbytes load leaves in 16 bits because they are bare nn.Parameters, not nn.Linear
// modules (graph/layers/mlp.hpp router_is_parameter, with_unquantized_experts; inference/weights.hpp):
// transformers 5's 3-D experts and XTopKRouter weights, gpt-oss's in every release, Llama 4's
// experts, DeepSeek's gate. Checked on the real configs, op by op, for QLoRA and for generate().
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include "memscale/inference.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "test_inputs.hpp"

namespace bnb_parameter_weights_test {
namespace {

using memscale_test::config_path;

struct stored {
  std::size_t experts_4bit = 0, experts_16bit = 0, routers_4bit = 0, routers_16bit = 0, other_4bit = 0;
};

bool is_router(const memscale::op& o, const memscale::model_spec& m) {
  return o.weight.rows == m.experts && o.weight.cols == m.hidden && o.weight.count == 1;
}

stored qlora_storage(const memscale::model_spec& m, std::uint32_t transformers_version) {
  memscale::training_spec run{};
  run.micro_batch = 1;
  run.seq_len = 64;
  run.prec = memscale::precision::pure_bf16;
  run.target = memscale::training_target::qlora;
  run.lora_rank = 8;
  run.lora_targets = memscale::parse_lora_targets("q_proj,v_proj");
  run.transformers_version = transformers_version;
  const auto g = std::make_unique<memscale::model_graph>(memscale::build(m, run));
  const memscale::graph& s = g->stack();
  stored out;
  for (std::size_t i = s.block_begin; i < s.block_end; ++i) {
    const memscale::op& o = s.ops[i];
    if (o.kind != memscale::op_kind::linear || o.role != memscale::param_role::matmul) continue;
    const bool four_bit = memscale::quantized_base(o, g->run);
    if (o.weight.count > 1) ++(four_bit ? out.experts_4bit : out.experts_16bit);
    else if (is_router(o, m)) ++(four_bit ? out.routers_4bit : out.routers_16bit);
    else if (four_bit) ++out.other_4bit;
  }
  return out;
}

stored served_storage(const memscale::model_spec& m, std::uint32_t transformers_version,
                      memscale::weight_format format = memscale::weight_format::bnb_nf4) {
  memscale::inference_spec r{.weights = format};
  r.transformers_version = transformers_version;
  const auto g = std::make_unique<memscale::model_graph>(memscale::detail::inference_weights_graph(m, r));
  const memscale::graph& s = g->stack();
  stored out;
  for (std::size_t i = s.block_begin; i < s.block_end; ++i) {
    const memscale::op& o = s.ops[i];
    if (o.kind != memscale::op_kind::linear || o.role != memscale::param_role::matmul) continue;
    const bool sixteen = memscale::inference_op_weight_bytes(s, i, r) ==
                         memscale::storage(r.compute, o.weight.elements()) + memscale::storage(r.compute, o.bias.elements());
    if (o.weight.count > 1) ++(sixteen ? out.experts_16bit : out.experts_4bit);
    else if (is_router(o, m)) ++(sixteen ? out.routers_16bit : out.routers_4bit);
    else if (!sixteen) ++out.other_4bit;
  }
  return out;
}

}  // namespace

TEST_CASE("bnb parameter weights: transformers 5's experts and routers stay 16-bit under QLoRA") {
  const memscale::model_spec qwen = memscale::json_io::load_hf_model(config_path("Qwen--Qwen3-30B-A3B"));
  // 4.x: per-expert nn.Linear and an nn.Linear gate, all replaced by Linear4bit.
  const stored v4 = qlora_storage(qwen, 446);
  CHECK(v4.experts_16bit == 0);
  CHECK(v4.experts_4bit > 0);
  CHECK(v4.routers_4bit == 1);
  // 5.x: Qwen3MoeExperts' gate_up_proj / down_proj and Qwen3MoeTopKRouter.weight are parameters.
  const stored v5 = qlora_storage(qwen, 517);
  CHECK(v5.experts_4bit == 0);
  CHECK(v5.experts_16bit > 0);
  CHECK(v5.routers_16bit == 1);
  CHECK(v5.routers_4bit == 0);
  CHECK(v5.other_4bit == v4.other_4bit);  // attention stays 4-bit either way
  // PhiMoE's 5.x router subclasses nn.Linear: replaced; its experts are parameters.
  const stored phi = qlora_storage(memscale::json_io::load_hf_model(config_path("microsoft--Phi-3.5-MoE-instruct")), 517);
  CHECK(phi.routers_4bit == 1);
  CHECK(phi.experts_4bit == 0);
}

TEST_CASE("bnb parameter weights: gpt-oss and Llama 4 experts are parameters in every release") {
  const stored oss = qlora_storage(memscale::json_io::load_hf_model(config_path("openai--gpt-oss-20b")), 455);
  CHECK(oss.experts_4bit == 0);
  CHECK(oss.routers_4bit == 0);
  CHECK(oss.other_4bit > 0);
  // Scout's language model alone (Llama4ForCausalLM): QLoRA under a vision tower is refused.
  std::ifstream file(config_path("meta-llama--Llama-4-Scout-17B-16E"));
  REQUIRE(file.good());
  memscale::json_io::json text = memscale::json_io::json::parse(file).at("text_config");
  text["model_type"] = "llama4_text";
  const stored scout = qlora_storage(memscale::json_io::model_from_hf_config(text), 451);
  CHECK(scout.experts_4bit == 0);
  CHECK(scout.experts_16bit > 0);
}

TEST_CASE("bnb parameter weights: a 4-bit checkpoint served by generate() keeps them 16-bit from 5.0") {
  const memscale::model_spec mixtral = memscale::json_io::load_hf_model(config_path("mistralai--Mixtral-8x7B-v0.1"));
  const stored v4 = served_storage(mixtral, 445);
  CHECK(v4.experts_16bit == 0);
  CHECK(v4.routers_4bit == 1);
  const stored v5 = served_storage(mixtral, 517);
  CHECK(v5.experts_4bit == 0);
  CHECK(v5.experts_16bit > 0);
  CHECK(v5.routers_16bit == 1);
  CHECK(v5.other_4bit == v4.other_4bit);
  // A format that does not go through bitsandbytes' Linear replacement is unchanged for the experts
  // (GPTQ's estimate over them is refused: tests/runtime/quantized_experts_test.cpp).
  const stored gptq = served_storage(mixtral, 517, memscale::weight_format::gptq_4bit);
  CHECK(gptq.experts_16bit == 0);
  CHECK(gptq.routers_16bit == 1);
  // DeepSeek's gate is a parameter in every release.
  const stored deepseek = served_storage(memscale::json_io::load_hf_model(config_path("deepseek-ai--DeepSeek-V2-Lite")), 445);
  CHECK(deepseek.routers_16bit == 1);
  CHECK(deepseek.routers_4bit == 0);
}

}  // namespace bnb_parameter_weights_test
