// memscale/json/hf/llama4.hpp: Llama 4 (transformers models/llama4/modeling_llama4.py@000c33fd,
// configuration_llama4.py@008e5743): llama4_text (Llama4ForCausalLM) and the multimodal llama4
// (Llama4ForConditionalGeneration), its text_config the decoder and its vision tower and projector
// loaded beside it: weights in a text-only run, run frozen on a step's images
// (graph/layers/vision_tower_llama4.hpp).
// Layers differ by position: MoE layers every interleave_moe_layer_step-th (dense ones of
// intermediate_size_mlp), NoPE layers every no_rope_layer_interval-th (full attention, no
// qk-norm, query temperature); the graph's block holds one period of them
// (graph/layers/layer_pattern.hpp). The MoE runs every expert on every token
// (`experts_on_every_token`) beside an ungated shared expert; RoPE is the complex product
// (`rotary_complex`), the qk-norm a weightless fp32 L2 norm after it (`qk_norm_kind::l2`), and
// eager softmax stays in the input dtype. The chunked layers' mask differs from the full one in
// content only (eager and SDPA masks are (b, 1, s, s) either way).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cstdint>
#include <string>

#include "memscale/detail/math.hpp"
#include "memscale/json/hf/llama.hpp"

namespace memscale::json_io::hf {

namespace detail {

// A config list of one entry per layer (moe_layers: layer indices; no_rope_layers: 1 = RoPE per
// layer) must be the periodic pattern the reader models; `expected(i)` is layer i's entry.
template <class Expected>
inline void require_layer_list(const config& c, const char* key, std::uint64_t layers, bool indices,
                               const Expected& expected, const char* what) {
  if (!c.has(key)) return;
  const json& l = c.raw().at(key);
  if (!l.is_array()) bad_field(error_code::invalid_model, c.field(key), l, "must be an array");
  std::string wanted;
  json pattern = json::array();
  for (std::uint64_t i = 0; i < layers; ++i) {
    if (indices) {
      if (expected(i)) pattern.push_back(i);
    } else {
      pattern.push_back(expected(i) ? 1 : 0);
    }
  }
  // no_rope_layers may list more entries than layers (Llama4TextConfig reads the first ones).
  json given = l;
  if (!indices && given.size() > layers) given.erase(given.begin() + static_cast<std::ptrdiff_t>(layers), given.end());
  if (given != pattern)
    bad_field(error_code::unsupported, c.field(key), l, std::string("must be ") + what + " (" + pattern.dump() +
                                                            "): other layer patterns are not modelled");
}

}  // namespace detail

inline model_spec llama4_text(const config& c) {
  // Llama4TextConfig: vocab 202048, hidden 5120, intermediate 8192 (experts and shared expert),
  // intermediate_size_mlp 16384 (dense layers), 48 layers, 40 heads, 8 kv heads, head_dim 128,
  // 131072 positions, untied, attention_bias False.
  model_spec m = llama_like(c, {.head_dim = 128,
                                .shape = {.layers = 48, .hidden = 5120, .heads = 40, .ffn = 8192, .vocab = 202048,
                                          .context = 131072}});
  m.kv_heads = c.raw().contains("num_key_value_heads") ? c.count("num_key_value_heads", m.heads) : 8;
  m.mlp_bias = false;                // Llama4TextMLP and Llama4TextExperts have no bias
  m.softmax_fp32 = false;            // eager_attention_forward: softmax(attn_weights) in the input dtype
  m.rotary_complex = true;           // apply_rotary_emb: view_as_complex(x.float()) * freqs_cis
  m.experts = c.count("num_local_experts", 16);
  m.experts_per_token = c.count("num_experts_per_tok", 1);
  m.experts_on_every_token = true;   // Llama4TextMoe.forward: hidden_states.repeat(num_experts, 1)
  m.shared_expert_ffn = m.ffn;       // Llama4TextMoe.shared_expert = Llama4TextMLP(config): intermediate_size
  const std::uint64_t step = c.count("interleave_moe_layer_step", 1);
  if (step == 0) bad_field(error_code::invalid_model, c.field("interleave_moe_layer_step"), step, "must be > 0");
  m.moe_layer_step = step == 1 ? 0 : step;
  m.dense_ffn = c.count("intermediate_size_mlp", 16384);
  // moe_layers None: range(step - 1, layers, step).
  detail::require_layer_list(c, "moe_layers", m.layers, true, [&](std::uint64_t i) { return (i + 1) % step == 0; },
                             "every interleave_moe_layer_step-th layer");
  const std::uint64_t interval = c.count("no_rope_layer_interval", 4);
  if (interval == 0) bad_field(error_code::invalid_model, c.field("no_rope_layer_interval"), interval, "must be > 0");
  // no_rope_layers None (or empty): int((i + 1) % no_rope_layer_interval != 0), 1 = RoPE.
  const auto rope_at = [&](std::uint64_t i) { return (i + 1) % interval != 0; };
  if (c.has("no_rope_layers") && !c.raw().at("no_rope_layers").empty())
    detail::require_layer_list(c, "no_rope_layers", m.layers, false, rope_at, "a NoPE layer every no_rope_layer_interval-th");
  m.nope_layer_interval = interval;
  // layer_types None: chunked_attention on RoPE layers, full_attention on NoPE layers; a chunk
  // masks scores only, so the two kinds make tensors of the same sizes.
  if (c.has("layer_types")) {
    const json& types = c.raw().at("layer_types");
    if (!types.is_array() || types.size() != m.layers)
      bad_field(error_code::invalid_model, c.field("layer_types"), types, "must list one type per hidden layer");
    for (std::uint64_t i = 0; i < m.layers; ++i)
      if (types.at(static_cast<std::size_t>(i)) != (rope_at(i) ? "chunked_attention" : "full_attention"))
        bad_field(error_code::unsupported, c.field("layer_types"), types,
                  "must be chunked_attention on RoPE layers and full_attention on NoPE layers");
  }
  if (c.has("attention_chunk_size")) static_cast<void>(c.count("attention_chunk_size", 8192));  // a count when given
  // use_qk_norm (True): Llama4TextL2Norm on the RoPE layers' q and k (the NoPE layers have none).
  m.qk_norm = c.flag("use_qk_norm", true) ? qk_norm_kind::l2 : qk_norm_kind::none;
  // attn_temperature_tuning (True; Scout's file gives 4): NoPE layers scale q by a per-position tensor.
  const json& tuning = c.raw().contains("attn_temperature_tuning") ? c.raw().at("attn_temperature_tuning") : json(true);
  if (!tuning.is_boolean() && !tuning.is_number())
    bad_field(error_code::invalid_model, c.field("attn_temperature_tuning"), tuning, "must be a bool");
  m.nope_attention_temperature = tuning.is_boolean() ? tuning.get<bool>() : tuning.get<double>() != 0.0;
  static_cast<void>(c.number("floor_scale", 8192));
  static_cast<void>(c.number("attn_scale", 0.1));
  if (c.flag("output_router_logits", false))
    bad_field(error_code::unsupported, "config.output_router_logits", true,
              "must be false: the load-balancing loss over every layer's router logits is not modelled");
  if (c.number("router_jitter_noise", 0.0) != 0.0)
    bad_field(error_code::unsupported, c.field("router_jitter_noise"), c.raw().at("router_jitter_noise"),
              "must be 0: Llama4TextMoe does not read it");
  return m;
}

// Parameters of Llama4VisionModel and Llama4MultiModalProjector (Llama4VisionConfig defaults:
// hidden 768, intermediate 5632, 34 layers, 3 channels, image 448, patch 14, vision_output_dim
// 7680, projector_input_dim and projector_output_dim 4096): the unfold patch Linear without bias,
// class embedding, (side^2 + 1) position rows, LayerNorms before and after, per layer two
// LayerNorms, q, k, v, o and fc1, fc2 with biases; the pixel-shuffle adapter's fc1
// (intermediate -> projector_input_dim) and fc2 (projector_output_dim square), no biases; the
// projector Linear(vision_output_dim, text hidden) without bias.
inline std::uint64_t llama4_vision_parameters(const config& v, std::uint64_t text_hidden) {
  constexpr memscale::detail::quantity q{"vision tower parameters"};
  const auto mul = [&](std::uint64_t a, std::uint64_t b) { return memscale::detail::checked_mul(a, b, q); };
  const auto add = [&](std::uint64_t a, std::uint64_t b) { return memscale::detail::checked_add(a, b, q); };
  const auto linear = [&](std::uint64_t in, std::uint64_t out) { return add(mul(in, out), out); };  // with bias
  const std::uint64_t h = v.count("hidden_size", 768);
  const std::uint64_t f = v.count("intermediate_size", 5632);
  const std::uint64_t image = v.count("image_size", 448);
  const std::uint64_t patch = v.count("patch_size", 14);
  if (patch == 0 || image < patch)
    bad_field(error_code::invalid_model, v.field("patch_size"), patch, "must be > 0 and at most image_size");
  const std::uint64_t side = image / patch;
  std::uint64_t n = mul(mul(mul(v.count("num_channels", 3), patch), patch), h);  // patch_embedding.linear
  n = add(n, add(h, mul(add(mul(side, side), 1), h)));  // class_embedding, positional_embedding_vlm
  n = add(n, mul(4, h));                                  // layernorm_pre, layernorm_post
  const std::uint64_t layer = add(add(mul(4, h), mul(4, linear(h, h))), add(linear(h, f), linear(f, h)));
  n = add(n, mul(v.count("num_hidden_layers", 34), layer));
  n = add(n, add(mul(f, v.count("projector_input_dim", 4096)), mul(v.count("projector_output_dim", 4096),
                                                                    v.count("projector_output_dim", 4096))));
  return add(n, mul(v.count("vision_output_dim", 7680), text_hidden));  // multi_modal_projector.linear_1
}

// The tower's shape as image inputs run it (vision_tower.hpp), checked where images run it
// (vision_tower_llama4.hpp): a text-only run never reads it. merge is 1 / pixel_shuffle_ratio, 0
// when that is not a whole number; adapter_out is 0 when vision_output_dim, which the projector
// reads, is not the adapter's projector_output_dim.
inline vision_tower_spec llama4_vision(const config& v) {
  const double ratio = v.number("pixel_shuffle_ratio", 0.5);
  const std::uint64_t merge = ratio > 0 && ratio <= 1 ? static_cast<std::uint64_t>(1.0 / ratio + 0.5) : 0;
  const std::uint64_t adapter_out = v.count("projector_output_dim", 4096);
  return {.kind = vision_tower_kind::llama4,
          .depth = v.count("num_hidden_layers", 34),
          .hidden = v.count("hidden_size", 768),
          .intermediate = v.count("intermediate_size", 5632),
          .heads = v.count("num_attention_heads", 16),
          .in_channels = v.count("num_channels", 3),
          .patch = v.count("patch_size", 14),
          .merge = static_cast<double>(merge) * ratio == 1.0 ? merge : 0,
          .image_size = v.count("image_size", 448),
          .max_tiles = 16,  // Llama4ImageProcessorFast.max_patches (image_processing_llama4_fast.py@0331fb36)
          .adapter_hidden = v.count("projector_input_dim", 4096),
          .adapter_out = v.count("vision_output_dim", 7680) == adapter_out ? adapter_out : 0};
}

inline model_spec llama4(const config& c) {
  model_spec m = llama4_text(c.nested_or_defaults("text_config"));  // Llama4Config: None is Llama4TextConfig()
  const config vision = c.nested_or_defaults("vision_config");
  m.idle_tower_parameters = llama4_vision_parameters(vision, m.hidden);
  m.vision = llama4_vision(vision);
  m.vision.out_hidden = m.hidden;
  m.tied_embeddings = c.flag("tie_word_embeddings", false);  // Llama4Config(tie_word_embeddings=False)
  // Llama4ForConditionalGeneration.forward computes its own loss: a contiguous copy of the
  // shifted logits for nn.CrossEntropyLoss, not upcast (Llama4ForCausalLM's logits are not).
  m.upcast_logits = false;
  m.shift_labels = false;
  return m;
}

}  // namespace memscale::json_io::hf
