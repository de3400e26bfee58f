// memscale/transformer.hpp: builds the op sequence of a transformer training step.
//
// What each op keeps follows the backward formulas in PyTorch's
// tools/autograd/derivatives.yaml and the forward code of the implementation named by
// model_spec::impl (Hugging Face transformers modeling_*.py, lit-gpt model.py).
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
namespace detail {

class transformer_builder {
 public:
  constexpr transformer_builder(const model_spec& m, const training_spec& t)
      : m_(validate(m)), t_(validate(t)), p_(precision_policy_of(t)),
        tokens_(checked_mul(t.micro_batch, t.seq_len, quantity{"tokens (micro_batch x seq_len)"})), rows_(tokens_), d_(head_dim_of(m)), kv_(kv_heads_of(m)) {}

  constexpr graph build() {
    prologue();
    b_.begin_block();
    block();
    b_.end_block(m_.layers);
    epilogue();
    // input_ids and labels: int64 each (PyTorch's default index dtype).
    b_.set_inputs(storage(dtype::int64, checked_mul(tokens_, 2)));
    b_.add_buffers(bytes{checked_mul(m_.buffer_bytes_per_layer, m_.layers)});
    b_.set_stream_grad(storage(stream_dtype(), checked_mul(tokens_, m_.hidden)));
    return b_.result();
  }

 private:
  // ---- tensors -------------------------------------------------------------------
  struct tensor_info {
    std::uint64_t elements = 0;
    dtype type = dtype::fp32;
  };

  constexpr std::size_t emit(op o, std::uint64_t elements, dtype type) {
    o.out = storage(type, elements);
    // Ops other than matmuls and norms map their input gradient one to one onto the output's.
    if (o.kind != op_kind::linear && o.kind != op_kind::norm && o.kind != op_kind::stream &&
        o.kind != op_kind::embedding)
      o.grad_in = o.out;
    const auto index = b_.push(o);
    info_[index] = {elements, type};
    return index;
  }
  constexpr std::size_t elementwise(std::uint64_t elements, dtype type) {
    return emit(op{.kind = op_kind::elementwise}, elements, type);
  }
  [[nodiscard]] constexpr std::uint64_t elems(std::size_t i) const { return info_[i].elements; }
  [[nodiscard]] constexpr dtype type(std::size_t i) const { return info_[i].type; }
  [[nodiscard]] constexpr dtype stream_dtype() const { return p_.param; }
  constexpr std::uint64_t tok(std::uint64_t width) const { return checked_mul(rows_, width); }

  // Under autocast a matmul casts an fp32 input to 16 bits and saves the cast copy
  // (aten/src/ATen/autocast_mode.cpp cached_cast: only leaf weights are cached).
  constexpr std::size_t matmul_input(std::size_t in) {
    if (!p_.autocast || type(in) == p_.matmul) return in;
    return elementwise(elems(in), p_.matmul);
  }

  // ---- ops -----------------------------------------------------------------------
  // y = x W^T + b. Saves its input (for the weight gradient) and, under autocast, the
  // 16-bit weight copy (the autocast weight cache lives until this op's backward).
  constexpr std::size_t linear(std::size_t in, std::uint64_t in_features, std::uint64_t out_features, bool bias,
                               bool lora_adapted = false) {
    const bool frozen = is_lora(t_);
    const auto x = matmul_input(in);
    op o{.kind = op_kind::linear,
         .weight = {out_features, in_features, copies_},
         .bias = bias ? param_tensor{out_features, 1, copies_} : param_tensor{},
         .role = param_role::matmul,
         .frozen = frozen};
    if (p_.autocast) o.extra_saved = storage(p_.matmul, checked_mul(in_features, out_features, copies_));
    const bool four_bit = frozen && t_.target == training_target::qlora;
    if (four_bit) {
      // bitsandbytes dequantizes the 4-bit weight to the compute dtype for each matmul
      // and transposes it (bitsandbytes/autograd/_functions.py MatMul4Bit): two copies,
      // freed afterwards.
      o.fwd_temp = storage(p_.matmul, checked_mul(in_features, out_features, 2));
      o.bwd_temp = o.fwd_temp;
    }
    o.grad_in = storage(type(x), elems(x));
    const auto y = emit(o, tok(out_features), p_.matmul);
    // Autograd saves only what a needed gradient uses: a frozen nn.Linear keeps nothing
    // (derivatives.yaml: mm's self is needed only for mat2's gradient). MatMul4Bit keeps
    // its input regardless (ctx.tensors = (A, B) in MatMul4Bit.forward).
    if (!frozen || four_bit) b_.keep(x, y);
    if (lora_adapted) return lora(x, in_features, out_features);
    return y;
  }

