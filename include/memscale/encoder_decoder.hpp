// memscale/encoder_decoder.hpp: the op graphs of an encoder-decoder (T5) training step.
//
// An encoder-decoder is two ordinary graphs, one per stack, each with its prologue, one
// repeated block and its epilogue, plus the tensors that cross between them: the encoder
// output (read by every decoder block's cross-attention, so its gradient accumulates
// across the decoder's backward) and the relative position biases each stack computes
// once and shares between its blocks. estimate/encoder_decoder.hpp walks the pair.
//
// The forward follows Hugging Face transformers src/transformers/models/t5/modeling_t5.py
// (commit 6b8b757d, 4.5x): T5LayerNorm, T5Attention, T5DenseActDense /
// T5DenseGatedActDense, T5Stack.forward and T5ForConditionalGeneration.forward.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "memscale/dtype.hpp"
#include "memscale/graph_builder.hpp"
#include "memscale/model.hpp"
#include "memscale/precision_policy.hpp"
#include "memscale/training.hpp"

namespace memscale {

struct encoder_decoder_graph {
  graph encoder{};
  graph decoder{};
  // The encoder's output (its last op's output): alive through the decoder's forward,
  // and saved for the decoder's backward by every cross-attention k and v projection
  // unless autocast gives each of them its own 16-bit copy.
  bytes encoder_output{};
  bool encoder_output_saved = false;
  bytes encoder_output_grad{};  // accumulated over the decoder's backward
  // Held by each stack's forward (T5Stack.forward locals): the position bias every block
  // adds to its scores and the masks. Checkpointed blocks keep them until their backward.
  bytes encoder_held{};
  bytes decoder_held{};
  // Gradients of the shared position biases, accumulated through a stack's backward.
  bytes encoder_bias_grad{};
  bytes decoder_bias_grad{};
  bytes decoder_cache{};  // use_cache=True: every decoder block's k and v until forward returns
};

namespace detail {

class t5_builder {
 public:
  constexpr t5_builder(const model_spec& m, const training_spec& t)
      : m_(validate(m)), t_(validate(t)), p_(precision_policy_of(t)), inner_(checked_mul(m.heads, head_dim_of(m))) {
    require(m.arch == architecture::encoder_decoder, error_code::invalid_model, "model.arch",
            "must be encoder_decoder for build_encoder_decoder_graph", static_cast<std::uint64_t>(m.arch));
    require(!is_lora(t), error_code::unsupported, "run.target",
            "LoRA on encoder-decoder models is not modelled yet", static_cast<std::uint64_t>(t.target));
  }

  constexpr encoder_decoder_graph build() {
    encoder_decoder_graph& r = out_;
    const auto b = t_.micro_batch;
    const auto se = t_.seq_len;
    const auto sd = target_len_of(t_);
    const bool ckpt = t_.ckpt == checkpointing::full;

    // ---- encoder ----
    stack(false, se, se);
    const auto enc_out = info_[b_.last()];
    r.encoder_output = storage(enc_out.type, enc_out.elements);
    r.encoder_output_saved = !p_.autocast;
    r.encoder_output_grad = storage(stream_dtype(), enc_out.elements);
    // position_bias (b, h, s, s) fp32: compute_bias + the extended mask (T5Stack.forward).
    const bytes enc_bias = storage(dtype::fp32, checked_mul(checked_mul(b, m_.heads), se, se));
    r.encoder_held = enc_bias + storage(dtype::fp32, checked_mul(b, se, 2));  // + ones mask, extended mask
    r.encoder_bias_grad = m_.relative_attention_buckets > 0 ? enc_bias : bytes{};

    // ---- decoder ----
    b_ = graph_builder{r.decoder};
    info_ = {};
    stack(true, sd, se);
    const bytes dec_bias = storage(dtype::fp32, checked_mul(checked_mul(b, m_.heads), sd, sd));
    const bytes cross_bias = storage(dtype::fp32, checked_mul(checked_mul(b, m_.heads), sd, se));
    // _update_causal_mask: (b, 1, sd, sd) in the embeddings' dtype.
    const bytes causal_mask = storage(p_.param, checked_mul(b, sd, sd));
    r.decoder_held = dec_bias + cross_bias + causal_mask;
    r.decoder_bias_grad = m_.relative_attention_buckets > 0 ? dec_bias : bytes{};
    // Under gradient checkpointing the cross-attention's zero bias is made to require
    // grad (T5Attention.forward), so its gradient accumulates too.
    if (ckpt) r.decoder_bias_grad += cross_bias;
    // T5Config.use_cache defaults to True and T5Stack turns it off only for gradient
    // checkpointing: the decoder keeps every block's k and v (self and cross).
    if (!ckpt) {
      const auto per_block = checked_add(checked_mul(checked_mul(2, b), sd, inner_), checked_mul(checked_mul(2, b), se, inner_));
      r.decoder_cache = storage(p_.matmul, checked_mul(per_block, decoder_layers()));
    }
    r.encoder.ops.complete_for_constant(r.encoder.size);
    r.decoder.ops.complete_for_constant(r.decoder.size);
    return r;
  }

