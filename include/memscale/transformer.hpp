// memscale/transformer.hpp: the graph of one decoder or encoder stack (GPT, LLaMA, BERT and
// their families), written from the shared layers by graph/recipes/decoder_stack.hpp, and
// the adapter dtype a run resolves to.
#pragma once

#include "memscale/dtype.hpp"
#include "memscale/graph.hpp"
#include "memscale/graph/recipes/decoder_stack.hpp"
#include "memscale/model.hpp"
#include "memscale/precision_policy.hpp"
#include "memscale/training.hpp"

namespace memscale {

// The run with its adapter dtype decided: PEFT (hf_transformers) keeps adapters over a 16-bit
// base in fp32 by default (peft_model.py get_peft_model autocast_adapter_dtype=True, which
// casts only bf16/fp16 adapters); other implementations keep them in the base dtype.
constexpr training_spec with_resolved_adapters(const model_spec& model, training_spec run) {
  if (run.adapters != adapter_dtype::framework_default) return run;
  const bool sixteen_bit_base = precision_policy_of(run).param != dtype::fp32;
  run.adapters = (is_lora(run) && sixteen_bit_base && model.impl == implementation::hf_transformers)
                     ? adapter_dtype::fp32
                     : adapter_dtype::as_base;
  return run;
}

// The op sequence of one training step of `model` under `run`. One sequence is one stack: an
// encoder-decoder has two (build_encoder_decoder_graph) and is refused here.
constexpr graph build_graph(const model_spec& model, const training_spec& run) {
  return recipes::build_decoder_stack(model, run);
}

}  // namespace memscale