  // LoRA (Hu et al. 2021, arXiv 2106.09685): y + B(A(dropout(x))) * alpha/r. Saves the
  // dropped input (for A's gradient), A's output (for B's gradient) and the dropout mask.
  constexpr std::size_t lora(std::size_t x, std::uint64_t in_features, std::uint64_t out_features) {
    const auto r = t_.lora_rank;
    // lit-gpt lora.py / peft: lora_dropout (0.05) on the adapter input.
    const auto dropped = emit(op{.kind = op_kind::dropout, .extra_saved = dropout_mask(elems(x), type(x))}, elems(x),
                              type(x));
    const auto a = emit(op{.kind = op_kind::linear, .weight = {r, in_features, 1}, .role = param_role::adapter}, tok(r),
                        p_.matmul);
    b_.keep(dropped, a);
    const auto bb = emit(op{.kind = op_kind::linear, .weight = {out_features, r, 1}, .role = param_role::adapter},
                         tok(out_features), p_.matmul);
    b_.keep(a, bb);
    elementwise(tok(out_features), p_.matmul);         // * alpha / r
    return elementwise(tok(out_features), p_.matmul);  // base output + adapter output
  }

  // LayerNorm saves its input and per-row mean and rstd in fp32
  // (aten/src/ATen/native/layer_norm.cpp); RMSNorm as Hugging Face writes it
  // (modeling_llama.py LlamaRMSNorm) saves the fp32 input, rsqrt and the normalized x.
  constexpr std::size_t norm(std::size_t in) {
    const auto rows = tokens_;
    const bool trainable_norm = !is_lora(t_);
    op o{.kind = op_kind::norm,
         .weight = {m_.hidden, 1, 1},
         .bias = (m_.norm == norm_kind::layernorm && m_.norm_bias) ? param_tensor{m_.hidden, 1, 1} : param_tensor{},
         .role = param_role::vector,
         .frozen = !trainable_norm};
    const dtype out_type = p_.autocast ? dtype::fp32 : p_.param;  // autocast fp32 list: layer_norm
    if (m_.norm == norm_kind::layernorm) {
      o.extra_saved = storage(dtype::fp32, checked_mul(rows, 2));
    } else {
      o.extra_saved = storage(dtype::fp32, rows);  // rsqrt(variance + eps)
      o.extra_saved += storage(type(in), elems(in));  // normalized x, saved by weight * x
      // hidden.to(float32): a new tensor unless the input is fp32 already (then the input
      // itself is what pow and mul save).
      if (type(in) != dtype::fp32) o.extra_saved += storage(dtype::fp32, elems(in));
      // HF's pow(2).mean(-1) also keeps x^2 alive (measured on torch 1.13,
      // docs/research/cpu-activations.md sec. 1).
      if (m_.impl == implementation::hf_transformers) o.extra_saved += storage(dtype::fp32, elems(in));
    }
    o.grad_in = storage(type(in), elems(in));
    const auto y = emit(o, elems(in), m_.norm == norm_kind::layernorm ? out_type : type(in));
    if (m_.norm == norm_kind::layernorm || type(in) == dtype::fp32 || m_.impl == implementation::litgpt) b_.keep(in, y);
    return y;
  }

  // The mask dropout keeps for backward. CUDA runs the fused native_dropout with a bool
  // mask (derivatives.yaml: native_dropout_backward); elsewhere aten's _dropout_impl
  // (aten/src/ATen/native/Dropout.cpp) multiplies by a noise tensor of the input's dtype.
  [[nodiscard]] constexpr bytes dropout_mask(std::uint64_t elements, dtype input) const {
    return storage(t_.device == device_kind::cuda ? dtype::boolean : input, elements);
  }

  constexpr std::size_t dropout(std::size_t in) {
    if (!(t_.dropout && m_.dropout)) return in;
    return emit(op{.kind = op_kind::dropout, .extra_saved = dropout_mask(elems(in), type(in))}, elems(in), type(in));
  }

  constexpr std::size_t add(std::size_t a, std::size_t b) {
    const dtype out = (type(a) == dtype::fp32 || type(b) == dtype::fp32) ? dtype::fp32 : type(a);
    return elementwise(elems(a) > elems(b) ? elems(a) : elems(b), out);
  }

