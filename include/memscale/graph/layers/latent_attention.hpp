// memscale/graph/layers/latent_attention.hpp: multi-head latent attention (DeepSeek-V2 and V3,
// arXiv 2405.04434 sec. 2.1) as transformers' eager path runs it in training
// (models/deepseek_v3/modeling_deepseek_v3.py@00b676f8 DeepseekV3Attention.forward; V2's
// modeling_deepseek_v2.py@0233e509 differs only in how it rotates): q from q_proj, or from
// q_a_proj -> q_a_layernorm -> q_b_proj; one kv_a_proj_with_mqa to the latent and the shared
// rotary key, kv_a_layernorm on the latent, kv_b_proj to every head's nope key and value.
#pragma once

#include <cstdint>

#include "memscale/attention_kernel.hpp"
#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/adapters.hpp"
#include "memscale/graph/layers/attention.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/norms.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/tensor.hpp"
#include "memscale/model.hpp"
#include "memscale/precision_policy.hpp"

namespace memscale::graph_layers {

// The attention's output over every token, o_proj included. Every tensor kept follows from the
// forward's views (derivatives.yaml: cat and split keep nothing, mm keeps its inputs):
// - q_proj / q_b_proj's output is split into views; the nope part goes into cat (nothing kept),
//   the rope part is rotated into a new tensor (the rotation keeps only the shared cos and sin),
//   so the projection's output is freed once q is concatenated;
// - kv_a_proj_with_mqa's output is split; kv_a_layernorm reads the latent as a view, so what the
//   norm saves of its input (pow and the first mul, an fp32 input) keeps the whole projection;
// - kv_b_proj's output is split into the nope key (into cat) and the value, a strided view the
//   context matmul copies into a contiguous tensor it saves;
// - torch.cat((q_pass, q_rot)) and torch.cat((k_pass, k_rot.expand(...))) give contiguous
//   (b, heads, s, nope + rope) tensors, which matmul(q, k^T) reads as they are and saves: no
//   further copies, unlike a transposed projection's q and k;
// - the scores, softmax in fp32 (cast back), dropout and the context as eager_attention_forward
//   makes them; transpose(1, 2).contiguous() copies the context, which o_proj saves;
// - a fused kernel (SDPA's flash or memory-efficient, flash_attention_2) instead saves q, k, v,
//   its output and an fp32 log-sum-exp per row, as self_attention's fused branch. SDPA reads the
//   value as the strided view of kv_b_proj's output, which it keeps whole, and its output is
//   merged into heads as a view (attention.hpp); flash_attention_2 pads the value to
//   qk_head_dim when they differ (F.pad: a new tensor the kernel saves), attends at that width
//   and slices the output back, a strided view that reshape copies for o_proj.
// Under LoRA each projection PEFT wraps (lora.hpp: q_proj or q_a_proj and q_b_proj,
// kv_a_proj_with_mqa, kv_b_proj, o_proj) adds its adapter (adapters.hpp lora): the frozen base
// keeps no input, the adapter keeps lora_A's input (dropout(x), cast to the adapters' dtype) and
// lora_A's output, and the split views above read the sum result + lora_B(...) * scaling.
constexpr tensor latent_attention(const layer_context& ctx, tensor in) {
  using detail::checked_mul;
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const precision_policy& p = ops.precision();
  const adapter_plan& adapters = ctx.adapters;
  const std::uint64_t tokens = ctx.tokens;
  const std::uint64_t qk_head_dim = detail::checked_add(m.qk_nope_head_dim, m.qk_rope_head_dim);
  const std::uint64_t q_width = checked_mul(m.heads, qk_head_dim);
  const std::uint64_t v_width = checked_mul(m.heads, m.v_head_dim);
  const std::uint64_t q_elements = checked_mul(tokens, q_width);

  // q_proj (bias=False), or q_a_proj (bias=attention_bias) -> q_a_layernorm -> q_b_proj (bias=False).
  tensor q{};
  if (m.q_lora_rank == 0) {
    q = projection(ops, adapters, in,
                   {.rows = tokens, .in_features = m.hidden, .out_features = q_width,
                    .role = static_cast<lora_modules>(lora_target::q)},
                   adapters.adapts(lora_target::q));
  } else {
    const tensor q_latent = projection(
        ops, adapters, in,
        {.rows = tokens, .in_features = m.hidden, .out_features = m.q_lora_rank, .bias = m.qkv_bias,
         .role = static_cast<lora_modules>(lora_target::q_a)},
        adapters.adapts(lora_target::q_a));
    const tensor q_normed = norm(ctx, q_latent, {.width = m.q_lora_rank, .rows = tokens});
    q = projection(ops, adapters, q_normed,
                   {.rows = tokens, .in_features = m.q_lora_rank, .out_features = q_width,
                    .role = static_cast<lora_modules>(lora_target::q_b)},
                   adapters.adapts(lora_target::q_b));
  }
  // kv_a_proj_with_mqa (bias=attention_bias) to kv_lora_rank + qk_rope_head_dim per token.
  const tensor compressed = projection(
      ops, adapters, in,
      {.rows = tokens, .in_features = m.hidden, .out_features = detail::checked_add(m.kv_lora_rank, m.qk_rope_head_dim),
       .bias = m.qkv_bias, .role = static_cast<lora_modules>(lora_target::kv_a)},
      adapters.adapts(lora_target::kv_a));
  tensor latent = compressed;  // the k_pass view: kv_lora_rank of each row, the projection's storage
  latent.elements = checked_mul(tokens, m.kv_lora_rank);
  const tensor latent_normed = norm(ctx, latent, {.width = m.kv_lora_rank, .rows = tokens});
  const tensor kv = projection(
      ops, adapters, latent_normed,
      {.rows = tokens, .in_features = m.kv_lora_rank, .out_features = checked_mul(m.heads, detail::checked_add(m.qk_nope_head_dim, m.v_head_dim)),
       .role = static_cast<lora_modules>(lora_target::kv_b)},
      adapters.adapts(lora_target::kv_b));
  // The rotated query and the one rotated key row per token (k_rot: (b, 1, s, rope)), then the
  // two concatenations (the key's rotary part expanded to every head without a copy).
  const tensor q_rotated = ops.elementwise(q, checked_mul(tokens, m.heads, m.qk_rope_head_dim), q.type);
  const tensor k_rotated = ops.elementwise(compressed, checked_mul(tokens, m.qk_rope_head_dim), compressed.type);
  const tensor query = ops.elementwise(q_rotated, q_elements, p.matmul);
  ops.reads(q, query);
  const tensor key = ops.elementwise(k_rotated, q_elements, p.matmul);
  ops.reads(kv, key);

  // What a generate() cache takes (DynamicLayer.update, after the concatenations): in a prefill the
  // key and the value as they are (the value a view that keeps kv_b_proj's output whole); with keys
  // already cached, torch.cat([cached, new]) of each over every key position.
  const std::uint64_t keys = ctx.keys();
  tensor cached_key = key;
  tensor cached_value = kv;
  if (ctx.cached_keys > 0) {
    cached_key = ops.elementwise(key, checked_mul(ctx.run.micro_batch, keys, q_width), p.matmul);
    cached_value = ops.elementwise(kv, checked_mul(ctx.run.micro_batch, keys, v_width), p.matmul);
  }
  if (ops.records_forward_liveness()) {
    ops.at(cached_key).kv_cached = true;
    ops.at(cached_value).kv_cached = true;
  }

  const auto batch_heads = checked_mul(ctx.run.micro_batch, m.heads,
                                       detail::quantity{"attention scores (micro_batch x heads x seq_len^2)"});
  const linear_shape out_projection{.rows = tokens, .in_features = v_width, .out_features = m.hidden, .bias = m.attn_out_bias,
                                    .role = static_cast<lora_modules>(lora_target::o)};
  if (is_fused(attention_kernel_of(m, ctx.run))) {
    const bool padded = ctx.run.attention == attention_impl::flash && m.v_head_dim != qk_head_dim;
    const tensor value =
        padded ? ops.elementwise(cached_value, checked_mul(ctx.run.micro_batch, keys, q_width), p.matmul) : cached_value;
    const op core{.kind = op_kind::attention, .extra_saved = storage(dtype::fp32, checked_mul(batch_heads, ctx.run.seq_len))};
    const tensor context = ops.emit(core, padded ? q_elements : checked_mul(tokens, v_width), p.matmul);
    ops.keep(query, context);
    ops.keep(cached_key, context);
    ops.keep(value, context);
    ops.keep_own_output(context);
    const tensor merged = padded ? ops.elementwise(context, checked_mul(tokens, v_width), p.matmul) : context;
    return projection(ops, adapters, merged, out_projection, adapters.adapts(lora_target::o));
  }
  const auto scores = checked_mul(batch_heads, ctx.run.seq_len, keys,
                                  detail::quantity{"attention scores (micro_batch x heads x seq_len^2)"});
  if (ops.records_forward_liveness()) {
    // eager_attention_forward without grad (attention.hpp); torch.matmul(attn_weights, value_states)
    // reshapes a strided value into a contiguous copy while it runs: the prefill's view of kv_b_proj's
    // output, not the cache's torch.cat result.
    const tensor context = eager_attention_without_grad(ctx, {.q = query, .k = cached_key, .v = cached_value, .projection = {}},
                                                        checked_mul(tokens, v_width), scores);
    if (ctx.cached_keys == 0) ops.at(context).fwd_temp += storage(p.matmul, checked_mul(tokens, v_width));
    const tensor merged = ops.elementwise(context, checked_mul(tokens, v_width), p.matmul);
    return projection(ops, adapters, merged, out_projection, adapters.adapts(lora_target::o));
  }
  const tensor qk = ops.emit(op{.kind = op_kind::attention, .recomputed_by_selective = true}, scores, p.matmul);
  ops.keep(query, qk);
  ops.keep(key, qk);
  // softmax(dtype=float32) keeps its output; .to(query.dtype) casts it back.
  const dtype prob_type = (m.softmax_fp32 || (p.autocast && ctx.run.device == device_kind::cuda)) ? dtype::fp32 : p.matmul;
  tensor probs = ops.emit(op{.kind = op_kind::attention, .recomputed_by_selective = true}, scores, prob_type);
  ops.keep_own_output(probs);
  if (prob_type != p.matmul) {
    probs = ops.elementwise(scores, p.matmul);
    ops.at(probs).recomputed_by_selective = true;
  }
  tensor dropped = ops.dropout(probs, ctx.dropout.attention_probs);
  ops.at(dropped).recomputed_by_selective = true;
  dropped = ops.matmul_input(dropped);
  const tensor value = ops.elementwise(kv, checked_mul(tokens, v_width), p.matmul);  // the value view made contiguous
  const tensor context = ops.emit(op_kind::attention, checked_mul(tokens, v_width), p.matmul);
  ops.keep(dropped, context);
  ops.keep(value, context);
  const tensor merged = ops.elementwise(context, checked_mul(tokens, v_width), p.matmul);
  return projection(ops, adapters, merged, out_projection, adapters.adapts(lora_target::o));
}

}  // namespace memscale::graph_layers
