// memscale/graph/layers/norms.hpp: LayerNorm and RMSNorm, each as the implementation that
// runs it saves tensors for backward (Hugging Face LLaMA-family, lit-gpt, Hugging Face T5,
// Cohere's Python LayerNorm).
#pragma once

#include <cstdint>

#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/tensor.hpp"
#include "memscale/liger.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale::graph_layers {

// A norm over `width` features of `rows` rows (qk-norm: head_dim per head, or a whole
// projection's width).
struct norm_shape {
  std::uint64_t width = 0;
  std::uint64_t rows = 0;
  std::uint64_t weight_rows = 1;  // the weight's rows of `width` (Cohere's qk-norm: one per head)
  norm_site site = norm_site::block;  // which module: Liger's instance patch names some only
};

// The code that computes an RMSNorm: what autograd keeps differs between them.
enum class rms_norm_code : std::uint8_t {
  hf_llama,  // modeling_llama.py LlamaRMSNorm and the families that copy it
  litgpt,    // lit_gpt/rmsnorm.py (the 2023 runs)
  litgpt_fp32,  // litgpt/model.py RMSNorm @ b0ea1772 (v0.4.9): x.float(), the product cast back
  hf_t5,     // modeling_t5.py T5LayerNorm
  torchtune, // torchtune/modules/rms_norm.py: F.rms_norm(x.float(), ..., weight=scale).to(x.dtype)
  liger,     // Liger-Kernel's Triton RMSNorm (ops/rms_norm.py, v0.5.10 @ 44a8f2fb), in_place=True
  liger_out_of_place,  // the same with in_place=False: backward makes a new dX
  hf_gemma,  // modeling_gemma3.py Gemma3RMSNorm (and Gemma's, Gemma 2's): the scale in fp32
};

// Liger's RMSNorm backward reduces the weight's gradient through an fp32 (SM count x width)
// partial (ops/rms_norm.py rms_norm_backward: _dW = torch.empty((sm_count, n_cols), float32)).
// The graph does not know the GPU, so the count is the largest in gpus.hpp: MI300X's 304.
inline constexpr std::uint64_t liger_partial_rows = 304;

// LayerNorm saves its input and per-row mean and rstd in fp32
// (aten/src/ATen/native/layer_norm.cpp).
constexpr tensor layer_norm(op_writer& ops, tensor in, const norm_shape& shape, bool bias, bool trainable) {
  const precision_policy& p = ops.precision();
  op o{.kind = op_kind::norm,
       .weight = {shape.width, 1, 1},
       .bias = bias ? param_tensor{shape.width, 1, 1} : param_tensor{},
       .role = param_role::vector,
       .frozen = !trainable};
  // CUDA autocast runs layer_norm in fp32 (autocast_mode.cpp fp32 list); CPU autocast (torch 1.13)
  // has no layer_norm entry, so it runs in the weights' dtype (torch 1.13 CPU: bf16 input and weight, bf16 output).
  const dtype out_type = (p.autocast && ops.device() == device_kind::cuda) ? dtype::fp32 : p.param;
  o.extra_saved = storage(dtype::fp32, detail::checked_mul(shape.rows, 2));
  o.grad_in = storage(in.type, in.elements);
  const tensor y = ops.emit(o, in.elements, out_type);
  ops.keep(in, y);
  return y;
}

// Liger's LayerNorm (LigerLayerNormFunction, ops/layer_norm.py @ 44a8f2fb): Y in the input's
// dtype (a custom Function: no autocast fp32 output), Mean and RSTD of one element per row in
// the input's dtype (not fp32 as torch's); saves X, W, B, Mean, RSTD. Backward makes DX and the
// (SM count x width) partials _DW and _DB in the weight's dtype, summed into DW and DB.
constexpr tensor liger_layer_norm(op_writer& ops, tensor in, const norm_shape& shape, bool bias, bool trainable) {
  op o{.kind = op_kind::norm,
       .weight = {shape.width, 1, 1},
       .bias = bias ? param_tensor{shape.width, 1, 1} : param_tensor{},
       .role = param_role::vector,
       .frozen = !trainable};
  o.extra_saved = storage(in.type, detail::checked_mul(shape.rows, 2));
  o.grad_in = storage(in.type, in.elements);
  const auto partial = detail::checked_mul(liger_partial_rows, shape.width);
  if (trainable) o.bwd_temp = storage(ops.precision().param, detail::checked_mul(partial, bias ? 2 : 1));
  const tensor y = ops.emit(o, in.elements, in.type);
  ops.keep(in, y);
  return y;
}

// mean.dim's backward keeps its input (an RMSNorm's x^2) before torch 2.2: its formula's
// self.sym_numel() is saved as a number only since pytorch PR #109935 (merged 2023-09-23, first
// in v2.2.0: tools/autograd/load_derivatives.py saved_variables); until then codegen saved self.
constexpr bool mean_keeps_input(std::uint32_t torch_version) { return torch_version < 202; }

