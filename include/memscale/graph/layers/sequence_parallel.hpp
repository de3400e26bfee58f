// memscale/graph/layers/sequence_parallel.hpp: one rank of torchtitan's tensor parallelism with
// sequence parallelism, as apply_tp lays out a Llama (torchtitan/models/llama3/infra/parallelize.py
// @ f7084fc7): the attention's heads and the MLP's hidden width split over the TP group
// (ColwiseParallel wq/wk/wv/w1/w3, RowwiseParallel wo/w2), the residual stream and the norms
// sequence-sharded between them (SequenceParallel, Shard(1) layouts), the sequence all-gathered
// into each branch (PrepareModuleInput Shard(1) -> Replicate) and reduce-scattered out of it
// (RowwiseParallel output_layouts=Shard(1)); the embedding and the output split over the
// vocabulary, the loss on the vocabulary-sharded logits (loss_parallel).
#pragma once

#include <cstdint>

#include "memscale/detail/math.hpp"
#include "memscale/error.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/layer_pattern.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale::graph_layers {

constexpr bool sequence_parallel(const training_spec& run) { return run.tensor_parallel > 1; }

// The rows of the residual stream one rank holds: its 1/tp of the sequence.
// Without TP no division (detail::ceil_div says why).
constexpr std::uint64_t stream_rows(const layer_context& ctx) {
  return ctx.run.tensor_parallel == 1 ? ctx.tokens : ctx.tokens / ctx.run.tensor_parallel;
}

// The model one TP rank computes: its heads, key/value heads, MLP width and vocabulary rows
// (torchtitan's Attention views wq's output as (bs, seqlen, -1, head_dim): the local heads,
// models/llama3/model/model.py @ f7084fc7); the norms stay whole (replicated over the TP group).
constexpr model_spec tensor_parallel_local(const model_spec& m, const training_spec& run) {
  const std::uint64_t tp = run.tensor_parallel;
  if (tp == 1) return m;
  constexpr auto unsupported = error_code::unsupported;
  detail::require(m.arch == architecture::decoder && m.layout == block_layout::sequential &&
                      m.block_norms == branch_norms::pre && m.extra_norms_per_block == 0 && !has_layer_pattern(m) &&
                      tensor_parallel_modelled(m) && m.experts == 0 &&
                      m.norm == norm_kind::rmsnorm && !m.tied_embeddings && m.head == head_kind::causal_lm,
                  unsupported, "run.tensor_parallel",
                  "is modelled for torchtitan's llama3 decoder (pre-norm RMSNorm blocks, dense MLP, untied causal-LM "
                  "head): apply_tp's plan names those modules",
                  tp);
  const auto divides = [&](std::uint64_t n, const char* field) {
    detail::require(n % tp == 0, error_code::invalid_run, field,
                    "must be a multiple of run.tensor_parallel (each TP rank holds an equal share)", n);
  };
  divides(m.heads, "model.heads");
  divides(kv_heads_of(m), "model.kv_heads");
  divides(m.ffn, "model.ffn");
  divides(m.vocab, "model.vocab");
  model_spec local = m;
  local.head_dim = head_dim_of(m);
  local.heads = m.heads / tp;
  local.kv_heads = kv_heads_of(m) / tp;
  local.ffn = m.ffn / tp;
  local.vocab = m.vocab / tp;
  return local;
}

// PrepareModuleInput / ColwiseParallel(input_layouts=Shard(1)): the rank's sequence shard
// all-gathered into the whole sequence, which the branch's first matmuls keep.
constexpr tensor all_gather_sequence(const layer_context& ctx, tensor shard) {
  const tensor whole = ctx.ops.elementwise(shard, detail::checked_mul(shard.elements, ctx.run.tensor_parallel), shard.type);
  ctx.ops.at(whole).grad_in = storage(shard.type, shard.elements);  // its backward reduce-scatters onto the shard
  return whole;
}

// RowwiseParallel(output_layouts=Shard(1)): the partial sums reduce-scattered into the rank's
// sequence shard.
constexpr tensor reduce_scatter_sequence(const layer_context& ctx, tensor partial) {
  const tensor shard = ctx.ops.elementwise(partial, partial.elements / ctx.run.tensor_parallel, partial.type);
  ctx.ops.at(shard).grad_in = storage(partial.type, partial.elements);  // its backward all-gathers the gradient
  return shard;
}

}  // namespace memscale::graph_layers
