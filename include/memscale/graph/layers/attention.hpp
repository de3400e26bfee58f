// memscale/graph/layers/attention.hpp: self-attention as the implementation runs it:
// q, k, v projections (fused or not, adapted or not), qk-norm, RoPE, repeat_kv, the
// attention kernel (fused, or eager with softcap, BLOOM's frame locals and the softmax
// dtype), the output projection; and T5's attention (relative position bias, cross-attention).
#pragma once

#include <cstdint>

#include "memscale/attention_kernel.hpp"
#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/adapters.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/context_parallel.hpp"
#include "memscale/graph/layers/liger_rope.hpp"
#include "memscale/graph/layers/norms.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/tensor.hpp"
#include "memscale/lora.hpp"
#include "memscale/model.hpp"
#include "memscale/precision_policy.hpp"
#include "memscale/training.hpp"

namespace memscale::graph_layers {

// litgpt 0.4's CausalSelfAttention.forward (litgpt/model.py lines 227-292 @ b0ea1772) views the
// interleaved qkv as (B, T, groups, q_per_kv + 2, hs), permutes it to (B, groups, q_per_kv + 2,
// T, hs) and splits q, k and v off as views (line 246); k.expand and v.expand to every query head
// (lines 251-253, always in training: input_pos is None), then reshape to (B, heads, T, hs)
// (lines 255-257): a copy of each where groups and q_per_kv cannot merge (more than one group),
// so RoPE and torch.cat (lines 259-262) run on heads key heads, not kv_heads. The 2023 scripts
// (framework_version 0) do the same, but only with more than one group (lit_gpt/model.py lines
// 203-214 @ 8641822: `if n_query_groups != 1`): their multi-query k and v keep one head.
constexpr bool litgpt_expands_kv_before_rope(const model_spec& model, const training_spec& t) {
  if (t.framework != framework_kind::litgpt) return false;
  if (t.framework_version == 0) return kv_heads_of(model) != 1;
  return t.framework_version >= litgpt_v0_4 && t.framework_version < litgpt_v0_5_5;
}

struct attention_path {
  attention_kernel kernel = attention_kernel::math;
  bool repeats_kv = false;  // k and v are copied per query head before attending
};

// Hugging Face's eager and SDPA attention both call repeat_kv before attending; from
// transformers 5.0 SDPA without a mask passes k and v as they are with enable_gqa
// (sdpa_gets_grouped_kv). The kernel follows from the call (attention_kernel_of): the
// math kernel repeats k and v itself, so an fp32 GQA model on CUDA (flash needs 16-bit
// inputs, mem-efficient refuses enable_gqa) still makes the copies (measured:
// tools/gpu-measure/sdpa_backends.py).
constexpr attention_path attention_path_of(const model_spec& model, const training_spec& run) {
  // torchtune copies k and v to every query head itself before SDPA (k.unsqueeze(2).expand(...)
  // .flatten(1, 2), torchtune/modules/attention.py lines 290-291 @ v0.6.1), whatever the kernel.
  // torchtitan's repeat_kv copies them too (expand + reshape, models/llama3/model/model.py @ f7084fc7).
  // litgpt main repeat_interleaves them after RoPE (litgpt_repeats_kv_after_rope, training.hpp),
  // litgpt 0.4 expands them before it (litgpt_expands_kv_before_rope).
  const bool torchtune = run.framework == framework_kind::torchtune || run.framework == framework_kind::torchtitan;
  const bool gqa = kv_heads_of(model) != model.heads &&
                   (model.impl == implementation::hf_transformers || torchtune || litgpt_repeats_kv_after_rope(run) ||
                    litgpt_expands_kv_before_rope(model, run));
  const attention_kernel kernel = attention_kernel_of(model, run);
  const bool sdpa_gqa = !torchtune && sdpa_gets_grouped_kv(model, run) &&
                        (run.attention == attention_impl::sdpa || run.attention == attention_impl::flash);
  // GPTBigCode's multi-query _attn folds the heads into the query's rows (query.reshape(b, s * heads,
  // head_dim)) and multiplies by the one k and v: nothing is repeated.
  const bool folds_heads = model.attention_keeps_fused_kv && !is_fused(kernel);
  // transformers' flash_attention_2 hands flash_attn_func k and v with kv_heads heads in every
  // release: LlamaFlashAttention2.forward calls no repeat_kv (modeling_llama.py@00227283;
  // integrations/flash_attention.py@0325dc46 neither). A padding-free row goes to
  // flash_attn_varlen_func with them as they are (modeling_flash_attention_utils.py@7713be1e
  // prepare_fa2_from_position_ids: only views and .contiguous() of k and v), one (heads, tokens)
  // log-sum-exp over the examples; `flash` alone also names SDPA's fused kernels, which repeat them.
  const bool varlen = run.packing == batch_packing::padding_free && run.attention == attention_impl::flash;
  const bool flash_attn = !torchtune && (run.flash_attention_2 || varlen);
  return {.kernel = kernel,
          .repeats_kv = gqa && !folds_heads && !flash_attn && (!sdpa_gqa || kernel == attention_kernel::math)};
}

// use_cache=True while training: each decoder layer puts its keys (after qk-norm and RoPE) and its
// values as the projection made them (views of a fused projection: all of it) into the returned
// past_key_values (a tuple until 4.35, DynamicCache.update from 4.36), which the model's outputs hold
// through the loss until forward returns (modeling_llama.py@v4.40.2 LlamaForCausalLM.forward). The
// modeling files turn it off under gradient checkpointing (modeling_gpt2.py `if
// self.gradient_checkpointing and self.training: if use_cache: ... use_cache = False`, quoted in
// huggingface/transformers issue #23808); from 5.0 check_model_inputs turns it off in training
// (huggingface/transformers PR #41585, review of 2025-10-16), so a run that states no release (today's
// code) has none. lit-gpt, torchtune and torchtitan train without a cache.
constexpr bool asks_for_cache(const model_spec& model, const training_spec& run) {
  return run.use_cache == cache_setting::on || (run.use_cache == cache_setting::config && model.use_cache);
}
// With no release stated the config's default keeps no cache (as from 5.0), but a run that says
// use_cache on keeps it: the upper side, and the stated input is never dropped.
constexpr bool keeps_cache_in_training(const model_spec& model, const training_spec& run) {
  const bool release_keeps = run.transformers_version == 0 ? run.use_cache == cache_setting::on
                                                           : run.transformers_version < 500;
  return asks_for_cache(model, run) && run.ckpt == checkpointing::none && run.framework == framework_kind::hf &&
         model.impl == implementation::hf_transformers && model.arch == architecture::decoder && release_keeps;
}

struct qkv_tensors {
  tensor q;
  tensor k;
  tensor v;
  tensor projection;  // the fused projection's output when fused_qkv (q, k and v are its views)
};

// Which of q, k and v need a gradient. All do inside the stack; in a first layer whose input
// needs none (layer_context::stream_needs_grad) only an adapted projection's output does, and a
// fused one's three views share it.
struct qkv_grads {
  bool q = true;
  bool k = true;
  bool v = true;
  [[nodiscard]] constexpr bool any() const { return q || k || v; }
  [[nodiscard]] constexpr bool scores() const { return q || k; }
};

constexpr qkv_grads qkv_grads_of(const layer_context& ctx) {
  if (ctx.stream_needs_grad) return {.q = true, .k = true, .v = true};
  const adapter_plan& a = ctx.adapters;
  const bool q = a.adapts(lora_target::q);
  const bool k = a.adapts(lora_target::k);
  const bool v = a.adapts(lora_target::v);
  if (ctx.model.fused_qkv) return {.q = q || k || v, .k = q || k || v, .v = q || k || v};
  return {.q = q, .k = k, .v = v};
}

struct attention_widths {
  std::uint64_t head_dim = 0;
  std::uint64_t kv_heads = 0;
  std::uint64_t q = 0;   // heads x head_dim
  std::uint64_t kv = 0;  // kv_heads x head_dim
};

// The q, k and v projections, each a projection the run may adapt.
constexpr qkv_tensors project_qkv(const layer_context& ctx, tensor in, const attention_widths& w) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const adapter_plan& adapters = ctx.adapters;
  const bool adapt_q = adapters.adapts(lora_target::q);
  const bool adapt_k = adapters.adapts(lora_target::k);
  const bool adapt_v = adapters.adapts(lora_target::v);
  const auto full_width = w.q + 2 * w.kv;
  const linear_shape fused{.rows = ctx.tokens, .in_features = m.hidden, .out_features = full_width, .bias = m.qkv_bias,
                           .role = lora_target::q | lora_target::k | lora_target::v};
  if (m.fused_qkv && m.impl == implementation::litgpt && (adapt_q || adapt_k || adapt_v)) {
    // lit-gpt adapts only the enabled parts of its fused projection.
    const fused_qkv_widths widths{.parts = (adapt_q ? 1U : 0U) + (adapt_k ? 1U : 0U) + (adapt_v ? 1U : 0U),
                                  .enabled_width = (adapt_q ? w.q : 0) + (adapt_k ? w.kv : 0) + (adapt_v ? w.kv : 0),
                                  .full_width = full_width};
    const tensor base = ops.tracked_if(ctx.stream_needs_grad, [&] { return ops.linear(in, fused, adapters.base); });
    const tensor qkv = litgpt_qkv_lora(ops, adapters, in, base, ctx.tokens, m.hidden, widths);
    return {qkv, qkv, qkv, qkv};
  }
  if (m.fused_qkv) {
    // PEFT adapts a fused module (GPT-2 c_attn, GPT-NeoX query_key_value) as one Linear.
    const tensor qkv = projection(ops, adapters, in, fused, adapt_q || adapt_k || adapt_v, ctx.stream_needs_grad);
    return {qkv, qkv, qkv, qkv};  // q, k and v are views of the fused output
  }
  const auto shape = [&](std::uint64_t width, lora_target role) {
    return linear_shape{.rows = ctx.tokens, .in_features = m.hidden, .out_features = width, .bias = m.qkv_bias,
                        .role = static_cast<lora_modules>(role)};
  };
  const tensor q = projection(ops, adapters, in, shape(w.q, lora_target::q), adapt_q, ctx.stream_needs_grad);
  const tensor k = projection(ops, adapters, in, shape(w.kv, lora_target::k), adapt_k, ctx.stream_needs_grad);
  const tensor v = projection(ops, adapters, in, shape(w.kv, lora_target::v), adapt_v, ctx.stream_needs_grad);
  return {q, k, v, q};
}

