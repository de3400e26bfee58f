// memscale/estimate.hpp: the estimate of a model's training step: one graph
// (estimate/single_graph.hpp) or an encoder-decoder's two (estimate/encoder_decoder.hpp).
#pragma once

#include <cstdint>

#include "memscale/encoder_decoder.hpp"
#include "memscale/estimate/encoder_decoder.hpp"
#include "memscale/estimate/single_graph.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"
#include "memscale/transformer.hpp"

namespace memscale {

constexpr estimate_result estimate(const model_spec& model, const training_spec& requested) {
  const training_spec run = with_resolved_adapters(model, requested);
  if (model.arch == architecture::encoder_decoder) return estimate(build_encoder_decoder_graph(model, run), run);
  return estimate(build_graph(model, run), run);
}

// Total parameters of a model (independent of how it is trained).
constexpr std::uint64_t parameter_count(const model_spec& model) {
  constexpr training_spec any_run{.micro_batch = 1, .seq_len = 1};
  if (model.arch == architecture::encoder_decoder) return parameter_count(build_encoder_decoder_graph(model, any_run));
  return parameter_count(build_graph(model, any_run));
}

}  // namespace memscale
