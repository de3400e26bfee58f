// Parameter counts of the model_spec features the config.json families use, in constant
// evaluation: per-head and full-width qk-norm, post and sandwich branch norms, a shared
// expert with its gate, the decoder classification head, and validate(model, run); the
// multi-query attention over a fused projection and a model-wide buffer in estimate();
// Cohere's Python fp32 LayerNorm.
#include <memscale/memscale.hpp>

namespace {

using namespace memscale;

constexpr model_spec tiny() {
  model_spec m = presets::llama_base("tiny", 2, 64, 4, 2, 128, 100);
  m.context_length = 256;
  return m;
}

// hidden 64, 4 heads of 16, 2 kv heads: q 64x64, k/v 64x32, o 64x64 = 12,288; MLP 3x64x128
// = 24,576; two norms 128 -> 36,992 per layer; embeddings and head 2 x 6,400; final norm 64.
constexpr std::uint64_t base_total = 2 * 36'992 + 2 * 6'400 + 64;
static_assert(parameter_count(tiny()) == base_total);

constexpr model_spec with_qk(qk_norm_kind k) {
  model_spec m = tiny();
  m.qk_norm = k;
  return m;
}
static_assert(parameter_count(with_qk(qk_norm_kind::per_head)) == base_total + 2 * (16 + 16));
static_assert(parameter_count(with_qk(qk_norm_kind::full_width)) == base_total + 2 * (64 + 32));

constexpr model_spec with_norms(branch_norms n) {
  model_spec m = tiny();
  m.block_norms = n;
  return m;
}
static_assert(parameter_count(with_norms(branch_norms::post)) == base_total);
static_assert(parameter_count(with_norms(branch_norms::sandwich)) == base_total + 2 * 128);

constexpr model_spec with_shared_expert() {
  model_spec m = tiny();
  m.experts = 4;
  m.experts_per_token = 2;
  m.shared_expert_ffn = 256;
  m.shared_expert_gate = true;
  return m;
}
// Four experts of 24,576, a 64x4 router, a shared expert of 3x64x256 and its 64x1 gate.
static_assert(parameter_count(with_shared_expert()) == base_total + 2 * (3 * 24'576 + 256 + 49'152 + 64));

constexpr model_spec classifier() {
  model_spec m = tiny();
  m.head = head_kind::sequence_classification;
  m.num_labels = 3;
  return m;
}
// The untied 100x64 head becomes a bias-free 3x64 score layer.
static_assert(parameter_count(classifier()) == base_total - 6'400 + 3 * 64);

static_assert(validate(tiny(), training_spec{.micro_batch = 1, .seq_len = 256}).layers == 2);

// GPTBigCode's attention: one fused c_attn, one kv head, k and v read as its views. The matmuls
// keep the fused output (tokens x (64 + 2 x 16)) and the query copy (tokens x 64) instead of
// a repeated v and copies of q and repeated k (3 x tokens x 64): tokens x (2 x 16 - 64) per layer.
constexpr training_spec fp32_run{
    .micro_batch = 1, .seq_len = 16, .prec = precision::fp32, .attention = attention_impl::eager, .dropout = false};
constexpr model_spec multi_query(bool fused_views) {
  model_spec m = tiny();
  m.kv_heads = 1;
  m.fused_qkv = true;
  m.attention_keeps_fused_kv = fused_views;
  return m;
}
static_assert(estimate(multi_query(false), fp32_run).saved_activation_bytes -
                  estimate(multi_query(true), fp32_run).saved_activation_bytes ==
              bytes{2 * 16 * (64 - 2 * 16) * 4});

// A buffer the model registers once (GPTBigCode's n_positions^2 bool mask) is counted once.
constexpr model_spec with_model_buffer() {
  model_spec m = tiny();
  m.model_buffer_bytes = 256 * 256;
  return m;
}
static_assert(estimate(with_model_buffer(), fp32_run).steady.tensor - estimate(tiny(), fp32_run).steady.tensor ==
              bytes{256 * 256});

// Cohere's Python LayerNorm (no bias: the parameters of an RMSNorm; per-head qk-norm weights
// of (heads, head_dim) and (kv_heads, head_dim)). Per norm over n = 16 x 64 elements of 16
// rows it keeps rsqrt, x - mean twice and the normalized x in fp32, where the fp32 RMSNorm
// keeps rsqrt, the normalized x and its input: 4n bytes more, five norms. On torch 1.13 it also
// keeps (x - mean)^2 and its fp32 input (8n). Under pure bf16 it keeps 12n + 4 x 16 + the
// weight's fp32 copy (4 x 64) where the RMSNorm keeps rsqrt, the normalized bf16 x and the fp32
// upcast (6n + 64): 6n + 256 more per norm.
constexpr model_spec cohere_norm(bool qk) {
  model_spec m = tiny();
  m.norm = norm_kind::layernorm_fp32_python;
  if (qk) m.qk_norm = qk_norm_kind::per_head;
  return m;
}
static_assert(parameter_count(cohere_norm(false)) == base_total);
static_assert(parameter_count(cohere_norm(true)) == base_total + 2 * (4 * 16 + 2 * 16));
constexpr std::uint64_t norm_elements = 16 * 64;
static_assert(estimate(cohere_norm(false), fp32_run).saved_activation_bytes -
                  estimate(tiny(), fp32_run).saved_activation_bytes ==
              bytes{5 * 4 * norm_elements});
constexpr training_spec torch_113_run = [] {
  training_spec r = fp32_run;
  r.torch_version = 113;
  return r;
}();
static_assert(estimate(cohere_norm(false), torch_113_run).saved_activation_bytes -
                  estimate(cohere_norm(false), fp32_run).saved_activation_bytes ==
              bytes{5 * 8 * norm_elements});
constexpr training_spec bf16_run = [] {
  training_spec r = fp32_run;
  r.prec = precision::pure_bf16;
  return r;
}();
static_assert(estimate(cohere_norm(false), bf16_run).saved_activation_bytes -
                  estimate(tiny(), bf16_run).saved_activation_bytes ==
              bytes{5 * (6 * norm_elements + 256)});

}  // namespace
