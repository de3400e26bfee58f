// Parameter counts of the model_spec features the config.json families use, in constant
// evaluation: per-head and full-width qk-norm, post and sandwich branch norms, a shared
// expert with its gate, the decoder classification head, and validate(model, run).
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

}  // namespace
