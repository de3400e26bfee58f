// memscale/graph/layers/heads.hpp: what follows the last block: the LM head and its loss
// (standard or chunked cross-entropy, upcast, logit softcap, label shift), the masked-LM
// head, sequence classification (decoder score or BERT pooler) and a bare pooler.
#pragma once

#include <algorithm>
#include <cstdint>

#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/activations.hpp"
#include "memscale/graph/layers/adapters.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/norms.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/tensor.hpp"
#include "memscale/lora.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale::graph_layers {

// An output layer over the vocabulary and the cross-entropy that follows it.
struct lm_head_spec {
  std::uint64_t rows = 0;        // positions the head runs on
  std::uint64_t sequences = 0;   // sequences among them (each loses one position to a shifted copy)
  bool tied = false;             // the weight is the input embedding's
  bool bias = false;
  bool causal = true;            // causal LM: the upcast, softcap and label-shift steps apply
  bool upcast_logits = false;
  bool logit_softcap = false;
  bool logits_scale = false;     // the logits divided by a float before the loss (a new tensor)
  bool labels_shifted = false;   // the loss shifts the labels, so no shifted copy of the logits
  bool chunked = false;          // chunked cross-entropy
  // The training loop computes the loss from the logits forward() returned and keeps them bound
  // until the next step's forward returns (lit-gpt finetune/full.py): the head's output is kept
  // through backward, in the loop's dtype (output_type).
  bool loss_in_loop = false;
  std::uint64_t loop_chunk_rows = 0;  // loss_in_loop: rows of one chunk of the flattened logits (0: not chunked)
  bool fused_linear = false;     // Liger's fused linear cross-entropy: the head and loss in one op
  // torchtune's: the head runs per chunk into a list of 16-bit logits, each chunk's loss reads
  // an fp32 copy, and the list is freed before backward (chunked only).
  bool chunk_upcast = false;
  std::uint64_t chunk_rows = 0;  // positions in one loss chunk
  dtype output_type = dtype::fp32;  // the logits the chunked loss reads (logits_output_dtype)
  bool scales_tied_input = false;   // T5: sequence_output * d_model**-0.5 before a tied head
  bool records_input_grad = false;  // the head op carries its input's gradient (T5's graph does)
  detail::quantity logits_quantity = detail::byte_count;  // named in an overflow of tokens x vocab
};

// lit-gpt's full fine-tuning loop (finetune/full.py fit() lines 169-171, Lightning-AI/lit-gpt @ 8641822):
// `logits = model(input_ids)`, one tensor over every position, and
// `chunked_cross_entropy(logits[..., :-1, :], targets[..., 1:], chunk_size=0)`, the whole-sequence
// loss computed in the loop from what Fabric's wrapper returned.
constexpr bool litgpt_full_logits_loop(const model_spec& m, const training_spec& run) {
  return m.impl == implementation::litgpt && run.loss == loss_impl::standard;
}

// litgpt 0.4's full.py leaves chunked_cross_entropy's chunk_size at its default, 128 rows of the
// flattened logits (litgpt/finetune/full.py line 256, litgpt/utils.py line 282 @ b0ea1772); the
// 2023 script passed chunk_size=0 (finetune/full.py line 171 @ 8641822).
inline constexpr std::uint64_t litgpt_v0_4_full_loss_chunk_rows = 128;

constexpr std::uint64_t loop_loss_chunk_rows(const training_spec& run) {
  return run.framework == framework_kind::litgpt && run.framework_version >= litgpt_v0_4
             ? litgpt_v0_4_full_loss_chunk_rows
             : 0;
}

