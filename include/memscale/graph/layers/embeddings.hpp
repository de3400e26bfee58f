// memscale/graph/layers/embeddings.hpp: the input embeddings: token, learned position and
// token-type tables (with Gemma's scaling and BERT's norm), and T5's shared token table.
#pragma once

#include <cstdint>

#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/norms.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/tensor.hpp"
#include "memscale/model.hpp"

namespace memscale::graph_layers {

// What the embeddings make: the stream the first block reads, and the lookups' outputs, which
// the base model's forward binds in locals until it returns (modeling_llama.py
// LlamaModel.forward inputs_embeds; modeling_gpt2.py GPT2Model.forward inputs_embeds and
// position_embeds; modeling_opt.py OPTDecoder.forward inputs_embeds and pos_embeds, v4.44.0).
struct embedded {
  tensor stream{};
  tensor token_lookup{};
  tensor position_lookup{};  // elements 0: the model has no learned position table
};

// The embeddings of a decoder or encoder stack, up to and including their dropout.
constexpr embedded embed(const layer_context& ctx) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const auto hidden = m.hidden;
  const dtype param = ops.precision().param;
  const bool frozen = ctx.adapters.enabled;
  const auto token_rows = [&] { return detail::checked_mul(ctx.tokens, hidden); };
  // Embedding backward needs only the indices (derivatives.yaml: embedding_backward).
  op wte{.kind = op_kind::embedding,
         .weight = {m.vocab, hidden, 1},
         .role = param_role::embedding,
         .frozen = frozen,
         .weight_grad_exists = m.tied_embeddings && m.head != head_kind::none};
  // The dense embedding gradient is built as a V x h tensor, then accumulated into the
  // gradient the tied output layer already created (embedding_dense_backward).
  if (wte.weight_grad_exists && !frozen) wte.bwd_temp = storage(param, detail::checked_mul(m.vocab, hidden));
  embedded result{};
  result.token_lookup = ops.emit(wte, token_rows(), param);
  tensor x = result.token_lookup;
  if (m.scale_embeddings) x = ops.elementwise(token_rows(), param);  // modeling_gemma.py: * sqrt(hidden)
  if (m.positions == position_kind::learned) {
    op pos{.kind = op_kind::embedding, .weight = {m.max_positions, hidden, 1}, .role = param_role::embedding,
           .frozen = frozen};
    // OPTLearnedPositionalEmbedding looks up position_ids + 2, a new (b, s) int64 tensor that
    // embedding keeps for its backward (derivatives.yaml embedding: indices).
    if (m.builds_attention_mask && !frozen) pos.extra_saved = storage(dtype::int64, ctx.tokens);
    result.position_lookup = ops.emit(pos, token_rows(), param);
    x = ops.add(x, result.position_lookup);
  }
  if (m.type_vocab > 0) {
    const op type_table{.kind = op_kind::embedding, .weight = {m.type_vocab, hidden, 1},
                        .role = param_role::embedding, .frozen = frozen};
    x = ops.add(x, ops.emit(type_table, token_rows(), param));
  }
  if (m.embedding_norm) x = norm(ctx, x);
  result.stream = ops.dropout(x, ctx.dropout.embeddings);
  return result;
}

// The first block reads the token lookup itself when nothing is added to it, scaled or normed (and
// no dropout runs, as in eval mode): LlamaModel.forward's hidden_states = inputs_embeds
// (modeling_llama.py@v5.17.0), bound through the blocks as inputs_embeds.
constexpr bool stream_is_token_lookup(const model_spec& m) {
  return !m.scale_embeddings && m.positions != position_kind::learned && m.type_vocab == 0 && !m.embedding_norm;
}

// T5's shared token embedding, looked up by the encoder and the decoder: stored once (by the
// encoder's op), borrowed by the decoder's.
constexpr tensor t5_shared_embedding(const layer_context& ctx, bool decoder, bool lm_head) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  op wte{.kind = op_kind::embedding,
         .weight = {m.vocab, m.hidden, 1},
         .role = param_role::embedding,
         .borrows_weight = decoder,
         // Backward runs the decoder first: a tied head, else the decoder's lookup, creates
         // the gradient; later lookups accumulate into it.
         .weight_grad_exists = decoder ? (m.tied_embeddings && lm_head) : true};
  // embedding_dense_backward builds a V x h gradient, then the engine adds it to the one
  // already waiting for the shared weight: out of place, a third V x h tensor while the
  // sum is made (InputBuffer::add, torch/csrc/autograd/input_buffer.cpp, runs with grad
  // mode as backward() was called; measured on torch 1.13: the step's peak sits in
  // EmbeddingBackward0 -> aten::add, 2 V x h above the gradients).
  if (wte.weight_grad_exists) wte.bwd_temp = storage(ops.precision().param, detail::checked_mul(m.vocab, m.hidden, 2));
  return ops.emit(wte, detail::checked_mul(ctx.tokens, m.hidden), ops.precision().param);
}

}  // namespace memscale::graph_layers
