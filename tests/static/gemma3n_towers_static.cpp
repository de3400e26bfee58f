// Static checks for Gemma 3n's towers (memscale/json/hf/mobilenetv5.hpp, gemma3n_towers.hpp): the
// block strings decode as timm's _decode_block_str reads them, and the counts are compile-time
// constants equal to sum(p.numel()) of timm.create_model("mobilenetv5_300m_enc") at timm@aa4b5850
// and of Gemma3nAudioEncoder(Gemma3nAudioConfig()). Building this TU is the test.
#include "memscale/json/hf/gemma3n_towers.hpp"

#include <cstdint>

namespace {

using memscale::json_io::hf::decode_mobilenet_block;
using memscale::json_io::hf::find_mobilenetv5_encoder;
using memscale::json_io::hf::mobilenet_block_kind;

constexpr auto mqa = decode_mobilenet_block("mqa_r1_k3_h12_v2_s1_d64_c640");
static_assert(mqa.kind == mobilenet_block_kind::multi_query_attention);
static_assert(mqa.heads == 12 && mqa.key_dim == 64 && mqa.kv_stride == 2 && mqa.kernel == 3 && mqa.out == 640);
constexpr auto uir = decode_mobilenet_block("uir_r1_a3_k5_s2_e6_c256");
static_assert(uir.kind == mobilenet_block_kind::universal_inverted_residual);
static_assert(uir.start_kernel == 3 && uir.kernel == 5 && uir.stride == 2 && uir.expansion == 6 && uir.out == 256);

// Stem 1,856; stages 1,492,608 + 2,439,168 + 63,407,744 + 211,540,480; MSFA neck 15,245,056.
static_assert(memscale::json_io::hf::mobilenetv5_encoder_parameters(*find_mobilenetv5_encoder("mobilenetv5_300m_enc")) ==
              294'126'912);
static_assert(!find_mobilenetv5_encoder("mobilenetv5_base").has_value());
static_assert(memscale::json_io::hf::gemma3n_audio_encoder_parameters({}) == 681'348'640);
static_assert(memscale::json_io::hf::gemma3n_embedder_parameters(128, 2048, 2048) == 4'460'544);

}  // namespace
