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

}  // namespace
