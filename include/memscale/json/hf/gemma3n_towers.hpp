// memscale/json/hf/gemma3n_towers.hpp: the parameters of Gemma 3n's vision and audio towers and
// their Gemma3nMultimodalEmbedders, from a gemma3n config's vision_config and audio_config (absent
// keys take Gemma3nVisionConfig's / Gemma3nAudioConfig's defaults, configuration_gemma3n.py@01854809).
// Sources: transformers models/gemma3n/modeling_gemma3n.py@b87ecf8c (Gemma3nModel,
// Gemma3nAudioEncoder and its blocks, Gemma3nMultimodalEmbedder); the vision tower is timm's
// MobileNetV5 encoder named by `architecture` (json/hf/mobilenetv5.hpp).
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "memscale/detail/math.hpp"
#include "memscale/json/hf/config.hpp"
#include "memscale/json/hf/mobilenetv5.hpp"
#include "memscale/model.hpp"
#include "memscale/vision_tower.hpp"

namespace memscale::json_io::hf {

// The sizes of a Gemma3nAudioEncoder (Gemma3nAudioConfig's names, defaults at @01854809).
struct gemma3n_audio_shape {
  std::uint64_t hidden = 1536;           // hidden_size
  std::uint64_t heads = 8;               // conf_num_attention_heads
  std::uint64_t layers = 12;             // conf_num_hidden_layers
  std::uint64_t conv_kernel = 5;         // conf_conv_kernel_size
  std::uint64_t input_features = 128;    // input_feat_size
  std::array<std::uint64_t, 2> sscp_channels{128, 32};             // sscp_conv_channel_size
  std::array<std::array<std::uint64_t, 2>, 2> sscp_kernel{{{3, 3}, {3, 3}}};  // (time, frequency)
  std::array<std::array<std::uint64_t, 2>, 2> sscp_stride{{{2, 2}, {2, 2}}};
};

namespace detail {

inline constexpr memscale::detail::quantity gemma3n_tower_q{"gemma3n tower parameters"};
constexpr std::uint64_t g3n_mul(std::uint64_t a, std::uint64_t b) { return memscale::detail::checked_mul(a, b, gemma3n_tower_q); }
constexpr std::uint64_t g3n_add(std::uint64_t a, std::uint64_t b) { return memscale::detail::checked_add(a, b, gemma3n_tower_q); }

// Gemma3nAudioSubSampleConvProjection: the frequency width after its two convolutions, each padded
// by one bin on both sides: (f + 2 - kernel_w) / stride_w + 1. 0 when a kernel is wider than its input.
constexpr std::uint64_t gemma3n_sscp_frequencies(const gemma3n_audio_shape& s) {
  std::uint64_t f = s.input_features;
  for (std::size_t i = 0; i < 2; ++i) {
    const std::uint64_t padded = f + 2;
    if (padded < s.sscp_kernel[i][1] || s.sscp_stride[i][1] == 0) return 0;
    f = (padded - s.sscp_kernel[i][1]) / s.sscp_stride[i][1] + 1;
  }
  return f;
}

}  // namespace detail

// The parameters of Gemma3nAudioEncoder (modeling_gemma3n.py@b87ecf8c). With H = hidden, the
// head width d = H / heads:
//  - SubSampleConvProjection: two bias-free Conv2d (1 -> c0, c0 -> c1, kernel kh x kw), each with a
//    CumulativeGroupNorm scale over its channels, and input_proj_linear (c1 x f_out -> H);
//  - per conformer block: two feed-forwards (pre and post RMSNorm, H -> 4H -> H: 8H^2 + 2H each);
//    attention (pre_attn_norm, q/k/v H -> heads x d, the relative position's pos_proj H ->
//    heads x d, per_dim_scale d, post H -> H, post_norm); the light conv (pre norm, linear_start
//    H -> 2H, a depthwise Conv1d of conv_kernel taps, conv_norm, linear_end H -> H); the block norm.
constexpr std::uint64_t gemma3n_audio_encoder_parameters(const gemma3n_audio_shape& s) {
  using detail::g3n_add;
  using detail::g3n_mul;
  const std::uint64_t h = s.hidden;
  const std::uint64_t head_dim = h / s.heads;
  const std::uint64_t width = g3n_mul(s.heads, head_dim);
  const std::uint64_t c0 = s.sscp_channels[0];
  const std::uint64_t c1 = s.sscp_channels[1];
  std::uint64_t sscp = g3n_add(g3n_mul(c0, g3n_mul(s.sscp_kernel[0][0], s.sscp_kernel[0][1])), c0);
  sscp = g3n_add(sscp, g3n_add(g3n_mul(g3n_mul(c0, c1), g3n_mul(s.sscp_kernel[1][0], s.sscp_kernel[1][1])), c1));
  sscp = g3n_add(sscp, g3n_mul(g3n_mul(c1, detail::gemma3n_sscp_frequencies(s)), h));

  const std::uint64_t feed_forward = g3n_add(g3n_mul(8, g3n_mul(h, h)), g3n_mul(2, h));
  const std::uint64_t attention =
      g3n_add(g3n_add(g3n_mul(4, g3n_mul(h, width)), head_dim), g3n_add(g3n_mul(h, h), g3n_mul(2, h)));
  const std::uint64_t light_conv =
      g3n_add(g3n_mul(3, g3n_mul(h, h)), g3n_add(g3n_mul(h, s.conv_kernel), g3n_mul(2, h)));
  const std::uint64_t block = g3n_add(g3n_add(g3n_mul(2, feed_forward), attention), g3n_add(light_conv, h));
  return g3n_add(sscp, g3n_mul(s.layers, block));
}

// Gemma3nMultimodalEmbedder: embedding (vocab_size x the tower's hidden_size), hard and soft
// embedding norms (scaled RMSNorms over it), embedding_projection (to the text hidden size, no
// bias); embedding_post_projection_norm has with_scale=False (a buffer, not a parameter).
constexpr std::uint64_t gemma3n_embedder_parameters(std::uint64_t vocab, std::uint64_t tower_hidden,
                                                    std::uint64_t text_hidden) {
  using detail::g3n_add;
  using detail::g3n_mul;
  return g3n_add(g3n_add(g3n_mul(vocab, tower_hidden), g3n_mul(2, tower_hidden)), g3n_mul(tower_hidden, text_hidden));
}

namespace detail {

inline bool gemma3n_positive(const json& v) { return v.is_number_integer() && v.get<std::int64_t>() > 0; }

// One entry of sscp_conv_*_size: a pair of positive integers (time, frequency).
inline std::array<std::uint64_t, 2> gemma3n_pair(const config& a, const char* key, const json& v) {
  if (!v.is_array() || v.size() != 2 || !gemma3n_positive(v.at(0)) || !gemma3n_positive(v.at(1)))
    bad_field(error_code::invalid_model, a.field(key), a.raw().at(key),
              "must list two [time, frequency] pairs of positive integers");
  return {v.at(0).get<std::uint64_t>(), v.at(1).get<std::uint64_t>()};
}

// Gemma3nAudioSubSampleConvProjection builds exactly two conv blocks (range(2)), so each sscp list
// must have two entries: a third would be ignored by the model, which memscale does not do silently.
inline const json* gemma3n_sscp_list(const config& a, const char* key) {
  if (!a.has(key)) return nullptr;
  const json& v = a.raw().at(key);
  if (!v.is_array() || v.size() != 2)
    bad_field(error_code::invalid_model, a.field(key), v,
              "must have two entries (Gemma3nAudioSubSampleConvProjection builds two conv blocks)");
  return &v;
}

}  // namespace detail

// The audio_config's sizes, checked.
inline gemma3n_audio_shape gemma3n_audio_shape_of(const config& a) {
  gemma3n_audio_shape s{};
  s.hidden = a.count("hidden_size", s.hidden);
  s.heads = a.count("conf_num_attention_heads", s.heads);
  s.layers = a.count("conf_num_hidden_layers", s.layers);
  s.conv_kernel = a.count("conf_conv_kernel_size", s.conv_kernel);
  s.input_features = a.count("input_feat_size", s.input_features);
  for (const auto& [key, value] : {std::pair{"hidden_size", s.hidden}, std::pair{"conf_num_attention_heads", s.heads},
                                   std::pair{"conf_conv_kernel_size", s.conv_kernel},
                                   std::pair{"input_feat_size", s.input_features}})
    if (value == 0) bad_field(error_code::invalid_model, a.field(key), value, "must be > 0");
  // Gemma3nAudioConformerAttention reshapes heads x (hidden / heads) back to hidden for `post`.
  if (s.hidden % s.heads != 0)
    bad_field(error_code::invalid_model, a.field("conf_num_attention_heads"), s.heads,
              "must divide hidden_size (" + std::to_string(s.hidden) + ")");
  if (const json* channels = detail::gemma3n_sscp_list(a, "sscp_conv_channel_size"))
    for (std::size_t i = 0; i < 2; ++i) {
      const json& c = channels->at(i);
      if (!detail::gemma3n_positive(c))
        bad_field(error_code::invalid_model, a.field("sscp_conv_channel_size"), *channels,
                  "must hold two positive integers");
      s.sscp_channels[i] = c.get<std::uint64_t>();
    }
  if (const json* kernels = detail::gemma3n_sscp_list(a, "sscp_conv_kernel_size"))
    for (std::size_t i = 0; i < 2; ++i) s.sscp_kernel[i] = detail::gemma3n_pair(a, "sscp_conv_kernel_size", kernels->at(i));
  if (const json* strides = detail::gemma3n_sscp_list(a, "sscp_conv_stride_size"))
    for (std::size_t i = 0; i < 2; ++i) s.sscp_stride[i] = detail::gemma3n_pair(a, "sscp_conv_stride_size", strides->at(i));
  if (detail::gemma3n_sscp_frequencies(s) == 0)
    bad_field(error_code::invalid_model, a.field("input_feat_size"), s.input_features,
              "is too narrow for sscp_conv_kernel_size's frequency kernels (each conv pads one bin per side)");
  return s;
}

// Gemma3nModel.audio_tower: Gemma3nAudioEncoder(audio_config).
inline std::uint64_t gemma3n_audio_tower_parameters(const config& audio) {
  return gemma3n_audio_encoder_parameters(gemma3n_audio_shape_of(audio));
}

// Gemma3nModel.vision_tower: AutoModel.from_config(vision_config), a TimmWrapperModel that calls
// timm.create_model(architecture, num_classes=0, **model_args) and adds no parameters of its own
// (models/timm_wrapper/modeling_timm_wrapper.py@01273ede).
inline std::uint64_t gemma3n_vision_tower_parameters(const config& vision) {
  const std::string name = vision.text("architecture", "mobilenetv5_300m_enc");
  const auto arch = find_mobilenetv5_encoder(name);
  if (!arch)
    bad_field(error_code::unsupported, vision.field("architecture"), name,
              "is a timm architecture memscale has not transcribed; it counts mobilenetv5_300m_enc");
  // model_args are keyword arguments to the timm constructor: they change the network.
  if (vision.has("model_args") && !(vision.raw().at("model_args").is_object() && vision.raw().at("model_args").empty()))
    bad_field(error_code::unsupported, vision.field("model_args"), vision.raw().at("model_args"),
              "changes timm's " + name + "; memscale counts it as registered (no model_args)");
  // get_image_features reshapes the encoder's output to vision_config.hidden_size channels.
  const std::uint64_t hidden = vision.count("hidden_size", arch->neck_out);
  if (hidden != arch->neck_out)
    bad_field(error_code::invalid_model, vision.field("hidden_size"), hidden,
              "must be " + name + "'s output width (" + std::to_string(arch->neck_out) + ")");
  return mobilenetv5_encoder_parameters(*arch);
}

// The vision tower as its image inputs see it (vision_tower.hpp): the encoder's output width and
// forward moments, and embed_vision's soft tokens. get_image_features reshapes the encoder's
// (images, hidden_size, side, side) output to vision_soft_tokens_per_image tokens
// (modeling_gemma3n.py@00aa0f5d), so that count must be the neck's side squared.
inline vision_tower_spec gemma3n_vision_tower(const config& c, std::uint64_t text_hidden) {
  const config vision = c.nested_or_defaults("vision_config");
  gemma3n_vision_tower_parameters(vision);  // checks architecture, model_args and hidden_size
  const auto arch = find_mobilenetv5_encoder(vision.text("architecture", "mobilenetv5_300m_enc"));
  const std::uint64_t tokens = c.count("vision_soft_tokens_per_image", 256);  // Gemma3nConfig's default
  if (tokens != arch->neck_resolution * arch->neck_resolution)
    bad_field(error_code::invalid_model, c.field("vision_soft_tokens_per_image"), tokens,
              "must be the MobileNetV5 neck's output side squared (" +
                  std::to_string(arch->neck_resolution * arch->neck_resolution) + ")");
  return {.kind = vision_tower_kind::mobilenetv5,
          .hidden = arch->neck_out,
          .in_channels = arch->in_channels,
          .out_hidden = text_hidden,
          .tokens_per_image = tokens,
          .mobilenet = mobilenetv5_moments(*arch)};
}

// The vision and audio towers of a gemma3n config (model_type gemma3n), the parameters Gemma3nModel
// holds beside its language_model and its embedders: absent sub-configs are their classes' defaults
// (Gemma3nConfig.__post_init__).
inline std::uint64_t gemma3n_tower_parameters(const config& c) {
  return detail::g3n_add(gemma3n_vision_tower_parameters(c.nested_or_defaults("vision_config")),
                         gemma3n_audio_tower_parameters(c.nested_or_defaults("audio_config")));
}

// Gemma3nModel.embed_vision and embed_audio: Gemma3nMultimodalEmbedder(vision_config or
// audio_config, text_config), a vocab_size x hidden_size table (vocab_size 128 in both
// Gemma3nVisionConfig and Gemma3nAudioConfig, hidden_size 2048 and 1536 by default).
inline token_embedder gemma3n_embedder(const config& tower, std::uint64_t default_width) {
  const token_embedder e{.vocab = tower.count("vocab_size", 128), .width = tower.count("hidden_size", default_width)};
  if (e.vocab == 0) bad_field(error_code::invalid_model, tower.field("vocab_size"), e.vocab, "must be > 0");
  if (e.width == 0) bad_field(error_code::invalid_model, tower.field("hidden_size"), e.width, "must be > 0");
  return e;
}

inline token_embedder gemma3n_vision_embedder(const config& c) {
  return gemma3n_embedder(c.nested_or_defaults("vision_config"), 2048);
}

inline token_embedder gemma3n_audio_embedder(const config& c) {
  return gemma3n_embedder(c.nested_or_defaults("audio_config"), 1536);
}

}  // namespace memscale::json_io::hf