 private:
  struct tensor_info {
    std::uint64_t elements = 0;
    dtype type = dtype::fp32;
  };

  [[nodiscard]] constexpr std::uint64_t decoder_layers() const {
    return m_.decoder_layers == 0 ? m_.layers : m_.decoder_layers;
  }
  [[nodiscard]] constexpr dtype stream_dtype() const { return p_.param; }
  [[nodiscard]] constexpr std::uint64_t elems(std::size_t i) const { return info_[i].elements; }
  [[nodiscard]] constexpr dtype type(std::size_t i) const { return info_[i].type; }

  constexpr std::size_t emit(op o, std::uint64_t elements, dtype t) {
    o.out = storage(t, elements);
    if (o.kind != op_kind::linear && o.kind != op_kind::norm && o.kind != op_kind::stream &&
        o.kind != op_kind::embedding)
      o.grad_in = o.out;
    const auto index = b_.push(o);
    info_[index] = {elements, t};
    return index;
  }
  constexpr std::size_t elementwise(std::uint64_t elements, dtype t) {
    return emit(op{.kind = op_kind::elementwise}, elements, t);
  }
  // A tensor produced elsewhere (the encoder output inside the decoder): shape only.
  constexpr std::size_t alias(std::uint64_t elements, dtype t) {
    const auto i = elementwise(elements, t);
    b_.at(i).out = {};
    b_.at(i).grad_in = {};
    return i;
  }

  // Autocast casts an fp32 input of a matmul to 16 bits; the copy is what the matmul saves
  // (aten/src/ATen/autocast_mode.cpp cached_cast caches leaf weights only).
  constexpr std::size_t matmul_input(std::size_t in) {
    if (!p_.autocast || type(in) == p_.matmul) return in;
    return elementwise(elems(in), p_.matmul);
  }

  // nn.Linear without bias (every T5 projection): saves its input, and under autocast the
  // 16-bit weight copy.
  constexpr std::size_t linear(std::size_t in, std::uint64_t rows, std::uint64_t in_features,
                               std::uint64_t out_features) {
    const auto x = matmul_input(in);
    op o{.kind = op_kind::linear, .weight = {out_features, in_features, 1}, .role = param_role::matmul};
    if (p_.autocast) o.extra_saved = storage(p_.matmul, checked_mul(in_features, out_features));
    o.grad_in = storage(type(x), elems(x));
    const auto y = emit(o, checked_mul(rows, out_features), p_.matmul);
    b_.keep(x, y);
    return y;
  }