  constexpr std::size_t activation(std::size_t in) {
    switch (m_.mlp) {
      case mlp_kind::relu: {
        const auto y = emit(op{.kind = op_kind::activation}, elems(in), type(in));
        b_.keep_own_output(y);  // threshold_backward uses the result
        return y;
      }
      case mlp_kind::gelu_tanh: {
        // Hugging Face gelu_new, written as Python: 0.5*x*(1+tanh(c*(x+0.044715*x^3))).
        // Autograd keeps x (pow), tanh's output, 0.5*x and (1+tanh) for the final mul.
        const auto cube = elementwise(elems(in), type(in));
        b_.keep(in, cube);
        elementwise(elems(in), type(in));  // c * (x + 0.044715 * x^3)
        const auto th = emit(op{.kind = op_kind::activation}, elems(in), type(in));
        b_.keep_own_output(th);
        const auto one_plus = elementwise(elems(in), type(in));
        const auto half_x = elementwise(elems(in), type(in));
        const auto y = elementwise(elems(in), type(in));
        b_.keep(one_plus, y);
        b_.keep(half_x, y);
        return y;
      }
      case mlp_kind::gelu:
      case mlp_kind::swiglu:
      case mlp_kind::geglu: return input_keeping_activation(in);
    }
    return in;
  }

  // Mixture of experts (HF modeling_mixtral.py MixtralSparseMoeBlock): a router, then
  // each token's hidden state is gathered for its top-k experts; the experts' weights all
  // stay resident, their activations cover tokens * top-k rows.
  constexpr std::size_t moe(std::size_t in) {
    const auto h = m_.hidden;
    const auto e = m_.experts;
    linear(in, h, e, false);  // router
    const auto routing = emit(op{.kind = op_kind::activation}, tok(e), dtype::fp32);  // softmax in fp32
    b_.keep_own_output(routing);
    rows_ = checked_mul(tokens_, m_.experts_per_token);
    copies_ = e;
    const auto gathered = elementwise(tok(h), type(in));
    const auto expert_out = dense_mlp(gathered);
    const auto weighted = elementwise(tok(h), type(expert_out));  // * routing weight: saves both factors
    b_.keep(expert_out, weighted);
    rows_ = tokens_;
    copies_ = 1;
    return elementwise(tok(h), type(weighted));  // index_add_ back into the token order
  }

  constexpr std::size_t mlp(std::size_t in) { return m_.experts > 0 ? moe(in) : dense_mlp(in); }

  constexpr std::size_t dense_mlp(std::size_t in) {
    const auto h = m_.hidden;
    const auto f = m_.ffn;
    const bool adapted = is_lora(t_) && has(t_.lora_targets, lora_target::mlp);
    if (gated_mlp(m_)) {
      const auto gate = linear(in, h, f, m_.mlp_bias, adapted);
      const auto up = linear(in, h, f, m_.mlp_bias, adapted);
      const auto act = activation(gate);
      const auto prod = elementwise(elems(up), type(up));
      b_.keep(act, prod);  // mul saves both factors
      b_.keep(up, prod);
      return linear(prod, f, h, m_.mlp_bias, adapted);
    }
    const auto up = linear(in, h, f, m_.mlp_bias, adapted);
    const auto act = activation(up);
    return linear(act, f, h, m_.mlp_bias, adapted);
  }

