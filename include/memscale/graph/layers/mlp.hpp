// memscale/graph/layers/mlp.hpp: the feed-forward layers: dense (two matrices), gated
// (three), mixture of experts with an optional shared expert, and T5's DenseActDense.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/activations.hpp"
#include "memscale/graph/layers/adapters.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/gpt_oss_mxfp4.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/tensor.hpp"
#include "memscale/lora.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale::graph_layers {

// The rows an MLP processes and how many copies of its weights exist: every token and one
// copy, or (inside a mixture of experts) tokens x top-k rows over `experts` copies.
struct mlp_rows {
  std::uint64_t rows = 0;
  std::uint64_t copies = 1;
};

// One expert matrix over the routed rows. With model.expert_weight_copies the experts are
// indexed by a 1-element index tensor (modeling_gpt_oss.py@00d4b3d2 GptOssExperts.forward,
// training branch: `self.gate_up_proj[expert_idx]`): advanced indexing copies each hit
// expert's weight, and the matmul saves the copy. Hit experts: at most min(experts, rows).
// Under autocast over fp32 weights the copy is fp32 and the matmul saves its 16-bit cast, which the
// linear's autocast weight copy already counts (for every expert: the upper side when fewer are hit).
// From transformers 5.0 a Hugging Face MoE block runs its experts through the experts interface
// (PR #42697), whose grouped_mm backend (the one the H100 records of 5.17 report in detail.info
// for every MoE family) orders the routed rows by expert and multiplies them by the 3-D
// parameters whole (integrations/moe.py@8b584a67 grouped_mm_experts_forward). Experts run in
// one pass (GraniteMoE's ParallelExperts) keep their own code.
constexpr bool grouped_mm_experts(const layer_context& ctx) {
  return ctx.model.experts > 0 && !ctx.model.experts_in_one_pass && ctx.run.transformers_version >= 500 &&
         ctx.model.impl == implementation::hf_transformers && ctx.run.framework == framework_kind::hf;
}

// Experts whose parameters are one 3-D tensor per matrix and layer, [experts, out, in], with
// a gated MLP's gate and up projections one tensor (gate_up_proj [E, 2F, H]): every Hugging
// Face MoE from transformers 5.0 (the experts interface above: OlmoeExperts, Qwen3MoeExperts,
// Qwen2MoeExperts, PhimoeExperts in 5.17.0, the release of the H100 records; their histories,
// docs/data/gpu_allocator_history/family-olmoe-*: one 512 MiB gate_up_proj and one 256 MiB
// down_proj per layer), gpt-oss in every release (modeling_gpt_oss.py@00d4b3d2 GptOssExperts:
// gate_up_proj [E, H, 2F] and its bias [E, 2F]) and GraniteMoE's ParallelExperts
// (modeling_granitemoe.py GraniteMoeParallelExperts.weight [E, out, in], input_linear 2F wide).
// Before 5.0 the others keep an nn.ModuleList of per-expert nn.Linear gate_proj, up_proj,
// down_proj (modeling_olmoe.py@00dcc6dd OlmoeMLP).
constexpr bool stacked_expert_parameters(const model_spec& m, const training_spec& run) {
  if (m.experts == 0) return false;
  const bool experts_interface = !m.experts_in_one_pass && run.transformers_version >= 500 &&
                                 m.impl == implementation::hf_transformers && run.framework == framework_kind::hf;
  return experts_interface || m.experts_in_one_pass || m.expert_weight_copies;
}

// Experts held as bare nn.Parameters, not nn.Linear modules: the stacked ones above and Llama 4's
// in every release (modeling_llama4.py@000c33fd Llama4TextExperts: gate_up_proj and down_proj are
// 3-D nn.Parameters). The quantisers that replace nn.Linear modules (bitsandbytes, GPTQ, AWQ) make
// nothing of them (inference/weights.hpp, inference/generate_peak.hpp check_inference).
constexpr bool expert_parameters(const model_spec& m, const training_spec& run) {
  return stacked_expert_parameters(m, run) || m.experts_on_every_token;
}

// Experts that are 3-D parameters in every release, whatever the checkpoint: gpt-oss's
// GptOssExperts, GraniteMoE's ParallelExperts and Llama 4's Llama4TextExperts.
constexpr bool experts_parameters_in_every_release(const model_spec& m) {
  return m.experts > 0 && (m.expert_weight_copies || m.experts_in_one_pass || m.experts_on_every_token);
}

// From transformers 5.0 the experts interface's 3-D parameters are filled from checkpoints that
// store one tensor per expert: the family's converters stack each expert's matrix and concatenate
// gate and up (conversion_mapping.py@000c33fd MergeModulelist, Concatenate: Mixtral, PhiMoE,
// Qwen2/3-MoE, OLMoE, DeepSeek-V2/V3, ...). The families whose experts are parameters in every
// release load their checkpoints' 3-D tensors as they are.
constexpr bool experts_merged_at_load(const model_spec& m, const training_spec& run) {
  return stacked_expert_parameters(m, run) && !experts_parameters_in_every_release(m);
}

// The experts' module is one MODULES_TO_PATCH_FOR_QUANTIZATION lists: the quantizer of a
// pre-quantised bitsandbytes or compressed-tensors checkpoint swaps Llama4TextExperts for
// SequentialLlama4TextExperts, one Llama4TextMLP of nn.Linear gate, up and down projections per
// expert, before the weights load (quantizers/base.py@302dcb5e _convert_model_for_quantization,
// pre_quantized only; the 5.x base.py keeps the table, and Llama4TextExperts stays that bmm
// module in modeling_llama4.py@000c33fd).
constexpr bool experts_swapped_for_prequantized(const model_spec& m) { return m.experts > 0 && m.experts_on_every_token; }

// grouped_mm copies no expert's weight (docs/source/en/experts_interface.md@0409b2f0: "avoids
// duplicating expert parameters"): its matmul saves the parameter itself.
constexpr bool copies_expert_weights(const layer_context& ctx) {
  return ctx.model.expert_weight_copies && !grouped_mm_experts(ctx);
}

constexpr tensor expert_projection(const layer_context& ctx, tensor in, const linear_shape& shape, bool adapted) {
  op_writer& ops = ctx.ops;
  if (!copies_expert_weights(ctx) || shape.copies <= 1)
    return projection(ops, ctx.adapters, in, shape, adapted);
  const auto hit = shape.copies < shape.rows ? shape.copies : shape.rows;
  const tensor copy =
      ops.elementwise(detail::checked_mul(hit, shape.in_features, shape.out_features), ops.precision().param);
  const tensor y = ops.linear(in, shape, ctx.adapters.base_for(shape.role));
  if (!ops.precision().casts_weights()) ops.keep(copy, y);
  return adapted ? lora(ops, ctx.adapters, in, y, shape) : y;
}

// Liger's SwiGLU (LigerSiLUMulFunction, ops/swiglu.py, v0.5.10 @ 44a8f2fb): silu(a) * b in one
// kernel that saves a and b only (not silu(a)). Its GEGLU (LigerGELUMulFunction, ops/geglu.py
// @ 44a8f2fb: gelu_tanh(a) * b) allocates, saves and writes back the same tensors. Its backward writes da and db into a and b, so
// it makes no new gradient, and a (the gate's output) holds da until the gate's projection reads
// it: kept past the up projection's backward, which runs before the gate's.
constexpr tensor liger_silu_mul(op_writer& ops, tensor gate, tensor up) {
  const tensor product = ops.emit(op_kind::activation, up.elements, up.type);
  ops.at(product).grad_in = {};
  ops.keep(gate, product);
  ops.keep(up, product);
  ops.keep(gate, up);
  return product;
}