// v as the context matmul saves it: repeat_kv's output is already contiguous and bmm saves it
// as it is; a plain v is a permuted view that matmul copies first.
constexpr tensor saved_value(const layer_context& ctx, const qkv_tensors& qkv, const attention_path& path,
                             std::uint64_t kv_width) {
  if (path.repeats_kv) return qkv.v;
  if (ctx.model.attention_keeps_fused_kv) return qkv.projection;  // bmm(probs, value): value is a view too
  return ctx.ops.elementwise(qkv.v, detail::checked_mul(ctx.run.micro_batch, ctx.keys(), kv_width),
                             ctx.ops.precision().matmul);
}

// What a softmax over the scores holds only while it runs: in backward on CUDA, grad * output,
// the output's size in the gradient's dtype, made after the input gradient and before the kernel
// (aten/src/ATen/native/cuda/SoftMax.cu@000cace5 softmax_backward_cuda_out; the CPU kernel has no
// such product). Seen on the H100 as a 512 MiB transient of _softmax_backward_data per layer of
// llama-small b2 s2048 fp32 (docs/data/gpu_allocator_runs/op_transients_h100.json). The math SDPA
// path's _safe_softmax also holds a one-byte mask of the scores in forward (128 MiB there), but in
// which order its tensors are made inside the op is not settled, and placed after the output it
// turns two measured OOMs of the capped llama-small b8 runs into fits: not modelled.
constexpr void softmax_temporaries(const layer_context& ctx, tensor probs, std::uint64_t scores) {
  if (ctx.run.device == device_kind::cuda) ctx.ops.at(probs).bwd_temp += storage(probs.type, scores);
}

// Before torch 1.11 softmax's backward took its input as well as its output, so autograd saved
// both (tools/autograd/derivatives.yaml@768cfaa8 _softmax: _softmax_backward_data(grad, result,
// dim, self)); 1.11 saves only the input's dtype (derivatives.yaml@e47a5a64, pytorch PR #65242).
constexpr bool softmax_saves_input(const training_spec& run) { return run.torch_version < 111; }

// The tensor softmax reads, in the dtype softmax takes it: the scaled and masked scores (the mask
// is in the model's dtype, so fp32 under autocast; autocast runs softmax in fp32 anyway), a
// copy when softmax(dtype=float32) converts it (aten/src/ATen/native/SoftMax.cpp@52644650, as in 1.x:
// softmax: input.toType(dtype)), but the 16-bit scores themselves when CUDA's half_to_float
// kernel takes fp16 without autocast (same function).
constexpr dtype softmax_input_type(const layer_context& ctx, dtype prob_type, bool softmax_fp32) {
  const precision_policy& p = ctx.ops.precision();
  const bool half_to_float = softmax_fp32 && !p.autocast && p.matmul == dtype::fp16 && ctx.run.device == device_kind::cuda;
  return half_to_float ? dtype::fp16 : prob_type;
}

