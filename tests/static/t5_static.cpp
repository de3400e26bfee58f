// Static checks for the encoder-decoder (T5) graph: parameter totals equal the published
// ones, computed from each config.json's numbers by hand below, and the estimators run in
// constant evaluation. Building this translation unit is the test.
#include "memscale/estimate.hpp"
#include "memscale/presets.hpp"

#include <cstdint>

namespace {

using namespace memscale;

// t5-small by hand (d_model 512, d_ff 2048, 6 + 6 blocks, 8 heads x d_kv 64, vocab 32128):
//   shared 32128*512 = 16,449,536
//   encoder block: q,k,v,o 4*512*512 + wi,wo 2*512*2048 + 2 norms 2*512 = 3,146,752;
//     x6 + relative bias 32*8 + final norm 512 = 18,881,280
//   decoder block: + cross-attention 4*512*512 + its norm 512 = 4,195,840;
//     x6 + 256 + 512 = 25,175,808
//   total 60,506,624 (lm_head tied to shared, counted once).
static_assert(parameter_count(presets::t5_small) == 60'506'624);
static_assert(parameter_count(presets::t5_base_model) == 222'903'552);
static_assert(parameter_count(presets::t5_large) == 737'668'096);
// flan-t5-base (= t5-v1_1-base shapes): gated wi_0/wi_1/wo with d_ff 2048, untied lm_head
// 32128*768 = 24,674,304 on top of the shared table.
static_assert(parameter_count(presets::flan_t5_base) == 247'577'856);

// T5Model (no lm_head) of t5-3b: d_kv 128 x 32 heads = 4096 inner width, d_ff 16384.
constexpr model_spec t5_3b_model = [] {
  model_spec m = presets::t5_large;
  m.heads = 32;
  m.head_dim = 128;
  m.ffn = 16384;
  m.head = head_kind::none;
  return m;
}();
static_assert(parameter_count(t5_3b_model) == 2'851'598'336);  // DeepSpeed memory.rst: "2851M total params"
// bigscience/T0_3B as T5Model (t5-v1_1-xl shapes): 2,783,959,040 (HF deepspeed docs).
constexpr model_spec t0_3b_model = [] {
  model_spec m = presets::flan_t5_base;
  m.layers = 24;
  m.hidden = 2048;
  m.heads = 32;
  m.ffn = 5120;
  m.head = head_kind::none;
  return m;
}();
static_assert(parameter_count(t0_3b_model) == 2'783'959'040);

// Decoder layers may differ from encoder layers (num_decoder_layers).
constexpr model_spec shallow_decoder = [] {
  model_spec m = presets::t5_small;
  m.decoder_layers = 2;
  return m;
}();
static_assert(parameter_count(presets::t5_small) - parameter_count(shallow_decoder) == 4 * 4'195'840);

// The whole estimate runs in constant evaluation, and grows with the target length.
constexpr training_spec run{.micro_batch = 2, .seq_len = 128, .attention = attention_impl::eager};
constexpr training_spec longer_target = [] {
  training_spec t = run;
  t.target_len = 256;
  return t;
}();
constexpr estimate_result small = estimate(presets::t5_small, run);
static_assert(small.parameter_count == 60'506'624);
static_assert(estimate(presets::t5_small, longer_target).steady.tensor > small.steady.tensor);
// Weights, gradients and AdamW state at least: 16 bytes per parameter in fp32.
static_assert(small.steady.tensor.value > 16ULL * 60'506'624);

// A built graph can itself be a constant, with both stacks written (T5) or one (GPT-2,
// whose unused encoder slots hold no op).
constexpr model_graph t5_built = build(presets::t5_small, run);
static_assert(t5_built.is_encoder_decoder() && t5_built.stacks.encoder.size > 0 && t5_built.stacks.decoder.size > 0);
static_assert(estimate(t5_built).parameter_count == 60'506'624);
constexpr model_graph gpt2_built = build(presets::gpt2, run);
static_assert(!gpt2_built.is_encoder_decoder() && gpt2_built.stacks.encoder.size == 0);
static_assert(estimate(gpt2_built).parameter_count == 124'439'808);

}  // namespace