// The dtype of the logits the loop's loss reads. lit-gpt's loop runs under Lightning Fabric,
// whose 16-bit "-true" precisions (bf16-true, 16-true) cast the model's floating outputs to
// torch.get_default_dtype(), fp32, once forward() returns (_FabricModule.forward,
// src/lightning/fabric/wrappers.py; HalfPrecision.convert_output, plugins/precision/half.py @ 71aed751);
// the loss is then computed from the cast list (lit-gpt finetune/lora.py fit() @ 8641822).
constexpr dtype logits_output_dtype(const model_spec& m, const training_spec& run, dtype computed) {
  switch (run.output_cast) {
    case output_cast_kind::none: return computed;
    case output_cast_kind::fp32: return dtype::fp32;
    case output_cast_kind::framework_default: break;
  }
  const bool fabric_true_16bit = run.prec == precision::pure_bf16 || run.prec == precision::pure_fp16;
  const bool loss_in_loop = (run.loss == loss_impl::chunked || litgpt_full_logits_loop(m, run)) &&
                            m.head == head_kind::causal_lm;
  // Under FSDP (FSDPPrecision casts too) the sharded estimate places its peak at the start of
  // backward, where the cast list over-predicts the lit-gpt FSDP rows (phi-1.5 mb4 +16%): their
  // peak is later in backward (docs/research/frameworks.md sec. 1.5), so the default casts
  // unsharded runs only until that placement is modelled. litgpt main's FSDPStrategy (full.py) is
  // placed: its step's logits stay bound through backward (estimate/single_graph.hpp bound_logits),
  // as tools/trace/litgpt_fsdp1_cases.py traces them, so the cast is kept there.
  const bool placed = run.shard == sharding::none || (litgpt_repeats_kv_after_rope(run) && run.fsdp_flat_views);
  return m.impl == implementation::litgpt && fabric_true_16bit && loss_in_loop && placed ? dtype::fp32 : computed;
}

// The model's LM head over every token (causal_lm, or masked_lm's decoder).
// Positions of every sequence in one loss chunk: loss_chunk tokens (lit-gpt), or the sequence
// cut into loss_chunks pieces by torch.chunk, ceil(seq / n) each (torchtune TransformerDecoder
// `h.chunk(num_output_chunks, dim=1)`, modules/transformer.py line 500 @ v0.6.1).
constexpr std::uint64_t loss_chunk_positions(const training_spec& run) {
  if (run.loss_chunks > 0) return (run.seq_len + run.loss_chunks - 1) / run.loss_chunks;
  return run.loss_chunk < run.seq_len ? run.loss_chunk : run.seq_len;
}

constexpr lm_head_spec lm_head_spec_of(const layer_context& ctx) {
  const model_spec& m = ctx.model;
  const training_spec& run = ctx.run;
  // torchtune's recipes shift the labels (labels[..., 1:] padded with the ignore index), and
  // without chunks its decoder returns output(h).float() (modules/transformer.py line 659).
  const bool torchtune = run.framework == framework_kind::torchtune;
  // torchtitan's loss upcasts the whole logits (components/loss.py cross_entropy_loss:
  // pred.flatten(0, 1).float()) against labels its dataloader already shifted (datasets/
  // hf_datasets.py: input = x[:-1], label = x[1:]) @ f7084fc7.
  const bool torchtitan = run.framework == framework_kind::torchtitan;
  return {.rows = ctx.tokens,
          .sequences = run.micro_batch,
          .tied = m.tied_embeddings,
          .bias = m.lm_head_bias || m.head == head_kind::masked_lm,
          .causal = m.head == head_kind::causal_lm,
          .upcast_logits = m.upcast_logits || torchtune || torchtitan,
          .logit_softcap = m.logit_softcap,
          .logits_scale = m.logits_scale,
          .labels_shifted = m.shift_labels || torchtune || torchtitan,
          .chunked = run.loss == loss_impl::chunked,
          .loss_in_loop = litgpt_full_logits_loop(m, run) && m.head == head_kind::causal_lm,
          .loop_chunk_rows = loop_loss_chunk_rows(run),
          .fused_linear = run.loss == loss_impl::fused_linear,
          .chunk_upcast = torchtune,
          // lit-gpt and torchtune split along the sequence (lit-gpt model.py GPT.forward:
          // x.split(lm_head_chunk_size, dim=1)), so a chunk holds positions of every sequence.
          .chunk_rows = run.loss == loss_impl::chunked ? detail::checked_mul(run.micro_batch, loss_chunk_positions(run))
                                                       : ctx.tokens,
          .output_type = logits_output_dtype(m, run, ctx.ops.precision().matmul),
          .logits_quantity = detail::quantity{"logits (tokens x vocab)"}};
}