  // T5LayerNorm: variance = x.to(fp32).pow(2).mean(-1); x * rsqrt(variance + eps), cast to
  // the weight's dtype when that is 16-bit; weight * x. pow and the first mul save x (or
  // its fp32 copy); x^2 stays alive as it does in HF's LLaMA RMSNorm on torch 1.13
  // (docs/research/cpu-activations.md sec. 1); the mul saves rsqrt (one fp32 per row); the
  // weight mul saves the normalized x (fp32, or its 16-bit cast under pure 16-bit).
  constexpr std::size_t norm(std::size_t in, std::uint64_t rows) {
    op o{.kind = op_kind::norm, .weight = {m_.hidden, 1, 1}, .role = param_role::vector};
    const bool fp32_in = type(in) == dtype::fp32;
    o.extra_saved = storage(dtype::fp32, rows);                     // rsqrt(variance + eps)
    o.extra_saved += storage(dtype::fp32, elems(in));               // x^2
    if (!fp32_in) o.extra_saved += storage(dtype::fp32, elems(in));  // x.to(float32), saved by pow
    // x * rsqrt: fp32 (type promotion); a 16-bit weight casts it back.
    const bool cast_back = p_.param != dtype::fp32;
    o.extra_saved += storage(cast_back ? p_.param : dtype::fp32, elems(in));
    if (cast_back) o.fwd_temp = storage(dtype::fp32, elems(in));
    o.grad_in = storage(type(in), elems(in));
    const auto y = emit(o, elems(in), cast_back ? p_.param : dtype::fp32);
    b_.keep(in, y);  // x itself: saved by the first mul
    return y;
  }

  // nn.Dropout on CPU multiplies by a noise tensor of the input's dtype; CUDA keeps a bool
  // mask (aten/src/ATen/native/Dropout.cpp, derivatives.yaml native_dropout_backward).
  // `site`: the model_spec flag of this dropout site (dropout_rate sets all of them for T5).
  constexpr std::size_t dropout(std::size_t in, bool site) {
    if (!(t_.dropout && m_.dropout && site)) return in;
    const dtype mask = t_.device == device_kind::cuda ? dtype::boolean : type(in);
    return emit(op{.kind = op_kind::dropout, .extra_saved = storage(mask, elems(in))}, elems(in), type(in));
  }

  constexpr std::size_t add(std::size_t a, std::size_t b) {
    const dtype out = (type(a) == dtype::fp32 || type(b) == dtype::fp32) ? dtype::fp32 : type(a);
    return elementwise(elems(a), out);
  }

  // T5Attention.forward is always eager (T5 has no SDPA or flash path, whatever
  // run.attention says): q, k, v projections; matmul(q, k^T) on transposed views
  // copies both into contiguous tensors it saves; `scores += position_bias` in place (no
  // scaling); softmax(scores.float()).type_as(scores); dropout; matmul with v (a copy
  // again); transpose + contiguous; o.
  constexpr std::size_t attention(std::size_t in, std::size_t kv_in, std::uint64_t sq, std::uint64_t sk) {
    const auto b = t_.micro_batch;
    const auto h = m_.hidden;
    const auto rows_q = checked_mul(b, sq);
    const auto rows_k = checked_mul(b, sk);
    linear(in, rows_q, h, inner_);
    const auto q = b_.last();
    linear(kv_in, rows_k, h, inner_);
    linear(kv_in, rows_k, h, inner_);
    const auto scores_elems = checked_mul(checked_mul(b, m_.heads), sq, sk);
    const auto q_copy = elementwise(elems(q), p_.matmul);
    const auto k_copy = elementwise(checked_mul(rows_k, inner_), p_.matmul);
    const auto scores = emit(op{.kind = op_kind::attention, .recomputed_by_selective = true}, scores_elems, p_.matmul);
    b_.keep(q_copy, scores);
    b_.keep(k_copy, scores);
    std::size_t s = scores;
    if (type(s) != dtype::fp32) {
      s = elementwise(scores_elems, dtype::fp32);  // scores.float()
      b_.at(s).recomputed_by_selective = true;
    }
    auto probs = emit(op{.kind = op_kind::attention, .recomputed_by_selective = true}, scores_elems, dtype::fp32);
    b_.keep_own_output(probs);
    if (p_.matmul != dtype::fp32) {
      probs = elementwise(scores_elems, p_.matmul);  // .type_as(scores)
      b_.at(probs).recomputed_by_selective = true;
    }
    auto dropped = dropout(probs, m_.attention_dropout);
    b_.at(dropped).recomputed_by_selective = true;
    dropped = matmul_input(dropped);
    const auto v_copy = elementwise(checked_mul(rows_k, inner_), p_.matmul);
    const auto pv = emit(op{.kind = op_kind::attention}, elems(q), p_.matmul);
    b_.keep(dropped, pv);
    b_.keep(v_copy, pv);
    const auto merged = elementwise(elems(q), p_.matmul);
    return linear(merged, rows_q, inner_, h);
  }

