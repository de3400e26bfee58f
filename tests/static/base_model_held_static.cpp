// What the base model's forward holds through its blocks (graph::held) and what BLOOM's
// attention frame keeps (model_spec::attention_keeps_locals), in constant evaluation:
// OPT's and BLOOM's (b, 1, s, s) causal mask with the 2-D ones mask, OPT's position ids,
// BLOOM's ALiBi bias; none for the LLaMA recipe; checkpointed blocks keep them in backward.
#include <memscale/memscale.hpp>

namespace {

using namespace memscale;

// The small BLOOM of docs/research/scripts/trace_families.py: hidden 256, 8 heads, 4 layers.
constexpr model_spec small_bloom(bool mask, bool alibi) {
  return model_spec{.name = "small-bloom", .layers = 4, .hidden = 256, .heads = 8, .ffn = 1024, .vocab = 4096,
                    .positions = position_kind::none, .fused_qkv = true, .qkv_bias = true, .attn_out_bias = true,
                    .mlp_bias = true, .embedding_norm = true, .tied_embeddings = true, .builds_attention_mask = mask,
                    .alibi = alibi, .attention_keeps_locals = true};
}

constexpr model_spec small_opt(bool mask) {
  return model_spec{.name = "small-opt", .layers = 4, .hidden = 256, .heads = 8, .ffn = 1024, .vocab = 4096,
                    .max_positions = 2050, .mlp = mlp_kind::relu, .qkv_bias = true, .attn_out_bias = true,
                    .mlp_bias = true, .tied_embeddings = true, .builds_attention_mask = mask};
}

constexpr training_spec cpu_run(checkpointing c) {
  return training_spec{.micro_batch = 4, .seq_len = 512, .optimizer = optimizer_kind::adamw,
                       .optimizer_impl = optimizer_implementation::for_loop, .ckpt = c,
                       .attention = attention_impl::eager, .dropout = false, .device = device_kind::cpu};
}

constexpr std::uint64_t b = 4;
constexpr std::uint64_t s = 512;
// fp32 causal mask (b, 1, s, s) and the fp32 all-ones (b, s) attention_mask.
constexpr std::uint64_t mask_bytes = 4 * b * s * s + 4 * b * s;

static_assert(build(small_opt(true), cpu_run(checkpointing::none)).stack().held.value == mask_bytes + 8 * b * s);
static_assert(build(small_bloom(true, true), cpu_run(checkpointing::none)).stack().held.value ==
              mask_bytes + 4 * b * 8 * s);
static_assert(build(small_bloom(false, true), cpu_run(checkpointing::none)).stack().held.value == 4 * b * 8 * s);
static_assert(build(presets::llama_base("tiny", 2, 64, 4, 2, 128, 100), cpu_run(checkpointing::none)).stack()
                  .held.value == 0);

// With every block checkpointed the peak is a block's backward, where the blocks' inputs
// (the masks among them) are still saved: the held bytes add one to one.
constexpr std::uint64_t ckpt_peak(const model_spec& m) {
  return estimate(m, cpu_run(checkpointing::full)).steady.tensor.value;
}
static_assert(estimate(small_bloom(true, true), cpu_run(checkpointing::full)).steady.at == phase::backward);
static_assert(ckpt_peak(small_bloom(true, true)) - ckpt_peak(small_bloom(false, false)) == mask_bytes + 4 * b * 8 * s);

// Without checkpointing the masks die with the base model's forward, before the head's
// logits and loss, where these small models peak: the peak does not move.
static_assert(estimate(small_opt(true), cpu_run(checkpointing::none)).steady.tensor.value -
                  estimate(small_opt(false), cpu_run(checkpointing::none)).steady.tensor.value ==
              8 * b * s);  // only OPT's position ids + 2, kept by the position embedding

// BLOOM's attention keeps fused_qkv, matmul_result and attn_weights until it returns: the
// rerun of a checkpointed block's forward peaks at its residual add with all three alive.
constexpr model_spec without_locals() {
  model_spec m = small_bloom(true, true);
  m.attention_keeps_locals = false;
  return m;
}
static_assert(ckpt_peak(small_bloom(true, true)) > ckpt_peak(without_locals()));

}  // namespace
