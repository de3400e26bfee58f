// memscale/graph/encoder_decoder_graph.hpp: the graphs of an encoder-decoder (T5) training
// step: two ordinary graphs, one per stack, each with its prologue, one repeated block and
// its epilogue, plus the tensors that cross between them: the encoder output (read by every
// decoder block's cross-attention, so its gradient accumulates across the decoder's
// backward) and the relative position biases each stack computes once and shares between
// its blocks. graph/recipes/encoder_decoder.hpp writes it; estimate/encoder_decoder.hpp walks it.
#pragma once

#include "memscale/bytes.hpp"
#include "memscale/graph/graph.hpp"

namespace memscale {

struct encoder_decoder_graph {
  graph encoder;  // default-initialised: value-initialising would zero every op slot (graph.hpp op_slots)
  graph decoder;
  // The encoder's output (its last op's output): alive through the decoder's forward,
  // and saved for the decoder's backward by every cross-attention k and v projection
  // unless autocast gives each of them its own 16-bit copy.
  bytes encoder_output{};
  bool encoder_output_saved = false;
  bytes encoder_output_grad{};  // accumulated over the decoder's backward
  // Held by each stack's forward (T5Stack.forward locals): the position bias every block
  // adds to its scores and the masks. Checkpointed blocks keep them until their backward.
  bytes encoder_held{};
  bytes decoder_held{};
  // Gradients of the shared position biases, accumulated through a stack's backward.
  bytes encoder_bias_grad{};
  bytes decoder_bias_grad{};
  bytes decoder_cache{};  // use_cache=True: every decoder block's k and v until forward returns
};

}  // namespace memscale