// The op owning the output layer's V x h weight (the embedding's when tied) and its bias.
constexpr op head_op(const layer_context& ctx, const lm_head_spec& spec, const base_weight& weight, op_kind kind) {
  const auto vocab = ctx.model.vocab;
  return {.kind = kind,
          .weight = {vocab, ctx.model.hidden, 1},
          .bias = spec.bias ? param_tensor{vocab, 1, 1} : param_tensor{},
          .role = spec.tied ? param_role::embedding : param_role::matmul,
          .frozen = weight.frozen,
          .borrows_weight = spec.tied,
          .unquantized_base = ctx.adapters.base.four_bit && !weight.four_bit && !spec.tied};
}

// The backward of torchtune's output projection, run once per chunk (TransformerDecoder.
// chunked_output, modules/transformer.py lines 482-500 @ v0.6.1), beyond one chunk's logits
// gradient (the op's grad_out) and the weight's gradient:
// - every chunk's loss and cast were made after every chunk's projection, so the engine (which runs
//   the newest node first) has made all chunks' 16-bit logits gradients before the first
//   projection's backward; each is freed as its chunk's backward ends;
// - each chunk's input gradient waits for chunk()'s backward, which concatenates them at the end;
// - a trained weight gets one V x h gradient per chunk, which the engine sums into the one
//   already waiting out of place (InputBuffer::add, torch/csrc/autograd/input_buffer.cpp
//   accumulate: `old_var + var` for dense tensors): from the second chunk on, the new gradient
//   and the sum beside the waiting one.
// The k-th chunk's moment grows or shrinks with k from the second on, so the largest is the
// first's, the second's or the last's. Traced on torch 1.13 (tools/trace/torchtune_cases.py, wide
// geometry): the backward peak sits in the second chunk's sum.
constexpr bytes chunked_head_backward_extra(const layer_context& ctx, const lm_head_spec& spec, bool trained) {
  const dtype matmul = ctx.ops.precision().matmul;
  const std::uint64_t chunks = detail::ceil_div(spec.rows, spec.chunk_rows);
  const bytes logits_grad = storage(matmul, detail::checked_mul(spec.chunk_rows, ctx.model.vocab));
  const bytes input_grad = storage(matmul, detail::checked_mul(spec.chunk_rows, ctx.model.hidden));
  const bytes sums = trained ? storage(matmul, detail::checked_mul(ctx.model.vocab, ctx.model.hidden, 2)) : bytes{};
  const auto at_chunk = [&](std::uint64_t k) {
    return logits_grad * (chunks - k) + input_grad * k + (k > 1 ? sums : bytes{});
  };
  bytes most = at_chunk(1);
  for (const std::uint64_t k : {std::uint64_t{2}, chunks})
    if (at_chunk(k) > most) most = at_chunk(k);
  return most - logits_grad;
}

// Rows of one chunk of Liger's fused linear cross-entropy: next_power_of_2(ceil(BT / ceil(V / h))),
// so a chunk's logits hold about as many elements as the hidden states (ops/fused_linear_cross_entropy.py
// lines 43-45, v0.5.10 @ 44a8f2fb); the last slice stops at BT.
constexpr std::uint64_t liger_chunk_rows(std::uint64_t rows, std::uint64_t vocab, std::uint64_t hidden) {
  const std::uint64_t wanted = detail::ceil_div(rows, detail::ceil_div(vocab, hidden));
  std::uint64_t chunk = 1;
  while (chunk < wanted) chunk *= 2;
  return chunk < rows ? chunk : rows;
}

