// memscale/encoder_decoder.hpp: the graphs of an encoder-decoder (T5) training step,
// written from the shared layers by graph/recipes/encoder_decoder.hpp.
#pragma once

#include "memscale/graph/encoder_decoder_graph.hpp"
#include "memscale/graph/recipes/encoder_decoder.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale {

// The two stacks of one training step of an encoder-decoder `model` under `run`.
constexpr encoder_decoder_graph build_encoder_decoder_graph(const model_spec& model, const training_spec& run) {
  return recipes::build_encoder_decoder(model, run);
}

}  // namespace memscale