// Phi3MLP.forward (models/phi3/modeling_phi3.py@43c2b481; Glm4MLP the same): one gate_up_proj
// makes a [rows, 2F] output, chunk(2, dim=-1) takes gate and up as views of it, and
// up * act(gate) follows. The activation saves its input view and the mul the up view, so the
// one 2F output is kept whole, and the backward gives it one 2F gradient. As one block it is
// what the allocator sees: its segment later holds a parameter gradient that two F-wide
// halves could not.
// grouped_mm_experts_forward (integrations/moe.py@8b584a67) runs a stacked expert MLP the same way
// over the routed rows: one gate_up grouped_mm of [rows, 2F], _default_apply_gate's chunk, act and
// mul, the down grouped_mm. Each grouped_mm output is followed by a new tensor of its size that
// the rest uses, and then freed (moe.py:445 in the 5.17 frames of frames-infer-olmoe; the
// family-qwen2moe H100 history with frames has the same for gate_up and down in training, and each
// copy's backward makes its own gradient): `copies_outputs`.
constexpr tensor fused_gate_up_mlp(const layer_context& ctx, tensor in, std::uint64_t ffn, const mlp_rows& shape,
                                   bool adapt_down, bool copies_outputs = false) {
  op_writer& ops = ctx.ops;
  const bool bias = ctx.model.mlp_bias;
  const auto hidden = ctx.model.hidden;
  const tensor projected = expert_projection(ctx, in,
                                             {.rows = shape.rows, .in_features = hidden,
                                              .out_features = detail::checked_mul(ffn, 2), .copies = shape.copies,
                                              .bias = bias, .role = lora_target::gate | lora_target::up},
                                             false);
  const tensor gate_up = copies_outputs ? ops.elementwise(projected, projected.elements, projected.type) : projected;
  const auto half = detail::checked_mul(shape.rows, ffn);
  const tensor act = ops.emit(op_kind::activation, half, gate_up.type);  // act(gate)
  ops.keep(gate_up, act);  // it saves its input, a view of gate_up
  const tensor product = ops.product(act, gate_up, half, half, gate_up.type);  // up, the other view
  const linear_shape narrow{.rows = shape.rows, .in_features = ffn, .out_features = hidden, .copies = shape.copies,
                            .bias = bias, .role = static_cast<lora_modules>(lora_target::down)};
  const tensor down = expert_projection(ctx, product, narrow, adapt_down);
  return copies_outputs ? ops.elementwise(down, down.elements, down.type) : down;
}

// Liger's SwiGLU over one gate_up_proj (LigerPhi3SwiGLUMLP, transformers/swiglu.py @ 44a8f2fb,
// which apply_liger_kernel_to_phi3 and _glm4 patch in): the [rows, 2F] output chunked in two;
// LigerSiLUMulFunction's ensure_contiguous (ops/utils.py) copies each strided half, saves the
// copies and writes da and db into them (ops/swiglu.py); the chunk's backward joins them into one
// new [rows, 2F] gradient for gate_up_proj, made after both halves' backward.
constexpr tensor liger_fused_gate_up_mlp(const layer_context& ctx, tensor in, std::uint64_t ffn, const mlp_rows& shape,
                                         bool adapt_down) {
  op_writer& ops = ctx.ops;
  const bool bias = ctx.model.mlp_bias;
  const auto hidden = ctx.model.hidden;
  const auto width = detail::checked_mul(ffn, 2);
  const tensor gate_up = expert_projection(
      ctx, in,
      {.rows = shape.rows, .in_features = hidden, .out_features = width, .bias = bias, .role = lora_target::gate | lora_target::up},
      false);
  const auto half = detail::checked_mul(shape.rows, ffn);
  const tensor gate = ops.elementwise(gate_up, half, gate_up.type);  // gate.contiguous()
  const tensor up = ops.elementwise(gate_up, half, gate_up.type);    // up.contiguous()
  ops.at(gate).grad_in = storage(gate_up.type, detail::checked_mul(shape.rows, width));  // the joined gradient
  ops.at(up).grad_in = {};  // .contiguous()'s backward passes the gradient on
  const linear_shape narrow{.rows = shape.rows, .in_features = ffn, .out_features = hidden, .bias = bias,
                            .role = static_cast<lora_modules>(lora_target::down)};
  return expert_projection(ctx, liger_silu_mul(ops, gate, up), narrow, adapt_down);
}

// up, activation, down; gated: act(gate(x)) * up(x), then down. Each matrix is a
// projection the run may adapt.
constexpr tensor dense_mlp(const layer_context& ctx, tensor in, std::uint64_t ffn, const mlp_rows& shape) {
  op_writer& ops = ctx.ops;
  const auto hidden = ctx.model.hidden;
  const bool bias = ctx.model.mlp_bias;
  const linear_shape widen{.rows = shape.rows, .in_features = hidden, .out_features = ffn, .copies = shape.copies, .bias = bias,
                           .role = static_cast<lora_modules>(lora_target::up)};
  const linear_shape narrow{.rows = shape.rows, .in_features = ffn, .out_features = hidden, .copies = shape.copies, .bias = bias,
                            .role = static_cast<lora_modules>(lora_target::down)};
  const bool adapt_up = ctx.adapters.adapts(lora_target::up);
  const bool adapt_down = ctx.adapters.adapts(lora_target::down);
  if (gated_mlp(ctx.model)) {
    const bool adapt_gate = ctx.adapters.adapts(lora_target::gate);
    const bool liger = ctx.run.liger_swiglu || ctx.run.liger_geglu;
    // Hugging Face's Phi3MLP, or Liger's over it; lit-gpt's LLaMAMLP keeps fc_1 and fc_2 apart.
    // Adapters keep the two-projection path (the same bytes, split in two).
    const bool one_gate_up = ctx.model.fused_gate_up && ctx.model.impl == implementation::hf_transformers &&
                             shape.copies == 1 && !adapt_gate && !adapt_up;
    if (one_gate_up && !liger) return fused_gate_up_mlp(ctx, in, ffn, shape, adapt_down);
    if (one_gate_up && ctx.run.liger_swiglu) return liger_fused_gate_up_mlp(ctx, in, ffn, shape, adapt_down);
    linear_shape gate_shape = widen;
    gate_shape.role = static_cast<lora_modules>(lora_target::gate);
    const tensor gate = expert_projection(ctx, in, gate_shape, adapt_gate);
    const tensor up = expert_projection(ctx, in, widen, adapt_up);
    if (ctx.run.liger_swiglu || ctx.run.liger_geglu) return expert_projection(ctx, liger_silu_mul(ops, gate, up), narrow, adapt_down);
    const tensor act = activation(ctx, gate);
    const tensor product = ops.product(act, up, up.elements, up.elements, up.type);
    return expert_projection(ctx, product, narrow, adapt_down);
  }
  const tensor up = expert_projection(ctx, in, widen, adapt_up);
  const tensor act = activation(ctx, up);
  return expert_projection(ctx, act, narrow, adapt_down);
}