  constexpr std::size_t attention(std::size_t in) {
    const auto h = m_.hidden;
    const auto q_width = checked_mul(m_.heads, d_);
    const auto kv_width = checked_mul(kv_, d_);
    const bool adapt_q = is_lora(t_) && has(t_.lora_targets, lora_target::q);
    const bool adapt_k = is_lora(t_) && has(t_.lora_targets, lora_target::k);
    const bool adapt_v = is_lora(t_) && has(t_.lora_targets, lora_target::v);
    const bool adapt_o = is_lora(t_) && has(t_.lora_targets, lora_target::o);

    std::size_t q = 0;
    std::size_t k = 0;
    std::size_t v = 0;
    if (m_.fused_qkv) {
      const auto qkv = linear(in, h, q_width + 2 * kv_width, m_.qkv_bias, adapt_q || adapt_k || adapt_v);
      q = k = v = qkv;  // q, k and v are views of the fused output
    } else {
      q = linear(in, h, q_width, m_.qkv_bias, adapt_q);
      k = linear(in, h, kv_width, m_.qkv_bias, adapt_k);
      v = linear(in, h, kv_width, m_.qkv_bias, adapt_v);
    }
    std::uint64_t q_elems = tok(q_width);
    std::uint64_t k_elems = tok(kv_width);
    if (m_.positions == position_kind::rotary) {
      // q*cos + rotate_half(q)*sin makes new q and k tensors (modeling_llama.py apply_rotary_pos_emb).
      q = elementwise(q_elems, p_.matmul);
      k = elementwise(k_elems, p_.matmul);
    }
    // Hugging Face's eager and SDPA attention both call repeat_kv before attending.
    const bool repeat_kv = kv_ != m_.heads && m_.impl == implementation::hf_transformers;
    if (repeat_kv) {
      // repeat_kv: expand + reshape materialises heads/kv_heads copies of k and v.
      k_elems = q_elems;
      k = elementwise(k_elems, p_.matmul);
      v = elementwise(k_elems, p_.matmul);
    }
    const auto batch_heads = checked_mul(t_.micro_batch, m_.heads, quantity{"attention scores (micro_batch x heads x seq_len^2)"});
    const auto scores = checked_mul(batch_heads, t_.seq_len, t_.seq_len, quantity{"attention scores (micro_batch x heads x seq_len^2)"});
    if (t_.attention == attention_impl::flash) {
      // Flash / memory-efficient SDPA saves q, k, v, the output and a per-row fp32
      // log-sum-exp (aten/src/ATen/native/transformers/attention.cpp).
      op core{.kind = op_kind::attention, .extra_saved = storage(dtype::fp32, checked_mul(batch_heads, t_.seq_len))};
      const auto context = emit(core, q_elems, p_.matmul);
      b_.keep(q, context);
      b_.keep(k, context);
      b_.keep(v, context);
      b_.keep_own_output(context);
    } else {
      // matmul on permuted 4-D views reshapes them into contiguous copies that bmm saves.
      const auto q_copy = elementwise(q_elems, p_.matmul);
      const auto k_copy = elementwise(k_elems, p_.matmul);
      const auto qk = emit(op{.kind = op_kind::attention, .recomputed_by_selective = true}, scores, p_.matmul);
      b_.keep(q_copy, qk);
      b_.keep(k_copy, qk);
      // Softmax saves its output. CUDA autocast runs it in fp32 (autocast_mode.cpp fp32
      // list); CPU autocast (torch 1.13) has no softmax entry, so it stays 16-bit; LLaMA-
      // family code asks for softmax(dtype=float32) and casts back (modeling_llama.py).
      const dtype prob_type =
          (m_.softmax_fp32 || (p_.autocast && t_.device == device_kind::cuda)) ? dtype::fp32 : p_.matmul;
      auto probs = emit(op{.kind = op_kind::attention, .recomputed_by_selective = true}, scores, prob_type);
      b_.keep_own_output(probs);
      if (m_.softmax_fp32 && p_.matmul != dtype::fp32) {
        probs = elementwise(scores, p_.matmul);  // .to(query_states.dtype)
        b_.at(probs).recomputed_by_selective = true;
      }
      auto dropped = dropout(probs);
      b_.at(dropped).recomputed_by_selective = true;
      dropped = matmul_input(dropped);
      // repeat_kv's output is already contiguous and bmm saves it as it is; a plain v is a
      // permuted view that matmul copies first.
      const auto v_saved = repeat_kv ? v : elementwise(tok(kv_width), p_.matmul);
      const auto pv = emit(op{.kind = op_kind::attention}, q_elems, p_.matmul);
      b_.keep(dropped, pv);
      b_.keep(v_saved, pv);
    }
    // Heads are merged with transpose + reshape: a contiguous copy the output projection saves.
    const auto merged = elementwise(q_elems, p_.matmul);
    return linear(merged, q_width, h, m_.attn_out_bias, adapt_o);
  }


