// memscale/estimate/model.hpp: the estimate of a model's training step, read from the graph
// build() makes: one stack (estimate/single_graph.hpp) or an encoder-decoder's two
// (estimate/encoder_decoder.hpp).
#pragma once

#include <cstdint>

#include "memscale/estimate/encoder_decoder.hpp"
#include "memscale/estimate/single_graph.hpp"
#include "memscale/graph/model_graph.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale {

constexpr estimate_result estimate(const model_graph& g) {
  return g.is_encoder_decoder() ? estimate(g.stacks, g.run) : estimate(g.stacks.decoder, g.run);
}

// The device peak of a step, the larger of step 1 and the steady state, without what only an
// estimate_result shows (the breakdown, the saved-activation total).
constexpr bytes device_peak_of(const model_graph& g) {
  const auto larger = [](bytes a, bytes b) { return a > b ? a : b; };
  if (g.is_encoder_decoder()) {
    const estimate_result e = estimate(g.stacks, g.run);
    return larger(e.first_step.device, e.steady.device);
  }
  const graph& s = g.stacks.decoder;
  const detail::step_peaks p = detail::estimate_peaks(s, g.run, detail::totals_of(s, g.run));
  return larger(p.first_step.device, p.steady.device);
}

constexpr std::uint64_t parameter_count(const model_graph& g) {
  return g.is_encoder_decoder() ? parameter_count(g.stacks) : parameter_count(g.stacks.decoder);
}

// Total parameters of a model (independent of how it is trained). Built on the torch path of
// state-space mixers; both paths own the same weights.
constexpr std::uint64_t parameter_count(const model_spec& model) {
  training_spec counting{.micro_batch = 1, .seq_len = 1};
  counting.ssm_kernels = ssm_kernel_choice::torch;
  return parameter_count(build(model, counting));
}

constexpr estimate_result estimate(const model_spec& model, const training_spec& run) {
  estimate_result r = estimate(build(model, run));
  // Under torchtitan's TP the graph is one rank's share of the model (graph/layers/sequence_parallel.hpp):
  // its bytes are the rank's, the counts the model's (full training: every parameter trainable).
  if (run.tensor_parallel > 1) r.parameter_count = r.trainable_parameter_count = parameter_count(model);
  return r;
}

// One micro-batch's checkpointed block inputs over every stack: what offloading the
// checkpointed activations moves to the host.
constexpr bytes checkpointed_block_inputs(const model_graph& g) {
  return g.is_encoder_decoder() ? checkpointed_block_inputs(g.stacks, g.run)
                                : checkpointed_block_inputs(g.stacks.decoder, g.run);
}

}  // namespace memscale
