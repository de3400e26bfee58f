// memscale/graph/layers/tower_bytes.hpp: what a frozen vision tower run on a step's images adds
// to the graph of its language model (each tower's layer file fills it).
#pragma once

#include "memscale/bytes.hpp"

namespace memscale::graph_layers {

struct tower_bytes {
  bytes forward{};   // the tower's forward at its largest moment, with the text embeddings beside it
  bytes held{};      // kept through the language model's forward
  bytes inputs{};    // pixel_values (and the tower's other inputs), alive through the step
};

}  // namespace memscale::graph_layers