// gpt-oss's expert MLP over the routed rows (modeling_gpt_oss.py@00d4b3d2 GptOssExperts.forward,
// training branch): gate_up = x @ W + b (one (h, 2f) matrix, biases always), gate and up its
// strided views, clamped (each clamp saves its input: the view keeps gate_up whole),
// glu = gate * sigmoid(gate * 1.702) (sigmoid keeps its output, the mul both factors),
// (up + 1) * glu (both factors), then down with bias. Per routed row 2h + 7f elements are
// saved (the input, gate_up, sigmoid, clamped gate, up + 1, glu, gated; the output is kept
// by the routing-weight mul), against 2h + 4f for SwiGLU.
constexpr tensor clamped_swiglu_experts(const layer_context& ctx, tensor in, const mlp_rows& shape) {
  op_writer& ops = ctx.ops;
  const auto hidden = ctx.model.hidden;
  const auto ffn = ctx.model.ffn;
  const auto half = detail::checked_mul(shape.rows, ffn);
  const tensor gate_up = expert_projection(
      ctx, in,
      {.rows = shape.rows, .in_features = hidden, .out_features = detail::checked_mul(ffn, 2), .copies = shape.copies,
       .bias = true, .role = lora_target::gate | lora_target::up},
      false);
  const tensor gate = ops.elementwise(half, gate_up.type);  // gate.clamp(max=limit)
  ops.keep(gate_up, gate);
  const tensor up = ops.elementwise(half, gate_up.type);    // up.clamp(-limit, limit)
  ops.keep(gate_up, up);  // the same storage: kept once
  const tensor scaled = ops.elementwise(half, gate_up.type);  // gate * alpha
  const tensor sig = output_keeping_activation(ops, scaled);
  const tensor glu = ops.elementwise(half, gate_up.type);
  ops.keep(gate, glu);
  ops.keep(sig, glu);
  const tensor up_plus_one = ops.elementwise(half, up.type);
  const tensor gated = ops.elementwise(half, glu.type);
  ops.keep(up_plus_one, gated);
  ops.keep(glu, gated);
  return expert_projection(
      ctx, gated,
      {.rows = shape.rows, .in_features = ffn, .out_features = hidden, .copies = shape.copies, .bias = true,
       .role = static_cast<lora_modules>(lora_target::down)},
      false);
}

// The shared expert beside the routed ones (modeling_qwen2_moe.py Qwen2MoeSparseMoeBlock, v4.51):
// every token runs it, scaled by sigmoid(shared_expert_gate(x)), and it is added to `routed`.
// `shared`: the shared expert's output when the block ran it before the routed experts.
constexpr tensor add_shared_expert(const layer_context& ctx, tensor in, tensor routed, tensor shared = {}) {
  op_writer& ops = ctx.ops;
  if (shared.elements == 0) shared = dense_mlp(ctx, in, ctx.model.shared_expert_ffn, {.rows = ctx.tokens});
  if (ctx.model.shared_expert_gate) {
    const tensor logit = ops.linear(in, {.rows = ctx.tokens, .in_features = ctx.model.hidden, .out_features = 1},
                                    ctx.adapters.base_for(static_cast<lora_modules>(lora_target::shared_expert_gate)));
    output_keeping_activation(ops, logit);  // sigmoid gate
    const tensor scaled = ops.elementwise(shared.elements, shared.type);
    ops.keep(shared, scaled);  // mul saves both factors
    shared = scaled;
  }
  return ops.add(routed, shared);
}

// A router whose weight is a bare nn.Parameter of its own module: GptOssTopKRouter in every
// release and, from transformers 5.0, the experts interface's XTopKRouter (modeling_mixtral.py
// MixtralTopKRouter, Qwen2MoeTopKRouter, OlmoeTopKRouter; PhiMoE's subclasses nn.Linear).
// Quantized loads replace nn.Linear modules only (integrations/bitsandbytes.py
// _replace_with_bnb_linear, transformers v4.57.0), so its weight stays in the load dtype.
constexpr bool router_is_parameter(const layer_context& ctx) {
  return ctx.model.expert_weight_copies || (grouped_mm_experts(ctx) && !ctx.model.router_subclasses_linear);
}

// Expert weights held as 3-D nn.Parameters (stacked_expert_parameters): bitsandbytes' 4-bit load
// replaces nn.Linear modules only and leaves them in the load dtype (bitsandbytes issue #1849,
// "Failed to quant MoE models with fused expert weights in transformers v5"), so a QLoRA base
// keeps them 16-bit, without dequantization.
constexpr layer_context with_unquantized_experts(const layer_context& ctx) {
  layer_context experts = ctx;
  if (experts.adapters.base.four_bit && stacked_expert_parameters(ctx.model, ctx.run)) {
    experts.adapters.base.four_bit = false;
    experts.adapters.base.unquantized = true;
  }
  return experts;
}

// The router: tokens x experts logits (model_spec::router_bias, LoRA's router target).
constexpr tensor router(const layer_context& ctx, tensor in) {
  const model_spec& m = ctx.model;
  if (router_is_parameter(ctx)) {
    adapter_plan kept = ctx.adapters;
    kept.unquantized = static_cast<lora_modules>(kept.unquantized | static_cast<lora_modules>(lora_target::router));
    return projection(ctx.ops, kept, in,
                      {.rows = ctx.tokens, .in_features = m.hidden, .out_features = m.experts, .bias = m.router_bias,
                       .role = static_cast<lora_modules>(lora_target::router)},
                      ctx.adapters.adapts(lora_target::router));
  }
  return projection(ctx.ops, ctx.adapters, in,
                    {.rows = ctx.tokens, .in_features = m.hidden, .out_features = m.experts, .bias = m.router_bias,
                     .role = static_cast<lora_modules>(lora_target::router)},
                    ctx.adapters.adapts(lora_target::router));
}

// DeepSeek's gate (model_spec::router_fp32): F.linear(hidden_states.type(torch.float32),
// self.weight.type(torch.float32)) (modeling_deepseek_v3.py@00b676f8 DeepseekV3TopkRouter.forward,
// modeling_deepseek_v2.py@0233e509 DeepseekV2Moe). With fp32 parameters both casts return the
// tensors themselves (and autocast casts as for any linear); a 16-bit model makes fp32 copies of
// the hidden states and of the weight, which the matmul saves, and fp32 logits. The gate is never
// adapted (validate.hpp check_deepseek_lora: the forward bypasses a wrapper); frozen under LoRA,
// its weight takes no gradient, so the matmul keeps only the weight copy (for the input's).
// The gate's weight is a bare nn.Parameter, not an nn.Linear, so no quantized load replaces it:
// bitsandbytes, GPTQ, AWQ and FP8 swap nn.Linear modules only (integrations/bitsandbytes.py
// _replace_with_bnb_linear, isinstance(module, (nn.Linear, Conv1D)), transformers v4.57.0).
constexpr tensor fp32_router(const layer_context& ctx, tensor in) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  if (ops.precision().param == dtype::fp32)
    return ops.linear(in, {.rows = ctx.tokens, .in_features = m.hidden, .out_features = m.experts, .bias = m.router_bias},
                      base_weight{.frozen = ctx.adapters.base.frozen, .keeps_input = !ctx.adapters.base.frozen,
                                  .unquantized = true});
  const tensor x = ops.elementwise(in, in.elements, dtype::fp32);
  const op logits{.kind = op_kind::linear,
                  .weight = {m.experts, m.hidden, 1},
                  .role = param_role::matmul,
                  .frozen = ctx.adapters.base.frozen,
                  .extra_saved = storage(dtype::fp32, detail::checked_mul(m.experts, m.hidden)),
                  .grad_in = storage(dtype::fp32, x.elements),
                  .unquantized_base = true};
  const tensor y = ops.emit(logits, detail::checked_mul(ctx.tokens, m.experts), dtype::fp32);
  if (!ctx.adapters.base.frozen) ops.keep(x, y);
  return y;
}

