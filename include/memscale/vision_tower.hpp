// memscale/vision_tower.hpp: a multimodal model's vision tower as its image inputs see it, and the
// images a training run feeds it.
#pragma once

#include <cstdint>

namespace memscale {

// The towers whose forward is modelled. none: the tower, if any, is held as weights only
// (model_spec::idle_tower_parameters) and a run with images is refused.
enum class vision_tower_kind : std::uint8_t {
  none,
  qwen2_5_vl,  // Qwen2_5_VisionTransformerPretrainedModel (modeling_qwen2_5_vl.py @ 00b676f8)
  qwen2_vl,    // Qwen2VisionTransformerPretrainedModel (modeling_qwen2_vl.py @ 00b676f8)
  qwen3_vl,    // Qwen3VLVisionModel (modeling_qwen3_vl.py @ 00709b86)
  siglip_gemma3,  // Gemma 3's SiglipVisionModel and Gemma3MultiModalProjector (modeling_gemma3.py @ 0018aa64)
  llama4,         // Llama4VisionModel and Llama4MultiModalProjector (modeling_llama4.py @ 000c33fd)
  mobilenetv5,    // Gemma 3n's timm MobileNetV5Encoder and embed_vision's soft tokens (modeling_gemma3n.py@00aa0f5d)
};

// The two moments of a MobileNetV5 encoder's forward that grow fastest with the image
// (graph/layers/vision_tower_mobilenetv5.hpp), picked from its block strings by the reader
// (json/hf/mobilenetv5.hpp). reduction: the block's input side is the image's / reduction.
struct mobilenet_moments {
  // The UniversalInvertedResidual whose pw_exp norm holds the most per image pixel: its input
  // channels, make_divisible(in x e) expanded channels, whether a dw_start conv runs first.
  std::uint64_t expansion_reduction = 0;
  std::uint64_t expansion_in = 0;
  std::uint64_t expansion_mid = 0;
  bool expansion_dw_start = false;
  // The MultiQueryAttention2d with the most (unfused) scores per squared image pixel.
  std::uint64_t attention_reduction = 0;
  std::uint64_t attention_in = 0;
  std::uint64_t attention_heads = 0;
  std::uint64_t attention_key_dim = 0;
  std::uint64_t attention_kv_stride = 1;
  // The MSFA neck: the reduction of its higher-resolution level (msfa_indices -2) and its output
  // side (msfa_output_resolution), which it average-pools that level down to.
  std::uint64_t neck_reduction = 0;
  std::uint64_t neck_resolution = 0;
};

// The vision configs' fields (configuration_qwen2_5_vl.py, configuration_qwen2_vl.py @ 00b676f8;
// configuration_qwen3_vl.py @ 00709b86; Gemma 3's SiglipVisionConfig), and the image processor's pixel bounds.
struct vision_tower_spec {
  vision_tower_kind kind = vision_tower_kind::none;
  std::uint64_t depth = 0;
  std::uint64_t hidden = 0;
  std::uint64_t intermediate = 0;
  std::uint64_t heads = 0;
  std::uint64_t in_channels = 0;
  std::uint64_t patch = 0;
  std::uint64_t temporal_patch = 0;
  std::uint64_t merge = 0;            // spatial_merge_size: merge x merge patches become one token
  std::uint64_t out_hidden = 0;       // the merger's output: the text model's hidden size
  std::uint64_t window_size = 0;      // pixels: window attention over (window_size / patch)^2 patches
  std::uint64_t full_attention_blocks = 0;  // len(fullatt_block_indexes): blocks attending over a whole image
  std::uint64_t position_embeddings = 0;    // Qwen3-VL's learned pos_embed rows (num_position_embeddings)
  std::uint64_t deepstack_features = 0;     // Qwen3-VL: len(deepstack_visual_indexes), one merged feature each
  std::uint64_t deepstack_before_last = 0;  // of those, taken before the last block (alive through its forward)
  // smart_resize's bounds when the run names none: Qwen2VLImageProcessor's defaults
  // (image_processing_qwen2_vl.py @ 009f6376: 56 * 56 and 28 * 28 * 1280); Qwen3-VL checkpoints
  // set their own in preprocessor_config.json (json/hf/qwen3_vl.hpp).
  std::uint64_t min_pixels = 56 * 56;
  std::uint64_t max_pixels = 28 * 28 * 1280;
  // A fixed-size tower (SigLIP): every image is resized to image_size^2 pixels and pooled to
  // tokens_per_image tokens (mm_tokens_per_image).
  std::uint64_t image_size = 0;
  std::uint64_t tokens_per_image = 0;
  // Llama 4: images cut into tiles of image_size^2 pixels on a canvas of at most max_tiles
  // (Llama4ImageProcessorFast.max_patches); merge is 1 / pixel_shuffle_ratio; the pixel-shuffle
  // adapter's fc1 output (projector_input_dim) and fc2 output (projector_output_dim).
  std::uint64_t max_tiles = 0;
  std::uint64_t adapter_hidden = 0;
  std::uint64_t adapter_out = 0;
  // Gemma 3n (hidden: the encoder's output width; tokens_per_image: vision_soft_tokens_per_image).
  mobilenet_moments mobilenet{};
};

// The images of one training sample, all of one size. The image processor resizes each to a
// multiple of patch x merge pixels within [min_pixels, max_pixels] (smart_resize); 0 takes the
// model's processor's bound (vision_tower_spec).
struct image_inputs {
  std::uint64_t per_sample = 0;  // 0: a text-only run
  std::uint64_t height = 0;      // pixels, before the processor's resize
  std::uint64_t width = 0;
  std::uint64_t min_pixels = 0;
  std::uint64_t max_pixels = 0;
  // The tower's parameters have requires_grad False (freeze_vision_tower in Qwen's finetune
  // scripts; PEFT freezes it with the rest of the base): no autograd graph is recorded there.
  bool tower_frozen = false;
};

}  // namespace memscale
