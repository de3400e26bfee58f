// memscale/generic_model.hpp: a model no family reader knows, estimated from its checkpoint
// and from the standard keys of its config.
//
// Parameters, gradients and optimizer state come from the checkpoint's tensors (exact for any
// architecture: estimate/checkpoint_state.hpp); activations come from a generic decoder of
// the config's sizes (hidden, layers, heads, kv heads, intermediate size, vocabulary), which
// no measurement covers: such a run takes the widest band (run_class::unmeasured, ±35%).
#pragma once

#include <cstdint>
#include <string_view>

#include "memscale/error_band.hpp"
#include "memscale/estimate.hpp"
#include "memscale/estimate/checkpoint_state.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"
#include "memscale/weights_inventory.hpp"

namespace memscale {

struct generic_model {
  model_spec decoder{};         // sizes the activations (a LLaMA-recipe decoder of the config's sizes)
  weights_inventory weights{};  // sizes parameters, gradients and optimizer state
};

// No measured class covers a generic decoder's activations.
inline constexpr run_class generic_run_class = run_class::unmeasured;
inline constexpr std::string_view generic_activation_note = "activations estimated from a generic decoder";

namespace detail {

// `part` of `old_total`, as the same share of `new_total` (rounded down).
constexpr bytes same_share(bytes part, bytes old_total, bytes new_total) {
  if (old_total.value == 0) return bytes{};
  const double share = static_cast<double>(part.value) / static_cast<double>(old_total.value);
  return bytes{floor_to_u64(share * static_cast<double>(new_total.value))};
}

// Spreads `target` over the prologue, one block (repeated `layers` times) and the epilogue
// in the proportions the decoder gave them; the epilogue takes the rounding, so the three
// add up to `target` exactly.
constexpr void spread(bytes& prologue, bytes& block, bytes& epilogue, std::uint64_t layers, bytes target) {
  const bytes old_total = prologue + block * layers + epilogue;
  bytes p = same_share(prologue, old_total, target);
  bytes b = same_share(block, old_total, target);
  if (p + b * layers > target) {  // double rounding: give it all to the epilogue
    p = {};
    b = {};
  }
  prologue = p;
  block = b;
  epilogue = target - p - b * layers;
}

// Bytes of the parameters a LoRA run trains (the adapters), as the decoder's graph holds them.
constexpr bytes trained_parameter_bytes(const graph& g, const training_spec& run) {
  bytes total{};
  for (std::size_t i = 0; i < g.size; ++i)
    if (!g.ops[i].frozen) total += op_parameter_bytes(g.ops[i], run) * repeats_of(g, i);
  return total;
}

}  // namespace detail

// The frozen base of a LoRA run over `m`'s checkpoint. LoRA: every stored tensor as loaded
// (floating parameters in the run's dtype, quantised storage and buffers as stored): exact.
// QLoRA over a checkpoint that is already quantised (bitsandbytes, GPTQ, ...): the same.
// QLoRA over a 16-bit checkpoint quantises the blocks' linear weights at load; which tensors
// those are is the decoder's guess, so the decoder's base is scaled to the checkpoint's count.
constexpr bytes generic_frozen_base_bytes(const generic_model& m, const training_spec& run, bytes decoder_base,
                                          std::uint64_t decoder_base_count) {
  const checkpoint_state s = checkpoint_state_of(m.weights, run);
  const bool prequantized = total(m.weights, tensor_role::quantized).tensors > 0;
  if (run.target == training_target::lora || prequantized) {
    const precision_policy p = precision_policy_of(run);
    return storage(p.param, s.parameters) + total(m.weights, tensor_role::quantized).stored +
           total(m.weights, tensor_role::buffer).stored;
  }
  return detail::same_share(decoder_base, bytes{decoder_base_count}, bytes{s.parameters});
}

// The estimate of a run on `m`: the generic decoder's activations and workspace, the
// checkpoint's parameters, gradients and optimizer state, composed into the peaks by the
// same code as any model (estimate.hpp).
constexpr estimate_result estimate(const generic_model& m, const training_spec& requested) {
  const model_graph built = build(validate(m.decoder), requested);
  const training_spec& run = built.run;
  const graph& g = built.stack();
  detail::graph_totals t = detail::totals_of(g, run);
  const auto layers = g.block_repeats;
  const checkpoint_state s = checkpoint_state_of(m.weights, run);
  if (run.target == training_target::full) {
    detail::spread(t.params_p, t.params_b, t.params_e, layers, s.parameter_bytes);
    detail::spread(t.grads_p, t.grads_b, t.grads_e, layers, s.gradient_bytes);
    t.parameters = s.parameters;
    t.trainable_parameters = s.parameters;
    t.optimizer_state = s.optimizer_bytes;
    t.step_temporaries = s.step_temporaries;
  } else {
    // Adapters (their gradients and state too) are the decoder's; the base is the checkpoint's.
    const bytes adapters = detail::trained_parameter_bytes(g, run);
    const bytes decoder_base = t.parameter_bytes(layers) - adapters;
    const bytes base = generic_frozen_base_bytes(m, run, decoder_base, t.parameters - t.trainable_parameters);
    detail::spread(t.params_p, t.params_b, t.params_e, layers, base + adapters);
    t.parameters = detail::checked_add(s.parameters, t.trainable_parameters, parameter_quantity);
  }
  return detail::estimate_from_totals(g, run, t);
}

}  // namespace memscale