// One expert's MLP over `rows` rows, its weights among `experts` copies.
constexpr tensor expert_mlp(const layer_context& ctx, tensor in, const mlp_rows& rows) {
  return ctx.model.mlp == mlp_kind::clamped_swiglu ? clamped_swiglu_experts(ctx, in, rows)
                                                   : dense_mlp(ctx, in, ctx.model.ffn, rows);
}

// A mixture of experts as generate() runs it, without grad (modeling_mixtral.py@v4.44.0
// MixtralSparseMoeBlock.forward; OLMoE, Qwen2-MoE, Qwen3-MoE and PhiMoE loop the same way):
// router logits, softmax in fp32, top-k weights and int64 indices, the weights cast back to the
// hidden dtype, the zeroed output and the int64 one-hot expert mask (tokens x k x experts); then
// one expert at a time: torch.where's int64 slot and row indices, the gathered rows
// (hidden_states[None, top_x]), the expert's MLP, the rows' routing weights, the weighted output,
// added in place (index_add_). A token picks an expert at most once, so the largest moment is one
// expert's MLP over every row. The loop's names stay bound until the next expert rebinds them:
// with two or more experts a token, the previous expert (every row too) still holds its indices
// and gathered rows until this one makes its own, and its weighted output until this one's is
// made. What the frame binds lives until the block returns. Not written: the top-k sum of the
// in-place renormalisation (tokens fp32), PhiMoE's sparsemixer temporaries (before the loop).
// DeepSeek's MoE (model_spec::router_fp32; modeling_deepseek_v3.py@00b676f8 DeepseekV3MoE.moe,
// DeepseekV3TopkRouter.forward) loops the same way over fp32 routing: the fp32 router, its sigmoid
// or softmax scores, the top-k weights times routed_scaling_factor (a new fp32 tensor, never cast
// back), zeros_like(hidden_states, dtype=topk_weights.dtype) (fp32), the weighted rows promoted to
// fp32, and final_hidden_states.type(hidden_states.dtype) after the loop (a copy unless fp32). Not
// written: V3's group-limited choice (tokens x experts fp32 temporaries of a no_grad helper).
constexpr tensor mixture_of_experts_without_grad(const layer_context& ctx, tensor in) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const auto tokens = ctx.tokens;
  const auto rows_hidden = detail::checked_mul(tokens, m.hidden);
  const auto picks = detail::checked_mul(tokens, m.experts_per_token);
  const tensor logits = m.router_fp32 ? fp32_router(ctx, in) : router(ctx, in);
  const tensor probabilities = ops.elementwise(logits, detail::checked_mul(tokens, m.experts), dtype::fp32);
  const tensor top_weights = ops.elementwise(probabilities, picks, dtype::fp32);
  const tensor selected = ops.elementwise(probabilities, picks, dtype::int64);
  // routing_weights.to(hidden_states.dtype): a new tensor unless they are fp32 already; DeepSeek's
  // topk_weights * routed_scaling_factor stays fp32.
  const dtype sum_type = m.router_fp32 ? dtype::fp32 : in.type;
  tensor weights = top_weights;
  if (m.router_fp32)
    weights = ops.elementwise(top_weights, picks, dtype::fp32);
  else if (in.type != dtype::fp32)
    weights = ops.elementwise(top_weights, picks, in.type);
  const tensor output = ops.elementwise(rows_hidden, sum_type);  // torch.zeros
  const tensor mask = ops.elementwise(selected, detail::checked_mul(picks, m.experts), dtype::int64);
  std::array<tensor, 12> bound{logits, weights, selected, output, mask};
  std::size_t count = 5;
  // The previous expert's names, each over every row when a token picks two experts or more.
  const bool previous = m.experts_per_token > 1;
  const tensor previous_indices = previous ? ops.elementwise(detail::checked_mul(tokens, 2), dtype::int64) : tensor{};
  const tensor previous_rows = previous ? ops.elementwise(rows_hidden, in.type) : tensor{};
  const tensor previous_out = previous ? ops.elementwise(rows_hidden, m.router_fp32 ? dtype::fp32 : in.type) : tensor{};
  const tensor indices = ops.elementwise(mask, detail::checked_mul(tokens, 2), dtype::int64);
  if (previous) ops.reads(previous_indices, indices);
  const tensor rows = ops.elementwise(in, rows_hidden, in.type);
  if (previous) ops.reads(previous_rows, rows);
  const tensor expert_out = expert_mlp(ctx, rows, {.rows = tokens, .copies = m.experts});
  const tensor row_weights = ops.elementwise(weights, tokens, weights.type);  // routing_weights[top_x, idx, None]
  const tensor weighted = ops.elementwise(expert_out, rows_hidden, m.router_fp32 ? dtype::fp32 : expert_out.type);
  ops.reads(row_weights, weighted);
  if (previous) ops.reads(previous_out, weighted);
  bound[count++] = indices;
  bound[count++] = rows;
  bound[count++] = weighted;
  bound[count++] = in;  // the caller's frame binds the block's input until it returns
  const tensor routed = output.type == in.type ? output : ops.elementwise(output, rows_hidden, in.type);
  const tensor result = m.shared_expert_ffn == 0 ? weighted : add_shared_expert(ctx, in, routed);
  for (std::size_t i = 0; i < count; ++i) ops.reads(bound[i], result);
  return m.shared_expert_ffn == 0 ? routed : result;
}

// GptOssTopKRouter.forward without grad (modeling_gpt_oss.py@00d4b3d2): the router's logits,
// topk's values and int64 indices over `picks` (tokens x top-k) entries, their softmax in the
// logits' dtype, scattered into zeros_like(logits): the (tokens x experts) routing weights.
struct gpt_oss_routed {
  tensor routing;
  tensor indices;
};

constexpr gpt_oss_routed gpt_oss_routing(const layer_context& ctx, tensor in, std::uint64_t picks) {
  op_writer& ops = ctx.ops;
  const tensor logits = router(ctx, in);
  const tensor top = ops.elementwise(logits, picks, logits.type);
  const tensor indices = ops.elementwise(logits, picks, dtype::int64);
  const tensor top_weights = ops.elementwise(top, picks, logits.type);
  const tensor routing = ops.elementwise(logits, detail::checked_mul(ctx.tokens, ctx.model.experts), logits.type);
  ops.reads(top_weights, routing);
  ops.reads(indices, routing);
  return {.routing = routing, .indices = indices};
}