// RMSNorm as Hugging Face writes it (modeling_llama.py LlamaRMSNorm) saves the fp32 input,
// rsqrt and the normalized x; lit-gpt's computes in the input dtype; T5's is below.
constexpr tensor rms_norm(op_writer& ops, tensor in, const norm_shape& shape, rms_norm_code code, bool trainable,
                          std::uint32_t torch_version) {
  if (code == rms_norm_code::hf_t5) {
    // T5LayerNorm: variance = x.to(fp32).pow(2).mean(-1); x * rsqrt(variance + eps), cast to
    // the weight's dtype when that is 16-bit; weight * x. pow and the first mul save x (or
    // its fp32 copy); the mean keeps x^2 under the same torch rule as HF's LLaMA RMSNorm
    // (mean_keeps_input: traced on torch 1.13, docs/research/cpu-activations.md sec. 1); the mul
    // saves rsqrt (one fp32 per row); the weight mul saves the normalized x (fp32, or its
    // 16-bit cast under pure 16-bit).
    const precision_policy& p = ops.precision();
    op o{.kind = op_kind::norm, .weight = {shape.width, 1, 1}, .role = param_role::vector, .frozen = !trainable};
    const bool fp32_in = in.type == dtype::fp32;
    o.extra_saved = storage(dtype::fp32, shape.rows);                     // rsqrt(variance + eps)
    if (mean_keeps_input(torch_version)) o.extra_saved += storage(dtype::fp32, in.elements);  // x^2
    if (!fp32_in) o.extra_saved += storage(dtype::fp32, in.elements);     // x.to(float32), saved by pow
    // x * rsqrt: fp32 (type promotion); a 16-bit weight casts it back.
    const bool cast_back = p.param != dtype::fp32;
    o.extra_saved += storage(cast_back ? p.param : dtype::fp32, in.elements);
    if (cast_back) o.fwd_temp = storage(dtype::fp32, in.elements);
    o.grad_in = storage(in.type, in.elements);
    const tensor y = ops.emit(o, in.elements, cast_back ? p.param : dtype::fp32);
    ops.keep(in, y);  // x itself: saved by the first mul
    return y;
  }
  op o{.kind = op_kind::norm, .weight = {shape.width, 1, 1}, .role = param_role::vector, .frozen = !trainable};
  o.extra_saved = storage(dtype::fp32, shape.rows);  // rsqrt(variance + eps)
  if (code == rms_norm_code::hf_gemma || code == rms_norm_code::litgpt_fp32) {
    // litgpt 0.4's RMSNorm (litgpt/model.py lines 483-490 @ b0ea1772, the same at main 26857050)
    // saves what Gemma's does: x * x keeps the fp32 x, x * rsqrt keeps it and rsqrt,
    // x_normed * weight.float() keeps the weight's fp32 copy and (when the weight trains) x_normed;
    // (...).to(dtype) copies the fp32 product back.
    // Gemma3RMSNorm.forward (modeling_gemma3.py@f14d0cbc, the same code in v5.17.0; PR #29402):
    // x.float(); x * rsqrt(x.pow(2).mean(-1) + eps); * (1.0 + weight.float()); .type_as(x). pow and
    // the first mul keep the fp32 x (the input itself when fp32; x^2 too while mean_keeps_input);
    // the scale mul keeps 1 + weight (fp32, new) for the input's gradient and the fp32 normalized x
    // for the weight's; the fp32 product is copied back to the input dtype. H100 listing:
    // docs/research/gpu/saved_tensors_families_h100.json (gemma3: two fp32 (b, s, h) per norm).
    const bool fp32_in = in.type == dtype::fp32;
    if (!fp32_in) o.extra_saved += storage(dtype::fp32, in.elements);
    if (mean_keeps_input(torch_version)) o.extra_saved += storage(dtype::fp32, in.elements);
    o.extra_saved += storage(dtype::fp32, o.weight.elements());  // 1.0 + weight.float() (litgpt: weight.float())
    if (trainable) o.extra_saved += storage(dtype::fp32, in.elements);
    // The product (copied back when the input is 16-bit), beside the normalized x when that is not kept.
    const std::uint64_t temporaries = (fp32_in ? 0 : 1) + (trainable ? 0 : 1);
    o.fwd_temp = storage(dtype::fp32, detail::checked_mul(in.elements, temporaries));
    o.grad_in = storage(in.type, in.elements);
    const tensor y = ops.emit(o, in.elements, in.type);
    if (fp32_in) ops.keep(in, y);
    return y;
  }
  if (code == rms_norm_code::liger || code == rms_norm_code::liger_out_of_place) {
    // Y = (X * rstd) * W in the input dtype (casting modes "llama" and "gemma" alike), one fp32
    // rstd per row; saves X (a view of the input), W and rstd. With in_place=True (the default of
    // liger_kernel/transformers/rms_norm.py) backward writes dX into dY, so no new input gradient
    // is made; with in_place=False it writes a new one, torch.zeros_like(dY).
    if (trainable) o.bwd_temp = storage(dtype::fp32, detail::checked_mul(liger_partial_rows, shape.width));
    const tensor y = ops.emit(o, in.elements, in.type);
    ops.at(y).grad_in = code == rms_norm_code::liger ? bytes{} : storage(in.type, in.elements);
    ops.keep(in, y);
    return y;
  }
  if (code == rms_norm_code::torchtune) {
    // F.rms_norm's composite (aten/src/ATen/native/layer_norm.cpp rms_norm_symint) on the fp32
    // copy torchtune passes it (modules/rms_norm.py @ v0.6.1): x * rsqrt(mean(x^2) + eps) keeps
    // the fp32 x (and x^2 while mean_keeps_input); * weight keeps the fp32 normalized x when the
    // scale trains and makes an fp32 product, which .to(x.dtype) copies back.
    const bool fp32_in = in.type == dtype::fp32;
    if (!fp32_in) o.extra_saved += storage(dtype::fp32, in.elements);
    if (mean_keeps_input(torch_version)) o.extra_saved += storage(dtype::fp32, in.elements);
    if (trainable) o.extra_saved += storage(dtype::fp32, in.elements);
    // The product, beside the normalized x when that is not kept.
    o.fwd_temp = storage(dtype::fp32, detail::checked_mul(in.elements, trainable ? 1 : 2));
    o.grad_in = storage(in.type, in.elements);
    const tensor y = ops.emit(o, in.elements, in.type);
    if (fp32_in) ops.keep(in, y);
    return y;
  }
  // normalized x, saved by weight * x only when the weight takes a gradient (a frozen
  // LoRA base: derivatives.yaml mul, other is needed for self's gradient only).
  if (trainable) o.extra_saved += storage(in.type, in.elements);
  // hidden.to(float32): a new tensor unless the input is fp32 already (then the input
  // itself is what pow and mul save). lit-gpt's RMSNorm of the 2023 runs has no upcast
  // (lit_gpt/rmsnorm.py @ 8641822: x * rsqrt(mean(x * x) + eps) in the input dtype).
  if (in.type != dtype::fp32 && code != rms_norm_code::litgpt) o.extra_saved += storage(dtype::fp32, in.elements);
  // The mean over x^2 keeps x^2 (fp32 in HF's pow(2).mean(-1); lit-gpt's x * x in the input
  // dtype): measured on torch 1.13 (docs/research/cpu-activations.md sec. 1), gone on 2.11
  // (docs/gpu-measurements.md).
  if (mean_keeps_input(torch_version))
    o.extra_saved += storage(code == rms_norm_code::litgpt ? in.type : dtype::fp32, in.elements);
  o.grad_in = storage(in.type, in.elements);
  // Under no_grad these are separate tensors, one after another: the fp32 copy, x^2 (gone after
  // its mean), the product, its cast and the weight product (H100 histories with frames,
  // docs/data/gpu_allocator_history/infer-tinyllama-* and gptfast-*: 128, 128, 128, 64, 64 MiB per
  // norm); the generate() walk replays them for gpt-fast (allocator/generate_events.hpp).
  if (code != rms_norm_code::litgpt && ops.records_forward_liveness())
    o.temporaries = in.type == dtype::fp32 ? forward_temporaries::rms_norm_fp32 : forward_temporaries::rms_norm_upcast;
  const tensor y = ops.emit(o, in.elements, in.type);
  if (in.type == dtype::fp32 || code == rms_norm_code::litgpt) ops.keep(in, y);
  return y;
}