// Eager attention with sinks (modeling_gpt_oss.py@00d4b3d2 eager_attention_forward): after the
// mask, cat([scores, sinks]) (b, H, s, s + 1, the H sink logits a parameter); minus
// max(-1).values (max keeps its int64 indices, (b, H, s, 1)); softmax(dtype=combined.dtype),
// in the scores' dtype, which is the parameters' once the mask is added (the mask is made in
// the model dtype); probs[..., :-1] (a view: the matmul with v keeps the whole softmax output,
// or its 16-bit cast under autocast).
constexpr tensor sink_softmax_and_context(const layer_context& ctx, const qkv_tensors& qkv, const attention_path& path,
                                          std::uint64_t q_elements, std::uint64_t kv_width,
                                          std::uint64_t scores, std::uint64_t score_rows) {
  op_writer& ops = ctx.ops;
  const precision_policy& p = ops.precision();
  const dtype logits_type = p.param;
  const auto widened = detail::checked_add(scores, score_rows, detail::quantity{"attention scores with sinks"});
  const op cat{.kind = op_kind::elementwise,
               .recomputed_by_selective = true,
               .weight = {ctx.model.heads, 1, 1},
               .role = param_role::vector,
               .frozen = ctx.adapters.base.frozen};
  ops.emit(cat, widened, logits_type);
  const op shift{.kind = op_kind::elementwise,
                 .recomputed_by_selective = true,
                 .extra_saved = storage(dtype::int64, score_rows)};  // max's indices
  ops.emit(shift, widened, logits_type);
  const tensor probs = ops.emit(op{.kind = op_kind::attention, .recomputed_by_selective = true}, widened, logits_type);
  ops.keep_own_output(probs);
  softmax_temporaries(ctx, probs, widened);
  tensor dropped = probs;
  if (ctx.dropout.attention_probs) {
    tensor view = probs;  // probs[..., :-1]
    view.elements = scores;
    dropped = ops.dropout(view, true);
    ops.at(dropped).recomputed_by_selective = true;
  }
  if (p.autocast && dropped.type != p.matmul) {
    dropped = ops.elementwise(scores, p.matmul);  // autocast's cast of the view, saved by the matmul
    ops.at(dropped).recomputed_by_selective = true;
  }
  const tensor v_saved = saved_value(ctx, qkv, path, kv_width);
  const tensor context = ops.emit(op_kind::attention, q_elements, p.matmul);
  ops.keep(dropped, context);
  ops.keep(v_saved, context);
  return context;
}

// softmax(QK^T)V with the scores materialised; returns the context (heads unmerged).
// `q`, `k`, `v` are the tensors the kernel reads; `k_elements` is k's size after repeat_kv.
// `grads`: bmm saves each factor only for the other's gradient (derivatives.yaml bmm: self for
// mat2, mat2 for self), and nothing up to the probabilities is recorded when neither q nor k needs one.
constexpr tensor eager_attention(const layer_context& ctx, const qkv_tensors& qkv, const attention_path& path,
                                 std::uint64_t q_elements, std::uint64_t k_elements, std::uint64_t kv_width,
                                 std::uint64_t scores, std::uint64_t score_rows, const qkv_grads& grads) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const precision_policy& p = ops.precision();
  const bool scores_grad = grads.scores() || m.attention_sinks;
  const std::size_t untracked = scores_grad ? 0 : ops.untracked_from();
  // matmul on permuted 4-D views reshapes them into contiguous copies that bmm saves.
  const tensor q_copy = ops.tracked_if(grads.q, [&] { return ops.elementwise(qkv.q, q_elements, p.matmul); });
  if (m.attention_keeps_locals && m.fused_qkv) ops.hold_in_frame(ops.at(qkv.projection).out);  // fused_qkv
  // modeling_gpt_bigcode.py@00574544 GPTBigCodeAttention._attn: baddbmm(query.reshape(...),
  // key) takes k as a view of c_attn's output, so the whole output is kept, not a k copy.
  const bool fused_views = m.attention_keeps_fused_kv;
  const tensor k_copy = fused_views ? qkv.projection : ops.tracked_if(grads.k, [&] {
    return ops.elementwise(qkv.k, k_elements, p.matmul);
  });
  const tensor qk = ops.emit(op{.kind = op_kind::attention, .recomputed_by_selective = true}, scores, p.matmul);
  if (grads.k) ops.keep(q_copy, qk);
  if (grads.q) ops.keep(k_copy, qk);
  tensor softmax_input = qk;
  if (m.attention_keeps_locals) {
    // modeling_bloom.py BloomAttention.forward (v4.48): attn_weights = matmul_result + causal_mask
    // (the mask's dtype wins); both stay referenced until the function returns.
    softmax_input = ops.elementwise(scores, p.param);
    ops.at(softmax_input).recomputed_by_selective = true;
    ops.hold_in_frame(ops.at(qk).out);
  }
  if (ctx.run.transformers_version != 0 && ctx.run.transformers_version < m.attention_clamp_before) {
    // modeling_opt.py@v4.32 OPTAttention.forward: attn_weights + attention_mask, then
    // torch.max(attn_weights, finfo.min), which saves both inputs: the masked scores stay.
    const tensor masked = ops.elementwise(softmax_input, scores, p.matmul);
    ops.at(masked).recomputed_by_selective = true;
    softmax_input = ops.elementwise(masked, scores, p.matmul);
    ops.keep(masked, softmax_input);
    ops.at(softmax_input).recomputed_by_selective = true;
  }
  if (m.attention_softcap) {
    // modeling_gemma2.py eager_attention_forward (v4.51): scores / cap, tanh (keeps its
    // output), * cap.
    ops.at(ops.elementwise(scores, p.matmul)).recomputed_by_selective = true;
    const tensor capped = ops.emit(op{.kind = op_kind::activation, .recomputed_by_selective = true}, scores, p.matmul);
    ops.keep_own_output(capped);
    softmax_input = ops.elementwise(scores, p.matmul);
    ops.at(softmax_input).recomputed_by_selective = true;
  }
  // Softmax saves its output. CUDA autocast runs it in fp32 (autocast_mode.cpp fp32
  // list); CPU autocast (torch 1.13) has no softmax entry, so it stays 16-bit; LLaMA-
  // family code asks for softmax(dtype=float32) and casts back (modeling_llama.py).
  // torchtune attends through F.scaled_dot_product_attention (modules/attention.py @ v0.6.1),
  // whose math path runs softmax in the inputs' dtype.
  const bool softmax_fp32 = m.softmax_fp32 && ctx.run.framework != framework_kind::torchtune;
  const dtype prob_type =
      (softmax_fp32 || (p.autocast && ctx.run.device == device_kind::cuda)) ? dtype::fp32 : p.matmul;
  if (m.attention_sinks) return sink_softmax_and_context(ctx, qkv, path, q_elements, kv_width, scores, score_rows);
  const bool saves_input = scores_grad && softmax_saves_input(ctx.run);
  if (saves_input) {
    const dtype input_type = softmax_input_type(ctx, prob_type, softmax_fp32);
    if (softmax_input.op_index == qk.op_index || softmax_input.type != input_type) {
      softmax_input = ops.elementwise(softmax_input, scores, input_type);
      ops.at(softmax_input).recomputed_by_selective = true;
    }
  }
  tensor probs = ops.emit(op{.kind = op_kind::attention, .recomputed_by_selective = true}, scores, prob_type);
  ops.keep_own_output(probs);
  if (saves_input) ops.keep(softmax_input, probs);
  softmax_temporaries(ctx, probs, scores);
  if (m.attention_keeps_locals) ops.hold_in_frame(ops.at(softmax_input).out);  // attn_weights
  if (softmax_fp32 && p.matmul != dtype::fp32) {
    probs = ops.elementwise(scores, p.matmul);  // .to(query_states.dtype)
    ops.at(probs).recomputed_by_selective = true;
  }
  tensor dropped = ops.dropout(probs, ctx.dropout.attention_probs);
  ops.at(dropped).recomputed_by_selective = true;
  dropped = ops.matmul_input(dropped);
  if (!scores_grad) ops.track_from(untracked);
  const tensor v_saved = saved_value(ctx, qkv, path, kv_width);
  const tensor context = ops.emit(op_kind::attention, q_elements, p.matmul);
  if (grads.v) ops.keep(dropped, context);
  if (scores_grad) ops.keep(v_saved, context);
  // The context matmul's backward hands back the probabilities' gradient and v's together; v's ops
  // were made before the scores', so v's gradient waits through the backward of every op from the
  // probabilities the context read down to the scores product.
  if (grads.v && scores_grad) ops.gradient_waits(context, qk, ops.at(v_saved).out);
  return context;
}

