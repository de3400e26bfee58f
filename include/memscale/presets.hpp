// memscale/presets.hpp: published architectures, from each model's config.json.
//
// Each preset's parameter count equals the published total; tests/static/presets_static.cpp
// pins every one with a static_assert.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "memscale/model.hpp"

namespace memscale::presets {

// openai-community/gpt2 config.json (n_embd 768, n_layer 12, n_head 12, n_positions 1024,
// vocab 50257); GPT2Attention registers a max_positions^2 bool causal-mask buffer per layer.
constexpr model_spec gpt2_base(std::string_view name, std::uint64_t layers, std::uint64_t hidden, std::uint64_t heads) {
  return {.name = name,
          .layers = layers,
          .hidden = hidden,
          .heads = heads,
          .ffn = 4 * hidden,
          .vocab = 50257,
          .max_positions = 1024,
          .mlp = mlp_kind::gelu_tanh,
          .fused_qkv = true,
          .qkv_bias = true,
          .attn_out_bias = true,
          .mlp_bias = true,
          .tied_embeddings = true,
          .dropout = true,
          .buffer_bytes_per_layer = 1024 * 1024,
          .generate_tuple_cache_before = 452};  // GPT-2 kept tuple caches until 4.52 (PR #35761)
}

inline constexpr model_spec gpt2 = gpt2_base("gpt2", 12, 768, 12);
inline constexpr model_spec gpt2_medium = gpt2_base("gpt2-medium", 24, 1024, 16);
inline constexpr model_spec gpt2_large = gpt2_base("gpt2-large", 36, 1280, 20);
inline constexpr model_spec gpt2_xl = gpt2_base("gpt2-xl", 48, 1600, 25);

// google-bert/bert-{base,large}-uncased config.json: vocab 30522, 512 positions, 2 token
// types, post-LayerNorm, GELU; the published totals include the pooler.
constexpr model_spec bert_base(std::string_view name, std::uint64_t layers, std::uint64_t hidden, std::uint64_t heads) {
  return {.name = name,
          .arch = architecture::encoder,
          .layers = layers,
          .hidden = hidden,
          .heads = heads,
          .ffn = 4 * hidden,
          .vocab = 30522,
          .max_positions = 512,
          .type_vocab = 2,
          .layout = block_layout::post_norm,
          .qkv_bias = true,
          .attn_out_bias = true,
          .mlp_bias = true,
          .embedding_norm = true,
          .final_norm = false,
          .tied_embeddings = true,
          .head = head_kind::none,
          .pooler = true,
          .dropout = true};
}

inline constexpr model_spec bert_base_uncased = bert_base("bert-base-uncased", 12, 768, 12);
inline constexpr model_spec bert_large_uncased = bert_base("bert-large-uncased", 24, 1024, 16);

// LLaMA-family decoders: RoPE, RMSNorm, SwiGLU, no biases, untied head, fp32 logits.
// `context` is the config's max_position_embeddings: the longest sequence the model takes,
// checked for presets as for a config.json (memscale/validate.hpp check_sequence).
constexpr model_spec llama_base(std::string_view name, std::uint64_t layers, std::uint64_t hidden, std::uint64_t heads,
                                std::uint64_t kv_heads, std::uint64_t ffn, std::uint64_t vocab,
                                std::uint64_t context = 0) {
  return {.name = name,
          .layers = layers,
          .hidden = hidden,
          .heads = heads,
          .kv_heads = kv_heads,
          .ffn = ffn,
          .vocab = vocab,
          .context_length = context,
          .positions = position_kind::rotary,
          .norm = norm_kind::rmsnorm,
          .mlp = mlp_kind::swiglu,
          .norm_bias = false,
          .upcast_logits = true,
          .softmax_fp32 = true,
          .liger = liger_patch::llama};  // apply_liger_kernel_to_llama / _mistral / _mixtral / _qwen2
}

// The release from which a family's layers share one rotary table (model_spec::rotary_tables_per_layer_before).
constexpr model_spec with_rotary_tables_before(model_spec m, std::uint32_t release) {
  m.rotary_tables_per_layer_before = release;
  return m;
}
// LLaMA's releases, as the llama config.json reader sets them: per-layer rotary tables before 4.40 and
// modeling_llama.py@v4.38's per-batch (max_pos)^2 causal-mask copies (refused at 4.38).
constexpr model_spec with_llama_releases(model_spec m) {
  m = with_rotary_tables_before(m, 440);
  m.batch_causal_mask_release = 438;
  return m;
}

// meta-llama/Llama-2-{7,13,70}b-hf config.json (max_position_embeddings 4096).
inline constexpr model_spec llama_2_7b =
    with_llama_releases(llama_base("llama-2-7b", 32, 4096, 32, 32, 11008, 32000, 4096));
inline constexpr model_spec llama_2_13b =
    with_llama_releases(llama_base("llama-2-13b", 40, 5120, 40, 40, 13824, 32000, 4096));
inline constexpr model_spec llama_2_70b =
    with_llama_releases(llama_base("llama-2-70b", 80, 8192, 64, 8, 28672, 32000, 4096));
// meta-llama/Meta-Llama-3-8B config.json (max_position_embeddings 8192).
inline constexpr model_spec llama_3_8b =
    with_llama_releases(llama_base("llama-3-8b", 32, 4096, 32, 8, 14336, 128256, 8192));
// mistralai/Mistral-7B-v0.1 config.json (max_position_embeddings 32768).
inline constexpr model_spec mistral_7b =
    with_rotary_tables_before(llama_base("mistral-7b", 32, 4096, 32, 8, 14336, 32000, 32768), 442);

// mistralai/Mixtral-8x7B-v0.1 config.json: 8 experts, 2 per token, a router per layer;
// max_position_embeddings 32768.
constexpr model_spec mixtral_base() {
  model_spec m = llama_base("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768);
  m.experts = 8;
  m.experts_per_token = 2;
  m.rotary_tables_per_layer_before = 442;
  return m;
}
inline constexpr model_spec mixtral_8x7b = mixtral_base();

// Qwen/Qwen2.5-7B config.json: biases on q, k and v only; max_position_embeddings 131072.
constexpr model_spec qwen25_base() {
  model_spec m = llama_base("qwen2.5-7b", 28, 3584, 28, 4, 18944, 152064, 131072);
  m.qkv_bias = true;
  m.rotary_tables_per_layer_before = 442;
  return m;
}
inline constexpr model_spec qwen2_5_7b = qwen25_base();

// T5 (google-t5/t5-{small,base,large} config.json: vocab 32128, d_kv 64, 32 relative
// attention buckets, ReLU, tied head, dropout_rate 0.1); v1.1 / FLAN-T5 (google/t5-v1_1-*,
// google/flan-t5-* config.json): gated-gelu (gelu_new), untied lm_head.
constexpr model_spec t5_family(std::string_view name, std::uint64_t layers, std::uint64_t hidden, std::uint64_t heads,
                             std::uint64_t ffn, bool v1_1) {
  return {.name = name,
          .arch = architecture::encoder_decoder,
          .layers = layers,
          .hidden = hidden,
          .heads = heads,
          .head_dim = 64,
          .ffn = ffn,
          .vocab = 32128,
          .positions = position_kind::none,
          .norm = norm_kind::rmsnorm,
          .mlp = v1_1 ? mlp_kind::geglu : mlp_kind::relu,
          .norm_bias = false,
          .tied_embeddings = !v1_1,
          .dropout = true,
          .relative_attention_buckets = 32};
}

inline constexpr model_spec t5_small = t5_family("t5-small", 6, 512, 8, 2048, false);
inline constexpr model_spec t5_base_model = t5_family("t5-base", 12, 768, 12, 3072, false);
inline constexpr model_spec t5_large = t5_family("t5-large", 24, 1024, 16, 4096, false);
inline constexpr model_spec flan_t5_base = t5_family("flan-t5-base", 12, 768, 12, 2048, true);

inline constexpr std::array all{gpt2,        gpt2_medium, gpt2_large, gpt2_xl,    bert_base_uncased,
                                bert_large_uncased, llama_2_7b, llama_2_13b, llama_2_70b, llama_3_8b,
                                mistral_7b,  mixtral_8x7b, qwen2_5_7b, t5_small, t5_base_model,
                                t5_large,    flan_t5_base};

constexpr std::optional<model_spec> find(std::string_view name) {
  for (const auto& m : all)
    if (m.name == name) return m;
  return std::nullopt;
}

}  // namespace memscale::presets
