// memscale/graph/layers/image_tower.hpp: a step's images through the model's frozen vision tower,
// written into the language model's graph (vision_tower.hpp, vision_tower_qwen3.hpp,
// vision_tower_siglip.hpp, vision_tower_llama4.hpp, vision_tower_mobilenetv5.hpp).
#pragma once

#include <cstdint>

#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/vision_tower.hpp"
#include "memscale/graph/layers/vision_tower_llama4.hpp"
#include "memscale/graph/layers/vision_tower_mobilenetv5.hpp"
#include "memscale/graph/layers/vision_tower_qwen3.hpp"
#include "memscale/graph/layers/vision_tower_siglip.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"
#include "memscale/vision_tower.hpp"

namespace memscale::graph_layers {

// One image's tokens in the text sequence: SigLIP pools every image to mm_tokens_per_image and
// MobileNetV5's neck to vision_soft_tokens_per_image; Llama 4's
// processor cuts it into tiles; the Qwen towers' processors resize it (smart_resize) and merge patches.
constexpr std::uint64_t image_tokens(const vision_tower_spec& v, const image_inputs& in) {
  if (v.kind == vision_tower_kind::siglip_gemma3 || v.kind == vision_tower_kind::mobilenetv5) return v.tokens_per_image;
  if (v.kind == vision_tower_kind::llama4) return llama4_tiles(v, in).tokens;
  return qwen2_5_vl_image_grid(v, in).tokens;
}

constexpr tower_bytes image_tower_bytes(const model_spec& model, const training_spec& run) {
  switch (model.vision.kind) {
    case vision_tower_kind::qwen3_vl:
      return qwen3_vl_tower_bytes(model, run);
    case vision_tower_kind::siglip_gemma3:
      return siglip_gemma3_tower_bytes(model, run);
    case vision_tower_kind::llama4:
      return llama4_tower_bytes(model, run);
    case vision_tower_kind::mobilenetv5:
      return mobilenetv5_tower_bytes(model, run);
    default:
      return qwen2_5_vl_tower_bytes(model, run);
  }
}

// The tower's forward moment, what the model keeps through its blocks and the pixel inputs.
// Nothing of the frozen tower is saved for backward; its weights are the idle tower op's
// (idle_tower.hpp).
constexpr void add_image_tower(const model_spec& model, const training_spec& run, graph& g) {
  if (run.images.per_sample == 0) return;
  const tower_bytes t = image_tower_bytes(model, run);
  g.tower_forward = t.forward;
  g.held += t.held;
  g.inputs += t.inputs;
}

}  // namespace memscale::graph_layers