// Eager attention under torch.no_grad, as generate() runs it (transformers 4.44
// modeling_llama.py LlamaAttention.forward, modeling_gpt2.py GPT2Attention._attn): the
// product q.k^T and its scaled copy coexist (`matmul(...) / sqrt(d)`); softmax reads the
// scaled scores, which stay bound while softmax(dtype=float32)'s result is cast back with
// .to(dtype) (a model that takes softmax in its own dtype, GPT-2, casts nothing); q and the
// (repeated) keys and values stay bound in the frame until the context is made. Nothing is
// saved, so the training piece's contiguous q and k copies are not written.
constexpr tensor eager_attention_without_grad(const layer_context& ctx, const qkv_tensors& qkv,
                                              std::uint64_t q_elements, std::uint64_t scores) {
  op_writer& ops = ctx.ops;
  const precision_policy& p = ops.precision();
  const tensor product = ops.emit(op_kind::attention, scores, p.matmul);
  tensor weights = ops.elementwise(product, scores, p.matmul);  // / sqrt(head_dim)
  if (ctx.model.attention_softcap) {
    // modeling_gemma2.py eager_attention_forward (v4.51): scores / cap, tanh, * cap.
    weights = ops.elementwise(weights, scores, p.matmul);
    weights = ops.elementwise(weights, scores, p.matmul);
    weights = ops.elementwise(weights, scores, p.matmul);
  }
  const bool fp32_softmax = ctx.model.softmax_fp32 && p.matmul != dtype::fp32;
  tensor probs = ops.emit(op_kind::attention, scores, fp32_softmax ? dtype::fp32 : p.matmul);
  ops.reads(weights, probs);
  if (fp32_softmax) {
    probs = ops.elementwise(probs, scores, p.matmul);  // .to(query_states.dtype)
    ops.reads(weights, probs);
  }
  const tensor context = ops.emit(op_kind::attention, q_elements, p.matmul);
  ops.reads(probs, context);
  ops.reads(qkv.q, context);
  ops.reads(qkv.k, context);
  ops.reads(qkv.v, context);
  return context;
}

// gpt-oss's eager attention without grad (modeling_gpt_oss.py@00d4b3d2 eager_attention_forward):
// q k^T, * scaling, + the mask; torch.cat with the per-head sink column (rows x (keys + 1));
// minus its max (values and int64 indices, temporaries); softmax in the scores' dtype; the
// context from probs[..., :-1], a strided view bmm reads as it is. The frame binds the masked
// scores (attn_weights) until the dropout call rebinds the name, and combined_logits until it
// returns. The probabilities go back to the decoder layer as attn_weights, which it binds to
// `_` until the MLP's (output, router_scores) rebinds it (GptOssDecoderLayer.forward): they live
// through o_proj, the residual add, the norm and the whole MLP.
constexpr tensor sink_attention_without_grad(const layer_context& ctx, const qkv_tensors& qkv,
                                             std::uint64_t q_elements, std::uint64_t scores,
                                             std::uint64_t score_rows) {
  op_writer& ops = ctx.ops;
  const dtype type = ops.precision().matmul;
  const auto widened = detail::checked_add(scores, score_rows, detail::quantity{"attention scores with sinks"});
  const tensor product = ops.emit(op_kind::attention, scores, type);
  const tensor scaled = ops.elementwise(product, scores, type);
  const tensor masked = ops.elementwise(scaled, scores, type);
  const op cat{.kind = op_kind::elementwise, .weight = {ctx.model.heads, 1, 1}, .role = param_role::vector, .frozen = true};
  const tensor combined = ops.emit(cat, widened, type);
  ops.reads(masked, combined);
  // .max(dim=-1, keepdim=True): values and int64 indices, freed once the difference is made.
  ops.at(combined).fwd_temp += storage(type, score_rows) + storage(dtype::int64, score_rows);
  const tensor shifted = ops.elementwise(combined, widened, type);
  const tensor probs = ops.emit(op_kind::attention, widened, type);
  ops.reads(shifted, probs);
  ops.reads(masked, probs);
  const tensor context = ops.emit(op_kind::attention, q_elements, type);
  ops.reads(probs, context);
  ops.reads(shifted, context);
  ops.reads(qkv.q, context);
  ops.reads(qkv.k, context);
  ops.reads(qkv.v, context);
  ops.hold_in_frame(ops.at(probs).out);  // attn_weights, bound until the MLP returns
  return context;
}

