// memscale/estimate/encoder_decoder.hpp: the estimators over an encoder-decoder pair.
//
// Built on the single-graph estimator (estimate/single_graph.hpp), whose types and section
// helpers it reuses; estimate/model.hpp chooses between them. Time line of one step:
// encoder forward, decoder forward (every encoder tensor still saved), decoder backward (the
// encoder output's gradient accumulating), encoder backward (the decoder's saved tensors
// gone, its gradients made), optimizer step. Inside each stack the moments are those of the single-graph walk: a
// section's first and last block bound every cross-layer term.
#pragma once

#include <cstdint>

#include "memscale/graph/encoder_decoder_graph.hpp"
#include "memscale/estimate/single_graph.hpp"

namespace memscale {

constexpr std::uint64_t parameter_count(const encoder_decoder_graph& g) {
  return detail::checked_add(parameter_count(g.encoder), parameter_count(g.decoder));
}

constexpr std::uint64_t trainable_parameter_count(const encoder_decoder_graph& g) {
  return detail::checked_add(trainable_parameter_count(g.encoder), trainable_parameter_count(g.decoder));
}

namespace detail {

// One stack's figures under `run` (block figures per layer).
struct stack_figures {
  bytes params{};        // on the device without sharding (two blocks when streamed)
  bytes params_block{};
  bytes params_root{};   // prologue and epilogue (FSDP's root unit keeps them gathered)
  bytes grads_p{};
  bytes grads_b{};
  bytes grads_e{};
  bytes saved_p{};
  bytes saved_b{};
  bytes saved_e{};
  std::uint64_t layers = 0;
  [[nodiscard]] constexpr bytes grads() const { return grads_p + grads_b * layers + grads_e; }
  [[nodiscard]] constexpr bytes saved() const { return saved_p + saved_b * layers + saved_e; }
  [[nodiscard]] constexpr bytes all_params() const { return params_root + params_block * layers; }
};

constexpr stack_figures figures_of(const graph& g, const training_spec& run) {
  const bool ckpt = run.ckpt == checkpointing::full;
  stack_figures f{};
  f.layers = g.block_repeats;
  f.params_block = section_bytes(g, block_of(g), run, false);
  // Streamed parameters leave two blocks of each stack on the device.
  const std::uint64_t resident = run.offload_parameters ? (f.layers < 2 ? f.layers : 2) : f.layers;
  f.params_root = section_bytes(g, prologue_of(g), run, false) + section_bytes(g, epilogue_of(g), run, false);
  f.params = f.params_root + f.params_block * resident;
  f.grads_p = section_bytes(g, prologue_of(g), run, true);
  f.grads_b = section_bytes(g, block_of(g), run, true);
  f.grads_e = section_bytes(g, epilogue_of(g), run, true);
  f.saved_p = section_saved_bytes(g, prologue_of(g), run, false);
  f.saved_b = section_saved_bytes(g, block_of(g), run, ckpt);
  if (ckpt && run.offload_activations) f.saved_b = {};
  f.saved_e = section_saved_bytes(g, epilogue_of(g), run, false);
  return f;
}

constexpr std::uint64_t layers_resident(std::uint64_t layers, bool streamed) {
  return streamed ? (layers < 2 ? layers : 2) : layers;
}

// FSDP FULL_SHARD's gathered units of both stacks, as for a single stack (sharded_residency_of):
// the root unit (shared embedding, final norms, head) and the running and one prefetched block.
constexpr bytes encoder_decoder_gathered_units(const stack_figures& enc, const stack_figures& dec) {
  return enc.params_root + dec.params_root + enc.params_block * layers_resident(enc.layers, true) +
         dec.params_block * layers_resident(dec.layers, true);
}

struct stack_context {
  bytes below{};          // activations held from before this stack (the encoder, for the decoder)
  bytes below_backward{};  // the same during this stack's backward
  bytes held{};           // this stack's shared biases and masks (forward; under ckpt also backward)
  bytes extra_at_end{};   // alive at the end of the forward (the decoder's k/v cache)
  bytes bias_grad{};      // accumulated through this stack's block backward
  bytes carried{};        // a gradient carried through this whole backward (encoder output's)
  bytes grads_before{};   // gradients created by later backward (when they do not persist)
};

// Forward and backward moments of one stack, added to `best`.
constexpr phase_candidate stack_moments(const graph& g, const stack_figures& f, const training_spec& run,
                                        const stack_context& c, bool persist, bool grads_elsewhere,
                                        std::uint64_t grad_share, phase_candidate best,
                                        const memory_breakdown& base) {
  const bool ckpt = run.ckpt == checkpointing::full;
  const bool streamed = run.offload_parameters;
  const auto L = f.layers;
  auto moment = [&](phase at, bytes activations, bytes grads) {
    memory_breakdown m = base;
    m.activations += activations;
    m.gradients += grads;
    return phase_candidate{at, m};
  };
  const bytes held_bwd = ckpt ? c.held : bytes{};
  const bytes below_blocks = f.saved_p + f.saved_b * (L - 1);
  // Forward.
  best = larger(best, moment(phase::forward, c.below + section_forward_peak(g, prologue_of(g), run), {}));
  best = larger(best, moment(phase::forward,
                             c.below + c.held + below_blocks + section_forward_peak(g, block_of(g), run, false, !ckpt),
                             {}));
  best = larger(best, moment(phase::forward,
                             c.below + f.saved_p + f.saved_b * L + c.extra_at_end +
                                 section_forward_peak(g, epilogue_of(g), run, true),
                             {}));
  // Gradients of later sections: on the host, or inside a buffer the base already counts.
  const auto own = [&](bytes grads) { return (persist || grads_elsewhere) ? bytes{} : ceil_div(grads, grad_share); };
  // Backward of the epilogue.
  // The encoder output's gradient starts at the first cross-attention, inside the blocks.
  const auto e = section_backward_peak(g, epilogue_of(g), run, persist, bytes{});
  best = larger(best, moment(phase::backward, c.below_backward + held_bwd + f.saved_p + f.saved_b * L +
                                                  (e.peak - e.grads_at_peak),
                             own(c.grads_before) + e.grads_at_peak));
  // Backward of the top and the bottom block.
  const auto bp = section_backward_peak(g, block_of(g), run, persist, g.stream_grad + c.bias_grad + c.carried);
  // The reentrant checkpoint holds its rerun's output through the block's backward (estimate/single_graph.hpp).
  const bytes local = bp.peak - bp.grads_at_peak + (reentrant_checkpoint(run) ? g.ops[block_of(g).end - 1].out : bytes{});
  best = larger(best, moment(phase::backward, c.below_backward + held_bwd + below_blocks + local,
                             own(c.grads_before + f.grads_e) + bp.grads_at_peak));
  best = larger(best,
                moment(phase::backward, c.below_backward + held_bwd + f.saved_p + local,
                       own(c.grads_before + f.grads_e + f.grads_b * layers_resident(L - 1, streamed)) +
                           bp.grads_at_peak));
  // Backward of the prologue.
  const auto pp = section_backward_peak(g, prologue_of(g), run, persist, c.carried);
  best = larger(best, moment(phase::backward, c.below_backward + (pp.peak - pp.grads_at_peak),
                             own(c.grads_before + f.grads_e + f.grads_b * layers_resident(L, streamed)) +
                                 pp.grads_at_peak));
  return best;
}

constexpr bytes encoder_decoder_step_temporaries(const encoder_decoder_graph& g, const training_spec& run) {
  // The step over both stacks: foreach lists span every tensor, the for-loop path holds
  // temporaries of the largest one.
  const bytes a = optimizer_step_temporaries(g.encoder, run);
  const bytes b = optimizer_step_temporaries(g.decoder, run);
  return run.optimizer_impl == optimizer_implementation::foreach ? a + b : max(a, b);
}

constexpr peak_estimate encoder_decoder_peak(const encoder_decoder_graph& g, const training_spec& run,
                                             bool state_present) {
  const stack_figures enc = figures_of(g.encoder, run);
  const stack_figures dec = figures_of(g.decoder, run);
  const bool cuda = run.device == device_kind::cuda;
  const bool grads_to_host = run.offload_optimizer;
  const gradient_residency residency = gradient_residency_of(run);
  const bool persist = residency.in_place;
  const bool grads_elsewhere = grads_to_host || residency.partitioned;
  const std::uint64_t n = run.data_parallel;
  const std::uint64_t grad_share = (run.shard >= sharding::gradients && !persist) ? n : 1;
  // FSDP full shard: 1/N of everything (on the host when streamed) plus the gathered units.
  const bytes params = run.shard == sharding::full
                           ? (run.offload_parameters ? bytes{} : ceil_div(enc.all_params() + dec.all_params(), n)) +
                                 encoder_decoder_gathered_units(enc, dec)
                           : enc.params + dec.params;
  const bytes all_grads = enc.grads() + dec.grads();
  const bytes kept_grads = persist ? all_grads : residency.partitioned ? ceil_div(all_grads, n) : bytes{};
  const bytes full_state = optimizer_state_bytes(g.encoder, run) + optimizer_state_bytes(g.decoder, run);
  const bytes device_state = run.shard != sharding::none ? ceil_div(full_state, n) : full_state;
  const bytes state = (state_present && !run.offload_optimizer) ? device_state : bytes{};
  const bool workspace_in_allocator = run.torch_version >= 200;
  const bytes cublas = cuda ? run.blas_workspace : bytes{};
  const bytes workspace = workspace_in_allocator ? cublas : bytes{};
  const bytes inputs = g.encoder.inputs + g.decoder.inputs;
  const memory_breakdown base{params + g.encoder.buffers + g.decoder.buffers, kept_grads, state, inputs, workspace};

  phase_candidate best{phase::forward, base};
  // Encoder: nothing below it; its backward comes after the whole decoder's.
  const stack_context enc_ctx{.held = g.encoder_held,
                              .bias_grad = g.encoder_bias_grad,
                              .grads_before = dec.grads()};
  best = stack_moments(g.encoder, enc, run, enc_ctx, persist, grads_elsewhere, grad_share, best, base);
  // Decoder: every encoder tensor saved below it, the encoder output alive in forward (and
  // in backward when the cross-attention projections saved it), the encoder's position
  // bias too when checkpointed blocks hold it.
  const bool ckpt = run.ckpt == checkpointing::full;
  const bytes enc_saved = enc.saved() + (ckpt ? g.encoder_held : bytes{});
  const stack_context dec_ctx{.below = enc_saved + g.encoder_output,
                              .below_backward = enc_saved + (g.encoder_output_saved ? g.encoder_output : bytes{}),
                              .held = g.decoder_held,
                              .extra_at_end = g.decoder_cache,
                              .bias_grad = g.decoder_bias_grad,
                              .carried = g.encoder_output_grad};
  best = stack_moments(g.decoder, dec, run, dec_ctx, persist, grads_elsewhere, grad_share, best, base);

  // Optimizer step.
  {
    const bytes step_state = run.offload_optimizer ? bytes{} : device_state;
    const bytes step_grads = run.shard >= sharding::gradients ? ceil_div(all_grads, n) : all_grads;
    memory_breakdown m = base;
    m.gradients = grads_to_host ? bytes{} : step_grads;
    m.optimizer = step_state;
    m.workspace = workspace + encoder_decoder_step_temporaries(g, run);
    best = larger(best, phase_candidate{phase::optimizer_step, m});
  }

  return finish_peak(best, run,
                     cuda ? checked_add(large_tensor_count(g.encoder, run), large_tensor_count(g.decoder, run)) : 0);
}

}  // namespace detail

// One micro-batch's checkpointed block inputs, every layer of every stack.
constexpr bytes checkpointed_block_inputs(const encoder_decoder_graph& g, const training_spec& run) {
  return checkpointed_block_inputs(g.encoder, run) + checkpointed_block_inputs(g.decoder, run);
}

constexpr bytes offloaded_block_inputs_on_host(const encoder_decoder_graph& g, const training_spec& run) {
  return offloaded_block_inputs_on_host(g.encoder, run) + offloaded_block_inputs_on_host(g.decoder, run);
}

constexpr pinned_shards pinned_fsdp2_shards(const encoder_decoder_graph& g, const training_spec& run) {
  const pinned_shards e = pinned_fsdp2_shards(g.encoder, run);
  const pinned_shards d = pinned_fsdp2_shards(g.decoder, run);
  return {.parameters = e.parameters + d.parameters,
          .gradients = e.gradients + d.gradients,
          .largest_unit_gradients = e.largest_unit_gradients > d.largest_unit_gradients ? e.largest_unit_gradients
                                                                                        : d.largest_unit_gradients};
}

constexpr estimate_result estimate(const encoder_decoder_graph& g, const training_spec& run) {
  estimate_result r{};
  r.parameter_count = parameter_count(g);
  r.trainable_parameter_count = trainable_parameter_count(g);
  r.parameter_bytes = parameter_bytes(g.encoder, run) + parameter_bytes(g.decoder, run);
  r.gradient_bytes = gradient_bytes(g.encoder, run) + gradient_bytes(g.decoder, run);
  r.optimizer_bytes = optimizer_state_bytes(g.encoder, run) + optimizer_state_bytes(g.decoder, run);
  r.paged_optimizer_bytes = paged_optimizer_bytes(g.encoder, run) + paged_optimizer_bytes(g.decoder, run);
  r.saved_activation_bytes = detail::figures_of(g.encoder, run).saved() + detail::figures_of(g.decoder, run).saved();
  r.steady = detail::encoder_decoder_peak(g, run, true);
  r.first_step = detail::encoder_decoder_peak(g, run, false);
  r.host_bytes = detail::host_bytes_of(r, g, run);
  return r;
}

}  // namespace memscale
