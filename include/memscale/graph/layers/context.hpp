// memscale/graph/layers/context.hpp: what every layer of one stack reads: the writer, the
// model, the run, and what is resolved from them once (adapters, dropout sites, tokens).
#pragma once

#include <cstdint>

#include "memscale/graph/layers/adapters.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale::graph_layers {

// Built by a recipe for the stack it writes; the writer is the only thing layers change.
struct layer_context {
  op_writer& ops;
  const model_spec& model;
  const training_spec& run;
  adapter_plan adapters;
  dropout_sites dropout;
  std::uint64_t tokens = 0;  // rows of the stack: micro_batch x its sequence length
};

}  // namespace memscale::graph_layers