// apply_rotary_pos_emb's temporaries under torch.no_grad (modeling_llama.py, v4.44): q * cos and
// rotate_half(q) * sin exist beside their sum, then the same for k; the unrotated q stays
// bound (the function's argument) until k is rotated. A training graph's rotation ops keep
// nothing of this: the products are freed inside the op, before its backward matters.
// Each product is a tensor of its own, the size of the rotated one (the H100 history of
// Llama-2-7B generate() b8: 128, 64 (-x2), 128 (cat), 128 MiB blocks around each 128 MiB q).
// Over the whole head (rotary_fraction 1, rotate_half's -x2 and cat), the generate() walk replays
// them one by one (graph.hpp forward_temporaries::rotary_half).
constexpr void rotary_temporaries(op_writer& ops, tensor q_unrotated, tensor q, tensor k, bool whole_head) {
  ops.at(q).fwd_temp += ops.at(q).out * 2u;
  ops.at(k).fwd_temp += storage(k.type, k.elements) * 2u;
  if (whole_head) {
    ops.at(q).temporaries = forward_temporaries::rotary_half;
    ops.at(k).temporaries = forward_temporaries::rotary_half;
  }
  ops.reads(q_unrotated, k);
}

// gpt-fast's apply_rotary_emb (model.py@32971d31) under no_grad: x.float() (a copy unless fp32),
// the two products and the difference of the real part, the same of the imaginary part,
// torch.stack of both (fp32, the full size) and .type_as(x) (a copy unless fp32). The most alive
// at once is the copy, the real part and the imaginary part's two products and sum (or the
// stack): six tensors of half the fp32 size when 16-bit (the output comes after), four with the
// output (the stack itself) when fp32.
constexpr void stacked_rotary_temporaries(op_writer& ops, tensor q_unrotated, tensor q, tensor k) {
  for (const tensor t : {q, k}) {
    op& o = ops.at(t);
    const bytes fp32_half = storage(dtype::fp32, t.elements / 2);
    const bytes most = fp32_half * (t.type == dtype::fp32 ? 4u : 6u);
    o.fwd_temp += most > o.out ? most - o.out : bytes{};
    o.temporaries = forward_temporaries::rotary_stacked;
  }
  ops.reads(q_unrotated, k);
}

// What the memory-efficient kernel keeps of a padding-free row's or a padded batch's bool mask
// (one layer's call, aten/src/ATen/native/transformers/attention.cpp@008887dc
// scaled_dot_product_attention): convert_boolean_attn_mask makes an additive (batch, 1, rows, keys)
// copy in q's dtype (a mask already additive, as before transformers 5.0, is taken as it is), and
// preprocess_mask expands it to (batch, heads, tokens, tokens) as a view, or, when the key count
// is not a multiple of 16, pads the expanded view (pad_bias: a new (batch, heads, tokens,
// keys rounded up to 16) tensor, sliced back); _scaled_dot_product_efficient_attention's backward
// reads attn_bias, so autograd saves it. The unpadded copy is then freed after the call.
constexpr bytes memory_efficient_mask_bias(const layer_context& ctx, op& core) {
  const dtype type = ctx.ops.precision().matmul;
  const std::uint64_t keys = ctx.keys();
  const std::uint64_t rows = detail::checked_mul(ctx.run.micro_batch, ctx.run.seq_len);
  const bytes additive = bool_attention_mask(ctx.run) ? storage(type, detail::checked_mul(rows, keys)) : bytes{};
  if (keys % 16 == 0) return additive;
  core.fwd_temp += additive;
  const std::uint64_t padded = (keys / 16 + 1) * 16;
  return storage(type, detail::checked_mul(detail::checked_mul(rows, ctx.model.heads), padded));
}

// With one key/value head the repeat is a view (repeat_kv_heads), which a fused kernel saves as
// passed. A mask makes Hugging Face's 4.x SDPA copy k and v first (modeling_llama.py@00227283
// LlamaSdpaAttention: .contiguous() on CUDA with a causal_mask), so only a run without one.
// Traced for a training step's saved tensors; generate() (no grad) keeps the copies it was
// walked with until a trace of its kernels' inputs says otherwise.
constexpr bool repeat_is_view_of(const layer_context& ctx, const attention_path& path) {
  return path.repeats_kv && kv_heads_of(ctx.model) == 1 && is_fused(path.kernel) && !padded_row_mask(ctx.run) &&
         !ctx.ops.records_forward_liveness();
}

// repeat_kv: expand + reshape materialises heads/kv_heads copies of k and v over every key
// position; returns k's element count after it.
constexpr std::uint64_t repeat_kv_heads(const layer_context& ctx, qkv_tensors& qkv, const qkv_grads& grads,
                                        std::uint64_t kv_elements, std::uint64_t q_width, bool as_view) {
  op_writer& ops = ctx.ops;
  const dtype type = ops.precision().matmul;
  const std::uint64_t k_elements = detail::checked_mul(ctx.run.micro_batch, ctx.keys(), q_width);
  qkv.k = ops.tracked_if(grads.k, [&] { return ops.elementwise(qkv.k, k_elements, type); });
  qkv.v = ops.tracked_if(grads.v, [&] { return ops.elementwise(qkv.v, k_elements, type); });
  // torchtitan's repeat_kv reshapes (bs, slen, kv_heads, n_rep, head_dim) into (bs, slen, heads,
  // head_dim) (models/llama3/model/model.py @ f7084fc7): with one key/value head (a TP rank's
  // share of few) it merges a size-1 dim with the expand's stride-0 one, which reshape does as a
  // view. Hugging Face's repeat_kv (expand, reshape) and torchtune's (unsqueeze(2).expand(...)
  // .flatten(1, 2), modules/attention.py @ v0.6.1) do the same (traced: tools/trace/repeat_kv_saved.py,
  // head stride 0). Nothing is copied; the kernel saves the one-head k and v, and the backward
  // still sums a full-size gradient back onto them. Eager attention and SDPA's math kernel copy
  // them inside matmul instead, as many bytes as the repeat's copies written here.
  if (as_view)
    for (const tensor repeated : {qkv.k, qkv.v}) {
      op& view = ops.at(repeated);
      view.grad_out = view.out;
      view.grad_in = storage(type, kv_elements);
      view.out = {};
    }
  return k_elements;
}

