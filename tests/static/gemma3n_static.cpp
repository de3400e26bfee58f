// Gemma 3n's AltUp graph (graph/recipes/altup_stack.hpp) in constant evaluation: the traced small
// model's parameters (tools/trace/gemma3n_cases.py, sum(p.numel()) 8,012,112) owned by the graph's
// ops, the sparse-gate layers' saved bytes, and v_norm keeping nothing for a weight.
#include <memscale/memscale.hpp>

namespace {

using namespace memscale;

// The traced model's config (docs/data/cpu_traced_families_2025.json, cpu-gemma3n_text-*) as
// json/hf/gemma3n.hpp reads it.
constexpr model_spec small_gemma3n(std::uint64_t sparse_layers) {
  model_spec m{};
  m.layers = 5;
  m.hidden = 256;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 64;
  m.ffn = 1024;
  m.vocab = 4096;
  m.context_length = 2048;
  m.positions = position_kind::rotary;
  m.norm = norm_kind::rmsnorm;
  m.norm_bias = false;
  m.rms_norm_fp32_scale = true;
  m.mlp = mlp_kind::geglu;
  m.tied_embeddings = true;
  m.scale_embeddings = true;
  m.qk_norm = qk_norm_kind::per_head;
  m.value_norm = true;
  m.block_norms = branch_norms::sandwich;
  m.upcast_logits = true;
  m.shift_labels = true;
  m.softmax_fp32 = true;
  m.logit_softcap = true;
  m.altup_inputs = 4;
  m.altup_correct_scale = true;
  m.per_layer_input_width = 64;
  m.per_layer_vocab = 4096;
  m.laurel_rank = 32;
  m.sparse_leading_layers = sparse_layers;
  return m;
}

static_assert(parameter_count(small_gemma3n(2)) == 8'012'112);

constexpr training_spec traced_run{.micro_batch = 2, .seq_len = 256, .prec = precision::fp32, .dropout = false};

// Each sparse-gate layer saves its relu output (tokens x ffn) and one std per row beyond a dense layer.
static_assert(estimate(small_gemma3n(2), traced_run).saved_activation_bytes -
                  estimate(small_gemma3n(0), traced_run).saved_activation_bytes ==
              bytes{2 * 4 * (512 * 1024 + 512)});

// Full checkpointing recomputes them: nothing of theirs is kept.
constexpr training_spec checkpointed{
    .micro_batch = 2, .seq_len = 256, .prec = precision::fp32, .ckpt = checkpointing::full, .dropout = false};
static_assert(estimate(small_gemma3n(2), checkpointed).saved_activation_bytes ==
              estimate(small_gemma3n(0), checkpointed).saved_activation_bytes);

// The multimodal Gemma3nModel trains its embedders (graph/layers/multimodal_embedders.hpp): over T
// tokens, the per-layer lookup's int64 ids, and per embedder of width w into hidden h: its int64
// ids, the looked-up and normalized rows and the projection's input (3 x 4Tw: fp32, the scale
// trained), the projection's output (4Th, kept by the post-projection norm), two rsqrt rows (8T),
// the scale terms of the two norms (4w + 4h) and torch.where's bool mask (T).
constexpr model_spec small_multimodal() {
  model_spec m = small_gemma3n(2);
  m.vision_embedder = {.vocab = 128, .width = 2048};
  m.audio_embedder = {.vocab = 128, .width = 64};
  return m;
}
constexpr std::uint64_t embedder_saved(std::uint64_t t, std::uint64_t w, std::uint64_t h) {
  return 8 * t + 3 * 4 * t * w + 4 * t * h + 8 * t + 4 * w + 4 * h + t;
}
static_assert(estimate(small_multimodal(), traced_run).saved_activation_bytes -
                  estimate(small_gemma3n(2), traced_run).saved_activation_bytes ==
              bytes{8 * 512 + embedder_saved(512, 2048, 256) + embedder_saved(512, 64, 256)});
// The embedders' parameters: 128 x w tables, two norms of w (the soft one frozen: hard ids only),
// the w x h projections.
static_assert(parameter_count(small_multimodal()) - parameter_count(small_gemma3n(2)) ==
              130 * 2048 + 2048 * 256 + 130 * 64 + 64 * 256);

}  // namespace