  // T5LayerFF: norm, DenseReluDense, dropout, residual add.
  constexpr std::size_t feed_forward(std::size_t in, std::uint64_t rows) {
    const auto h = m_.hidden;
    const auto f = m_.ffn;
    std::size_t x = 0;
    if (gated_mlp(m_)) {
      // T5DenseGatedActDense: act(wi_0(x)) * wi_1(x); v1.1 / flan-t5 / mT5 use gelu_new,
      // written as Python ops whose intermediates autograd keeps (activations.py NewGELUActivation).
      const auto gate = linear(in, rows, h, f);
      const auto act = gelu_new(gate);
      const auto up = linear(in, rows, h, f);
      x = elementwise(elems(up), type(up));
      b_.keep(act, x);
      b_.keep(up, x);
    } else {
      const auto up = linear(in, rows, h, f);
      x = emit(op{.kind = op_kind::activation}, elems(up), type(up));  // relu saves its output
      b_.keep_own_output(x);
    }
    x = dropout(x, m_.hidden_dropout);
    // `hidden_states.to(self.wo.weight.dtype)` when they differ: under autocast a 16-bit
    // activation is cast to fp32, which the autocast wo then casts back (and saves).
    if (type(x) != p_.param) x = elementwise(elems(x), p_.param);
    return linear(x, rows, f, h);
  }

  // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))).
  constexpr std::size_t gelu_new(std::size_t in) {
    const auto cube = elementwise(elems(in), type(in));
    b_.keep(in, cube);
    elementwise(elems(in), type(in));
    const auto th = emit(op{.kind = op_kind::activation}, elems(in), type(in));
    b_.keep_own_output(th);
    const auto one_plus = elementwise(elems(in), type(in));
    const auto half_x = elementwise(elems(in), type(in));
    const auto y = elementwise(elems(in), type(in));
    b_.keep(one_plus, y);
    b_.keep(half_x, y);
    return y;
  }

  constexpr std::size_t sublayer_residual(std::size_t stream, std::size_t branch) {
    return add(stream, dropout(branch, m_.hidden_dropout));
  }