// gpt-oss's gated activation over the experts' gate_up output (modeling_gpt_oss.py@00d4b3d2
// GptOssExperts: gate and up the strided halves, gate clamped and scaled by alpha, glu = gate *
// sigmoid(gate * alpha), (up + 1) * glu); the same chain in the 4.x every-expert path and the 5.x
// experts interface (_apply_gate).
struct gpt_oss_gated {
  tensor gate{};
  tensor up{};
  tensor glu{};
  tensor gated{};  // (up + 1) * glu
};

constexpr gpt_oss_gated gpt_oss_gated_activation(op_writer& ops, tensor gate_up, std::uint64_t half, dtype type) {
  const tensor gate = ops.elementwise(gate_up, half, type);
  const tensor up = ops.elementwise(gate_up, half, type);
  const tensor scaled = ops.elementwise(gate, half, type);
  const tensor sig = ops.elementwise(scaled, half, type);
  const tensor glu = ops.elementwise(sig, half, type);
  ops.reads(gate, glu);
  const tensor up_plus_one = ops.elementwise(up, half, type);
  const tensor gated = ops.elementwise(up_plus_one, half, type);
  ops.reads(glu, gated);
  return {.gate = gate, .up = up, .glu = glu, .gated = gated};
}

// gpt-oss's MoE without grad, in eval mode (modeling_gpt_oss.py@00d4b3d2 GptOssTopKRouter.forward,
// GptOssExperts.forward, the branch `self.training` is false): the router's logits, topk's values
// and int64 indices, their softmax in the logits' dtype, scattered into zeros_like(logits): the
// (tokens x experts) routing weights. Then every expert runs every token: hidden_states.repeat
// (experts, 1), bmm with gate_up_proj plus its bias (the bmm's output and the sum coexist), the
// clamped gate and up (new tensors; gate_up stays bound), gate * alpha and its sigmoid, glu,
// (up + 1) * glu, bmm with down_proj, plus its bias, times the transposed routing weights (a
// view), summed over the experts. The names hidden_states (the repeat), gate_up, gate, up and glu
// stay bound until the experts return: at (up + 1) * glu the layer holds experts x tokens x
// (hidden + 7 ffn) elements. The router's scores and indices stay bound until the MLP returns.
constexpr tensor every_expert_without_grad(const layer_context& ctx, tensor in) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const dtype type = in.type;
  const auto picks = detail::checked_mul(ctx.tokens, m.experts_per_token);
  const auto rows = detail::checked_mul(m.experts, ctx.tokens, detail::quantity{"gpt-oss expert rows (experts x tokens)"});
  const auto half = detail::checked_mul(rows, m.ffn);
  const auto wide = detail::checked_mul(rows, m.hidden);
  const auto [routing, indices] = gpt_oss_routing(ctx, in, picks);
  const tensor repeated = ops.elementwise(in, wide, type);
  const base_weight gate_up_base = ctx.adapters.base_for(lora_target::gate | lora_target::up);
  const base_weight down_base = ctx.adapters.base_for(static_cast<lora_modules>(lora_target::down));
  const tensor gate_up_product = ops.linear(
      repeated, {.rows = rows, .in_features = m.hidden, .out_features = detail::checked_mul(m.ffn, 2), .copies = m.experts, .bias = true},
      gate_up_base);
  const tensor gate_up = ops.elementwise(gate_up_product, detail::checked_mul(half, 2), type);
  const auto [gate, up, glu, gated] = gpt_oss_gated_activation(ops, gate_up, half, type);
  const tensor down = ops.linear(
      gated, {.rows = rows, .in_features = m.ffn, .out_features = m.hidden, .copies = m.experts, .bias = true}, down_base);
  const tensor biased = ops.elementwise(down, wide, type);
  const tensor weighted = ops.elementwise(biased, wide, type);
  ops.reads(routing, weighted);
  const tensor summed = ops.elementwise(weighted, detail::checked_mul(ctx.tokens, m.hidden), type);
  for (const tensor& bound : {repeated, gate_up, gate, up, glu, routing, indices, in}) ops.reads(bound, summed);
  return summed;
}

// generate() on CUDA switches the experts interface from grouped_mm to batched_mm for the decoding
// steps (docs/source/en/experts_interface.md@0409b2f0, "Decode-stage switching").
constexpr bool batched_mm_decoding(const layer_context& ctx) {
  return ctx.cached_keys > 0 && ctx.run.device == device_kind::cuda;
}

// batched_mm_experts_forward's self.gate_up_proj[expert_ids] or self.down_proj[expert_ids]
// (integrations/moe.py@0261a467): advanced indexing copies one expert matrix per routed row.
constexpr tensor routed_expert_weights(op_writer& ops, std::uint64_t rows, std::uint64_t in_features,
                                       std::uint64_t out_features, dtype type) {
  return ops.elementwise(detail::checked_mul(rows, in_features, out_features), type);
}

// gpt-oss's MoE without grad from transformers 5.0: the experts interface's grouped_mm backend
// (integrations/moe.py@0261a467 grouped_mm_experts_forward, GptOssExperts' _apply_gate) over
// tokens x top-k rows. Read off the H100 history of 5.17 (docs/data/gpu_allocator_history/
// infer-gpt_oss-l4-e8-bf16-b4-c1024-n64, the prefill): one gather of the rows in expert order, the
// grouped_mm output (bound until the down projection is made), the gathered gate_up bias and the sum,
// the clamped gate and up, gate * alpha and its sigmoid, glu, up + 1 and (up + 1) * glu (gate, up and
// glu bound until then), then down, its gathered bias and the sum, the routing weights' product,
// the reorder by inv_perm and the token-order sum; the rows and the down outputs stay bound until the
// experts return. On CUDA, generate() switches grouped_mm to batched_mm for the decoding steps
// (docs/source/en/experts_interface.md@0409b2f0, "Decode-stage switching"): batched_mm_experts_forward
// (moe.py@0261a467) copies each row's expert matrices, self.gate_up_proj[expert_ids] (rows x h x 2f)
// and self.down_proj[expert_ids] (rows x f x h); the history's decoding steps hold both at once
// while the second is made.
constexpr tensor gpt_oss_experts_interface_without_grad(const layer_context& ctx, tensor in) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const dtype type = in.type;
  const auto rows = detail::checked_mul(ctx.tokens, m.experts_per_token);
  const auto half = detail::checked_mul(rows, m.ffn);
  const auto wide = detail::checked_mul(rows, m.hidden);
  const bool batched = batched_mm_decoding(ctx);
  const auto [routing, indices] = gpt_oss_routing(ctx, in, rows);
  const tensor gathered = ops.elementwise(in, wide, type);
  const tensor gate_up_copy = batched ? routed_expert_weights(ops, rows, m.hidden, detail::checked_mul(m.ffn, 2), type) : tensor{};
  const base_weight gate_up_base = ctx.adapters.base_for(lora_target::gate | lora_target::up);
  const base_weight down_base = ctx.adapters.base_for(static_cast<lora_modules>(lora_target::down));
  const tensor product = ops.linear(
      gathered, {.rows = rows, .in_features = m.hidden, .out_features = detail::checked_mul(m.ffn, 2), .copies = m.experts, .bias = true},
      gate_up_base);
  if (batched) ops.reads(gate_up_copy, product);
  const tensor gate_up_bias = ops.elementwise(indices, detail::checked_mul(half, 2), type);
  const tensor gate_up = ops.elementwise(product, detail::checked_mul(half, 2), type);
  ops.reads(gate_up_bias, gate_up);
  const auto [gate, up, glu, gated] = gpt_oss_gated_activation(ops, gate_up, half, type);
  for (const tensor& bound : {gate_up, gate, up}) ops.reads(bound, gated);
  const tensor down_copy = batched ? routed_expert_weights(ops, rows, m.ffn, m.hidden, type) : tensor{};
  if (batched) ops.reads(gate_up_copy, down_copy);
  const tensor down = ops.linear(
      gated, {.rows = rows, .in_features = m.ffn, .out_features = m.hidden, .copies = m.experts, .bias = true}, down_base);
  ops.reads(product, down);
  if (batched) ops.reads(down_copy, down);
  const tensor down_bias = ops.elementwise(indices, wide, type);
  const tensor biased = ops.elementwise(down, wide, type);
  ops.reads(down_bias, biased);
  const tensor weighted = ops.elementwise(biased, wide, type);
  ops.reads(routing, weighted);
  const tensor reordered = ops.elementwise(weighted, wide, type);
  const tensor summed = ops.elementwise(reordered, detail::checked_mul(ctx.tokens, m.hidden), type);
  for (const tensor& bound : {gathered, down, biased, reordered, routing, indices, in}) ops.reads(bound, summed);
  return summed;
}