// Liger's fused linear cross-entropy (LigerFusedLinearCrossEntropyFunction, v0.5.10 @ 44a8f2fb):
// forward makes grad_input = zeros_like(x) and, when the head trains, grad_weight = zeros_like(W),
// then per chunk the chunk's logits (x_chunk @ W^T), their cross-entropy gradient written into
// them, grad_logits @ W (copied into grad_input) and an addmm into grad_weight; the loss per row
// is fp32. It saves grad_input and grad_weight; backward only scales them (by 1.0: nothing new)
// and returns them, so the input's gradient is the saved tensor and the weight's gradient the
// one made in forward. x itself is not saved, and the logits never exist whole.
constexpr void fused_linear_loss(const layer_context& ctx, tensor x, const lm_head_spec& spec,
                                 const base_weight& weight) {
  op_writer& ops = ctx.ops;
  const precision_policy& p = ops.precision();
  const auto vocab = ctx.model.vocab;
  const auto hidden = ctx.model.hidden;
  const auto chunk = liger_chunk_rows(spec.rows, vocab, hidden);
  op loss = head_op(ctx, spec, weight, op_kind::loss);
  loss.extra_saved = storage(x.type, x.elements);  // grad_input
  // grad_weight (and grad_bias) exist from here on; backward hands them to the parameters,
  // where the estimate counts them as the head's gradient, so in forward they are this op's.
  if (!weight.frozen)
    loss.fwd_temp = storage(p.param, detail::checked_add(detail::checked_mul(vocab, hidden), spec.bias ? vocab : 0));
  // One chunk's logits in the matmul dtype (the gradient is written into them), grad_logits @ W
  // before its copy into grad_input, and loss_1d.
  loss.fwd_temp += storage(p.matmul, detail::checked_mul(chunk, vocab, spec.logits_quantity));
  loss.fwd_temp += storage(p.matmul, detail::checked_mul(chunk, hidden));
  loss.fwd_temp += storage(dtype::fp32, spec.rows);
  // Under autocast the fp32 weight is cast to 16 bits for the chunks' matmuls (cached while
  // autocast lasts when it requires grad: aten/src/ATen/autocast_mode.cpp cached_cast). An fp32
  // grad_weight takes the 16-bit chunk gradient through a weight-sized 16-bit product and its fp32
  // copy wherever addmm's out_dtype path is not taken (the "legacy fallback" of
  // fused_linear_cross_entropy.py @ 00eba634; before torch 2.8 always): counted, never fewer.
  if (p.casts_weights()) {
    loss.fwd_temp += storage(p.matmul, detail::checked_mul(vocab, hidden));
    if (!weight.frozen)
      loss.fwd_temp += storage(p.matmul, detail::checked_mul(vocab, hidden)) +
                       storage(dtype::fp32, detail::checked_mul(vocab, hidden));
  }
  const tensor out = ops.emit(loss, 1, dtype::fp32);
  ops.at(out).grad_in = {};
}

// The loss lit-gpt's full fine-tuning loop computes from the (cast) logits it keeps bound
// through backward: chunked_cross_entropy (lit_gpt/utils.py lines 265-268 @ 8641822, litgpt/utils.py
// lines 310-322 @ b0ea1772) reshapes `logits[..., :-1, :]` to (-1, V), which copies the slice when it
// is not contiguous (more than one sequence); the copy is the only reference the loss has, so it
// is freed when the loss returns. cross_entropy keeps its log-probabilities in the logits' dtype.
// Backward ends in the slice's, which writes the gradient into zeros over every position.
// The 2023 script's chunk_size=0 is one cross_entropy: its backward holds nll_loss's and
// log_softmax's gradients over the shifted positions at once. litgpt 0.4's splits the flattened
// rows (see loop_loss_chunk_rows) into views, one cross_entropy each, and torch.cat's the per-row
// losses: backward runs chunk by chunk, each chunk's log-probabilities freed as its gradient is
// made, and the split's backward concatenates the waiting chunk gradients (FunctionsManual.cpp
// split_with_sizes_backward: at::cat). Those two shifted-rows-wide tensors are fewer bytes than
// the concatenation beside the slice's zeros that follow, so one op stands for both moments.
constexpr void loop_loss(const layer_context& ctx, tensor logits, const lm_head_spec& spec) {
  op_writer& ops = ctx.ops;
  ops.keep_own_output(logits);
  const auto loss_rows = spec.rows - spec.sequences;
  const auto loss_elements = detail::checked_mul(loss_rows, ctx.model.vocab);
  if (spec.loop_chunk_rows == 0) {
    if (spec.sequences > 1) ops.elementwise(loss_elements, logits.type);
    ops.keep_own_output(ops.emit(op_kind::loss, loss_elements, logits.type));
    return;
  }
  // The shifted rows (reshape's copy, or a view of one sequence): backward takes the chunks'
  // concatenated gradient and gives the slice's zeros.
  const op shift{.kind = op_kind::elementwise,
                 .grad_in = storage(logits.type, logits.elements),
                 .grad_out = storage(logits.type, loss_elements)};
  ops.emit(shift, spec.sequences > 1 ? loss_elements : 0, logits.type);
  const bytes chunk =
      storage(logits.type, detail::checked_mul(std::min(spec.loop_chunk_rows, loss_rows), ctx.model.vocab));
  ops.keep_own_output(ops.emit(op{.kind = op_kind::loss, .grad_in = chunk, .grad_out = chunk}, loss_elements, logits.type));
}

