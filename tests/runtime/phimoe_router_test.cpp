// PhiMoE's router (json/hf/phimoe.hpp, graph/layers/mlp.hpp): sparsemixer picks exactly two experts
// and saves two rounds of masked_fill and softmax; from transformers 5.0 the router scales the
// experts' input by a second saved noise tensor (modular_phimoe.py@0233e509 PhimoeTopKRouter.forward,
// besides PhimoeSparseMoeBlock.forward's).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#endif

#include <cstdint>
#include <string>

#include "error_capture.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace phimoe_router_test {
namespace {

using namespace memscale;
using memscale_test::error_message;
using nlohmann::json;

constexpr std::uint64_t hidden = 256, layers = 2;

json small(json extra = json::object()) {
  json c{{"model_type", "phimoe"},        {"hidden_size", hidden},      {"num_hidden_layers", layers},
         {"num_attention_heads", 8},      {"num_key_value_heads", 2},   {"intermediate_size", 512},
         {"vocab_size", 4096},            {"num_local_experts", 4},     {"num_experts_per_tok", 2},
         {"input_jitter_noise", 0.01},    {"router_jitter_noise", 0.01}};
  c.update(extra);
  return c;
}

training_spec step(std::uint32_t transformers_version) {
  training_spec r{};
  r.micro_batch = 2;
  r.seq_len = 512;
  r.prec = precision::pure_bf16;
  r.attention = attention_impl::sdpa;
  r.transformers_version = transformers_version;
  return r;
}

// The saved activations that input_jitter_noise adds to a step.
std::uint64_t jitter_saved(std::uint32_t transformers_version) {
  const model_spec with = json_io::model_from_hf_config(small());
  const model_spec without = json_io::model_from_hf_config(small({{"input_jitter_noise", 0.0}}));
  return estimate(with, step(transformers_version)).saved_activation_bytes.value -
         estimate(without, step(transformers_version)).saved_activation_bytes.value;
}

}  // namespace

TEST_CASE("PhiMoE's router is sparsemixer, which picks exactly two experts") {
  CHECK(json_io::model_from_hf_config(small()).sparsemixer_router);
  CHECK_THAT(error_message([] { (void)json_io::model_from_hf_config(small({{"num_experts_per_tok", 4}})); }),
             Catch::Matchers::Contains("config.num_experts_per_tok") && Catch::Matchers::Contains("4") &&
                 Catch::Matchers::Contains("exactly two"));
  model_spec hand = json_io::model_from_hf_config(small());
  hand.experts_per_token = 3;
  CHECK_THAT(error_message([&] { (void)validate(hand); }), Catch::Matchers::Contains("model.experts_per_token"));
}

TEST_CASE("PhiMoE's input jitter saves one noise tensor per layer in 4.x and two from transformers 5.0") {
  const std::uint64_t noise = 2 * 512 * hidden * 2;  // tokens x hidden, bf16
  CHECK(jitter_saved(456) == layers * noise);
  CHECK(jitter_saved(517) == layers * 2 * noise);
}

TEST_CASE("sparsemixer's saved masks and softmaxes are written") {
  model_spec sparsemixer = json_io::model_from_hf_config(small({{"input_jitter_noise", 0.0}}));
  model_spec softmax_topk = sparsemixer;
  softmax_topk.sparsemixer_router = false;
  const std::uint64_t tokens = 2 * 512, experts = 4, picks = tokens * 2;
  // Per layer: two bool masks and two bf16 softmaxes of tokens x experts, one int64 index and one bf16
  // multiplier per pick, against softmax's fp32 output.
  const std::uint64_t added = tokens * experts * (2 * 1 + 2 * 2) + picks * (8 + 2) - tokens * experts * 4;
  CHECK(estimate(sparsemixer, step(517)).saved_activation_bytes.value -
            estimate(softmax_topk, step(517)).saved_activation_bytes.value ==
        layers * added);
}

}  // namespace phimoe_router_test