// The router of the experts interface's families without grad (transformers 5.17.0, the H100
// frames of docs/data/gpu_allocator_frames/frames-infer-olmoe-*: modeling_olmoe.py:340): the
// logits, softmax(logits, dtype=float) (its fp32 cast of the logits, then the probabilities),
// topk's fp32 values and int64 indices over tokens x top-k, cast back to the hidden dtype
// (OlmoeTopKRouter, Qwen2MoeTopKRouter, MixtralTopKRouter: softmax then top-k). Not written:
// norm_topk_prob's division (a tokens x top-k fp32 temporary). DeepSeek's fp32 gate keeps fp32
// weights (DeepseekV3TopkRouter, as in mixture_of_experts_without_grad).
struct routed_picks {
  tensor weights;
  tensor indices;
};

constexpr routed_picks experts_interface_routing(const layer_context& ctx, tensor in, std::uint64_t picks) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const auto scores = detail::checked_mul(ctx.tokens, m.experts);
  const tensor logits = m.router_fp32 ? fp32_router(ctx, in) : router(ctx, in);
  const tensor widened = logits.type == dtype::fp32 ? logits : ops.elementwise(logits, scores, dtype::fp32);
  const tensor probabilities = ops.elementwise(widened, scores, dtype::fp32);
  const tensor top = ops.elementwise(probabilities, picks, dtype::fp32);
  const tensor indices = ops.elementwise(probabilities, picks, dtype::int64);
  ops.reads(top, indices);
  const dtype weights_type = m.router_fp32 ? dtype::fp32 : in.type;
  const tensor weights = weights_type == dtype::fp32 ? top : ops.elementwise(top, picks, weights_type);
  ops.reads(logits, weights);  // the block binds the router's logits until it returns
  return {.weights = weights, .indices = indices};
}

// OLMoE, Qwen2-MoE / Qwen1.5-MoE, Qwen3-MoE, Mixtral, PhiMoE, DeepSeek without grad from
// transformers 5.0: the experts interface with _default_apply_gate (integrations/moe.py@0261a467
// grouped_mm_experts_forward, batched_mm_experts_forward). Read off the H100 frames of 5.17.0
// (frames-infer-olmoe-l4-bf16-b4-c1024-n64, the prefill, tokens x top-k rows): the rows gathered
// (moe.py:394, bound until the experts return), the grouped_mm gate_up output and a second
// rows x 2f tensor made from it (moe.py:445) before it is freed, silu(gate) and act * up
// (moe.py:523; the 2f tensor freed after), the down grouped_mm, the routing weights' product
// (moe.py:465, bound), the reorder by inv_perm (moe.py:468) and a rows x h tensor made from it
// (moe.py:473, bound), then the sum over top-k (moe.py:479): four rows x h tensors at once. The
// Mixtral and Qwen1.5-MoE histories of the same run show the same sizes in the same order. In the
// decoding steps on CUDA, batched_mm's per-row weight copies (rows x h x 2f, then rows x f x h
// while the first is alive) dominate: Mixtral's history peaks there (1792 + 896 MiB, 8 rows).
// A gated shared expert (Qwen2MoeSparseMoeBlock.forward, modeling_qwen2_moe.py of 5.x) runs first
// and its output is bound across the experts; then sigmoid(shared_expert_gate(x)) * it, added in
// place. An ungated one (DeepSeek's shared_experts) runs after the experts and is added.
constexpr tensor experts_interface_without_grad(const layer_context& ctx, tensor in) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const dtype type = in.type;
  const bool gated = gated_mlp(m);
  const auto rows = detail::checked_mul(ctx.tokens, m.experts_per_token);
  const auto half = detail::checked_mul(rows, m.ffn);
  const auto wide = detail::checked_mul(rows, m.hidden);
  const auto widened = gated ? detail::checked_mul(m.ffn, 2) : m.ffn;
  const bool batched = batched_mm_decoding(ctx);
  const bool shared_first = m.shared_expert_ffn > 0 && m.shared_expert_gate;
  const tensor shared = shared_first ? dense_mlp(ctx, in, m.shared_expert_ffn, {.rows = ctx.tokens}) : tensor{};
  const auto [weights, indices] = experts_interface_routing(ctx, in, rows);
  const tensor gathered = ops.elementwise(in, wide, type);
  const tensor gate_up_copy = batched ? routed_expert_weights(ops, rows, m.hidden, widened, type) : tensor{};
  const base_weight gate_up_base = ctx.adapters.base_for(gated ? lora_target::gate | lora_target::up
                                                                : static_cast<lora_modules>(lora_target::up));
  const base_weight down_base = ctx.adapters.base_for(static_cast<lora_modules>(lora_target::down));
  const tensor product = ops.linear(
      gathered, {.rows = rows, .in_features = m.hidden, .out_features = widened, .copies = m.experts}, gate_up_base);
  if (batched) ops.reads(gate_up_copy, product);
  const tensor gate_up = batched ? product : ops.elementwise(product, detail::checked_mul(rows, widened), type);
  const tensor act = ops.elementwise(gate_up, half, type);
  tensor hidden_rows = act;
  if (gated) {
    hidden_rows = ops.elementwise(act, half, type);  // act_fn(gate) * up
    ops.reads(gate_up, hidden_rows);
  }
  const tensor down_copy = batched ? routed_expert_weights(ops, rows, m.ffn, m.hidden, type) : tensor{};
  if (batched) ops.reads(gate_up_copy, down_copy);
  const tensor down = ops.linear(
      hidden_rows, {.rows = rows, .in_features = m.ffn, .out_features = m.hidden, .copies = m.experts}, down_base);
  if (batched) ops.reads(down_copy, down);
  // The routing weights' product promotes to their dtype (fp32 for DeepSeek's fp32 router): the
  // DeepSeek-V2 history of 5.17 (infer-deepseek_v2-lite-l4-e16-bf16-b4-c1024-n64) shows, after the
  // down grouped_mm, one rows x h tensor in bf16 (moe.py:465), then two in fp32 (moe.py:468, 473),
  // an fp32 sum and its cast back (return ....to(hidden_states.dtype), moe.py@8b584a67).
  const dtype promoted = weights.type == dtype::fp32 ? dtype::fp32 : type;
  const tensor weighted = ops.elementwise(down, wide, type);
  ops.reads(weights, weighted);
  const tensor reordered = ops.elementwise(weighted, wide, promoted);
  ops.reads(weights, reordered);
  const tensor ordered = ops.elementwise(reordered, wide, promoted);
  const auto token_rows = detail::checked_mul(ctx.tokens, m.hidden);
  tensor summed = ops.elementwise(ordered, token_rows, promoted);
  for (const tensor& bound : {gathered, weighted, ordered, weights, indices, in}) ops.reads(bound, summed);
  if (promoted != type) {
    const tensor cast = ops.elementwise(summed, token_rows, type);
    for (const tensor& bound : {gathered, weighted, ordered, weights, indices, in}) ops.reads(bound, cast);
    summed = cast;
  }
  if (m.shared_expert_ffn == 0) return summed;
  if (!shared_first) return add_shared_expert(ctx, in, summed);
  const tensor logit = ops.linear(in, {.rows = ctx.tokens, .in_features = m.hidden, .out_features = 1},
                                  ctx.adapters.base_for(static_cast<lora_modules>(lora_target::shared_expert_gate)));
  const tensor scale = ops.elementwise(logit, ctx.tokens, logit.type);
  const tensor scaled = ops.elementwise(shared, shared.elements, shared.type);
  ops.reads(scale, scaled);
  ops.reads(summed, scaled);  // expert_output += shared_expert_output: in place, no new tensor
  return summed;
}

