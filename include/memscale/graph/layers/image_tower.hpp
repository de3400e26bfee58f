// memscale/graph/layers/image_tower.hpp: a step's images through the model's frozen vision tower,
// written into the language model's graph (vision_tower.hpp, vision_tower_qwen3.hpp).
#pragma once

#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/vision_tower.hpp"
#include "memscale/graph/layers/vision_tower_qwen3.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"
#include "memscale/vision_tower.hpp"

namespace memscale::graph_layers {

constexpr tower_bytes image_tower_bytes(const model_spec& model, const training_spec& run) {
  return model.vision.kind == vision_tower_kind::qwen3_vl ? qwen3_vl_tower_bytes(model, run)
                                                          : qwen2_5_vl_tower_bytes(model, run);
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
