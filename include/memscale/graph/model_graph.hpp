// memscale/graph/model_graph.hpp: the one entry point from a model and a run to the graph
// every estimator, planner, per-GPU figure, device peak and error band reads. build() alone
// reads the model's architecture kind and resolves the run's adapter dtype.
#pragma once

#include <cstdint>

#include "memscale/dtype.hpp"
#include "memscale/error.hpp"
#include "memscale/graph/encoder_decoder_graph.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/image_tower.hpp"
#include "memscale/graph/layers/mlp.hpp"
#include "memscale/graph/model_layout.hpp"
#include "memscale/graph/recipes/decoder_stack.hpp"
#include "memscale/graph/recipes/encoder_decoder.hpp"
#include "memscale/model.hpp"
#include "memscale/precision_policy.hpp"
#include "memscale/training.hpp"

namespace memscale {

// A model's training step as built: the run it was built for (adapter dtype decided) and its
// stacks. One stack lives in `stacks.decoder` (read it with stack()); `stacks.encoder` is
// written only for an encoder-decoder.
struct model_graph {
  model_layout layout = model_layout::one_stack;
  training_spec run{};
  encoder_decoder_graph stacks;  // default-initialised: `{}` would zero both stacks' op slots (125 KB)

  [[nodiscard]] constexpr bool is_encoder_decoder() const { return layout == model_layout::encoder_decoder; }
  // The model's one stack; an encoder-decoder has two, and a path that reads one refuses it.
  [[nodiscard]] constexpr const graph& stack() const {
    if (is_encoder_decoder())
      detail::fail(error_code::unsupported, "model.arch",
                   "is encoder_decoder: this path reads one stack and does not model both", 2);
    return stacks.decoder;
  }
};

namespace detail {

// The run with its adapter dtype decided: PEFT (hf_transformers) keeps adapters over a 16-bit
// base in fp32 by default (peft_model.py get_peft_model autocast_adapter_dtype=True, which
// casts only bf16/fp16 adapters); other implementations keep them in the base dtype.
constexpr training_spec with_resolved_adapters(const model_spec& model, training_spec run) {
  if (run.adapters != adapter_dtype::framework_default) return run;
  const bool sixteen_bit_base = precision_policy_of(run).param != dtype::fp32;
  run.adapters = (is_lora(run) && sixteen_bit_base && model.impl == implementation::hf_transformers &&
                  run.framework == framework_kind::hf)
                     ? adapter_dtype::fp32
                     : adapter_dtype::as_base;
  return run;
}

}  // namespace detail

// The graph of one training step of `model` under `requested`: the only place a model's
// stacks are built.
constexpr model_graph build(const model_spec& model, const training_spec& requested) {
  // Assigned member by member: g++ writes a braced initialisation of the 36 KB object as a
  // zero fill first, which doubled the cost of a build (300 ns on Llama-2-7B).
  model_graph g;
  g.layout = layout_of(model);
  g.run = detail::with_resolved_adapters(model, requested);
  if (g.is_encoder_decoder())
    recipes::build_encoder_decoder(model, g.run, g.stacks);
  else
    recipes::build_decoder_stack(model, g.run, g.stacks.decoder);
  // The images' frozen tower runs before the decoder's blocks, in the same forward.
  graph_layers::add_image_tower(model, g.run, g.stacks.decoder);
  g.stacks.decoder.stacked_experts = graph_layers::stacked_expert_parameters(model, g.run);
  g.stacks.decoder.parameter_experts = graph_layers::expert_parameters(model, g.run);
  g.stacks.decoder.experts_swapped_for_prequantized = graph_layers::experts_swapped_for_prequantized(model);
  return g;
}

// The graph of one forward of `run.seq_len` new positions per sequence over `cached_keys`
// positions a KV cache already holds, in eval mode (no dropout) and without labels: generate()'s
// prefill (cached_keys 0) and decoding steps (seq_len 1). The same layers as build(), with the
// generation head instead of the loss (recipes::generation_forward); read it without grad
// (graph/forward_liveness.hpp): only this graph records each output's last reader.
constexpr model_graph build_forward(const model_spec& model, training_spec run, std::uint64_t cached_keys) {
  run.dropout = false;
  model_graph g;
  g.layout = layout_of(model);
  g.run = detail::with_resolved_adapters(model, run);
  if (g.is_encoder_decoder())
    detail::fail(error_code::unsupported, "model.arch",
                 "is encoder_decoder: a forward with a KV cache is built for one stack", 2);
  recipes::build_decoder_stack(model, g.run, g.stacks.decoder, true, cached_keys);
  return g;
}

// build_forward's one stack alone: generate()'s estimate builds three forwards per call, and a
// model_graph's unused encoder stack would cost each of them graph_capacity empty slots in
// constant evaluation (a 7B plan in a static_assert stays under clang's step limit).
// `model_validated`: the caller ran validate(model).
constexpr graph build_forward_stack(const model_spec& model, training_spec run, std::uint64_t cached_keys,
                                    bool model_validated = false) {
  run.dropout = false;
  if (layout_of(model) == model_layout::encoder_decoder)
    detail::fail(error_code::unsupported, "model.arch",
                 "is encoder_decoder: a forward with a KV cache is built for one stack", 2);
  graph g;  // default-initialised: the op slots are left unwritten (graph/graph.hpp op_slots)
  recipes::build_decoder_stack(model, detail::with_resolved_adapters(model, run), g, true, cached_keys, model_validated);
  return g;
}

}  // namespace memscale