// Mixture of experts (HF modeling_mixtral.py MixtralSparseMoeBlock): a router, then
// each token's hidden state is gathered for its top-k experts; the experts' weights all
// stay resident, their activations cover tokens * top-k rows (autograd keeps every expert's).
// Without grad this is also what experts run in one pass do (model_spec::experts_in_one_pass).
constexpr tensor mixture_of_experts(const layer_context& ctx, tensor in) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  if (ops.records_forward_liveness() && m.expert_weight_copies && ctx.run.mxfp4_experts)
    return gpt_oss_mxfp4_experts_without_grad(ctx, in, router(ctx, in));
  if (ops.records_forward_liveness() && m.expert_weight_copies)
    return grouped_mm_experts(ctx) ? gpt_oss_experts_interface_without_grad(ctx, in) : every_expert_without_grad(ctx, in);
  // Without grad: transformers 5's experts interface, or the 4.x loop over the experts.
  if (ops.records_forward_liveness() && grouped_mm_experts(ctx)) return experts_interface_without_grad(ctx, in);
  if (ops.records_forward_liveness() && !m.experts_in_one_pass)
    return mixture_of_experts_without_grad(ctx, in);
  const auto hidden = m.hidden;
  const auto experts = m.experts;
  if (m.moe_input_jitter) {
    // PhimoeSparseMoeBlock.forward (modeling_phimoe.py@008f5c8c) in training with
    // input_jitter_noise > 0: hidden_states *= empty_like(hidden_states).uniform_(...); the
    // in-place mul saves the noise for its backward. Written as a new tensor, which counts
    // the in-place result once more as a transient (the upper side). From 5.0 PhimoeTopKRouter.forward
    // scales the same input again (modular_phimoe.py@0233e509), saving a second noise tensor.
    const std::uint64_t scalings = grouped_mm_experts(ctx) ? 2 : 1;
    for (std::uint64_t i = 0; i < scalings; ++i)
      in = ops.emit(op{.kind = op_kind::elementwise, .extra_saved = storage(in.type, in.elements)}, in.elements, in.type);
  }
  // From 5.0 a gated shared expert runs before the router and the experts (as without grad,
  // experts_interface_without_grad; the family-qwen2moe H100 history: its four [tokens, F_shared]
  // tensors come before the router's).
  const bool experts_interface = grouped_mm_experts(ctx);
  const bool shared_first = experts_interface && m.shared_expert_ffn > 0 && m.shared_expert_gate;
  const tensor shared = shared_first ? dense_mlp(ctx, in, m.shared_expert_ffn, {.rows = ctx.tokens}) : tensor{};
  if (m.router_fp32)
    fp32_router(ctx, in);
  else
    router(ctx, in);
  // Softmax in fp32 keeps its output; topk keeps its int64 indices, and each expert's
  // torch.where gives int64 row and slot indices that the gather, the routing-weight
  // slice and index_add_ keep (T*k each). DeepSeek-V3's sigmoid keeps its output as softmax
  // does, and scores.gather(1, topk_indices) keeps the indices topk kept for Mixtral.
  // The routing weights the expert rows are multiplied by: fp32 from an fp32 router.
  const dtype weights_type = m.router_fp32 ? dtype::fp32 : ops.precision().matmul;
  const auto routed_rows = detail::checked_mul(ctx.tokens, m.experts_per_token);
  const auto scores = detail::checked_mul(ctx.tokens, experts);
  // PhiMoE's sparsemixer (modular_phimoe.py@0233e509) instead saves, for each of its two picks, the
  // masked_fill's bool mask, softmax's output in the logits' dtype (kept by the gather and by
  // PhimoeMultiplier), the gather's int64 index and PhimoeMultiplier's multiplier; the concatenated
  // picks and weights go on to the experts as topk's would. Autocast runs softmax in fp32
  // (torch.amp's float32 op list), and the gathered multipliers follow it.
  const dtype mixer_type = ops.precision().autocast ? dtype::fp32 : weights_type;
  const tensor routing =
      m.sparsemixer_router
          ? ops.emit(op{.kind = op_kind::activation,
                        .extra_saved = storage(dtype::boolean, detail::checked_mul(scores, 2)) +
                                       storage(mixer_type, scores) +
                                       storage(dtype::int64, detail::checked_mul(routed_rows, 4)) +
                                       storage(mixer_type, detail::checked_mul(routed_rows, 2))},
                     scores, mixer_type)
          : ops.emit(op{.kind = op_kind::activation,
                        .extra_saved = storage(dtype::int64, detail::checked_mul(routed_rows, 3)) +
                                       storage(weights_type, routed_rows)},
                     scores, dtype::fp32);
  ops.keep_own_output(routing);
  const mlp_rows expert_rows{.rows = detail::checked_mul(ctx.tokens, m.experts_per_token), .copies = experts};
  const tensor gathered = ops.elementwise(detail::checked_mul(expert_rows.rows, hidden), in.type);
  // The experts interface keeps gate and up as one [rows, 2F] output (fused_gate_up_mlp); adapted
  // gate or up projections and Liger's kernels keep the two-projection path, and so does autocast:
  // grouped_mm is not autocast-enabled and runs in the weights' dtype (moe.py@8b584a67
  // _grouped_mm: input.to(weight.dtype)), fp32 under amp over fp32 weights, which the walk does not
  // model yet; over 16-bit weights it runs as without autocast.
  const bool one_gate_up = experts_interface && gated_mlp(m) && m.mlp != mlp_kind::clamped_swiglu &&
                           !ops.precision().casts_weights() &&
                           !ctx.run.liger_swiglu && !ctx.run.liger_geglu &&
                           !ctx.adapters.adapts(lora_target::gate) && !ctx.adapters.adapts(lora_target::up);
  const layer_context experts_ctx = with_unquantized_experts(ctx);
  const tensor expert_out =
      one_gate_up
          ? fused_gate_up_mlp(experts_ctx, gathered, m.ffn, expert_rows, ctx.adapters.adapts(lora_target::down), true)
          : expert_mlp(experts_ctx, gathered, expert_rows);
  // * routing weight: saves both factors (the product is fp32 when the weights are: type promotion)
  const tensor weighted =
      ops.elementwise(detail::checked_mul(expert_rows.rows, hidden), m.router_fp32 ? dtype::fp32 : expert_out.type);
  ops.keep(expert_out, weighted);
  // index_add_ back into the token order. Its source gradient is written
  // grad.index_select(dim, index).expand_as(source) (torch 1.13 derivatives.yaml
  // index_add), so autograd saves the weighted expert outputs. grouped_mm instead gathers them
  // back by inv_perm and sums view(tokens, top_k, hidden) over top_k (moe.py@8b584a67): the
  // gather keeps its indices, the sum nothing. The gathered rows are a new [rows, hidden]
  // tensor, made before the weighted rows are freed and freed after the sum (the qwen2moe H100
  // history: alloc 32 MiB, free the 32 MiB product, alloc the 8 MiB sum, free the 32 MiB).
  const auto token_elements = detail::checked_mul(ctx.tokens, hidden);
  tensor routed = grouped_mm_experts(ctx)
                      ? ops.elementwise(ops.elementwise(weighted, weighted.elements, weighted.type), token_elements,
                                        weighted.type)
                      : ops.elementwise(token_elements, weighted.type);
  if (!grouped_mm_experts(ctx)) ops.keep(weighted, routed);
  // DeepseekV3MoE.moe sums into zeros_like(hidden_states, dtype=topk_weights.dtype) and returns
  // final_hidden_states.type(hidden_states.dtype): a copy when the input is not fp32.
  if (m.router_fp32 && routed.type != in.type) routed = ops.elementwise(routed, routed.elements, in.type);
  return m.shared_expert_ffn == 0 ? routed : add_shared_expert(ctx, in, routed, shared);
}