// LayerNorm written out in Python in fp32 without bias (transformers
// models/cohere/modular_cohere.py@03ea97ae CohereLayerNorm): x.to(float32); mean; (x - mean)
// .pow(2).mean; (x - mean) * rsqrt(variance + eps), x - mean made a second time; weight.to(float32)
// * x; .to(input dtype). Autograd (tools/autograd/derivatives.yaml) keeps the first x - mean
// (pow), the second and rsqrt (mul), the normalized x (weight * x, for the weight's gradient
// only) and the weight's fp32 copy when the weight is 16-bit; before torch 2.2 the two mean.dim
// calls also keep their inputs, the fp32 x and (x - mean)^2 (mean_keeps_input).
constexpr tensor layer_norm_fp32_python(op_writer& ops, tensor in, const norm_shape& shape, bool trainable,
                                        std::uint32_t torch_version) {
  const precision_policy& p = ops.precision();
  op o{.kind = op_kind::norm,
       .weight = {shape.width, shape.weight_rows, 1},
       .role = param_role::vector,
       .frozen = !trainable};
  const bool fp32_in = in.type == dtype::fp32;
  o.extra_saved = storage(dtype::fp32, shape.rows);                       // rsqrt(variance + eps)
  o.extra_saved += storage(dtype::fp32, detail::checked_mul(in.elements, 2));  // x - mean, twice
  if (trainable) o.extra_saved += storage(dtype::fp32, in.elements);      // the normalized x
  if (p.param != dtype::fp32) o.extra_saved += storage(dtype::fp32, o.weight.elements());  // weight.to(float32)
  if (mean_keeps_input(torch_version)) {
    o.extra_saved += storage(dtype::fp32, in.elements);                // (x - mean)^2
    if (!fp32_in) o.extra_saved += storage(dtype::fp32, in.elements);  // x.to(float32)
  }
  // weight * x is fp32; .to(input dtype) copies it when the input is 16-bit.
  if (!fp32_in) o.fwd_temp = storage(dtype::fp32, in.elements);
  o.grad_in = storage(in.type, in.elements);
  const tensor y = ops.emit(o, in.elements, in.type);
  if (fp32_in && mean_keeps_input(torch_version)) ops.keep(in, y);  // x itself: saved by the first mean
  return y;
}