  // ---- sections -------------------------------------------------------------------
  constexpr void prologue() {
    const auto h = m_.hidden;
    const bool frozen = is_lora(t_);
    // Embedding backward needs only the indices (derivatives.yaml: embedding_backward).
    op wte{.kind = op_kind::embedding,
           .weight = {m_.vocab, h, 1},
           .role = param_role::embedding,
           .frozen = frozen,
           .weight_grad_exists = m_.tied_embeddings && m_.head != head_kind::none};
    // The dense embedding gradient is built as a V x h tensor, then accumulated into the
    // gradient the tied output layer already created (embedding_dense_backward).
    if (wte.weight_grad_exists && !frozen) wte.bwd_temp = storage(p_.param, checked_mul(m_.vocab, h));
    auto x = emit(wte, tok(h), p_.param);
    if (m_.positions == position_kind::learned) {
      emit(op{.kind = op_kind::embedding, .weight = {m_.max_positions, h, 1}, .role = param_role::embedding,
              .frozen = frozen},
           tok(h), p_.param);
      x = add(x, last());
    }
    if (m_.type_vocab > 0) {
      emit(op{.kind = op_kind::embedding, .weight = {m_.type_vocab, h, 1}, .role = param_role::embedding,
              .frozen = frozen},
           tok(h), p_.param);
      x = add(x, last());
    }
    if (m_.embedding_norm) x = norm(x);
    dropout(x);
  }

  constexpr void block() {
    const auto x = emit(op{.kind = op_kind::stream}, tok(m_.hidden), stream_dtype());
    switch (m_.layout) {
      case block_layout::sequential: {
        const auto a = dropout(attention(norm(x)));
        const auto mid = add(x, a);
        const auto f = dropout(mlp(norm(mid)));
        add(mid, f);
        break;
      }
      case block_layout::parallel: {
        const auto n1 = norm(x);
        const auto a = attention(n1);
        const auto f = mlp(m_.shared_attention_norm ? n1 : norm(x));
        add(add(a, f), x);
        break;
      }
      case block_layout::post_norm: {
        const auto a = dropout(attention(x));
        const auto mid = norm(add(a, x));
        const auto f = dropout(mlp(mid));
        norm(add(f, mid));
        break;
      }
    }
    for (std::uint64_t i = 0; i < m_.extra_norms_per_block; ++i) norm(last());
  }

  constexpr void epilogue() {
    const auto h = m_.hidden;
    auto x = emit(op{.kind = op_kind::stream}, tok(h), stream_dtype());
    if (m_.final_norm) x = norm(x);
    switch (m_.head) {
      case head_kind::causal_lm: lm_loss(x); break;
      case head_kind::masked_lm: {
        // BertLMPredictionHead: dense + GELU + LayerNorm, then the (tied) decoder.
        const auto dense = linear(x, h, h, true);
        const auto act = input_keeping_activation(dense);  // erf GELU
        lm_loss(norm(act));
        break;
      }
      case head_kind::sequence_classification: {
        // Pooler on the first token, dropout, classifier: b rows only.
        const auto first = elementwise(checked_mul(t_.micro_batch, h), type(x));
        const auto pooled = linear_rows(first, t_.micro_batch, h, h);
        linear_rows(pooled, t_.micro_batch, h, m_.num_labels);  // logits
        emit(op{.kind = op_kind::loss}, 1, dtype::fp32);
        break;
      }
      case head_kind::none:
        if (m_.pooler) linear_rows(elementwise(checked_mul(t_.micro_batch, h), type(x)), t_.micro_batch, h, h);
        break;
    }
  }

  // gelu / silu backward use the input (derivatives.yaml: gelu_backward, silu_backward).
  constexpr std::size_t input_keeping_activation(std::size_t in) {
    const auto y = emit(op{.kind = op_kind::activation}, elems(in), type(in));
    b_.keep(in, y);
    return y;
  }

  // A linear layer over `rows` rows instead of every token (pooler, classifier).
  constexpr std::size_t linear_rows(std::size_t in, std::uint64_t rows, std::uint64_t in_features,
                                    std::uint64_t out_features) {
    op o{.kind = op_kind::linear,
         .weight = {out_features, in_features, 1},
         .bias = {out_features, 1, 1},
         .role = param_role::matmul,
         .frozen = is_lora(t_)};
    const auto y = emit(o, checked_mul(rows, out_features), p_.matmul);
    b_.keep(in, y);
    return y;
  }