  // One T5Stack: embeddings, blocks, final norm and dropout; the decoder adds the head.
  constexpr void stack(bool decoder, std::uint64_t s, std::uint64_t s_enc) {
    const auto b = t_.micro_batch;
    const auto h = m_.hidden;
    const auto rows = checked_mul(b, s);
    const bool tied = m_.tied_embeddings;
    const bool head = decoder && m_.head == head_kind::causal_lm;
    // ---- prologue: the shared embedding (stored once, by the encoder's op), the first
    // block's relative_attention_bias table (its lookup keeps the s x s bucket indices).
    op wte{.kind = op_kind::embedding,
           .weight = {m_.vocab, h, 1},
           .role = param_role::embedding,
           .borrows_weight = decoder,
           // Backward runs the decoder first: a tied head, else the decoder's lookup, creates
           // the gradient; later lookups accumulate into it.
           .weight_grad_exists = decoder ? (tied && head) : true};
    // embedding_dense_backward builds a V x h gradient, then the engine adds it to the one
    // already waiting for the shared weight: out of place, a third V x h tensor while the
    // sum is made (InputBuffer::add, torch/csrc/autograd/input_buffer.cpp, runs with grad
    // mode as backward() was called; measured on torch 1.13: the step's peak sits in
    // EmbeddingBackward0 -> aten::add, 2 V x h above the gradients).
    if (wte.weight_grad_exists) wte.bwd_temp = storage(p_.param, checked_mul(m_.vocab, h, 2));
    const auto x = emit(wte, checked_mul(rows, h), p_.param);
    if (m_.relative_attention_buckets > 0) {
      op bias{.kind = op_kind::embedding, .weight = {m_.relative_attention_buckets, m_.heads, 1},
              .role = param_role::embedding, .extra_saved = storage(dtype::int64, checked_mul(s, s))};
      emit(bias, 0, p_.param);
    }
    dropout(x, m_.embedding_dropout);
    // ---- the repeated block.
    b_.begin_block();
    auto y = emit(op{.kind = op_kind::stream}, checked_mul(rows, h), stream_dtype());
    const auto n1 = norm(y, rows);
    y = sublayer_residual(y, attention(n1, n1, s, s));
    if (decoder) {
      const auto n2 = norm(y, rows);
      const auto enc = alias(checked_mul(b, s_enc, h), p_.param);
      y = sublayer_residual(y, attention(n2, enc, s, s_enc));
    }
    const auto n3 = norm(y, rows);
    sublayer_residual(y, feed_forward(n3, rows));
    b_.end_block(decoder ? decoder_layers() : m_.layers);
    // ---- epilogue.
    auto z = emit(op{.kind = op_kind::stream}, checked_mul(rows, h), stream_dtype());
    z = dropout(norm(z, rows), m_.hidden_dropout);
    if (head) {
      // Tied: sequence_output * d_model**-0.5 before lm_head (a scalar mul saves nothing).
      if (tied) z = elementwise(elems(z), type(z));
      const auto in = matmul_input(z);
      op lm{.kind = op_kind::linear,
            .weight = {m_.vocab, h, 1},
            .role = tied ? param_role::embedding : param_role::matmul,
            .borrows_weight = tied};
      if (p_.autocast) lm.extra_saved = storage(p_.matmul, checked_mul(m_.vocab, h));
      lm.grad_in = storage(type(in), elems(in));
      const auto logits = emit(lm, checked_mul(rows, m_.vocab), p_.matmul);
      b_.keep(in, logits);
      // CrossEntropyLoss on logits.view(-1, V) against the labels as given (the decoder's
      // inputs are the shifted labels, so no shifted copy); log_softmax keeps its output,
      // fp32 under autocast.
      const auto logp =
          emit(op{.kind = op_kind::loss}, checked_mul(rows, m_.vocab), p_.autocast ? dtype::fp32 : type(logits));
      b_.keep_own_output(logp);
    }
    // input_ids + labels (encoder), the shifted decoder_input_ids (decoder): int64.
    b_.set_inputs(storage(dtype::int64, decoder ? rows : checked_add(rows, checked_mul(b, target_len_of(t_)))));
    b_.set_stream_grad(storage(stream_dtype(), checked_mul(rows, h)));
  }

  model_spec m_;
  training_spec t_;
  precision_policy p_;
  std::uint64_t inner_;
  encoder_decoder_graph out_;  // default-initialised: the op slots are left unwritten
  graph_builder b_{out_.encoder};
  std::array<tensor_info, graph_capacity> info_{};
};

}  // namespace detail

// The two stacks of one training step of an encoder-decoder `model` under `run`.
constexpr encoder_decoder_graph build_encoder_decoder_graph(const model_spec& model, const training_spec& run) {
  return detail::t5_builder(model, run).build();
}

}  // namespace memscale