// The model's norm over `shape`: LayerNorm or RMSNorm as its implementation writes it;
// frozen under LoRA.
constexpr tensor norm(const layer_context& ctx, tensor in, const norm_shape& shape) {
  const bool trainable = !ctx.adapters.enabled;
  if (ctx.model.norm == norm_kind::layernorm && ctx.run.liger_layer_norm)
    return liger_layer_norm(ctx.ops, in, shape, ctx.model.norm_bias, trainable);
  if (ctx.model.norm == norm_kind::layernorm) return layer_norm(ctx.ops, in, shape, ctx.model.norm_bias, trainable);
  if (ctx.model.norm == norm_kind::layernorm_fp32_python)
    return layer_norm_fp32_python(ctx.ops, in, shape, trainable, ctx.run.torch_version);
  const liger_norm_use liger = ctx.run.liger_rms_norm
                                   ? liger_rms_norm_use(ctx.model.liger, ctx.run.liger_norm_patching, shape.site)
                                   : liger_norm_use::kept;
  const rms_norm_code code = liger == liger_norm_use::in_place                ? rms_norm_code::liger
                            : liger == liger_norm_use::out_of_place          ? rms_norm_code::liger_out_of_place
                            : ctx.run.framework == framework_kind::torchtune ? rms_norm_code::torchtune
                            : litgpt_rms_norm_in_fp32(ctx.run)             ? rms_norm_code::litgpt_fp32
                            : ctx.model.impl == implementation::litgpt     ? rms_norm_code::litgpt
                            : ctx.model.rms_norm_fp32_scale                ? rms_norm_code::hf_gemma
                                                                           : rms_norm_code::hf_llama;
  return rms_norm(ctx.ops, in, shape, code, trainable, ctx.run.torch_version);
}

// Llama4TextL2Norm (modeling_llama4.py@000c33fd): x.float() * rsqrt(x.pow(2).mean(-1) + eps), then
// .type_as(x): LLaMA's RMSNorm without its weight, so nothing is saved for a weight gradient.
constexpr tensor l2_norm(const layer_context& ctx, tensor in, const norm_shape& shape) {
  const tensor y = rms_norm(ctx.ops, in, shape, rms_norm_code::hf_llama, false, ctx.run.torch_version);
  op& o = ctx.ops.at(y);
  o.weight = {};
  o.role = param_role::none;
  o.frozen = false;
  return y;
}

// An RMSNorm whose scale is a constant buffer (Gemma3nRMSNorm with_scale=False,
// modeling_gemma3n.py@b87ecf8c): the model's RMSNorm code, nothing kept for a weight gradient,
// no parameter.
constexpr tensor unscaled_rms_norm(const layer_context& ctx, tensor in, const norm_shape& shape) {
  const rms_norm_code code = ctx.model.rms_norm_fp32_scale ? rms_norm_code::hf_gemma : rms_norm_code::hf_llama;
  const tensor y = rms_norm(ctx.ops, in, shape, code, false, ctx.run.torch_version);
  op& o = ctx.ops.at(y);
  o.weight = {};
  o.role = param_role::none;
  o.frozen = false;
  return y;
}

// The model's norm over the hidden width of every token.
constexpr tensor norm(const layer_context& ctx, tensor in) {
  return norm(ctx, in, {.width = ctx.model.hidden, .rows = ctx.tokens});
}

}  // namespace memscale::graph_layers
