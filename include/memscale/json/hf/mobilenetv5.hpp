// memscale/json/hf/mobilenetv5.hpp: the parameters of timm's MobileNetV5 encoders, which Gemma 3n's
// vision_config builds by `architecture` name (TimmWrapperModel -> timm.create_model). The
// architectures are timm's block strings, transcribed from timm/models/mobilenetv5.py@aa4b5850
// (_gen_mobilenet_v5; the arch_def is unchanged since it landed, e83e2516, timm v1.0.16), decoded
// and counted at compile time by the rules of _efficientnet_builder.py and _efficientnet_blocks.py
// at the same commit.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string_view>

#include "memscale/detail/math.hpp"
#include "memscale/vision_tower.hpp"

namespace memscale::json_io::hf {

// The block types of a MobileNetV5 arch_def (_decode_block_str): EdgeResidual, UniversalInverted-
// Residual and MobileAttention with multi-query attention.
enum class mobilenet_block_kind : std::uint8_t { edge_residual, universal_inverted_residual, multi_query_attention };

// One decoded block string. kernel: er's k (exp_kernel_size), uir's k (dw_kernel_size_mid), mqa's k
// (the kv down-sampling dw kernel); start_kernel: uir's a (dw_kernel_size_start, 0 = none).
struct mobilenet_block {
  mobilenet_block_kind kind = mobilenet_block_kind::edge_residual;
  std::uint64_t repeats = 1;
  std::uint64_t out = 0;
  std::uint64_t stride = 1;
  std::uint64_t kernel = 0;
  std::uint64_t start_kernel = 0;
  std::uint64_t expansion = 1;
  std::uint64_t heads = 0;
  std::uint64_t key_dim = 0;
  std::uint64_t kv_stride = 1;
};

namespace detail {

constexpr std::uint64_t mobilenet_digits(std::string_view s) {
  if (s.empty()) throw std::invalid_argument("mobilenetv5 block string: an option without a value");
  std::uint64_t v = 0;
  for (const char ch : s) {
    // Only whole numbers are transcribed (no e1.5, no kernel lists); anything else is refused.
    if (ch < '0' || ch > '9') throw std::invalid_argument("mobilenetv5 block string: a value that is not a whole number");
    v = memscale::detail::checked_mul(v, 10) + static_cast<std::uint64_t>(ch - '0');
  }
  return v;
}

}  // namespace detail

// _decode_block_str for the options MobileNetV5's strings use: r (repeats), k, a, s, e, c, and for
// mqa h (heads), d (key_dim = value_dim), v (kv_stride). Another option is refused, not skipped.
constexpr mobilenet_block decode_mobilenet_block(std::string_view text) {
  mobilenet_block b{};
  const std::size_t first = text.find('_');
  const std::string_view type = text.substr(0, first);
  if (type == "er") b.kind = mobilenet_block_kind::edge_residual;
  else if (type == "uir") b.kind = mobilenet_block_kind::universal_inverted_residual;
  else if (type == "mqa") b.kind = mobilenet_block_kind::multi_query_attention;
  else throw std::invalid_argument("mobilenetv5 block string: a block type other than er, uir, mqa");
  bool has_out = false;
  std::string_view rest = first == std::string_view::npos ? std::string_view{} : text.substr(first + 1);
  while (!rest.empty()) {
    const std::size_t end = rest.find('_');
    const std::string_view op = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    if (op.empty()) throw std::invalid_argument("mobilenetv5 block string: an empty option");
    const std::uint64_t v = detail::mobilenet_digits(op.substr(1));
    switch (op.front()) {
      case 'r': b.repeats = v; break;
      case 'k': b.kernel = v; break;
      case 'a': b.start_kernel = v; break;
      case 's': b.stride = v; break;
      case 'e': b.expansion = v; break;
      case 'c': b.out = v; has_out = true; break;
      case 'h': b.heads = v; break;
      case 'd': b.key_dim = v; break;
      case 'v': b.kv_stride = v; break;
      default: throw std::invalid_argument("mobilenetv5 block string: an option memscale has not transcribed");
    }
  }
  if (!has_out || b.out == 0 || b.repeats == 0 || b.stride == 0 || b.kv_stride == 0)
    throw std::invalid_argument("mobilenetv5 block string: c, r, s and v must be > 0");
  if (b.kind == mobilenet_block_kind::multi_query_attention && (b.heads == 0 || b.key_dim == 0))
    throw std::invalid_argument("mobilenetv5 block string: an mqa block needs h and d");
  if (b.kind == mobilenet_block_kind::edge_residual && b.start_kernel != 0)
    throw std::invalid_argument("mobilenetv5 block string: an er block takes no a");
  return b;
}

// A MobileNetV5Encoder by name: its stem width (stem_size 64, round_channels at multiplier 1.0
// keeps it), the stages' block strings, and the MSFA neck's output width (num_features 2048).
struct mobilenetv5_architecture {
  std::string_view name;
  std::uint64_t in_channels = 3;
  std::uint64_t stem = 64;
  std::span<const std::string_view> stages[4];
  std::uint64_t neck_out = 2048;
  std::uint64_t neck_expansion = 2;  // MobileNetV5MultiScaleFusionAdapter expansion_ratio
  std::uint64_t neck_resolution = 16;  // MobileNetV5Encoder's msfa_output_resolution: the neck's output side
};

// timm/models/mobilenetv5.py@aa4b5850 _gen_mobilenet_v5, the arch_def of every name but
// mobilenetv5_base (used by mobilenetv5_300m_enc, Gemma3nVisionConfig's default architecture).
namespace mobilenetv5_300m_def {
inline constexpr std::string_view stage0[] = {"er_r1_k3_s2_e4_c128", "er_r1_k3_s1_e4_c128", "er_r1_k3_s1_e4_c128"};
inline constexpr std::string_view stage1[] = {"uir_r1_a3_k5_s2_e6_c256", "uir_r1_a5_k0_s1_e4_c256",
                                              "uir_r1_a3_k0_s1_e4_c256", "uir_r1_a5_k0_s1_e4_c256",
                                              "uir_r1_a3_k0_s1_e4_c256"};
inline constexpr std::string_view stage2[] = {
    "uir_r1_a5_k5_s2_e6_c640",      "uir_r1_a5_k0_s1_e4_c640",      "uir_r1_a5_k0_s1_e4_c640",
    "uir_r1_a5_k0_s1_e4_c640",      "uir_r1_a5_k0_s1_e4_c640",      "uir_r1_a5_k0_s1_e4_c640",
    "uir_r1_a5_k0_s1_e4_c640",      "uir_r1_a5_k0_s1_e4_c640",      "uir_r1_a0_k0_s1_e1_c640",
    "mqa_r1_k3_h12_v2_s1_d64_c640", "uir_r1_a0_k0_s1_e2_c640",      "mqa_r1_k3_h12_v2_s1_d64_c640",
    "uir_r1_a0_k0_s1_e2_c640",      "mqa_r1_k3_h12_v2_s1_d64_c640", "uir_r1_a0_k0_s1_e2_c640",
    "mqa_r1_k3_h12_v2_s1_d64_c640", "uir_r1_a0_k0_s1_e2_c640",      "mqa_r1_k3_h12_v2_s1_d64_c640",
    "uir_r1_a0_k0_s1_e2_c640",      "mqa_r1_k3_h12_v2_s1_d64_c640", "uir_r1_a0_k0_s1_e2_c640",
    "mqa_r1_k3_h12_v2_s1_d64_c640", "uir_r1_a0_k0_s1_e2_c640",      "mqa_r1_k3_h12_v2_s1_d64_c640",
    "uir_r1_a0_k0_s1_e2_c640",      "mqa_r1_k3_h12_v2_s1_d64_c640", "uir_r1_a0_k0_s1_e2_c640",
    "mqa_r1_k3_h12_v2_s1_d64_c640", "uir_r1_a0_k0_s1_e2_c640",      "mqa_r1_k3_h12_v2_s1_d64_c640",
    "uir_r1_a0_k0_s1_e2_c640",      "mqa_r1_k3_h12_v2_s1_d64_c640", "uir_r1_a0_k0_s1_e2_c640",
    "mqa_r1_k3_h12_v2_s1_d64_c640", "uir_r1_a0_k0_s1_e2_c640",      "mqa_r1_k3_h12_v2_s1_d64_c640",
    "uir_r1_a0_k0_s1_e2_c640"};
inline constexpr std::string_view stage3[] = {
    "uir_r1_a5_k5_s2_e6_c1280",    "mqa_r1_k3_h16_s1_d96_c1280", "uir_r1_a0_k0_s1_e2_c1280",
    "mqa_r1_k3_h16_s1_d96_c1280",  "uir_r1_a0_k0_s1_e2_c1280",   "mqa_r1_k3_h16_s1_d96_c1280",
    "uir_r1_a0_k0_s1_e2_c1280",    "mqa_r1_k3_h16_s1_d96_c1280", "uir_r1_a0_k0_s1_e2_c1280",
    "mqa_r1_k3_h16_s1_d96_c1280",  "uir_r1_a0_k0_s1_e2_c1280",   "mqa_r1_k3_h16_s1_d96_c1280",
    "uir_r1_a0_k0_s1_e2_c1280",    "mqa_r1_k3_h16_s1_d96_c1280", "uir_r1_a0_k0_s1_e2_c1280",
    "mqa_r1_k3_h16_s1_d96_c1280",  "uir_r1_a0_k0_s1_e2_c1280",   "mqa_r1_k3_h16_s1_d96_c1280",
    "uir_r1_a0_k0_s1_e2_c1280",    "mqa_r1_k3_h16_s1_d96_c1280", "uir_r1_a0_k0_s1_e2_c1280",
    "mqa_r1_k3_h16_s1_d96_c1280",  "uir_r1_a0_k0_s1_e2_c1280",   "mqa_r1_k3_h16_s1_d96_c1280",
    "uir_r1_a0_k0_s1_e2_c1280",    "mqa_r1_k3_h16_s1_d96_c1280", "uir_r1_a0_k0_s1_e2_c1280",
    "mqa_r1_k3_h16_s1_d96_c1280",  "uir_r1_a0_k0_s1_e2_c1280",   "mqa_r1_k3_h16_s1_d96_c1280",
    "uir_r1_a0_k0_s1_e2_c1280",    "mqa_r1_k3_h16_s1_d96_c1280", "uir_r1_a0_k0_s1_e2_c1280",
    "mqa_r1_k3_h16_s1_d96_c1280",  "uir_r1_a0_k0_s1_e2_c1280",   "mqa_r1_k3_h16_s1_d96_c1280",
    "uir_r1_a0_k0_s1_e2_c1280",    "mqa_r1_k3_h16_s1_d96_c1280", "uir_r1_a0_k0_s1_e2_c1280"};
}  // namespace mobilenetv5_300m_def

// The encoder names memscale has transcribed (timm registers mobilenetv5_300m_enc as a
// MobileNetV5Encoder; mobilenetv5_300m and mobilenetv5_base are classifiers, not Gemma 3n's).
inline constexpr std::array<mobilenetv5_architecture, 1> mobilenetv5_encoders{{
    {.name = "mobilenetv5_300m_enc",
     .stages = {mobilenetv5_300m_def::stage0, mobilenetv5_300m_def::stage1, mobilenetv5_300m_def::stage2,
                mobilenetv5_300m_def::stage3}},
}};

constexpr std::optional<mobilenetv5_architecture> find_mobilenetv5_encoder(std::string_view name) {
  for (const mobilenetv5_architecture& a : mobilenetv5_encoders)
    if (a.name == name) return a;
  return std::nullopt;
}

namespace detail {

// timm/layers/helpers.py@aa4b5850 make_divisible(v, 8): nearest multiple of 8, never 10% below v.
constexpr std::uint64_t timm_make_divisible(std::uint64_t v) {
  std::uint64_t rounded = (v + 4) / 8 * 8;
  if (rounded < 8) rounded = 8;
  if (10 * rounded < 9 * v) rounded += 8;
  return rounded;
}

inline constexpr memscale::detail::quantity mobilenetv5_q{"mobilenetv5 parameters"};

constexpr std::uint64_t mnv5_mul(std::uint64_t a, std::uint64_t b) { return memscale::detail::checked_mul(a, b, mobilenetv5_q); }
constexpr std::uint64_t mnv5_add(std::uint64_t a, std::uint64_t b) { return memscale::detail::checked_add(a, b, mobilenetv5_q); }

// A UniversalInvertedResidual: optional dw_start (a x a depthwise + RmsNorm2d), pw_exp (1x1 to
// make_divisible(in x e) + norm), optional dw_mid (k x k depthwise + norm), pw_proj (1x1 + norm),
// and LayerScale2d's gamma when layer scale is on. Convs have no bias (create_conv2d_pad).
constexpr std::uint64_t uir_parameters(std::uint64_t in, std::uint64_t out, std::uint64_t start_kernel,
                                       std::uint64_t mid_kernel, std::uint64_t expansion, bool layer_scale) {
  const std::uint64_t mid = timm_make_divisible(mnv5_mul(in, expansion));
  std::uint64_t n = 0;
  if (start_kernel != 0) n = mnv5_add(n, mnv5_add(mnv5_mul(in, mnv5_mul(start_kernel, start_kernel)), in));
  n = mnv5_add(n, mnv5_add(mnv5_mul(in, mid), mid));
  if (mid_kernel != 0) n = mnv5_add(n, mnv5_add(mnv5_mul(mid, mnv5_mul(mid_kernel, mid_kernel)), mid));
  n = mnv5_add(n, mnv5_add(mnv5_mul(mid, out), out));
  return layer_scale ? mnv5_add(n, out) : n;
}

// An EdgeResidual: conv_exp (k x k full conv to make_divisible(in x e)), bn1, conv_pwl (1x1), bn2;
// no layer scale (the builder passes it to uir and mqa only).
constexpr std::uint64_t edge_residual_parameters(std::uint64_t in, const mobilenet_block& b) {
  const std::uint64_t mid = timm_make_divisible(mnv5_mul(in, b.expansion));
  const std::uint64_t exp = mnv5_add(mnv5_mul(mnv5_mul(in, mid), mnv5_mul(b.kernel, b.kernel)), mid);
  return mnv5_add(exp, mnv5_add(mnv5_mul(mid, b.out), b.out));
}

// A MobileAttention with MultiQueryAttention2d (timm/layers/attention2d.py@aa4b5850): the input
// norm, query.proj (in -> heads x key_dim), key and value: with kv_stride > 1 a k x k depthwise
// down_conv and a norm each, then a 1x1 to key_dim; output.proj (heads x key_dim -> out), all
// without bias; LayerScale2d.
constexpr std::uint64_t mobile_attention_parameters(std::uint64_t in, const mobilenet_block& b) {
  const std::uint64_t width = mnv5_mul(b.heads, b.key_dim);
  std::uint64_t n = mnv5_add(in, mnv5_mul(in, width));
  if (b.kv_stride > 1) n = mnv5_add(n, mnv5_mul(2, mnv5_add(mnv5_mul(in, mnv5_mul(b.kernel, b.kernel)), in)));
  n = mnv5_add(n, mnv5_mul(2, mnv5_mul(in, b.key_dim)));
  n = mnv5_add(n, mnv5_mul(width, b.out));
  return mnv5_add(n, b.out);
}

}  // namespace detail

// The parameters of a MobileNetV5Encoder (timm/models/mobilenetv5.py@aa4b5850): conv_stem (3x3
// with bias, RmsNorm2d), the blocks, and the MSFA neck over the last two feature levels (a uir
// without dw convs or layer scale from their summed widths to neck_out, then an RmsNorm2d).
constexpr std::uint64_t mobilenetv5_encoder_parameters(const mobilenetv5_architecture& a) {
  using detail::mnv5_add;
  using detail::mnv5_mul;
  std::uint64_t n = mnv5_add(mnv5_mul(mnv5_mul(a.in_channels, a.stem), 9), mnv5_mul(2, a.stem));
  // EfficientNetBuilder.features: the stem when the first block strides, then each stage whose
  // next stage starts with a stride (or is the last).
  std::array<std::uint64_t, 5> features{};
  std::size_t feature_count = 0;
  if (decode_mobilenet_block(a.stages[0].front()).stride > 1) features[feature_count++] = a.stem;
  std::uint64_t in = a.stem;
  constexpr std::size_t stage_count = 4;
  for (std::size_t s = 0; s < stage_count; ++s) {
    for (const std::string_view text : a.stages[s]) {
      const mobilenet_block b = decode_mobilenet_block(text);
      for (std::uint64_t r = 0; r < b.repeats; ++r) {
        switch (b.kind) {
          case mobilenet_block_kind::edge_residual: n = mnv5_add(n, detail::edge_residual_parameters(in, b)); break;
          case mobilenet_block_kind::universal_inverted_residual:
            n = mnv5_add(n, detail::uir_parameters(in, b.out, b.start_kernel, b.kernel, b.expansion, true));
            break;
          case mobilenet_block_kind::multi_query_attention:
            n = mnv5_add(n, detail::mobile_attention_parameters(in, b));
            break;
        }
        in = b.out;
      }
    }
    if (s + 1 == stage_count || decode_mobilenet_block(a.stages[s + 1].front()).stride > 1)
      features[feature_count++] = in;
  }
  // msfa_indices (-2, -1): the last two feature levels, concatenated on channels.
  if (feature_count < 2) throw std::invalid_argument("mobilenetv5: fewer than two feature levels for the MSFA neck");
  const std::uint64_t neck_in = mnv5_add(features[feature_count - 2], features[feature_count - 1]);
  n = mnv5_add(n, detail::uir_parameters(neck_in, a.neck_out, 0, 0, a.neck_expansion, false));
  return mnv5_add(n, a.neck_out);
}

// The encoder's two fastest-growing forward moments (vision_tower.hpp mobilenet_moments), walked
// over its blocks with each block's input side as the image's / reduction (conv_stem strides 2).
// UniversalInvertedResidual puts the stride on dw_mid when there is one (`dw_start_stride = stride
// if not dw_kernel_size_mid else 1`, _efficientnet_blocks.py@aa4b5850), so pw_exp runs at the
// block's input side; MultiQueryAttention2d's keys and values are strided by kv_stride.
constexpr mobilenet_moments mobilenetv5_moments(const mobilenetv5_architecture& a) {
  using detail::mnv5_add;
  using detail::mnv5_mul;
  mobilenet_moments m{};
  std::uint64_t in = a.stem;
  std::uint64_t reduction = 2;
  std::uint64_t best_expansion = 0;  // elements per input pixel x the best block's reduction^2
  std::array<std::uint64_t, 4> stage_end{};
  for (std::size_t s = 0; s < stage_end.size(); ++s) {
    for (const std::string_view text : a.stages[s]) {
      const mobilenet_block b = decode_mobilenet_block(text);
      for (std::uint64_t r = 0; r < b.repeats; ++r) {
        const std::uint64_t stride = r == 0 ? b.stride : 1;
        if (b.kind == mobilenet_block_kind::universal_inverted_residual) {
          if (stride > 1 && b.kernel == 0)
            throw std::invalid_argument("mobilenetv5: a strided uir without dw_mid is not transcribed");
          // The block input, dw_start's output, pw_exp's conv output, x * rsqrt(v), its product
          // by the weight and v (one channel): fast_norm.py@aa4b5850 rms_norm2d.
          const std::uint64_t mid = detail::timm_make_divisible(mnv5_mul(in, b.expansion));
          const std::uint64_t live = mnv5_add(mnv5_mul(b.start_kernel != 0 ? 2 : 1, in), mnv5_add(mnv5_mul(3, mid), 1));
          const std::uint64_t r2 = mnv5_mul(reduction, reduction);
          const std::uint64_t best_r2 = mnv5_mul(m.expansion_reduction, m.expansion_reduction);
          if (m.expansion_reduction == 0 || mnv5_mul(live, best_r2) > mnv5_mul(best_expansion, r2)) {
            m.expansion_reduction = reduction;
            m.expansion_in = in;
            m.expansion_mid = mid;
            m.expansion_dw_start = b.start_kernel != 0;
            best_expansion = live;
          }
        } else if (b.kind == mobilenet_block_kind::multi_query_attention) {
          if (stride > 1) throw std::invalid_argument("mobilenetv5: a strided mqa is not transcribed");
          // Scores per squared image pixel: heads / (reduction^2 x (reduction x kv_stride)^2).
          const auto spread = [&](std::uint64_t red, std::uint64_t kv) {
            return mnv5_mul(mnv5_mul(red, red), mnv5_mul(mnv5_mul(red, kv), mnv5_mul(red, kv)));
          };
          if (m.attention_reduction == 0 ||
              mnv5_mul(b.heads, spread(m.attention_reduction, m.attention_kv_stride)) >
                  mnv5_mul(m.attention_heads, spread(reduction, b.kv_stride))) {
            m.attention_reduction = reduction;
            m.attention_in = in;
            m.attention_heads = b.heads;
            m.attention_key_dim = b.key_dim;
            m.attention_kv_stride = b.kv_stride;
          }
        }
        reduction = mnv5_mul(reduction, stride);
        in = b.out;
      }
    }
    stage_end[s] = reduction;
  }
  // msfa_indices (-2, -1) are the last two stages' outputs when the last stage starts strided.
  if (decode_mobilenet_block(a.stages[3].front()).stride == 1)
    throw std::invalid_argument("mobilenetv5: a last stage without a stride is not transcribed");
  m.neck_reduction = stage_end[2];
  m.neck_resolution = a.neck_resolution;
  return m;
}

}  // namespace memscale::json_io::hf