// The model's self-attention over every token, output projection included.
constexpr tensor self_attention(const layer_context& ctx, tensor in) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const training_spec& run = ctx.run;
  const precision_policy& p = ops.precision();
  attention_widths w{.head_dim = head_dim_of(m), .kv_heads = kv_heads_of(m)};
  w.q = detail::checked_mul(m.heads, w.head_dim);
  w.kv = detail::checked_mul(w.kv_heads, w.head_dim);

  // With none of q, k and v needing a gradient, nothing up to the output projection is recorded.
  const qkv_grads grads = qkv_grads_of(ctx);
  const std::size_t untracked = grads.any() ? 0 : ops.untracked_from();
  qkv_tensors qkv = project_qkv(ctx, in, w);
  const auto q_elements = detail::checked_mul(ctx.tokens, w.q);
  auto k_elements = detail::checked_mul(ctx.tokens, w.kv);
  if (m.qk_norm == qk_norm_kind::per_head) {
    // modeling_qwen3.py / modeling_gemma3.py (transformers v4.51): q_norm, k_norm over head_dim.
    // Cohere's CohereLayerNorm((heads, head_dim)) holds a weight row per head
    // (models/cohere/modular_cohere.py@03ea97ae CohereAttention).
    const bool weight_per_head = m.norm == norm_kind::layernorm_fp32_python;
    qkv.q = ops.tracked_if(grads.q, [&] {
      return norm(ctx, qkv.q, {.width = w.head_dim, .rows = detail::checked_mul(ctx.tokens, m.heads),
                               .weight_rows = weight_per_head ? m.heads : 1, .site = norm_site::qk});
    });
    qkv.k = ops.tracked_if(grads.k, [&] {
      return norm(ctx, qkv.k, {.width = w.head_dim, .rows = detail::checked_mul(ctx.tokens, w.kv_heads),
                               .weight_rows = weight_per_head ? w.kv_heads : 1, .site = norm_site::qk});
    });
  } else if (m.qk_norm == qk_norm_kind::full_width) {
    // modeling_olmo2.py (v4.51): q_norm over heads*head_dim, k_norm over kv_heads*head_dim.
    qkv.q = ops.tracked_if(grads.q, [&] { return norm(ctx, qkv.q, {.width = w.q, .rows = ctx.tokens, .site = norm_site::qk}); });
    qkv.k = ops.tracked_if(grads.k, [&] { return norm(ctx, qkv.k, {.width = w.kv, .rows = ctx.tokens, .site = norm_site::qk}); });
  }
  if (m.value_norm) {
    // Gemma3nTextAttention.v_norm (modeling_gemma3n.py@b87ecf8c): Gemma3nRMSNorm(with_scale=False)
    // over head_dim; its scale is a 0-dim buffer, so nothing is kept for a weight gradient.
    qkv.v = unscaled_rms_norm(ctx, qkv.v, {.width = w.head_dim, .rows = detail::checked_mul(ctx.tokens, w.kv_heads),
                                          .site = norm_site::qk});
  }
  const attention_path path = attention_path_of(m, run);
  const bool repeat_is_view = repeat_is_view_of(ctx, path);
  tensor v_heads = qkv.v;
  const bool kv_before_rope = path.repeats_kv && litgpt_expands_kv_before_rope(m, run);
  if (kv_before_rope) {
    // q.reshape (litgpt/model.py line 255 @ b0ea1772) copies the (B, groups, q_per_kv, T, hs) view
    // unless there is one group; then k and v to every query head.
    if (w.kv_heads > 1) qkv.q = ops.tracked_if(grads.q, [&] { return ops.elementwise(qkv.q, q_elements, p.matmul); });
    k_elements = repeat_kv_heads(ctx, qkv, grads, k_elements, w.q, repeat_is_view);
  }
  bytes rope_backward_copies{};
  if (m.positions == position_kind::rotary && run.liger_rope) {
    const liger_rotated rotated = liger_rope(ops, qkv.q, qkv.k, q_elements, k_elements, p.matmul, m.fused_qkv);
    qkv.q = rotated.q;
    qkv.k = rotated.k;
    rope_backward_copies = rotated.backward_copies;
  } else if (m.positions == position_kind::rotary) {
    // q*cos + rotate_half(q)*sin makes new q and k tensors (modeling_llama.py apply_rotary_pos_emb).
    const tensor q_unrotated = qkv.q;
    const tensor k_unrotated = qkv.k;
    qkv.q = ops.tracked_if(grads.q, [&] { return ops.elementwise(qkv.q, q_elements, p.matmul); });
    qkv.k = ops.tracked_if(grads.k, [&] { return ops.elementwise(qkv.k, k_elements, p.matmul); });
    const bool whole_head = m.rotary_fraction == 1.0 && !has_latent_attention(m) && !m.rotary_complex;
    if (ops.records_forward_liveness()) {
      if (m.rotary_stacked_pairs)
        stacked_rotary_temporaries(ops, q_unrotated, qkv.q, qkv.k);
      else
        rotary_temporaries(ops, q_unrotated, qkv.q, qkv.k, whole_head);
    } else if (!m.rotary_stacked_pairs && !m.rotary_chunked_halves && whole_head) {
      // Training makes the same products one by one (autograd saves only cos and sin); they die
      // inside the rotation, before any peak the estimators take, so fwd_temp leaves them out, but
      // the training walk replays them (allocator/step_events.hpp): the qwen2moe H100 history
      // (5.17 frames) has +8 +4 +8 -4 +8 -8 +8 -8 -8 MiB per q at 2 x 1024 x 2048.
      ops.at(qkv.q).temporaries = forward_temporaries::rotary_half;
      ops.at(qkv.k).temporaries = forward_temporaries::rotary_half;
      // Both unrotated tensors are apply_rotary_pos_emb's arguments: alive until it returns.
      ops.bound_until(q_unrotated, qkv.k);
      ops.bound_until(k_unrotated, qkv.k);
    }
  }
  if (m.positions == position_kind::rotary) {
    if (m.rotary_complex && p.matmul != dtype::fp32) {
      // modeling_llama4.py@000c33fd apply_rotary_emb: view_as_complex(x.float()) * freqs_cis, then
      // .type_as(x): the fp32 copy and the complex product (fp32-sized) exist beside each output.
      ops.at(qkv.q).fwd_temp += storage(dtype::fp32, q_elements) * 2u;
      ops.at(qkv.k).fwd_temp += storage(dtype::fp32, k_elements) * 2u;
    }
    if (m.rotary_cache_per_layer) {
      // The layer's caches cast to the activations' dtype (a copy when they differ), then
      // cos[position_ids] and sin[position_ids]: (1, s, head_dim) each, position_ids being
      // arange(s).unsqueeze(0); both multiplications save them (counted once, on q's op).
      const bytes tables = storage(p.matmul, detail::checked_mul(2, run.seq_len, w.head_dim));
      op& rotated = ops.at(qkv.q);
      rotated.extra_saved += tables;
      if (p.param != p.matmul) rotated.fwd_temp += tables;
    }
    if (m.rotary_rows_per_layer) {
      // torch.cat of the sections of the (3, b, s, head_dim) cos and sin into new (b, 1, s,
      // head_dim) tensors in the hidden states' dtype, which q*cos and rotate_half(q)*sin save
      // (modeling_qwen2_5_vl.py@00b676f8 apply_multimodal_rotary_pos_emb; counted on q's op).
      ops.at(qkv.q).extra_saved += storage(ops.stream_dtype(), detail::checked_mul(2, ctx.tokens, w.head_dim));
    }
  }
  if (m.qk_norm == qk_norm_kind::l2 && m.positions == position_kind::rotary) {
    // Llama4TextAttention.forward (modeling_llama4.py@000c33fd): qk_norm after RoPE, on the RoPE layers.
    qkv.q = l2_norm(ctx, qkv.q, {.width = w.head_dim, .rows = detail::checked_mul(ctx.tokens, m.heads)});
    qkv.k = l2_norm(ctx, qkv.k, {.width = w.head_dim, .rows = detail::checked_mul(ctx.tokens, w.kv_heads)});
  }
  if (m.nope_attention_temperature && m.positions == position_kind::none) {
    // (query_states * attn_scales).to(query_states.dtype) (modeling_llama4.py@000c33fd): the fp32
    // (1, s, 1, 1) scales, expanded over the batch, promote the product to fp32; the mul saves the
    // scales for q's gradient, and a 16-bit model casts the product back.
    const op scale{.kind = op_kind::elementwise, .extra_saved = storage(dtype::fp32, run.seq_len)};
    const tensor scaled = ops.emit(scale, q_elements, dtype::fp32);
    ops.reads(qkv.q, scaled);
    qkv.q = p.matmul == dtype::fp32 ? scaled : ops.elementwise(scaled, q_elements, p.matmul);
  }
  // What a generate() cache takes (DynamicLayer.update): in a prefill the keys after qk-norm and
  // RoPE and the values as they are (views of a fused projection keep all of it); with keys
  // already cached, torch.cat([cached, new]) of each, over every key position.
  const std::uint64_t keys = ctx.keys();
  if (ctx.cached_keys > 0) {
    k_elements = detail::checked_mul(run.micro_batch, keys, w.kv);
    qkv.k = ops.elementwise(qkv.k, k_elements, p.matmul);
    qkv.v = ops.elementwise(qkv.v, k_elements, p.matmul);
  }
  if (ops.records_forward_liveness()) {
    ops.at(qkv.k).kv_cached = true;
    ops.at(qkv.v).kv_cached = true;
  } else if (keeps_cache_in_training(m, run)) {
    // A training graph marks them only when the run keeps the cache (estimate/activations.hpp
    // kept_until_loss), and not where the legacy eager code caches the very tensors its matmuls
    // save, which the eager piece below writes as its saved copies: OPTAttention before its
    // refactor (the release attention_clamp_before names) caches _shape(...).contiguous() copies
    // of k and v that bmm saves through views (modeling_opt.py@v4.32); GPT-NeoX's _attn (before
    // mask_buffers_per_layer_before) caches the torch.cat of the rotated and pass-through key,
    // which baddbmm saves through a view (modeling_gpt_neox.py@v4.32); its v stays a view of
    // query_key_value's output.
    const bool eager = !is_fused(path.kernel);
    const bool legacy_opt = eager && run.transformers_version < m.attention_clamp_before;
    const bool legacy_neox = eager && run.transformers_version < m.mask_buffers_per_layer_before;
    ops.at(qkv.k).kv_cached = !legacy_opt && !legacy_neox;
    ops.at(qkv.v).kv_cached = !legacy_opt;
  }
  // repeat_kv's inputs, which a fused kernel saves in place of its outputs when those are views
  // (keys expanded before RoPE are saved as RoPE made them).
  const tensor k_heads = qkv.k;
  if (!kv_before_rope) v_heads = qkv.v;
  if (path.repeats_kv && !kv_before_rope) k_elements = repeat_kv_heads(ctx, qkv, grads, k_elements, w.q, repeat_is_view);
  const auto batch_heads =
      detail::checked_mul(run.micro_batch, m.heads, detail::quantity{"attention scores (micro_batch x heads x seq_len^2)"});
  const auto scores = detail::checked_mul(batch_heads, run.seq_len, keys,
                                          detail::quantity{"attention scores (micro_batch x heads x seq_len^2)"});
  tensor context{};
  if (is_fused(path.kernel)) {
    // Flash / memory-efficient SDPA saves q, k, v, the output and a per-row fp32
    // log-sum-exp (aten/src/ATen/native/transformers/attention.cpp).
    op core{.kind = op_kind::attention,
            .extra_saved = storage(dtype::fp32, detail::checked_mul(batch_heads, run.seq_len))};
    if (m.attention_sinks) {
      // A fused kernel that takes the sinks (transformers' hub flash kernel: s_aux) owns them here.
      core.weight = {m.heads, 1, 1};
      core.role = param_role::vector;
      core.frozen = ctx.adapters.base.frozen;
    }
    if (padded_row_mask(run)) {
      const bytes bias = memory_efficient_mask_bias(ctx, core);
      // Without grad nothing is saved: the additive copy is made before the kernel's output and
      // freed after the call (the 5.17 H100 frames: +32 +64 -32 MiB per layer of Llama-2-7B at
      // 4 x 2048), which the generate() walk replays when no padding copy is made.
      if (ops.records_forward_liveness() && ctx.keys() % 16 == 0 && bool_attention_mask(run)) {
        core.fwd_temp += bias;
        core.temporaries = forward_temporaries::mask_before_output;
      } else {
        core.extra_saved += bias;
      }
    }
    add_ring_attention_buffers(core, run, q_elements, k_elements, p.matmul);
    context = ops.emit(core, q_elements, p.matmul);
    ops.keep(qkv.q, context);
    ops.keep(repeat_is_view ? k_heads : qkv.k, context);
    ops.keep(repeat_is_view ? v_heads : qkv.v, context);
    ops.keep_own_output(context);
  } else if (ops.records_forward_liveness() && m.attention_sinks) {
    context = sink_attention_without_grad(ctx, qkv, q_elements, scores, detail::checked_mul(batch_heads, run.seq_len));
  } else if (ops.records_forward_liveness()) {
    context = eager_attention_without_grad(ctx, qkv, q_elements, scores);
  } else {
    context = eager_attention(ctx, qkv, path, q_elements, k_elements, w.kv, scores,
                              detail::checked_mul(batch_heads, run.seq_len), grads);
    // SDPA's math path adds the mask made additive per call (convert_boolean_attn_mask, above)
    // in place to the scores: it lives through the call. Eager attention adds the float mask
    // the model made once (decoder_stack.hpp base_model_held).
    if (padded_row_mask(run) && run.attention != attention_impl::eager)
      ops.at(context).fwd_temp += storage(p.matmul, detail::checked_mul(run.micro_batch, run.seq_len, keys));
  }
  // Liger's rope_backward runs on the gradients the attention hands back (liger_rope.hpp).
  ops.at(context).bwd_temp += rope_backward_copies;
  // Heads are merged with transpose + reshape: a contiguous copy the output projection saves.
  // torchtitan (output.transpose(1, 2).contiguous(), models/llama3/model/model.py @ f7084fc7)
  // gets the fused kernels' output as a transposed view of a (batch, seq, heads, head_dim)
  // buffer (aten/src/ATen/native/transformers/cuda/attention.cu _scaled_dot_product_flash_attention_cuda:
  // the output is allocated in q's untransposed layout), so .contiguous() copies nothing and wo saves it.
  // Hugging Face's q is the same transposed view of its projection, which the elementwise RoPE and
  // qk-norm keep (TensorIterator follows the first input's layout), and sdpa_attention_forward's
  // transpose(1, 2).contiguous() (integrations/sdpa_attention.py, v5.17.0) is then a view too: the
  // H100 listing of qwen3, gemma3 shows no separate o_proj input
  // (docs/research/gpu/saved_tensors_families_h100.json).
  // A fused qkv projection (GPT-2's c_attn, Phi-3's qkv_proj) gives q as a slice with the fused
  // row stride: the H100 steps of GPT-2 and Phi-3 keep a q-sized tensor per layer more than this
  // merge leaves (docs/gpu-measurements.md), so for them the merge stays a copy.
  const bool merged_in_place =
      is_fused(path.kernel) &&
      (run.framework == framework_kind::torchtitan ||
       (run.framework == framework_kind::hf && m.impl == implementation::hf_transformers && !m.fused_qkv));
  const tensor merged = merged_in_place ? context : ops.elementwise(context, q_elements, p.matmul);
  if (!grads.any()) ops.track_from(untracked);
  return projection(ops, ctx.adapters, merged,
                    {.rows = ctx.tokens, .in_features = w.q, .out_features = m.hidden, .bias = m.attn_out_bias,
                     .role = static_cast<lora_modules>(lora_target::o)},
                    ctx.adapters.adapts(lora_target::o), grads.any());
}

