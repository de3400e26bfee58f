// memscale/transformer.hpp: builds the op sequence of a transformer training step.
//
// What each op keeps follows the backward formulas in PyTorch's
// tools/autograd/derivatives.yaml and the forward code of the implementation named by
// model_spec::impl (Hugging Face transformers modeling_*.py, lit-gpt model.py).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "memscale/attention_kernel.hpp"
#include "memscale/dtype.hpp"
#include "memscale/graph_builder.hpp"
#include "memscale/model.hpp"
#include "memscale/precision_policy.hpp"
#include "memscale/training.hpp"
#include "memscale/validate.hpp"

namespace memscale {
namespace detail {

class transformer_builder {
 public:
  // Builds into `out`, which must be empty.
  constexpr transformer_builder(const model_spec& m, const training_spec& t, graph& out)
      : m_(validate(m, t)), t_(t), p_(precision_policy_of(t)),
        tokens_(checked_mul(t.micro_batch, t.seq_len, quantity{"tokens (micro_batch x seq_len)"})), rows_(tokens_), d_(head_dim_of(m)), kv_(kv_heads_of(m)), b_(out) {}

  constexpr void build() {
    prologue();
    b_.begin_block();
    block();
    b_.end_block(m_.layers);
    epilogue();
    // input_ids and labels: int64 each (PyTorch's default index dtype).
    b_.set_inputs(storage(dtype::int64, checked_mul(tokens_, 2)));
    b_.add_buffers(bytes{checked_mul(m_.buffer_bytes_per_layer, m_.layers)});
    b_.set_stream_grad(storage(stream_dtype(), checked_mul(tokens_, m_.hidden)));
    // lit-gpt's fine-tuning loop binds `logits = model(input_ids, lm_head_chunk_size=128)`
    // and keeps the list of chunks until the next step's forward returns and rebinds it
    // (finetune/lora.py fit(), Lightning-AI/lit-gpt @ 8641822 and @ 3cf6493c). The HF
    // Trainer returns loss.detach() from training_step and drops the outputs.
    if (m_.impl == implementation::litgpt && m_.head == head_kind::causal_lm)
      b_.set_carried(storage(p_.matmul, checked_mul(tokens_, m_.vocab)));
    b_.set_held(base_model_held());
  }

 private:
  // ---- tensors -------------------------------------------------------------------
  // No default member initialisers: info_ is written before it is read, so it is left
  // uninitialised (allowed in constant evaluation since C++20, P1331) instead of zeroed per build.
  struct tensor_info {
    std::uint64_t elements;
    dtype type;
  };