// Llama 4's MoE (modeling_llama4.py@000c33fd Llama4Router, Llama4TextMoe, Llama4TextExperts):
// router logits; topk keeps its int64 indices (scatter_ saves the same tensor); the scores are
// full_like(-inf).scatter_(top-k), sigmoid in fp32 (saves its output) cast back; every expert
// takes every token: hidden_states.repeat(experts, 1) times the scores' transposed column (a
// copy), the mul saving both; the experts' bmm over experts x tokens rows, as a gated MLP of the
// expert weights (gate_up's input saved once, gate_up, silu's input and output, the product);
// the sum over experts saves nothing; the shared expert over every token, then out.add_
// (written as a new tensor: the upper side). gate_up_proj and down_proj are nn.Parameters, not
// nn.Linear modules: LoRA's target modules and bitsandbytes' 4-bit Linears replace neither, so the
// experts stay unadapted in the load dtype (frozen under LoRA).
constexpr tensor experts_on_every_token(const layer_context& ctx, tensor in) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const auto tokens = ctx.tokens;
  const auto scores = detail::checked_mul(tokens, m.experts);
  const auto picks = detail::checked_mul(tokens, m.experts_per_token);
  const auto routed = detail::checked_mul(scores, m.hidden, detail::quantity{"Llama 4 routed rows (experts x tokens x hidden)"});
  const tensor logits = router(ctx, in);
  ops.emit(op{.kind = op_kind::elementwise, .extra_saved = storage(dtype::int64, picks)}, picks, logits.type);
  const tensor filled = ops.elementwise(logits, scores, logits.type);
  tensor weights = ops.emit(op_kind::activation, scores, dtype::fp32);
  ops.reads(filled, weights);
  ops.keep_own_output(weights);
  if (in.type != dtype::fp32) weights = ops.elementwise(weights, scores, in.type);
  const tensor repeated = ops.elementwise(in, routed, in.type);
  const tensor column = ops.elementwise(weights, scores, weights.type);
  const tensor scaled = ops.elementwise(routed, in.type);
  ops.keep(repeated, scaled);
  ops.keep(column, scaled);
  layer_context parameters = ctx;
  parameters.adapters.targets = 0;
  parameters.adapters.base.unquantized = parameters.adapters.base.four_bit;
  parameters.adapters.base.four_bit = false;
  const tensor expert_out = dense_mlp(parameters, scaled, m.ffn, {.rows = scores, .copies = m.experts});
  const tensor summed = ops.elementwise(expert_out, detail::checked_mul(tokens, m.hidden), expert_out.type);
  const tensor shared = dense_mlp(ctx, in, m.shared_expert_ffn, {.rows = tokens});
  return ops.add(shared, summed);
}

// The model's MLP over every token.
constexpr tensor mlp(const layer_context& ctx, tensor in) {
  if (ctx.model.experts_on_every_token) return experts_on_every_token(ctx, in);
  return ctx.model.experts > 0 ? mixture_of_experts(ctx, in) : dense_mlp(ctx, in, ctx.model.ffn, {.rows = ctx.tokens});
}

// T5LayerFF's DenseReluDense over `rows` rows: T5DenseActDense (wi, ReLU, dropout, wo) or
// T5DenseGatedActDense (act(wi_0(x)) * wi_1(x), dropout, wo; the activation runs before
// wi_1, as the module writes it).
constexpr tensor t5_dense_act_dense(const layer_context& ctx, tensor in, std::uint64_t rows) {
  op_writer& ops = ctx.ops;
  const auto hidden = ctx.model.hidden;
  const auto ffn = ctx.model.ffn;
  const linear_shape widen{.rows = rows, .in_features = hidden, .out_features = ffn};
  tensor x{};
  if (gated_mlp(ctx.model)) {
    // T5DenseGatedActDense: act(wi_0(x)) * wi_1(x); v1.1 / flan-t5 / mT5 use gelu_new,
    // written as Python ops whose intermediates autograd keeps (activations.py NewGELUActivation).
    // Its CUDA autocast fp32 pow is not applied to T5 (as this graph has always been built).
    const tensor gate = ops.linear(in, widen, ctx.adapters.base);
    const tensor act = gelu_tanh_as_python_ops(ops, gate, false);
    const tensor up = ops.linear(in, widen, ctx.adapters.base);
    x = ops.elementwise(up.elements, up.type);
    ops.keep(act, x);
    ops.keep(up, x);
  } else {
    const tensor up = ops.linear(in, widen, ctx.adapters.base);
    x = output_keeping_activation(ops, up);  // relu
  }
  x = ops.dropout(x, ctx.dropout.mlp_hidden);
  // `hidden_states.to(self.wo.weight.dtype)` when they differ: under autocast a 16-bit
  // activation is cast to fp32, which the autocast wo then casts back (and saves).
  if (x.type != ops.precision().param) x = ops.elementwise(x.elements, ops.precision().param);
  return ops.linear(x, {.rows = rows, .in_features = ffn, .out_features = hidden}, ctx.adapters.base);
}

}  // namespace memscale::graph_layers