// ---- T5 ---------------------------------------------------------------------------

// The first block's relative_attention_bias table of a T5 stack (its lookup keeps the
// s x s bucket indices); the bias it makes is held by the stack (encoder_decoder recipe).
constexpr void relative_attention_bias_table(op_writer& ops, const model_spec& model, std::uint64_t seq) {
  const op table{.kind = op_kind::embedding,
                 .weight = {model.relative_attention_buckets, model.heads, 1},
                 .role = param_role::embedding,
                 .extra_saved = storage(dtype::int64, detail::checked_mul(seq, seq))};
  ops.emit(table, 0, ops.precision().param);
}

// T5Attention.forward is always eager (T5 has no SDPA or flash path, whatever
// run.attention says): q, k, v projections; matmul(q, k^T) on transposed views
// copies both into contiguous tensors it saves; `scores += position_bias` in place (no
// scaling); softmax(scores.float()).type_as(scores); dropout; matmul with v (a copy
// again); transpose + contiguous; o. Cross-attention reads k and v from `kv_in` (the
// encoder output): `query_len` and `key_len` tokens per sequence, `inner` = heads x d_kv.
constexpr tensor t5_attention(const layer_context& ctx, tensor in, tensor kv_in, std::uint64_t query_len,
                              std::uint64_t key_len, std::uint64_t inner) {
  op_writer& ops = ctx.ops;
  const precision_policy& p = ops.precision();
  const auto batch = ctx.run.micro_batch;
  const auto hidden = ctx.model.hidden;
  const auto rows_q = detail::checked_mul(batch, query_len);
  const auto rows_k = detail::checked_mul(batch, key_len);
  const tensor q = ops.linear(in, {.rows = rows_q, .in_features = hidden, .out_features = inner}, ctx.adapters.base);
  ops.linear(kv_in, {.rows = rows_k, .in_features = hidden, .out_features = inner}, ctx.adapters.base);
  ops.linear(kv_in, {.rows = rows_k, .in_features = hidden, .out_features = inner}, ctx.adapters.base);
  const auto scores = detail::checked_mul(detail::checked_mul(batch, ctx.model.heads), query_len, key_len);
  const tensor q_copy = ops.elementwise(q.elements, p.matmul);
  const tensor k_copy = ops.elementwise(detail::checked_mul(rows_k, inner), p.matmul);
  const tensor raw = ops.emit(op{.kind = op_kind::attention, .recomputed_by_selective = true}, scores, p.matmul);
  ops.keep(q_copy, raw);
  ops.keep(k_copy, raw);
  if (raw.type != dtype::fp32) ops.at(ops.elementwise(scores, dtype::fp32)).recomputed_by_selective = true;  // scores.float()
  tensor probs = ops.emit(op{.kind = op_kind::attention, .recomputed_by_selective = true}, scores, dtype::fp32);
  ops.keep_own_output(probs);
  if (p.matmul != dtype::fp32) {
    probs = ops.elementwise(scores, p.matmul);  // .type_as(scores)
    ops.at(probs).recomputed_by_selective = true;
  }
  tensor dropped = ops.dropout(probs, ctx.dropout.attention_probs);
  ops.at(dropped).recomputed_by_selective = true;
  dropped = ops.matmul_input(dropped);
  const tensor v_copy = ops.elementwise(detail::checked_mul(rows_k, inner), p.matmul);
  const tensor context = ops.emit(op_kind::attention, q.elements, p.matmul);
  ops.keep(dropped, context);
  ops.keep(v_copy, context);
  const tensor merged = ops.elementwise(q.elements, p.matmul);
  return ops.linear(merged, {.rows = rows_q, .in_features = inner, .out_features = hidden}, ctx.adapters.base);
}

}  // namespace memscale::graph_layers