// An untied head is an nn.Linear, quantized under QLoRA like the others: its matmul
// dequantizes the whole V x h weight (two 16-bit copies) in forward and backward.
constexpr bytes head_dequantized_bytes(const base_weight& weight, const precision_policy& p, std::uint64_t vocab,
                                       std::uint64_t hidden) {
  return weight.four_bit ? storage(p.matmul, detail::checked_mul(vocab, hidden, 2)) : bytes{};
}

// The output layer and cross-entropy: logits b*s*V, the shifted contiguous copy, and
// log_softmax's output, which cross_entropy keeps for nll_loss's backward
// (derivatives.yaml: _log_softmax_backward_data uses the result).
constexpr void lm_loss(const layer_context& ctx, tensor x, const lm_head_spec& spec) {
  op_writer& ops = ctx.ops;
  const precision_policy& p = ops.precision();
  const auto rows = spec.rows;
  const auto hidden = ctx.model.hidden;
  const auto vocab = ctx.model.vocab;
  if (spec.scales_tied_input && spec.tied) x = ops.elementwise(x.elements, x.type);  // a scalar mul saves nothing
  const base_weight weight = spec.tied ? tied_head_weight(ctx.adapters.base) : ctx.adapters.head;
  if (spec.fused_linear) return fused_linear_loss(ctx, x, spec, weight);
  const tensor input = ops.matmul_input(x);
  op head = head_op(ctx, spec, weight, op_kind::linear);
  if (p.casts_weights() && !weight.four_bit) head.extra_saved = storage(p.matmul, detail::checked_mul(vocab, hidden));
  const bytes dequantized = head_dequantized_bytes(weight, p, vocab, hidden);
  head.bwd_temp = dequantized;
  if (spec.records_input_grad) head.grad_in = storage(input.type, input.elements);
  if (ctx.adapters.adapts(lora_target::head))
    head.fwd_temp += lm_head_lora(ops, ctx.adapters, x, rows, hidden, vocab, spec.chunk_rows);
  head.fwd_temp += dequantized;
  if (spec.chunked && spec.chunk_upcast) {
    // torchtune (modules/loss/ce_chunked_output_loss.py lines 42, 81 @ v0.6.1): the 16-bit chunks
    // stay in the decoder's list while every chunk's F.cross_entropy(chunk.float(), ...) runs on an
    // fp32 copy (one chunk at a time) and keeps its fp32 log-probabilities; the recipe's
    // `del logits` (recipes/lora_finetune_single_device.py line 659) frees the list before backward.
    const tensor logits = ops.emit(head, detail::checked_mul(rows, vocab, spec.logits_quantity), p.matmul);
    if (weight.keeps_input) ops.keep(input, logits);
    const tensor logp = ops.emit(
        op{.kind = op_kind::loss, .fwd_temp = storage(dtype::fp32, detail::checked_mul(spec.chunk_rows, vocab))},
        detail::checked_mul(rows, vocab), dtype::fp32);
    ops.keep_own_output(logp);
    // Backward runs chunk by chunk: log_softmax's gradients in fp32, the cast's back to 16 bits.
    const bytes loss_chunk = storage(dtype::fp32, detail::checked_mul(spec.chunk_rows, vocab));
    ops.at(logp).grad_out = loss_chunk;
    ops.at(logp).grad_in = loss_chunk;
    ops.at(logits).grad_out = storage(p.matmul, detail::checked_mul(spec.chunk_rows, vocab));
    if (spec.chunk_rows < rows) ops.at(logits).bwd_temp += chunked_head_backward_extra(ctx, spec, !weight.frozen);
    return;
  }
  // The loss reads the logits in the loop's dtype: a cast copy (fp32 under Fabric's bf16-true)
  // is made while the model's 16-bit list is still referenced, which is freed afterwards.
  const dtype loss_input = spec.chunked || spec.loss_in_loop ? spec.output_type : p.matmul;
  if (loss_input != p.matmul)
    head.fwd_temp = std::max(head.fwd_temp, storage(p.matmul, detail::checked_mul(rows, vocab)));
  const tensor logits = ops.emit(head, detail::checked_mul(rows, vocab, spec.logits_quantity), loss_input);
  if (weight.keeps_input) ops.keep(input, logits);
  if (spec.loss_in_loop) return loop_loss(ctx, logits, spec);
  if (spec.chunked) {
    // Chunked cross-entropy (lit-gpt utils.chunked_cross_entropy) keeps one chunk's
    // logits and log-probabilities at a time, plus each chunk's saved log_softmax.
    // The chunks' logits stay referenced by a Python list until backward, and each
    // chunk's cross_entropy keeps its log-probabilities (lit-gpt utils.py), in the
    // dtype of the logits it reads.
    ops.keep_own_output(logits);
    // The one-chunk temporary belongs to the loss: the reshape of the last chunk's shifted
    // (non-contiguous) slice copies it, after model() has returned.
    const tensor logp =
        ops.emit(op{.kind = op_kind::loss, .fwd_temp = storage(loss_input, detail::checked_mul(spec.chunk_rows, vocab))},
                 detail::checked_mul(rows, vocab), loss_input);
    ops.keep_own_output(logp);
    // Backward runs chunk by chunk (each chunk's cross_entropy and lm_head call is its own
    // branch of the graph, joined only by torch.cat of the small per-token losses), so the
    // gradients of log-probabilities and logits are one chunk wide at a time: nll_loss's
    // and log_softmax's in the loss's dtype, the head's in its own (a cast's backward casts back).
    const bytes loss_chunk = storage(loss_input, detail::checked_mul(spec.chunk_rows, vocab));
    ops.at(logp).grad_out = loss_chunk;
    ops.at(logp).grad_in = loss_chunk;
    ops.at(logits).grad_out = storage(p.matmul, detail::checked_mul(spec.chunk_rows, vocab));
    return;
  }
  tensor scores = logits;
  auto loss_rows = rows;
  if (spec.causal) {
    if (spec.logits_scale) {
      // modeling_granite.py@023633dd GraniteForCausalLM.forward: `logits = logits / logits_scaling`
      // before the loss: a division by a float saves nothing, and reassigning `logits` frees the
      // head's output, so both are alive only while the quotient is made.
      ops.at(scores).transient = true;
      scores = ops.elementwise(detail::checked_mul(rows, vocab), scores.type);
    }
    // Many causal-LM heads upcast logits to fp32 (modeling_llama.py: logits.float()).
    // .float() copies only 16-bit logits; on fp32 logits it is a no-op.
    if (spec.upcast_logits && scores.type != dtype::fp32)
      scores = ops.elementwise(detail::checked_mul(rows, vocab), dtype::fp32);
    if (spec.logit_softcap) {
      // modeling_gemma2.py: logits / cap, tanh (keeps its output), * cap. Each step
      // reassigns `logits`, so the head's output and the quotient are freed once used.
      ops.at(scores).transient = true;
      const tensor quotient = ops.elementwise(detail::checked_mul(rows, vocab), scores.type);
      ops.at(quotient).transient = true;
      scores = output_keeping_activation(ops, quotient);  // tanh
      scores = ops.elementwise(detail::checked_mul(rows, vocab), scores.type);
    }
    // logits[..., :-1, :].contiguous(): a copy of all but one position per sequence;
    // transformers >= 4.48 pads and shifts the labels instead (loss/loss_utils.py
    // ForCausalLMLoss at d0fed636), so every position's logits go to the loss uncopied.
    if (!spec.labels_shifted) {
      loss_rows = rows - spec.sequences;
      scores = ops.elementwise(detail::checked_mul(loss_rows, vocab), scores.type);
    }
  }
  const tensor logp =
      ops.emit(op_kind::loss, detail::checked_mul(loss_rows, vocab), p.autocast ? dtype::fp32 : scores.type);
  ops.keep_own_output(logp);
  if (ctx.run.tensor_parallel > 1) {
    // loss_parallel on the rank's vocabulary columns (torch/distributed/tensor/parallel/loss.py,
    // torch 2.6): _log_softmax is the decomposition, `shifted = x - x_max` alive beside exp(shifted)
    // and the result; its backward builds zeros_like(x), exp(x) and their sum before the product.
    const bytes one = storage(logp.type, logp.elements);
    ops.at(logp).fwd_temp += one;
    ops.at(logp).bwd_temp += one;
  }
}