  // The output layer and cross-entropy: logits b*s*V, the shifted contiguous copy, and
  // log_softmax's output, which cross_entropy keeps for nll_loss's backward
  // (derivatives.yaml: _log_softmax_backward_data uses the result).
  constexpr void lm_loss(std::size_t x) {
    const auto rows = tokens_;
    const auto h = m_.hidden;
    const auto v = m_.vocab;
    const bool tied = m_.tied_embeddings;
    const bool frozen = is_lora(t_);
    const auto input = matmul_input(x);
    op head{.kind = op_kind::linear,
            .weight = {v, h, 1},
            .bias = m_.lm_head_bias || m_.head == head_kind::masked_lm ? param_tensor{v, 1, 1} : param_tensor{},
            .role = tied ? param_role::embedding : param_role::matmul,
            .frozen = frozen,
            .borrows_weight = tied};
    if (p_.autocast) head.extra_saved = storage(p_.matmul, checked_mul(v, h));
    // An untied head is an nn.Linear, quantized under QLoRA like the others: its matmul
    // dequantizes the whole V x h weight (two 16-bit copies) in forward and backward.
    const bytes dequantized = (frozen && !tied && t_.target == training_target::qlora)
                                  ? storage(p_.matmul, checked_mul(v, h, 2))
                                  : bytes{};
    head.bwd_temp = dequantized;
    if (t_.loss == loss_impl::chunked) {
      // Chunked cross-entropy (lit-gpt utils.chunked_cross_entropy) keeps one chunk's
      // logits and log-probabilities at a time, plus each chunk's saved log_softmax.
      const auto chunk_rows = t_.loss_chunk < rows ? t_.loss_chunk : rows;
      head.fwd_temp = storage(p_.matmul, checked_mul(chunk_rows, v)) + dequantized;
      // The chunks' logits stay referenced by a Python list until backward, and each
      // chunk's cross_entropy keeps its log-probabilities (lit-gpt utils.py).
      const auto logits = emit(head, checked_mul(rows, v, quantity{"logits (tokens x vocab)"}), p_.matmul);
      if (!frozen || t_.target == training_target::qlora) b_.keep(input, logits);
      b_.keep_own_output(logits);
      const auto logp = emit(op{.kind = op_kind::loss}, checked_mul(rows, v), p_.matmul);
      b_.keep_own_output(logp);
      return;
    }
    head.fwd_temp = dequantized;
    const auto logits = emit(head, checked_mul(rows, v, quantity{"logits (tokens x vocab)"}), p_.matmul);
    if (!frozen || t_.target == training_target::qlora) b_.keep(input, logits);
    std::size_t scores = logits;
    if (m_.head == head_kind::causal_lm) {
      // Many causal-LM heads upcast logits to fp32 (modeling_llama.py: logits.float()).
      // .float() copies only 16-bit logits; on fp32 logits it is a no-op.
      if (m_.upcast_logits && type(scores) != dtype::fp32) scores = elementwise(checked_mul(rows, v), dtype::fp32);
      if (m_.logit_softcap) {
        // modeling_gemma2.py: logits / cap, tanh (keeps its output), * cap.
        elementwise(checked_mul(rows, v), type(scores));
        scores = emit(op{.kind = op_kind::activation}, checked_mul(rows, v), type(scores));
        b_.keep_own_output(scores);
        scores = elementwise(checked_mul(rows, v), type(scores));
      }
      // logits[..., :-1, :].contiguous(): a copy of all but one position per sequence.
      const auto shifted_rows = rows - t_.micro_batch;
      scores = elementwise(checked_mul(shifted_rows, v), type(scores));
      const auto logp = emit(op{.kind = op_kind::loss}, checked_mul(shifted_rows, v),
                             p_.autocast ? dtype::fp32 : type(scores));
      b_.keep_own_output(logp);
    } else {
      const auto logp = emit(op{.kind = op_kind::loss}, checked_mul(rows, v), p_.autocast ? dtype::fp32 : type(scores));
      b_.keep_own_output(logp);
    }
  }


  [[nodiscard]] constexpr std::size_t last() const { return b_.last(); }

  model_spec m_;
  training_spec t_;
  precision_policy p_;
  std::uint64_t tokens_;
  std::uint64_t rows_;         // rows the next ops process: tokens, or tokens * top-k inside experts
  std::uint64_t copies_ = 1;   // parameter copies of the next linear ops: experts
  std::uint64_t d_;
  std::uint64_t kv_;
  graph_builder b_{};
  std::array<tensor_info, graph_capacity> info_{};
};

}  // namespace detail

// The op sequence of one training step of `model` under `run`.
constexpr graph build_graph(const model_spec& model, const training_spec& run) {
  return detail::transformer_builder(model, run).build();
}

}  // namespace memscale
