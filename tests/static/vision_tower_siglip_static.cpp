// Gemma 3's frozen SigLIP tower on a step's images (graph/layers/vision_tower_siglip.hpp) in
// constant evaluation: what the language model holds, the inputs, and the eager scores' size.
#include <memscale/memscale.hpp>

namespace {

using namespace memscale;

// gemma-3-4b-it's shapes: text hidden 2560 over 34 layers (29 sliding), SigLIP 27 x 1152 at 896 / 14.
constexpr model_spec siglip_gemma3_4b() {
  model_spec m{.name = "gemma-3-4b-shapes", .layers = 34, .hidden = 2560, .heads = 8, .ffn = 10240, .vocab = 262208};
  m.sliding_window = 1024;
  m.sliding_layers = 29;
  m.vision = vision_tower_spec{.kind = vision_tower_kind::siglip_gemma3, .depth = 27, .hidden = 1152,
                               .intermediate = 4304, .heads = 16, .in_channels = 3, .patch = 14, .out_hidden = 2560,
                               .image_size = 896, .tokens_per_image = 256};
  return m;
}

constexpr training_spec siglip_images_run(attention_impl a) {
  training_spec t{.micro_batch = 1, .seq_len = 1024, .prec = precision::pure_bf16, .attention = a};
  t.images = image_inputs{.per_sample = 2, .height = 480, .width = 640, .tower_frozen = true};
  return t;
}

constexpr graph_layers::tower_bytes siglip_sdpa =
    graph_layers::siglip_gemma3_tower_bytes(siglip_gemma3_4b(), siglip_images_run(attention_impl::sdpa));
constexpr graph_layers::tower_bytes siglip_eager =
    graph_layers::siglip_gemma3_tower_bytes(siglip_gemma3_4b(), siglip_images_run(attention_impl::eager));
constexpr graph_layers::tower_bytes siglip_flash =
    graph_layers::siglip_gemma3_tower_bytes(siglip_gemma3_4b(), siglip_images_run(attention_impl::flash));

// image_features (512 x 2560 bf16), special_image_mask (1024 bool) and a full and a sliding mask:
// bool under SDPA, bf16 under eager, none under flash attention.
static_assert(siglip_sdpa.held.value == 512 * 2560 * 2 + 1024 + 2 * 1024 * 1024);
static_assert(siglip_eager.held.value == 512 * 2560 * 2 + 1024 + 2 * 1024 * 1024 * 2);
static_assert(siglip_flash.held.value == 512 * 2560 * 2 + 1024);
// fp32 pixel_values at 896^2 whatever the image's size, and int64 token_type_ids.
static_assert(siglip_sdpa.inputs.value == 2 * 3 * 896 * 896 * 4 + 1024 * 8);
// Eager scores: 2 images x 16 heads x 4096^2, 8 bytes each at the softmax.
static_assert(siglip_eager.forward.value > 2ULL * 16 * 4096 * 4096 * 8);
// SDPA keeps no scores: the MLP is the largest moment, the text embeddings (1024 x 2560), the
// stream and layer_norm2's output (8192 patches x 1152) beside fc1's output and its GELU (x 4304).
static_assert(siglip_sdpa.forward.value == 1024 * 2560 * 2 + 2 * 8192 * 1152 * 2 + 2 * 8192 * 4304 * 2);
static_assert(graph_layers::image_tokens(siglip_gemma3_4b().vision, siglip_images_run(attention_impl::sdpa).images) ==
              256);

}  // namespace