  // Completed in its slot rather than in a copy (graph_builder::push says why copies are slow).
  constexpr std::size_t emit(const op& proto, std::uint64_t elements, dtype type) {
    return complete(b_.push(proto), elements, type);
  }
  // An op with nothing but its kind and output.
  constexpr std::size_t emit(op_kind kind, std::uint64_t elements, dtype type) {
    return complete(b_.append(kind), elements, type);
  }
  constexpr std::size_t complete(std::size_t index, std::uint64_t elements, dtype type) {
    op& o = b_.at(index);
    o.out = storage(type, elements);
    o.fwd_temp += frame_locals_;
    // Ops other than matmuls and norms map their input gradient one to one onto the output's.
    if (o.kind != op_kind::linear && o.kind != op_kind::norm && o.kind != op_kind::stream &&
        o.kind != op_kind::embedding)
      o.grad_in = o.out;
    info_[index] = {elements, type};
    return index;
  }
  constexpr std::size_t elementwise(std::uint64_t elements, dtype type) {
    return emit(op_kind::elementwise, elements, type);
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
  [[nodiscard]] constexpr bool adapts(lora_target t) const { return is_lora(t_) && has(t_.lora_targets, t); }
  [[nodiscard]] constexpr bool four_bit_base() const { return t_.target == training_target::qlora; }
  [[nodiscard]] constexpr bool bnb_keeps_input() const {
    return four_bit_base() && t_.bitsandbytes_version < bnb_drops_matmul_input;
  }

  // y = x W^T + b. Saves its input (for the weight gradient) and, under autocast, the
  // 16-bit weight copy (the autocast weight cache lives until this op's backward).
  constexpr std::size_t linear(std::size_t in, std::uint64_t in_features, std::uint64_t out_features, bool bias,
                               bool lora_adapted = false) {
    const bool frozen = is_lora(t_);
    const auto x = matmul_input(in);
    // The most frequent op is written in its slot (graph_builder::push says why).
    const auto y = b_.append(op_kind::linear);
    op& o = b_.at(y);
    o.weight = {out_features, in_features, copies_};
    o.bias = bias ? param_tensor{out_features, 1, copies_} : param_tensor{};
    o.role = param_role::matmul;
    o.frozen = frozen;
    const bool four_bit = frozen && four_bit_base();
    // A 4-bit weight is uint8 storage behind a custom autograd Function: autocast never
    // casts it (autocast_mode.cpp is_eligible: floating-point tensors only), so no 16-bit
    // copy is saved (bitsandbytes 0.42.0 @ 4870580f, autograd/_functions.py MatMul4Bit).
    if (p_.autocast && !four_bit) o.extra_saved = storage(p_.matmul, checked_mul(in_features, out_features, copies_));
    if (four_bit) {
      // bitsandbytes dequantizes the 4-bit weight to the compute dtype for each matmul
      // and transposes it (bitsandbytes/autograd/_functions.py MatMul4Bit): two copies,
      // freed afterwards.
      o.fwd_temp = storage(p_.matmul, checked_mul(in_features, out_features, 2));
      o.bwd_temp = o.fwd_temp;
    }
    o.grad_in = storage(type(x), elems(x));
    complete(y, tok(out_features), p_.matmul);
    // Autograd saves only what a needed gradient uses: a frozen nn.Linear keeps nothing
    // (derivatives.yaml: mm's self is needed only for mat2's gradient). MatMul4Bit kept
    // its input until bitsandbytes 0.43.2 (ctx.tensors = (A, B) in 0.42.0 @ 4870580f;
    // (None, B) from 0.43.2 @ ce53caf3, PR #1270 "delete useless buffered activation").
    if (!frozen || bnb_keeps_input()) b_.keep(x, y);
    if (lora_adapted) return lora(in, y, in_features, out_features);
    return y;
  }

  // The adapter's input: LoRA dropout when p > 0 (PEFT nn.Dropout, else nn.Identity:
  // peft v0.13.0 @ 8f074d75 tuners/lora/layer.py update_layer; lit-gpt lora.py LoRALayer),
  // then autocast's own 16-bit copy for lora_A (the base matmul's copy is not shared:
  // autocast caches only leaf weights).
  constexpr std::size_t adapter_input(std::size_t in) {
    std::size_t x = in;
    // PEFT first casts x to the adapters' dtype (layer.py Linear.forward: x = x.to(lora_A.weight.dtype)):
    // under autocast a 16-bit input becomes an fp32 copy, and the dropout mask is fp32 too.
    if (m_.impl == implementation::hf_transformers && type(x) != p_.trainable) x = elementwise(elems(x), p_.trainable);
    if (t_.lora_dropout)
      x = emit(op{.kind = op_kind::dropout, .extra_saved = dropout_mask(elems(x), type(x))}, elems(x), type(x));
    return matmul_input(x);
  }

  // LoRA (Hu et al. 2021, arXiv 2106.09685): y + B(A(dropout(x))) * alpha/r, as PEFT's
  // lora.Linear.forward and lit-gpt's LoRALinear.forward write it. Saves the adapter
  // input (for A's gradient), A's output (for B's gradient) and the dropout mask.
  // rsLoRA changes only the scaling factor: same tensors.
  constexpr std::size_t lora(std::size_t in, std::size_t base, std::uint64_t in_features, std::uint64_t out_features) {
    const auto r = t_.lora_rank;
    const auto dropped = adapter_input(in);
    // fp32 adapters over a 16-bit base compute in fp32 (no autocast casts them down).
    const dtype adapter_out = p_.autocast ? p_.matmul : p_.trainable;
    const auto a = emit(op{.kind = op_kind::linear, .weight = {r, in_features, copies_}, .role = param_role::adapter},
                        tok(r), adapter_out);
    b_.keep(dropped, a);
    const auto bb = emit(op{.kind = op_kind::linear, .weight = {out_features, r, copies_}, .role = param_role::adapter},
                         tok(out_features), adapter_out);
    b_.keep(a, bb);
    if (t_.lora_kind == lora_variant::dora) return dora(dropped, base, bb, in_features, out_features);
    elementwise(tok(out_features), adapter_out);  // * alpha / r
    if (adapter_out == type(base)) return elementwise(tok(out_features), type(base));  // base output + adapter output
    // result + fp32 adapter output promotes to fp32; layer.py then casts back (result.to(torch_result_dtype)).
    elementwise(tok(out_features), dtype::fp32);
    return elementwise(tok(out_features), type(base));
  }

  // DoRA (Liu et al. 2024, arXiv 2402.09353) as PEFT runs it (peft v0.13.0 @ 8f074d75,
  // tuners/lora/dora.py DoraLinearLayer.forward): a trainable magnitude per output row;
  // lora_weight = lora_B(lora_A(eye(in))).T and x_eye stay referenced until the
  // function returns; ||W + s * lora_weight|| is detached; the base matmul runs again,
  // (m/||.|| - 1) * (x W^T) + m/||.|| * lora_out * s: both products keep their tensor factor.
  constexpr std::size_t dora(std::size_t x, std::size_t base, std::size_t lora_out, std::uint64_t in_features,
                             std::uint64_t out_features) {
    const dtype t = type(x);
    const bytes held = storage(t, checked_add(checked_mul(in_features, in_features),
                                              checked_mul(in_features, out_features)));  // x_eye, lora_weight
    // The weight norm: lora_A(eye) (in x r), scaling * lora_weight and W + that (out x in each).
    op norm_op{.kind = op_kind::elementwise,
               .weight = {out_features, 1, copies_},
               .role = param_role::adapter,
               .fwd_temp = held + storage(t, checked_add(checked_mul(in_features, t_.lora_rank),
                                                         checked_mul(in_features, out_features, 2)))};
    const dtype scale_type = p_.autocast ? dtype::fp32 : p_.matmul;  // magnitude / norm: the parameter dtype
    emit(norm_op, checked_mul(out_features, copies_), scale_type);
    op again{.kind = op_kind::linear, .fwd_temp = held, .grad_in = storage(t, elems(x))};
    // Under autocast the frozen weight is cast again (not cached: it needs no grad) and
    // mm keeps the copy for the input's gradient.
    if (p_.autocast) again.extra_saved = storage(p_.matmul, checked_mul(in_features, out_features, copies_));
    const auto base2 = emit(again, tok(out_features), p_.matmul);
    const auto scaled_base = elementwise(tok(out_features), scale_type);  // (m/n - 1) * (x W^T)
    b_.keep(base2, scaled_base);
    const auto scaled_lora = elementwise(tok(out_features), scale_type);  // m/n * lora_out
    b_.keep(lora_out, scaled_lora);
    elementwise(tok(out_features), scale_type);                           // * scaling
    const auto sum = elementwise(tok(out_features), scale_type);          // result_dora
    return elementwise(elems(sum), type(base));                           // result + result_dora (then .to(dtype))
  }

  // lit-gpt's fused qkv adapter (lit-gpt lora.py LoRAQKVLinear.forward, Lightning-AI/lit-gpt
  // @ 3cf6493c, 2024): lora_A has r rows per enabled part, lora_B only the enabled widths,
  // applied as a grouped conv1d; zero_pad copies the result (x.reshape: a copy of the
  // transposed view, which index_copy keeps for its backward: derivatives.yaml
  // index_copy, source) into new zeros of the full qkv width.
  constexpr std::size_t litgpt_qkv_lora(std::size_t in, std::size_t base, std::uint64_t in_features,
                                        std::uint64_t parts, std::uint64_t enabled_width, std::uint64_t full_width) {
    const auto r = checked_mul(t_.lora_rank, parts);
    const auto dropped = adapter_input(in);
    const auto a = emit(op{.kind = op_kind::linear, .weight = {r, in_features, 1}, .role = param_role::adapter},
                        tok(r), p_.matmul);
    b_.keep(dropped, a);
    const auto conv = emit(op{.kind = op_kind::linear, .weight = {enabled_width, t_.lora_rank, 1},
                              .role = param_role::adapter},
                           tok(enabled_width), p_.matmul);
    b_.keep(a, conv);
    const auto source = elementwise(tok(enabled_width), p_.matmul);  // x.reshape(-1, sum(qkv_shapes))
    op pad{.kind = op_kind::elementwise, .fwd_temp = storage(p_.matmul, tok(full_width))};  // new_zeros
    const auto padded = emit(pad, tok(full_width), p_.matmul);
    b_.keep(source, padded);
    elementwise(tok(full_width), p_.matmul);                      // * scaling
    return elementwise(tok(full_width), type(base));              // pretrained + lora
  }

  // LayerNorm saves its input and per-row mean and rstd in fp32
  // (aten/src/ATen/native/layer_norm.cpp); RMSNorm as Hugging Face writes it
  // (modeling_llama.py LlamaRMSNorm) saves the fp32 input, rsqrt and the normalized x.
  constexpr std::size_t norm(std::size_t in) { return norm(in, m_.hidden, tokens_); }

  // A norm over `width` features of `rows` rows (qk-norm: head_dim per head, or a whole
  // projection's width).
  constexpr std::size_t norm(std::size_t in, std::uint64_t width, std::uint64_t rows) {
    const bool trainable_norm = !is_lora(t_);
    op o{.kind = op_kind::norm,
         .weight = {width, 1, 1},
         .bias = (m_.norm == norm_kind::layernorm && m_.norm_bias) ? param_tensor{width, 1, 1} : param_tensor{},
         .role = param_role::vector,
         .frozen = !trainable_norm};
    const dtype out_type = p_.autocast ? dtype::fp32 : p_.param;  // autocast fp32 list: layer_norm
    if (m_.norm == norm_kind::layernorm) {
      o.extra_saved = storage(dtype::fp32, checked_mul(rows, 2));
    } else {
      o.extra_saved = storage(dtype::fp32, rows);  // rsqrt(variance + eps)
      // normalized x, saved by weight * x only when the weight takes a gradient (a frozen
      // LoRA base: derivatives.yaml mul, other is needed for self's gradient only).
      if (trainable_norm) o.extra_saved += storage(type(in), elems(in));
      // hidden.to(float32): a new tensor unless the input is fp32 already (then the input
      // itself is what pow and mul save). lit-gpt's RMSNorm of the 2023 runs has no upcast
      // (lit_gpt/rmsnorm.py @ 8641822: x * rsqrt(mean(x * x) + eps) in the input dtype).
      if (type(in) != dtype::fp32 && m_.impl != implementation::litgpt)
        o.extra_saved += storage(dtype::fp32, elems(in));
      // HF's pow(2).mean(-1) also keeps x^2 alive on torch 1.13, whose MeanBackward saved its
      // input (docs/research/cpu-activations.md sec. 1). From 2.0 mean.dim's backward keeps
      // only self.sym_numel() (tools/autograd/derivatives.yaml); measured on 2.11 (docs/gpu-measurements.md).
      if (m_.impl == implementation::hf_transformers && t_.torch_version < 200)
        o.extra_saved += storage(dtype::fp32, elems(in));
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

  // A dropout layer at a site whose flag (model_spec::attention_dropout, hidden_dropout,
  // embedding_dropout) says its p > 0, while the model trains.
  constexpr std::size_t dropout(std::size_t in, bool site) {
    if (!(t_.dropout && m_.dropout && site)) return in;
    return emit(op{.kind = op_kind::dropout, .extra_saved = dropout_mask(elems(in), type(in))}, elems(in), type(in));
  }

  constexpr std::size_t hidden_dropout(std::size_t in) { return dropout(in, m_.hidden_dropout); }

  constexpr std::size_t add(std::size_t a, std::size_t b) {
    const dtype out = (type(a) == dtype::fp32 || type(b) == dtype::fp32) ? dtype::fp32 : type(a);
    return elementwise(elems(a) > elems(b) ? elems(a) : elems(b), out);
  }

  constexpr std::size_t activation(std::size_t in) {
    switch (m_.mlp) {
      case mlp_kind::relu: {
        const auto y = emit(op_kind::activation, elems(in), type(in));
        b_.keep_own_output(y);  // threshold_backward uses the result
        return y;
      }
      case mlp_kind::gelu_tanh: {
        // Hugging Face gelu_new, written as Python: 0.5*x*(1+tanh(c*(x+0.044715*x^3))).
        // Autograd keeps x (pow), tanh's output, 0.5*x and (1+tanh) for the final mul.
        // CUDA autocast runs pow in fp32 (aten/src/ATen/autocast_mode.cpp, fp32 cast policy:
        // pow), so pow keeps an fp32 copy of x and the chain after it is fp32; 0.5*x stays
        // 16-bit (measured on torch 2.11, docs/gpu-measurements.md). CPU autocast has no pow entry.
        const bool pow_fp32 = p_.autocast && t_.device == device_kind::cuda && type(in) != dtype::fp32;
        const dtype chain = pow_fp32 ? dtype::fp32 : type(in);
        const auto x = pow_fp32 ? elementwise(elems(in), dtype::fp32) : in;
        const auto cube = elementwise(elems(in), chain);
        b_.keep(x, cube);
        elementwise(elems(in), chain);  // c * (x + 0.044715 * x^3)
        const auto th = emit(op_kind::activation, elems(in), chain);
        b_.keep_own_output(th);
        const auto one_plus = elementwise(elems(in), chain);
        const auto half_x = elementwise(elems(in), type(in));
        const auto y = elementwise(elems(in), chain);
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
    linear(in, h, e, false, adapts(lora_target::router));  // router
    // Softmax in fp32 keeps its output; topk keeps its int64 indices, and each expert's
    // torch.where gives int64 row and slot indices that the gather, the routing-weight
    // slice and index_add_ keep (T*k each).
    const auto routed_rows = checked_mul(tokens_, m_.experts_per_token);
    const auto routing = emit(op{.kind = op_kind::activation,
                                 .extra_saved = storage(dtype::int64, checked_mul(routed_rows, 3)) +
                                                storage(p_.matmul, routed_rows)},
                              tok(e), dtype::fp32);
    b_.keep_own_output(routing);
    rows_ = checked_mul(tokens_, m_.experts_per_token);
    copies_ = e;
    const auto gathered = elementwise(tok(h), type(in));
    const auto expert_out = dense_mlp(gathered);
    const auto weighted = elementwise(tok(h), type(expert_out));  // * routing weight: saves both factors
    b_.keep(expert_out, weighted);
    rows_ = tokens_;
    copies_ = 1;
    // index_add_ back into the token order. Its source gradient is written
    // grad.index_select(dim, index).expand_as(source) (torch 1.13 derivatives.yaml
    // index_add), so autograd saves the weighted expert outputs.
    const auto routed = elementwise(tok(h), type(weighted));
    b_.keep(weighted, routed);
    if (m_.shared_expert_ffn == 0) return routed;
    // modeling_qwen2_moe.py Qwen2MoeSparseMoeBlock (v4.51): every token also runs the shared
    // expert, scaled by sigmoid(shared_expert_gate(x)).
    auto shared = dense_mlp(in, m_.shared_expert_ffn);
    if (m_.shared_expert_gate) {
      const auto logit = linear(in, h, 1, false);
      const auto gate = emit(op_kind::activation, elems(logit), type(logit));  // sigmoid keeps its output
      b_.keep_own_output(gate);
      const auto scaled = elementwise(elems(shared), type(shared));
      b_.keep(shared, scaled);  // mul saves both factors
      shared = scaled;
    }
    return add(routed, shared);
  }

  constexpr std::size_t mlp(std::size_t in) { return m_.experts > 0 ? moe(in) : dense_mlp(in); }

  constexpr std::size_t dense_mlp(std::size_t in) { return dense_mlp(in, m_.ffn); }

  constexpr std::size_t dense_mlp(std::size_t in, std::uint64_t f) {
    const auto h = m_.hidden;
    const bool adapt_up = adapts(lora_target::up);
    const bool adapt_down = adapts(lora_target::down);
    if (gated_mlp(m_)) {
      const auto gate = linear(in, h, f, m_.mlp_bias, adapts(lora_target::gate));
      const auto up = linear(in, h, f, m_.mlp_bias, adapt_up);
      const auto act = activation(gate);
      const auto prod = elementwise(elems(up), type(up));
      b_.keep(act, prod);  // mul saves both factors
      b_.keep(up, prod);
      return linear(prod, f, h, m_.mlp_bias, adapt_down);
    }
    const auto up = linear(in, h, f, m_.mlp_bias, adapt_up);
    const auto act = activation(up);
    return linear(act, f, h, m_.mlp_bias, adapt_down);
  }

  constexpr std::size_t attention(std::size_t in) {
    const auto h = m_.hidden;
    const auto q_width = checked_mul(m_.heads, d_);
    const auto kv_width = checked_mul(kv_, d_);
    const bool adapt_q = adapts(lora_target::q);
    const bool adapt_k = adapts(lora_target::k);
    const bool adapt_v = adapts(lora_target::v);
    const bool adapt_o = adapts(lora_target::o);

    std::size_t q = 0;
    std::size_t k = 0;
    std::size_t v = 0;
    if (m_.fused_qkv && m_.impl == implementation::litgpt && (adapt_q || adapt_k || adapt_v)) {
      // lit-gpt adapts only the enabled parts of its fused projection.
      const std::uint64_t parts = (adapt_q ? 1U : 0U) + (adapt_k ? 1U : 0U) + (adapt_v ? 1U : 0U);
      const std::uint64_t enabled = (adapt_q ? q_width : 0) + (adapt_k ? kv_width : 0) + (adapt_v ? kv_width : 0);
      const auto base = linear(in, h, q_width + 2 * kv_width, m_.qkv_bias);
      q = k = v = litgpt_qkv_lora(in, base, h, parts, enabled, q_width + 2 * kv_width);
    } else if (m_.fused_qkv) {
      // PEFT adapts a fused module (GPT-2 c_attn, GPT-NeoX query_key_value) as one Linear.
      const auto qkv = linear(in, h, q_width + 2 * kv_width, m_.qkv_bias, adapt_q || adapt_k || adapt_v);
      q = k = v = qkv;  // q, k and v are views of the fused output
    } else {
      q = linear(in, h, q_width, m_.qkv_bias, adapt_q);
      k = linear(in, h, kv_width, m_.qkv_bias, adapt_k);
      v = linear(in, h, kv_width, m_.qkv_bias, adapt_v);
    }
    const auto projection = q;  // the fused projection's output when fused_qkv
    std::uint64_t q_elems = tok(q_width);
    std::uint64_t k_elems = tok(kv_width);
    if (m_.qk_norm == qk_norm_kind::per_head) {
      // modeling_qwen3.py / modeling_gemma3.py (transformers v4.51): q_norm, k_norm over head_dim.
      q = norm(q, d_, checked_mul(tokens_, m_.heads));
      k = norm(k, d_, checked_mul(tokens_, kv_));
    } else if (m_.qk_norm == qk_norm_kind::full_width) {
      // modeling_olmo2.py (v4.51): q_norm over heads*head_dim, k_norm over kv_heads*head_dim.
      q = norm(q, q_width, tokens_);
      k = norm(k, kv_width, tokens_);
    }
    if (m_.positions == position_kind::rotary) {
      // q*cos + rotate_half(q)*sin makes new q and k tensors (modeling_llama.py apply_rotary_pos_emb).
      q = elementwise(q_elems, p_.matmul);
      k = elementwise(k_elems, p_.matmul);
    }
    // Hugging Face's eager and SDPA attention both call repeat_kv before attending; from
    // transformers 5.0 SDPA without a mask passes k and v as they are with enable_gqa
    // (sdpa_gets_grouped_kv). The kernel follows from the call (attention_kernel_of): the
    // math kernel repeats k and v itself, so an fp32 GQA model on CUDA (flash needs 16-bit
    // inputs, mem-efficient refuses enable_gqa) still makes the copies (measured:
    // tools/gpu-measure/sdpa_backends.py).
    const bool gqa = kv_ != m_.heads && m_.impl == implementation::hf_transformers;
    const attention_kernel kernel = attention_kernel_of(m_, t_);
    const bool sdpa_gqa = sdpa_gets_grouped_kv(m_, t_) &&
                          (t_.attention == attention_impl::sdpa || t_.attention == attention_impl::flash);
    const bool repeat_kv = gqa && (!sdpa_gqa || kernel == attention_kernel::math);
    const bool flash_kernel = is_fused(kernel);
    if (repeat_kv) {
      // repeat_kv: expand + reshape materialises heads/kv_heads copies of k and v.
      k_elems = q_elems;
      k = elementwise(k_elems, p_.matmul);
      v = elementwise(k_elems, p_.matmul);
    }
    const auto batch_heads = checked_mul(t_.micro_batch, m_.heads, quantity{"attention scores (micro_batch x heads x seq_len^2)"});
    const auto scores = checked_mul(batch_heads, t_.seq_len, t_.seq_len, quantity{"attention scores (micro_batch x heads x seq_len^2)"});
    if (flash_kernel) {
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
      if (m_.attention_keeps_locals && m_.fused_qkv) frame_locals_ += b_.at(projection).out;  // fused_qkv
      const auto k_copy = elementwise(k_elems, p_.matmul);
      const auto qk = emit(op{.kind = op_kind::attention, .recomputed_by_selective = true}, scores, p_.matmul);
      b_.keep(q_copy, qk);
      b_.keep(k_copy, qk);
      if (m_.attention_keeps_locals) {
        // modeling_bloom.py BloomAttention.forward (v4.48): attn_weights = matmul_result + causal_mask
        // (the mask's dtype wins); both stay referenced until the function returns.
        const auto masked = elementwise(scores, p_.param);
        b_.at(masked).recomputed_by_selective = true;
        frame_locals_ += b_.at(qk).out;
      }
      if (m_.attention_softcap) {
        // modeling_gemma2.py eager_attention_forward (v4.51): scores / cap, tanh (keeps its
        // output), * cap.
        b_.at(elementwise(scores, p_.matmul)).recomputed_by_selective = true;
        const auto capped = emit(op{.kind = op_kind::activation, .recomputed_by_selective = true}, scores, p_.matmul);
        b_.keep_own_output(capped);
        b_.at(elementwise(scores, p_.matmul)).recomputed_by_selective = true;
      }
      // Softmax saves its output. CUDA autocast runs it in fp32 (autocast_mode.cpp fp32
      // list); CPU autocast (torch 1.13) has no softmax entry, so it stays 16-bit; LLaMA-
      // family code asks for softmax(dtype=float32) and casts back (modeling_llama.py).
      const dtype prob_type =
          (m_.softmax_fp32 || (p_.autocast && t_.device == device_kind::cuda)) ? dtype::fp32 : p_.matmul;
      auto probs = emit(op{.kind = op_kind::attention, .recomputed_by_selective = true}, scores, prob_type);
      b_.keep_own_output(probs);
      if (m_.attention_keeps_locals) frame_locals_ += b_.at(probs - 1).out;  // attn_weights
      if (m_.softmax_fp32 && p_.matmul != dtype::fp32) {
        probs = elementwise(scores, p_.matmul);  // .to(query_states.dtype)
        b_.at(probs).recomputed_by_selective = true;
      }
      auto dropped = dropout(probs, m_.attention_dropout);
      b_.at(dropped).recomputed_by_selective = true;
      dropped = matmul_input(dropped);
      // repeat_kv's output is already contiguous and bmm saves it as it is; a plain v is a
      // permuted view that matmul copies first.
      const auto v_saved = repeat_kv ? v : elementwise(tok(kv_width), p_.matmul);
      const auto pv = emit(op_kind::attention, q_elems, p_.matmul);
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
    if (m_.scale_embeddings) x = elementwise(tok(h), p_.param);  // modeling_gemma.py: * sqrt(hidden)
    if (m_.positions == position_kind::learned) {
      op pos{.kind = op_kind::embedding, .weight = {m_.max_positions, h, 1}, .role = param_role::embedding,
             .frozen = frozen};
      // OPTLearnedPositionalEmbedding looks up position_ids + 2, a new (b, s) int64 tensor that
      // embedding keeps for its backward (derivatives.yaml embedding: indices).
      if (m_.builds_attention_mask && !frozen) pos.extra_saved = storage(dtype::int64, tokens_);
      emit(pos, tok(h), p_.param);
      x = add(x, last());
    }
    if (m_.type_vocab > 0) {
      emit(op{.kind = op_kind::embedding, .weight = {m_.type_vocab, h, 1}, .role = param_role::embedding,
              .frozen = frozen},
           tok(h), p_.param);
      x = add(x, last());
    }
    if (m_.embedding_norm) x = norm(x);
    dropout(x, m_.embedding_dropout);
  }

  // Norms around a sequential branch (model_spec::block_norms).
  constexpr std::size_t branch_in(std::size_t x) { return m_.block_norms == branch_norms::post ? x : norm(x); }
  constexpr std::size_t branch_out(std::size_t y) { return m_.block_norms == branch_norms::pre ? y : norm(y); }

  constexpr void block() {
    const auto x = emit(op_kind::stream, tok(m_.hidden), stream_dtype());
    switch (m_.layout) {
      case block_layout::sequential: {
        const auto a = hidden_dropout(branch_out(attention(branch_in(x))));
        const auto mid = add(x, a);
        frame_locals_ = {};  // the attention's frame ends with its residual add
        const auto f = hidden_dropout(branch_out(mlp(branch_in(mid))));
        add(mid, f);
        break;
      }
      case block_layout::parallel: {
        // GPT-NeoX post_attention_dropout / post_mlp_dropout, Phi and GPT-J resid_dropout:
        // one dropout per branch. (Falcon drops out the branches' sum once: one mask fewer.)
        const auto n1 = norm(x);
        const auto a = hidden_dropout(attention(n1));
        frame_locals_ = {};
        const auto f = hidden_dropout(mlp(m_.shared_attention_norm ? n1 : norm(x)));
        add(add(a, f), x);
        break;
      }
      case block_layout::post_norm: {
        const auto a = hidden_dropout(attention(x));
        frame_locals_ = {};
        const auto mid = norm(add(a, x));
        const auto f = hidden_dropout(mlp(mid));
        norm(add(f, mid));
        break;
      }
    }
    for (std::uint64_t i = 0; i < m_.extra_norms_per_block; ++i) norm(last());
  }

  constexpr void epilogue() {
    const auto h = m_.hidden;
    auto x = emit(op_kind::stream, tok(h), stream_dtype());
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
        if (m_.arch == architecture::decoder) {
          // modeling_llama.py LlamaForSequenceClassification (v4.51): score = Linear(h, labels,
          // bias=False) over every token; the last token's logits feed the loss.
          const auto input = matmul_input(x);
          op score{.kind = op_kind::linear,
                   .weight = {m_.num_labels, h, 1},
                   .role = param_role::matmul,
                   .frozen = is_lora(t_)};
          const auto logits = emit(score, tok(m_.num_labels), p_.matmul);
          b_.keep(input, logits);
          emit(op_kind::loss, 1, dtype::fp32);
          break;
        }
        // Pooler on the first token, dropout, classifier: b rows only.
        const auto first = elementwise(checked_mul(t_.micro_batch, h), type(x));
        const auto pooled = linear_rows(first, t_.micro_batch, h, h);
        linear_rows(pooled, t_.micro_batch, h, m_.num_labels);  // logits
        emit(op_kind::loss, 1, dtype::fp32);
        break;
      }
      case head_kind::none:
        if (m_.pooler) linear_rows(elementwise(checked_mul(t_.micro_batch, h), type(x)), t_.micro_batch, h, h);
        break;
    }
  }

  // gelu / silu backward use the input (derivatives.yaml: gelu_backward, silu_backward).
  constexpr std::size_t input_keeping_activation(std::size_t in) {
    const auto y = emit(op_kind::activation, elems(in), type(in));
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
    if (p_.autocast && !(frozen && !tied && four_bit_base())) head.extra_saved = storage(p_.matmul, checked_mul(v, h));
    // An untied head is an nn.Linear, quantized under QLoRA like the others: its matmul
    // dequantizes the whole V x h weight (two 16-bit copies) in forward and backward.
    const bytes dequantized = (frozen && !tied && t_.target == training_target::qlora)
                                  ? storage(p_.matmul, checked_mul(v, h, 2))
                                  : bytes{};
    head.bwd_temp = dequantized;
    // lit-gpt splits along the sequence (model.py GPT.forward: x.split(lm_head_chunk_size, dim=1)),
    // so a chunk holds loss_chunk positions of every sequence in the batch.
    const auto chunk_rows = (t_.loss == loss_impl::chunked && t_.loss_chunk < t_.seq_len)
                                ? checked_mul(t_.micro_batch, t_.loss_chunk)
                                : rows;
    if (adapts(lora_target::head)) {
      // An adapter on the output layer (PEFT lm_head, lit-gpt lora_head): its input and
      // A's output are kept; B's output and the scaled copy are as wide as the logits
      // (one chunk at a time under lit-gpt's lm_head_chunk_size), beside the base output.
      const auto dropped = adapter_input(x);
      const auto a = emit(op{.kind = op_kind::linear, .weight = {t_.lora_rank, h, 1}, .role = param_role::adapter},
                          checked_mul(rows, t_.lora_rank), p_.matmul);
      b_.keep(dropped, a);
      // B's output is a temporary of the head's forward (not held by the loss code), so its
      // logits-wide bytes sit in the head op's temporaries.
      const auto bb = emit(op{.kind = op_kind::linear, .weight = {v, t_.lora_rank, 1}, .role = param_role::adapter},
                           checked_mul(rows, t_.lora_rank), p_.matmul);
      b_.keep(a, bb);
      head.fwd_temp += storage(p_.matmul, checked_mul(chunk_rows, v, 2));
    }
    if (t_.loss == loss_impl::chunked) {
      // Chunked cross-entropy (lit-gpt utils.chunked_cross_entropy) keeps one chunk's
      // logits and log-probabilities at a time, plus each chunk's saved log_softmax.
      head.fwd_temp += dequantized;
      // The chunks' logits stay referenced by a Python list until backward, and each
      // chunk's cross_entropy keeps its log-probabilities (lit-gpt utils.py).
      const auto logits = emit(head, checked_mul(rows, v, quantity{"logits (tokens x vocab)"}), p_.matmul);
      if (!frozen || (!tied && bnb_keeps_input())) b_.keep(input, logits);
      b_.keep_own_output(logits);
      // The one-chunk temporary belongs to the loss: the reshape of the last chunk's shifted
      // (non-contiguous) slice copies it, after model() has returned.
      const auto logp = emit(op{.kind = op_kind::loss, .fwd_temp = storage(p_.matmul, checked_mul(chunk_rows, v))},
                             checked_mul(rows, v), p_.matmul);
      b_.keep_own_output(logp);
      // Backward runs chunk by chunk (each chunk's cross_entropy and lm_head call is its own
      // branch of the graph, joined only by torch.cat of the small per-token losses), so the
      // gradients of log-probabilities and logits are one chunk wide at a time.
      const auto chunk = storage(p_.matmul, checked_mul(chunk_rows, v));
      b_.at(logp).grad_out = chunk;
      b_.at(logp).grad_in = chunk;
      b_.at(logits).grad_out = chunk;
      return;
    }
    head.fwd_temp += dequantized;
    const auto logits = emit(head, checked_mul(rows, v, quantity{"logits (tokens x vocab)"}), p_.matmul);
    if (!frozen || (!tied && bnb_keeps_input())) b_.keep(input, logits);
    std::size_t scores = logits;
    if (m_.head == head_kind::causal_lm) {
      // Many causal-LM heads upcast logits to fp32 (modeling_llama.py: logits.float()).
      // .float() copies only 16-bit logits; on fp32 logits it is a no-op.
      if (m_.upcast_logits && type(scores) != dtype::fp32) scores = elementwise(checked_mul(rows, v), dtype::fp32);
      if (m_.logit_softcap) {
        // modeling_gemma2.py: logits / cap, tanh (keeps its output), * cap. Each step
        // reassigns `logits`, so the head's output and the quotient are freed once used.
        b_.at(scores).transient = true;
        b_.at(elementwise(checked_mul(rows, v), type(scores))).transient = true;
        scores = emit(op_kind::activation, checked_mul(rows, v), type(scores));
        b_.keep_own_output(scores);
        scores = elementwise(checked_mul(rows, v), type(scores));
      }
      // logits[..., :-1, :].contiguous(): a copy of all but one position per sequence;
      // transformers >= 4.48 pads and shifts the labels instead (loss/loss_utils.py
      // ForCausalLMLoss at d0fed636), so every position's logits go to the loss uncopied.
      const auto shifted_rows = m_.shift_labels ? rows : rows - t_.micro_batch;
      if (!m_.shift_labels) scores = elementwise(checked_mul(shifted_rows, v), type(scores));
      const auto logp = emit(op_kind::loss, checked_mul(shifted_rows, v),
                             p_.autocast ? dtype::fp32 : type(scores));
      b_.keep_own_output(logp);
    } else {
      const auto logp = emit(op_kind::loss, checked_mul(rows, v), p_.autocast ? dtype::fp32 : type(scores));
      b_.keep_own_output(logp);
    }
  }


  // What the base model's forward makes once and keeps in local variables through its
  // blocks, freed when it returns, before the head (transformers v4.48 modeling_opt.py
  // OPTDecoder.forward, modeling_bloom.py BloomModel.forward). Both make an all-ones 2-D
  // attention_mask when none is given (torch.ones: fp32); with a 2-D mask,
  // _prepare_4d_causal_attention_mask_with_cache_position clones the expanded causal mask
  // into (b, 1, s, s) of the embeddings' dtype. OPT derives its position ids from that mask
  // ((cumsum(mask) * mask - 1).long(): (b, s) int64); BLOOM's build_alibi_tensor returns
  // (b * heads, 1, s) in the embeddings' dtype.
  [[nodiscard]] constexpr bytes base_model_held() const {
    bytes held{};
    if (m_.builds_attention_mask) {
      held += storage(dtype::fp32, tokens_);
      held += storage(p_.param, checked_mul(tokens_, t_.seq_len, quantity{"causal mask (micro_batch x seq_len^2)"}));
      if (m_.positions == position_kind::learned) held += storage(dtype::int64, tokens_);
    }
    if (m_.alibi) held += storage(p_.param, checked_mul(tokens_, m_.heads, quantity{"ALiBi bias (tokens x heads)"}));
    return held;
  }

  [[nodiscard]] constexpr std::size_t last() const { return b_.last(); }

  const model_spec& m_;   // the builder lives inside build_graph, within its arguments' lifetime
  const training_spec& t_;
  precision_policy p_;
  std::uint64_t tokens_;
  std::uint64_t rows_;         // rows the next ops process: tokens, or tokens * top-k inside experts
  std::uint64_t copies_ = 1;   // parameter copies of the next linear ops: experts
  std::uint64_t d_;
  std::uint64_t kv_;
  bytes frame_locals_{};       // tensors the running Python frame still references (model_spec::attention_keeps_locals)
  graph_builder b_;
  std::array<tensor_info, graph_capacity> info_;
};

}  // namespace detail

// The run with its adapter dtype decided: PEFT (hf_transformers) keeps adapters over a 16-bit
// base in fp32 by default (peft_model.py get_peft_model autocast_adapter_dtype=True, which
// casts only bf16/fp16 adapters); other implementations keep them in the base dtype.
constexpr training_spec with_resolved_adapters(const model_spec& model, training_spec run) {
  if (run.adapters != adapter_dtype::framework_default) return run;
  const bool sixteen_bit_base = precision_policy_of(run).param != dtype::fp32;
  run.adapters = (is_lora(run) && sixteen_bit_base && model.impl == implementation::hf_transformers)
                     ? adapter_dtype::fp32
                     : adapter_dtype::as_base;
  return run;
}

// The op sequence of one training step of `model` under `run`. One sequence is one stack: an
// encoder-decoder has two (build_encoder_decoder_graph), and half of it is never built here.
constexpr graph build_graph(const model_spec& model, const training_spec& run) {
  if (model.arch == architecture::encoder_decoder)
    detail::fail(error_code::unsupported, "model.arch",
                 "is encoder_decoder: build_graph builds one stack (build_encoder_decoder_graph builds both; "
                 "estimate() takes either)");
  graph g;  // default-initialised: the op slots are left unwritten (graph.hpp op_slots)
  detail::transformer_builder(model, run, g).build();
  g.ops.complete_for_constant(g.size);
  return g;
}

}  // namespace memscale
