// memscale/parallel/rank_model.hpp: what the multi-GPU rules need to know of a model under one
// rank's run: its parameters, gradients and optimizer state by section, the units FSDP keeps
// gathered, ZeRO-3's module sizes and the checkpointed inputs. Gathered from one graph, or
// from both stacks of an encoder-decoder, so every data-parallel rule sees the whole model.
#pragma once

#include <cstdint>

#include "memscale/graph/encoder_decoder_graph.hpp"
#include "memscale/estimate.hpp"
#include "memscale/parallel/strategy.hpp"

namespace memscale::detail {

struct section_states {
  bytes params{};
  bytes grads{};
  bytes state{};
  std::uint64_t trainable = 0;  // trainable elements
};

constexpr section_states states_of(const graph& g, section s, const training_spec& run) {
  section_states r{};
  for (std::size_t i = s.begin; i < s.end; ++i) {
    const op& o = g.ops[i];
    r.params += op_parameter_bytes(o, run);
    r.grads += op_gradient_bytes(o, run);
    if (o.frozen) continue;
    if (!o.borrows_weight && o.weight.rows != 0) {
      r.state += tensor_state_bytes(o.weight.rows, o.weight.cols, run) * o.weight.count;
      r.trainable = checked_add(r.trainable, o.weight.elements());
    }
    if (o.bias.rows != 0) {
      r.state += tensor_state_bytes(o.bias.rows, 1, run) * o.bias.count;
      r.trainable = checked_add(r.trainable, o.bias.elements());
    }
  }
  return r;
}

constexpr section_states scaled(section_states a, std::uint64_t times) {
  return {a.params * times, a.grads * times, a.state * times, checked_mul(a.trainable, times)};
}
constexpr section_states plus(section_states a, section_states b) {
  return {a.params + b.params, a.grads + b.grads, a.state + b.state, checked_add(a.trainable, b.trainable)};
}
constexpr section_states split(section_states a, std::uint64_t t) {
  return {ceil_div(a.params, t), ceil_div(a.grads, t), ceil_div(a.state, t), ceil_div(a.trainable, t)};
}

// ZeRO-3's view of the parameters, in elements: the largest module, the tensors under the
// persistence threshold (never partitioned) and all of them.
struct zero3_sizes {
  std::uint64_t largest_module = 0;
  std::uint64_t persistent = 0;
  std::uint64_t total = 0;
};

constexpr zero3_sizes zero3_sizes_of(const graph& g, std::uint64_t threshold) {
  zero3_sizes r{};
  for (std::size_t i = 0; i < g.size; ++i) {
    const op& o = g.ops[i];
    r.largest_module = max(r.largest_module, stored_elements(o));
    r.total = checked_add(r.total, checked_mul(stored_elements(o), repeats_of(g, i)));
    const std::uint64_t w = o.borrows_weight ? 0 : checked_mul(o.weight.rows, o.weight.cols);
    if (w != 0 && w < threshold) r.persistent = checked_add(r.persistent, checked_mul(w, o.weight.count, repeats_of(g, i)));
    const std::uint64_t b = o.bias.rows;
    if (b != 0 && b < threshold) r.persistent = checked_add(r.persistent, checked_mul(b, o.bias.count, repeats_of(g, i)));
  }
  return r;
}

// The whole model as one rank's run sees it.
struct rank_model {
  section_states whole{};       // every parameter, gradient and optimizer state
  bytes fsdp_gathered{};        // FSDP FULL_SHARD's gathered units as the single-GPU estimator counts them
  zero3_sizes zero3{};
  bytes checkpointed_inputs{};  // one micro-batch's checkpointed block inputs, every layer
};

constexpr rank_model rank_model_of(const graph& g, const training_spec& rr, const parallel_spec& p) {
  const std::uint64_t L = g.block_repeats;
  const section_states sp = states_of(g, prologue_of(g), rr);
  const section_states sb = states_of(g, block_of(g), rr);
  const section_states se = states_of(g, epilogue_of(g), rr);
  rank_model m{};
  m.whole = plus(plus(sp, scaled(sb, L)), se);
  // sharded_residency_of: the root unit (prologue, epilogue) and two blocks.
  m.fsdp_gathered = sp.params + se.params + sb.params * (L < 2 ? L : std::uint64_t{2});
  m.zero3 = zero3_sizes_of(g, p.deepspeed.param_persistence_threshold);
  m.checkpointed_inputs = checkpointed_block_inputs(g, rr);
  return m;
}

constexpr rank_model rank_model_of(const encoder_decoder_graph& g, const training_spec& rr, const parallel_spec& p) {
  const rank_model enc = rank_model_of(g.encoder, rr, p);
  const rank_model dec = rank_model_of(g.decoder, rr, p);
  rank_model m{};
  m.whole = plus(enc.whole, dec.whole);
  m.fsdp_gathered = encoder_decoder_gathered_units(figures_of(g.encoder, rr), figures_of(g.decoder, rr));
  m.zero3 = {.largest_module = max(enc.zero3.largest_module, dec.zero3.largest_module),
             .persistent = checked_add(enc.zero3.persistent, dec.zero3.persistent),
             .total = checked_add(enc.zero3.total, dec.zero3.total)};
  m.checkpointed_inputs = enc.checkpointed_inputs + dec.checkpointed_inputs;
  return m;
}

}  // namespace memscale::detail
