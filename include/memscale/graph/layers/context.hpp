// memscale/graph/layers/context.hpp: what every layer of one stack reads: the writer, the
// model, the run, and what is resolved from them once (adapters, dropout sites, tokens).
#pragma once

#include <cstdint>

#include "memscale/detail/math.hpp"
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
  // Key positions per sequence a KV cache holds before this forward (a generate() decoding
  // step); 0 in training and in a prefill.
  std::uint64_t cached_keys = 0;
  // Whether the residual stream entering the layer needs a gradient: not in the first layer of a
  // LoRA or QLoRA model, whose input is the frozen embeddings' output (decoder_stack.hpp
  // first_layer_untracked_input).
  bool stream_needs_grad = true;

  // Key positions per sequence the attention reads: the cached ones and the new rows.
  [[nodiscard]] constexpr std::uint64_t keys() const { return detail::checked_add(run.seq_len, cached_keys); }
};

}  // namespace memscale::graph_layers
