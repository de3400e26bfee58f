// memscale/json/hf/gemma3n.hpp: Gemma 3n's config.json (model_type gemma3n, with text_config
// gemma3n_text; or gemma3n_text alone): its text stack counted exactly and read into the model
// the AltUp training graph builds (graph/recipes/altup_stack.hpp). Source: transformers models/gemma3n/
// modeling_gemma3n.py@b87ecf8c (Gemma3nTextModel, Gemma3nTextDecoderLayer, Gemma3nTextAltUp,
// Gemma3nTextLaurelBlock, Gemma3nTextMLP) and configuration_gemma3n.py@01854809
// (Gemma3nTextConfig's defaults).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "memscale/detail/math.hpp"
#include "memscale/json/hf/config.hpp"
#include "memscale/json/hf/gemma3n_towers.hpp"
#include "memscale/model.hpp"

namespace memscale::json_io::hf {

// Gemma3nTextConfig's defaults (configuration_gemma3n.py@01854809, the E4B sizes).
struct gemma3n_text_defaults {
  static constexpr std::uint64_t vocab = 262400;
  static constexpr std::uint64_t hidden = 2048;
  static constexpr std::uint64_t ffn = 16384;
  static constexpr std::uint64_t layers = 35;
  static constexpr std::uint64_t heads = 8;
  static constexpr std::uint64_t kv_heads = 2;
  static constexpr std::uint64_t head_dim = 256;
  static constexpr std::uint64_t vocab_per_layer = 262144;  // vocab_size_per_layer_input
  static constexpr std::uint64_t hidden_per_layer = 256;    // hidden_size_per_layer_input
  static constexpr std::uint64_t altup_inputs = 4;          // altup_num_inputs
  static constexpr std::uint64_t kv_shared_layers = 15;     // num_kv_shared_layers
  static constexpr std::uint64_t laurel_rank = 64;
};

namespace detail {

// intermediate_size: one int for every layer, or one per layer (Gemma3nTextConfig.__post_init__).
inline std::uint64_t gemma3n_ffn_of_layer(const config& c, std::uint64_t layers, std::uint64_t layer) {
  if (!c.has("intermediate_size") || !c.raw().at("intermediate_size").is_array())
    return c.count("intermediate_size", gemma3n_text_defaults::ffn);
  const json& sizes = c.raw().at("intermediate_size");
  if (sizes.size() != layers)
    bad_field(error_code::invalid_model, c.field("intermediate_size"), sizes,
              "must be one integer or list one per hidden layer (num_hidden_layers " + std::to_string(layers) + ")");
  const json& size = sizes.at(static_cast<std::size_t>(layer));
  if (!size.is_number_unsigned() || size.get<std::uint64_t>() == 0)
    bad_field(error_code::invalid_model, c.field("intermediate_size"), sizes, "must hold positive integers");
  return size.get<std::uint64_t>();
}

// activation_sparsity_pattern: one sparsity in [0, 1) per layer (Gemma3nTextConfig.__post_init__
// requires the length; Gemma3nTextMLP reads entry layer_idx).
inline void check_gemma3n_sparsity(const config& c, std::uint64_t layers) {
  if (!c.has("activation_sparsity_pattern")) return;
  const json& pattern = c.raw().at("activation_sparsity_pattern");
  if (!pattern.is_array() || pattern.size() != layers)
    bad_field(error_code::invalid_model, c.field("activation_sparsity_pattern"), pattern,
              "must list one sparsity per hidden layer (num_hidden_layers " + std::to_string(layers) + ")");
  for (const json& s : pattern)
    if (!s.is_number() || s.get<double>() < 0.0 || s.get<double>() >= 1.0)
      bad_field(error_code::invalid_model, c.field("activation_sparsity_pattern"), s,
                "must hold numbers in [0, 1) (Normal(0, 1).icdf of the sparsity is the gate's cutoff)");
}

}  // namespace detail

// The parameters of Gemma3nForCausalLM (the language_model of Gemma3nForConditionalGeneration,
// whose lm_head is tied to embed_tokens unless tie_word_embeddings is false), from a
// gemma3n_text config; checks the keys that size it.
inline std::uint64_t gemma3n_text_parameters(const config& c) {
  using d = gemma3n_text_defaults;
  constexpr memscale::detail::quantity q{"gemma3n text parameters"};
  const auto mul = [&](std::uint64_t a, std::uint64_t b) { return memscale::detail::checked_mul(a, b, q); };
  const auto add = [&](std::uint64_t a, std::uint64_t b) { return memscale::detail::checked_add(a, b, q); };
  const std::uint64_t layers = c.count("num_hidden_layers", d::layers);
  const std::uint64_t h = c.count("hidden_size", d::hidden);
  const std::uint64_t heads = c.count("num_attention_heads", d::heads);
  const std::uint64_t kv_heads = c.count("num_key_value_heads", d::kv_heads);
  const std::uint64_t head_dim = c.count("head_dim", d::head_dim);
  const std::uint64_t vocab = c.count("vocab_size", d::vocab);
  const std::uint64_t vocab_per_layer = c.count("vocab_size_per_layer_input", d::vocab_per_layer);
  const std::uint64_t per_layer = c.count("hidden_size_per_layer_input", d::hidden_per_layer);
  const std::uint64_t altup = c.count("altup_num_inputs", d::altup_inputs);
  const std::uint64_t shared = c.count("num_kv_shared_layers", d::kv_shared_layers);
  const std::uint64_t rank = c.count("laurel_rank", d::laurel_rank);
  const bool bias = c.flag("attention_bias", false);
  for (const auto& [key, value] : {std::pair{"num_hidden_layers", layers}, std::pair{"hidden_size", h},
                                   std::pair{"num_attention_heads", heads}, std::pair{"num_key_value_heads", kv_heads},
                                   std::pair{"head_dim", head_dim}, std::pair{"vocab_size", vocab},
                                   std::pair{"altup_num_inputs", altup}})
    if (value == 0) bad_field(error_code::invalid_model, c.field(key), value, "must be > 0");
  if (heads % kv_heads != 0)
    bad_field(error_code::invalid_model, c.field("num_key_value_heads"), kv_heads,
              "must divide num_attention_heads (" + std::to_string(heads) + ")");
  if (c.count("altup_active_idx", 0) >= altup)
    bad_field(error_code::invalid_model, c.field("altup_active_idx"), c.count("altup_active_idx", 0),
              "must be below altup_num_inputs (" + std::to_string(altup) + ")");
  // Gemma3nTextAttention: the shared layers read the cache of the last layer of their type before them.
  if (shared >= layers)
    bad_field(error_code::invalid_model, c.field("num_kv_shared_layers"), shared,
              "must be below num_hidden_layers (" + std::to_string(layers) + ")");
  check_layer_types(c, layers);
  detail::check_gemma3n_sparsity(c, layers);
  const std::string act = c.text("hidden_activation", "gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh" && act != "gelu" && act != "silu")
    bad_field(error_code::unsupported, c.field("hidden_activation"), act, "must be gelu_pytorch_tanh, gelu or silu");

  const std::uint64_t q_width = mul(heads, head_dim);
  const std::uint64_t kv_width = mul(kv_heads, head_dim);
  // Gemma3nTextAttention: q, k, v, o projections; q_norm and k_norm scaled over head_dim, v_norm
  // without a scale (with_scale=False registers a buffer, not a parameter).
  std::uint64_t attention = add(add(mul(h, q_width), mul(2, mul(h, kv_width))), mul(q_width, h));
  if (bias) attention = add(attention, add(add(q_width, mul(2, kv_width)), h));
  attention = add(attention, mul(2, head_dim));
  // Gemma3nTextAltUp: correct_output_scale (h), correction_coefs (n x n), prediction_coefs
  // (n x n^2), modality_router (h x n), router_norm (h).
  const std::uint64_t altup_block =
      add(add(mul(2, h), mul(altup, altup)), add(mul(mul(altup, altup), altup), mul(h, altup)));
  // Gemma3nTextLaurelBlock: linear_left (h x rank), linear_right (rank x h), post_laurel_norm (h).
  const std::uint64_t laurel = add(mul(2, mul(h, rank)), h);
  // per_layer_input_gate (h x p), per_layer_projection (p x h), post_per_layer_input_norm (h).
  const std::uint64_t per_layer_gate = add(mul(2, mul(h, per_layer)), h);
  const std::uint64_t block_norms = mul(4, h);  // input, post-attention, pre- and post-feedforward
  const std::uint64_t fixed = add(add(attention, altup_block), add(add(laurel, per_layer_gate), block_norms));
  std::uint64_t n = 0;
  for (std::uint64_t i = 0; i < layers; ++i)
    n = add(n, add(fixed, mul(3, mul(h, detail::gemma3n_ffn_of_layer(c, layers, i)))));  // gate, up, down

  const std::uint64_t per_layer_width = mul(layers, per_layer);
  n = add(n, mul(vocab, h));                                // embed_tokens
  n = add(n, mul(vocab_per_layer, per_layer_width));        // embed_tokens_per_layer
  n = add(n, add(mul(h, per_layer_width), per_layer));      // per_layer_model_projection, its norm
  n = add(n, mul(2, mul(altup - 1, mul(h, h))));           // altup_projections, altup_unembed_projections
  n = add(n, h);                                            // norm
  if (!c.flag("tie_word_embeddings", true)) n = add(n, mul(vocab, h));  // an untied lm_head
  return n;
}

// The text config of a gemma3n or gemma3n_text config.json (Gemma3nConfig builds
// Gemma3nTextConfig() from its defaults when text_config is left out).
inline config gemma3n_text_config(const config& c) {
  return c.text("model_type", "") == "gemma3n" ? c.nested_or_defaults("text_config") : c;
}


// activation_sparsity_pattern as the layers that cut their gate (Gemma3nTextMLP: sparsity > 0
// runs _gaussian_topk): the first k layers, the rest 0 (the E2B and E4B patterns); the graph
// adds what those k save beyond a dense layer (graph/layers/activation_sparsity.hpp). The default (0.95,) * 10 + (0.0,) * 25
// (configuration_gemma3n.py@01854809) fits only 35 layers.
inline std::uint64_t gemma3n_sparse_leading_layers(const config& c, std::uint64_t layers) {
  if (!c.has("activation_sparsity_pattern")) {
    if (layers != gemma3n_text_defaults::layers)
      bad_field(error_code::invalid_model, c.field("activation_sparsity_pattern"), json(),
                "must be given for num_hidden_layers " + std::to_string(layers) +
                    " (Gemma3nTextConfig's default lists 35 layers)");
    return 10;
  }
  const json& pattern = c.raw().at("activation_sparsity_pattern");
  std::uint64_t leading = 0;
  while (leading < layers && pattern.at(static_cast<std::size_t>(leading)).get<double>() > 0.0) ++leading;
  for (std::uint64_t i = leading; i < layers; ++i)
    if (pattern.at(static_cast<std::size_t>(i)).get<double>() > 0.0)
      bad_field(error_code::unsupported, c.field("activation_sparsity_pattern"), pattern,
                "must give the sparse layers (> 0) first and 0 to the others (the E2B and E4B patterns, "
                "which the graph models)");
  if (leading == layers)
    bad_field(error_code::unsupported, c.field("activation_sparsity_pattern"), pattern,
              "must leave at least one layer at 0 (the E2B and E4B patterns, which the graph models)");
  return leading;
}

// Gemma3nForCausalLM from a gemma3n_text config (modeling_gemma3n.py@b87ecf8c), its keys checked
// and counted by gemma3n_text_parameters. In training no cache is passed, so the KV-shared layers
// compute their own k and v (Gemma3nTextAttention reads the shared cache only with past_key_values):
// num_kv_shared_layers changes nothing here.
inline model_spec gemma3n_text(const config& c) {
  using d = gemma3n_text_defaults;
  gemma3n_text_parameters(c);  // checks the keys that size the stack
  model_spec m{};
  m.layers = c.count("num_hidden_layers", d::layers);
  m.hidden = c.count("hidden_size", d::hidden);
  m.heads = c.count("num_attention_heads", d::heads);
  m.kv_heads = c.count("num_key_value_heads", d::kv_heads);
  m.head_dim = c.count("head_dim", d::head_dim);
  m.vocab = c.count("vocab_size", d::vocab);
  m.context_length = c.count("max_position_embeddings", 32768);
  m.ffn = detail::gemma3n_ffn_of_layer(c, m.layers, 0);
  for (std::uint64_t i = 1; i < m.layers; ++i)
    if (detail::gemma3n_ffn_of_layer(c, m.layers, i) != m.ffn)
      bad_field(error_code::unsupported, c.field("intermediate_size"), c.raw().at("intermediate_size"),
                "must be one width for every layer: the graph repeats one layer");
  m.positions = position_kind::rotary;
  m.norm = norm_kind::rmsnorm;
  m.norm_bias = false;
  // Gemma3nRMSNorm: x.float() normalized, times weight.float(), .type_as(x): the fp32 scale path.
  m.rms_norm_fp32_scale = true;
  m.mlp = gated_activation(c, "hidden_activation", "gelu_pytorch_tanh");
  m.qkv_bias = c.flag("attention_bias", false);
  m.attn_out_bias = m.qkv_bias;
  m.tied_embeddings = c.flag("tie_word_embeddings", true);
  m.scale_embeddings = true;  // Gemma3nTextScaledWordEmbedding: * sqrt(hidden)
  m.qk_norm = qk_norm_kind::per_head;
  m.value_norm = true;
  m.block_norms = branch_norms::sandwich;
  // loss_function (ForCausalLMLoss, every release with gemma3n): fp32 logits, the labels shifted.
  m.upcast_logits = true;
  m.shift_labels = true;
  m.softmax_fp32 = true;
  // final_logit_softcapping: 30.0 by default, off when null.
  m.logit_softcap = !c.raw().contains("final_logit_softcapping") || !c.raw().at("final_logit_softcapping").is_null();
  apply_dropout(c, m, {.attention = {"attention_dropout", 0.0}});
  // layer_types: every fifth layer full attention by default (Gemma3nTextConfig.__init__).
  std::uint64_t sliding = 0;
  for (std::uint64_t i = 0; i < m.layers; ++i)
    if (c.has("layer_types") ? c.raw().at("layer_types").at(static_cast<std::size_t>(i)) == "sliding_attention"
                             : (i + 1) % 5 != 0)
      ++sliding;
  m.sliding_window = c.count("sliding_window", 512);
  m.sliding_layers = sliding;
  m.rotary_per_layer_type = sliding < m.layers;
  m.altup_inputs = c.count("altup_num_inputs", d::altup_inputs);
  m.altup_correct_scale = c.flag("altup_correct_scale", true);
  m.per_layer_input_width = c.count("hidden_size_per_layer_input", d::hidden_per_layer);
  m.per_layer_vocab = c.count("vocab_size_per_layer_input", d::vocab_per_layer);
  m.laurel_rank = c.count("laurel_rank", d::laurel_rank);
  for (const auto& [key, value] : {std::pair{"hidden_size_per_layer_input", m.per_layer_input_width},
                                   std::pair{"vocab_size_per_layer_input", m.per_layer_vocab},
                                   std::pair{"laurel_rank", m.laurel_rank}})
    if (value == 0) bad_field(error_code::invalid_model, c.field(key), value, "must be > 0");
  m.sparse_leading_layers = gemma3n_sparse_leading_layers(c, m.layers);
  return m;
}

// Gemma3nForConditionalGeneration (model_type gemma3n) in a text-only run: the language model of
// text_config as above, with the MobileNetV5 vision tower and the audio encoder held as weights
// (gemma3n_towers.hpp; images run through the frozen vision tower, graph/layers/
// vision_tower_mobilenetv5.hpp; audio is not modelled) and both multimodal embedders, which
// Gemma3nModel.forward runs over every token (graph/layers/multimodal_embedders.hpp). Its loss
// upcasts the soft-capped logits and copies the shifted ones, as Gemma 3's does
// (modeling_gemma3n.py@00aa0f5d Gemma3nForConditionalGeneration.forward: logits.float(),
// shift_logits.contiguous(), nn.CrossEntropyLoss).
inline model_spec gemma3n(const config& c) {
  model_spec m = gemma3n_text(gemma3n_text_config(c));
  m.idle_tower_parameters = gemma3n_tower_parameters(c);
  m.vision = gemma3n_vision_tower(c, m.hidden);
  m.vision_embedder = gemma3n_vision_embedder(c);
  m.audio_embedder = gemma3n_audio_embedder(c);
  m.upcast_logits = true;
  m.shift_labels = false;
  return m;
}

}  // namespace memscale::json_io::hf
