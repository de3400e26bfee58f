// memscale/graph/layers/idle_tower.hpp: the vision tower and projector of a multimodal model
// in a text-only run: loaded with the model, never run.
#pragma once

#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/ops.hpp"

namespace memscale::graph_layers {

// One op that owns the tower's parameters, stored as the base model's are (the checkpoint is
// loaded whole: Gemma3ForConditionalGeneration.__init__ builds vision_tower and
// multi_modal_projector beside the language model). Frozen: without images no gradient reaches
// it, and torch.optim makes no state for a parameter whose .grad is None. No output: nothing runs.
constexpr void idle_tower(const layer_context& ctx) {
  if (ctx.model.idle_tower_parameters == 0) return;
  const op tower{.kind = op_kind::elementwise,
                 .weight = param_tensor::vector(ctx.model.idle_tower_parameters),
                 .role = param_role::vector,
                 .frozen = true};
  ctx.ops.emit(tower, 0, ctx.ops.precision().param);
}

}  // namespace memscale::graph_layers
