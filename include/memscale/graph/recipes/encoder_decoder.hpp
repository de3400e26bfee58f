// memscale/graph/recipes/encoder_decoder.hpp: one training step of an encoder-decoder (T5)
// from the shared layers: two stacks, each with its prologue, one repeated block and its
// epilogue, plus the tensors that cross between them (encoder_decoder_graph says which).
//
// The forward follows Hugging Face transformers src/transformers/models/t5/modeling_t5.py
// (commit 6b8b757d, 4.5x): T5LayerNorm, T5Attention, T5DenseActDense /
// T5DenseGatedActDense, T5Stack.forward and T5ForConditionalGeneration.forward.
#pragma once

#include <cstdint>

#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/graph/encoder_decoder_graph.hpp"
#include "memscale/error.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/adapters.hpp"
#include "memscale/graph/layers/attention.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/embeddings.hpp"
#include "memscale/graph/layers/heads.hpp"
#include "memscale/graph/layers/mlp.hpp"
#include "memscale/graph/layers/norms.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/tensor.hpp"
#include "memscale/model.hpp"
#include "memscale/precision_policy.hpp"
#include "memscale/training.hpp"

namespace memscale::recipes {

// One side of a T5 step.
struct t5_stack_spec {
  bool decoder = false;
  std::uint64_t seq = 0;          // this stack's tokens per sequence
  std::uint64_t encoder_seq = 0;  // the encoder's (what cross-attention reads)
  std::uint64_t inner = 0;        // heads x d_kv
};

constexpr std::uint64_t t5_decoder_layers(const model_spec& model) {
  return model.decoder_layers == 0 ? model.layers : model.decoder_layers;
}

// One T5Stack: embeddings, blocks, final norm and dropout; the decoder adds the head.
// Returns the stack's output (its last op's).
constexpr graph_layers::tensor t5_stack(const graph_layers::layer_context& ctx, const t5_stack_spec& spec) {
  using namespace graph_layers;
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const training_spec& run = ctx.run;
  const auto batch = run.micro_batch;
  const auto rows = ctx.tokens;
  const bool lm_head = spec.decoder && m.head == head_kind::causal_lm;
  const auto t5_norm = [&](tensor in) {
    return rms_norm(ops, in, {.width = m.hidden, .rows = rows}, rms_norm_code::hf_t5, true, run.torch_version);
  };
  const auto sublayer_residual = [&](tensor stream, tensor branch) {
    return ops.add(stream, ops.dropout(branch, ctx.dropout.residual));
  };
  // ---- prologue: the shared embedding and the first block's relative_attention_bias table.
  const tensor embedded = t5_shared_embedding(ctx, spec.decoder, lm_head);
  if (m.relative_attention_buckets > 0) relative_attention_bias_table(ops, m, spec.seq);
  ops.dropout(embedded, ctx.dropout.embeddings);
  // ---- the repeated block.
  graph_builder& sections = ops.sections();
  sections.begin_block();
  tensor y = ops.emit(op_kind::stream, detail::checked_mul(rows, m.hidden), ops.stream_dtype());
  const tensor self_in = t5_norm(y);
  y = sublayer_residual(y, t5_attention(ctx, self_in, self_in, spec.seq, spec.seq, spec.inner));
  if (spec.decoder) {
    const tensor cross_in = t5_norm(y);
    const tensor encoder_output = ops.alias(detail::checked_mul(batch, spec.encoder_seq, m.hidden), ops.precision().param);
    y = sublayer_residual(y, t5_attention(ctx, cross_in, encoder_output, spec.seq, spec.encoder_seq, spec.inner));
  }
  const tensor ff_in = t5_norm(y);
  sublayer_residual(y, t5_dense_act_dense(ctx, ff_in, rows));
  sections.end_block(spec.decoder ? t5_decoder_layers(m) : m.layers);
  // ---- epilogue.
  tensor z = ops.emit(op_kind::stream, detail::checked_mul(rows, m.hidden), ops.stream_dtype());
  z = ops.dropout(t5_norm(z), ctx.dropout.stack_output);
  if (lm_head) {
    // CrossEntropyLoss on logits.view(-1, V) against the labels as given (the decoder's
    // inputs are the shifted labels, so no shifted copy); log_softmax keeps its output,
    // fp32 under autocast.
    lm_loss(ctx, z,
            {.rows = rows,
             .sequences = batch,
             .tied = m.tied_embeddings,
             .labels_shifted = true,
             .chunk_rows = rows,
             .scales_tied_input = true,
             .records_input_grad = true});
  }
  // input_ids + labels (encoder), the shifted decoder_input_ids (decoder): int64.
  sections.set_inputs(
      storage(dtype::int64, spec.decoder ? rows : detail::checked_add(rows, detail::checked_mul(batch, target_len_of(run)))));
  sections.set_stream_grad(storage(ops.stream_dtype(), detail::checked_mul(rows, m.hidden)));
  return z;
}

// The two stacks of one training step of an encoder-decoder `model` under `run`, written
// into `r` (default-initialised: the op slots are left unwritten).
constexpr void build_encoder_decoder(const model_spec& model, const training_spec& run, encoder_decoder_graph& r) {
  using namespace graph_layers;
  validate(model);
  validate(run);
  const precision_policy precision = precision_policy_of(run);
  const auto inner = detail::checked_mul(model.heads, head_dim_of(model));
  detail::require(model.arch == architecture::encoder_decoder, error_code::invalid_model, "model.arch",
                  "must be encoder_decoder for the encoder-decoder recipe", model.arch);
  detail::require(!is_lora(run), error_code::unsupported, "run.target",
                  "LoRA on encoder-decoder models is not modelled yet", run.target);
  const auto batch = run.micro_batch;
  const auto encoder_seq = run.seq_len;
  const auto decoder_seq = target_len_of(run);
  const bool ckpt = run.ckpt == checkpointing::full;
  const adapter_plan adapters = adapter_plan_of(model, run);
  const dropout_sites dropout = dropout_sites_of(model, run);

  // ---- encoder ----
  {
    op_writer ops(r.encoder, precision, run.device);
    const layer_context ctx{.ops = ops, .model = model, .run = run, .adapters = adapters, .dropout = dropout,
                            .tokens = detail::checked_mul(batch, encoder_seq)};
    const tensor encoder_output = t5_stack(ctx, {.seq = encoder_seq, .encoder_seq = encoder_seq, .inner = inner});
    r.encoder_output = storage(encoder_output.type, encoder_output.elements);
    r.encoder_output_saved = !precision.casts_weights();
    r.encoder_output_grad = storage(precision.param, encoder_output.elements);
  }
  // position_bias (b, h, s, s) fp32: compute_bias + the extended mask (T5Stack.forward).
  const bytes encoder_bias = storage(dtype::fp32, detail::checked_mul(detail::checked_mul(batch, model.heads), encoder_seq, encoder_seq));
  r.encoder_held = encoder_bias + storage(dtype::fp32, detail::checked_mul(batch, encoder_seq, 2));  // + ones mask, extended mask
  r.encoder_bias_grad = model.relative_attention_buckets > 0 ? encoder_bias : bytes{};

  // ---- decoder ----
  {
    op_writer ops(r.decoder, precision, run.device);
    const layer_context ctx{.ops = ops, .model = model, .run = run, .adapters = adapters, .dropout = dropout,
                            .tokens = detail::checked_mul(batch, decoder_seq)};
    t5_stack(ctx, {.decoder = true, .seq = decoder_seq, .encoder_seq = encoder_seq, .inner = inner});
  }
  const bytes decoder_bias = storage(dtype::fp32, detail::checked_mul(detail::checked_mul(batch, model.heads), decoder_seq, decoder_seq));
  const bytes cross_bias = storage(dtype::fp32, detail::checked_mul(detail::checked_mul(batch, model.heads), decoder_seq, encoder_seq));
  // _update_causal_mask: (b, 1, sd, sd) in the embeddings' dtype.
  const bytes causal_mask = storage(precision.param, detail::checked_mul(batch, decoder_seq, decoder_seq));
  r.decoder_held = decoder_bias + cross_bias + causal_mask;
  r.decoder_bias_grad = model.relative_attention_buckets > 0 ? decoder_bias : bytes{};
  // Under gradient checkpointing the cross-attention's zero bias is made to require
  // grad (T5Attention.forward), so its gradient accumulates too.
  if (ckpt) r.decoder_bias_grad += cross_bias;
  // T5Config.use_cache defaults to True and T5Stack turns it off only for gradient
  // checkpointing: the decoder keeps every block's k and v (self and cross), unless the run
  // passes use_cache=False.
  if (!ckpt && graph_layers::asks_for_cache(model, run)) {
    const auto per_block = detail::checked_add(detail::checked_mul(detail::checked_mul(2, batch), decoder_seq, inner),
                                               detail::checked_mul(detail::checked_mul(2, batch), encoder_seq, inner));
    r.decoder_cache = storage(precision.matmul, detail::checked_mul(per_block, t5_decoder_layers(model)));
  }
}

constexpr encoder_decoder_graph build_encoder_decoder(const model_spec& model, const training_spec& run) {
  encoder_decoder_graph r;  // default-initialised: the op slots are left unwritten
  build_encoder_decoder(model, run, r);
  return r;
}

}  // namespace memscale::recipes