// BertLMPredictionHead: dense + GELU + LayerNorm, then the (tied) decoder.
constexpr void masked_lm_head(const layer_context& ctx, tensor x) {
  const auto hidden = ctx.model.hidden;
  const tensor dense = ctx.ops.linear(x, {.rows = ctx.tokens, .in_features = hidden, .out_features = hidden, .bias = true},
                                      ctx.adapters.base);
  const tensor act = input_keeping_activation(ctx.ops, dense);  // erf GELU
  lm_loss(ctx, norm(ctx, act), lm_head_spec_of(ctx));
}

// A classifier over the sequence and its loss (one number).
constexpr void sequence_classification_head(const layer_context& ctx, tensor x) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const auto hidden = m.hidden;
  const auto batch = ctx.run.micro_batch;
  if (m.arch == architecture::decoder) {
    // modeling_llama.py LlamaForSequenceClassification (v4.51): score = Linear(h, labels,
    // bias=False) over every token; the last token's logits feed the loss.
    const tensor input = ops.matmul_input(x);
    const op score{.kind = op_kind::linear,
                   .weight = {m.num_labels, hidden, 1},
                   .role = param_role::matmul,
                   .frozen = ctx.adapters.enabled};
    const tensor logits = ops.emit(score, detail::checked_mul(ctx.tokens, m.num_labels), ops.precision().matmul);
    ops.keep(input, logits);
    ops.emit(op_kind::loss, 1, dtype::fp32);
    return;
  }
  // Pooler on the first token, dropout, classifier: b rows only.
  const tensor first = ops.elementwise(detail::checked_mul(batch, hidden), x.type);
  const tensor pooled = ops.linear_over_rows(first, batch, hidden, hidden, ctx.adapters.enabled);
  ops.linear_over_rows(pooled, batch, hidden, m.num_labels, ctx.adapters.enabled);  // logits
  ops.emit(op_kind::loss, 1, dtype::fp32);
}

// No head: the base model's output, through BERT's pooler when it has one.
constexpr void bare_model_output(const layer_context& ctx, tensor x) {
  if (!ctx.model.pooler) return;
  const auto batch = ctx.run.micro_batch;
  const auto hidden = ctx.model.hidden;
  ctx.ops.linear_over_rows(ctx.ops.elementwise(detail::checked_mul(batch, hidden), x.type), batch, hidden, hidden,
                           ctx.adapters.enabled);
}

// The model's head on the stack's output.
constexpr void head(const layer_context& ctx, tensor x) {
  switch (ctx.model.head) {
    case head_kind::causal_lm: lm_loss(ctx, x, lm_head_spec_of(ctx)); break;
    case head_kind::masked_lm: masked_lm_head(ctx, x); break;
    case head_kind::sequence_classification: sequence_classification_head(ctx, x); break;
    case head_kind::none: bare_model_output(ctx, x); break;
  }
}

}  // namespace memscale::graph_layers
