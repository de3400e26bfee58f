// memscale/graph/layers/mamba.hpp: the Mamba-1 mixer (selective state-space scan) and its
// block, on either code path that runs it in training:
//   torch: the modeling file's slow_forward (transformers models/mamba/modeling_mamba.py@1160c0f3
//          MambaMixer.slow_forward; models/falcon_mamba/modeling_falcon_mamba.py@11065c9b), a
//          Python loop over the sequence that saves one state per step;
//   fused: mamba-ssm's MambaInnerFn (state-spaces/mamba mamba_ssm/ops/selective_scan_interface.py
//          @0e8d22c5, checkpoint_lvl=1), one autograd Function for conv1d, x_proj, dt_proj, the
//          scan, the gate and out_proj, which MambaMixer.cuda_kernels_forward calls in training;
//          Jamba's mixer, whose dt/B/C norms do not fit MambaInnerFn, calls causal_conv1d_fn and
//          selective_scan_fn as separate Functions around them (mamba1_mixer_separate_kernels).
// What each op saves is listed per block in docs/research/ssm-saved-tensors.txt (torch 1.13).
#pragma once

#include <cstdint>

#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/activations.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/norms.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/tensor.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale::graph_layers {

// mamba-ssm's selective scan keeps the state at the end of every chunk of this many positions
// (selective_scan_interface.py@0e8d22c5 SelectiveScanFn: x of (b, d, ceil(L / 2048), 2 * dstate)).
inline constexpr std::uint64_t selective_scan_chunk = 2048;

// The sizes one mixer reads, resolved once.
struct mamba_shape {
  std::uint64_t tokens = 0;  // B * L
  std::uint64_t batch = 0;
  std::uint64_t seq = 0;
  std::uint64_t hidden = 0;  // H
  std::uint64_t inner = 0;   // D
  std::uint64_t state = 0;   // N
  std::uint64_t conv = 0;    // K
  std::uint64_t rank = 0;    // R

  [[nodiscard]] constexpr std::uint64_t token_elements(std::uint64_t width) const {
    return detail::checked_mul(tokens, width);
  }
  // (B, D, L, N): the discretised A and B of the torch path.
  [[nodiscard]] constexpr std::uint64_t state_per_token() const {
    return detail::checked_mul(tokens, inner, state, detail::quantity{"Mamba scan tensors (tokens x inner x state)"});
  }
  // (B, D, N): one scan state.
  [[nodiscard]] constexpr std::uint64_t one_state() const { return detail::checked_mul(batch, inner, state); }
};

constexpr mamba_shape mamba_shape_of(const layer_context& ctx) {
  const model_spec& m = ctx.model;
  return {.tokens = ctx.tokens,
          .batch = ctx.run.micro_batch,
          .seq = ctx.run.seq_len,
          .hidden = m.hidden,
          .inner = m.ssm_inner,
          .state = m.ssm_state,
          .conv = m.ssm_conv,
          .rank = m.ssm_dt_rank};
}

// FalconMamba's rms_forward on a slice of x_proj's output (dt: R wide, B and C: N wide):
// x.to(float32), pow(2).mean(-1), x * rsqrt(variance + eps), .to(input dtype), no weight
// (modeling_falcon_mamba.py@11065c9b rms_forward). pow and mul keep x (its fp32 copy when
// 16-bit), mean keeps x^2 before torch 2.2 (norms.hpp mean_keeps_input), mul keeps rsqrt.
constexpr tensor weightless_rms(const layer_context& ctx, tensor slice_source, std::uint64_t width,
                                const mamba_shape& s) {
  op_writer& ops = ctx.ops;
  const std::uint64_t n = s.token_elements(width);
  op o{.kind = op_kind::norm};
  o.extra_saved = storage(dtype::fp32, s.tokens);  // rsqrt
  if (slice_source.type != dtype::fp32) o.extra_saved += storage(dtype::fp32, n);  // x.to(float32)
  if (mean_keeps_input(ctx.run.torch_version)) o.extra_saved += storage(dtype::fp32, n);  // x^2
  if (slice_source.type != dtype::fp32) o.fwd_temp = storage(dtype::fp32, n);  // the fp32 product before the cast
  o.grad_in = storage(slice_source.type, n);
  const tensor y = ops.emit(o, n, slice_source.type);
  if (slice_source.type == dtype::fp32) ops.keep(slice_source, y);  // x is a view of x_proj's output
  return y;
}

// JambaRMSNorm (modeling_jamba.py@97bb61d0, LlamaRMSNorm's code) on a slice of x_proj's output:
// weightless_rms, then weight * x.to(input dtype), which keeps the normalised x (its 16-bit copy
// when 16-bit) for the weight's gradient (JambaMambaMixer dt_layernorm, b_layernorm, c_layernorm).
constexpr tensor weighted_rms(const layer_context& ctx, tensor slice_source, std::uint64_t width,
                              const mamba_shape& s) {
  const tensor y = weightless_rms(ctx, slice_source, width, s);
  op& o = ctx.ops.at(y);
  o.weight = param_tensor::vector(width);
  o.role = param_role::vector;
  o.frozen = ctx.adapters.enabled;
  if (!ctx.adapters.enabled) o.extra_saved += storage(slice_source.type, s.token_elements(width));
  return y;
}

// The norm on dt, B or C the model's mixer has (none: the slice of x_proj's output itself).
constexpr tensor dt_bc_norm(const layer_context& ctx, tensor x_dbl, std::uint64_t width, const mamba_shape& s) {
  switch (ctx.model.ssm_dt_norms) {
    case ssm_dt_norm_kind::weightless: return weightless_rms(ctx, x_dbl, width, s);
    case ssm_dt_norm_kind::weighted: return weighted_rms(ctx, x_dbl, width, s);
    case ssm_dt_norm_kind::none: break;
  }
  return x_dbl;
}

// The torch path (MambaMixer.slow_forward without a cache), op by op; `in` is the block norm's
// output. Returns out_proj's output.
constexpr tensor mamba1_mixer_torch(const layer_context& ctx, tensor in) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const base_weight base = ctx.adapters.base;
  const mamba_shape s = mamba_shape_of(ctx);
  const std::uint64_t td = s.token_elements(s.inner);
  // in_proj: (B, L, 2D); conv1d and silu(gate) keep views of it.
  const tensor xz = ops.linear(in, {.rows = s.tokens, .in_features = s.hidden, .out_features = 2 * s.inner,
                                    .bias = m.ssm_proj_bias}, base);
  // Depthwise conv1d, padding K - 1 on both sides: (B, D, L + K - 1); [..., :L] is a view.
  op conv{.kind = op_kind::elementwise,
          .weight = {s.inner, s.conv, 1},
          .bias = m.ssm_conv_bias ? param_tensor::vector(s.inner) : param_tensor{},
          .role = param_role::vector,
          .frozen = ctx.adapters.enabled};
  const std::uint64_t padded = detail::checked_add(s.seq, s.conv - 1);
  const tensor conv_out = ops.emit(conv, detail::checked_mul(s.batch, s.inner, padded), xz.type);
  ops.keep(xz, conv_out);
  // silu on the view [..., :L]: keeps the view, so the whole conv output.
  const tensor hs = ops.emit(op_kind::activation, td, conv_out.type);
  ops.keep(conv_out, hs);
  const tensor u = hs;
  // x_proj: (B, L, R + 2N); dt, B and C are views of it.
  const tensor x_dbl = ops.linear(u, {.rows = s.tokens, .in_features = s.inner,
                                      .out_features = detail::checked_add(s.rank, 2 * s.state)}, base);
  const tensor dt_in = dt_bc_norm(ctx, x_dbl, s.rank, s);
  const tensor b_in = dt_bc_norm(ctx, x_dbl, s.state, s);
  const tensor c_in = dt_bc_norm(ctx, x_dbl, s.state, s);
  // dt_proj (always with a bias), then softplus, which keeps its input.
  const tensor dt = ops.linear(dt_in, {.rows = s.tokens, .in_features = s.rank, .out_features = s.inner, .bias = true},
                               base);
  const tensor delta = input_keeping_activation(ops, dt);  // softplus
  // A = -exp(A_log.float()): exp keeps its (D, N) fp32 result, the mul below keeps A.
  op a_op{.kind = op_kind::elementwise,
          .weight = {s.inner, s.state, 1},
          .role = param_role::vector,
          .frozen = ctx.adapters.enabled};
  a_op.extra_saved = storage(dtype::fp32, detail::checked_mul(s.inner, s.state, 2));
  const tensor a = ops.emit(a_op, detail::checked_mul(s.inner, s.state), dtype::fp32);
  ops.at(a).transient = true;
  // discrete_A = exp(A * dt): (B, D, L, N) fp32; exp keeps its result, the mul keeps dt.
  const std::uint64_t tdn = s.state_per_token();
  const tensor discrete_a = ops.elementwise(tdn, dtype::fp32);
  ops.keep_own_output(discrete_a);
  ops.keep(delta, discrete_a);
  // discrete_B = dt * B.float(): keeps dt and B's fp32 copy (a view of x_proj's output in fp32).
  const tensor discrete_b = ops.elementwise(tdn, dtype::fp32);
  if (b_in.type == dtype::fp32) ops.keep(b_in, discrete_b);
  else ops.at(discrete_b).extra_saved = storage(dtype::fp32, s.token_elements(s.state));
  // deltaB_u = discrete_B * hs.float(): keeps discrete_B and hs's fp32 copy. deltaB_u itself
  // feeds only adds, but slow_forward holds it in a local until it returns.
  const tensor delta_bu = ops.elementwise(tdn, dtype::fp32);
  ops.keep(discrete_b, delta_bu);
  if (hs.type == dtype::fp32) ops.keep(u, delta_bu);
  else ops.at(delta_bu).extra_saved = storage(dtype::fp32, td);
  ops.at(delta_bu).transient = true;
  ops.hold_in_frame(storage(dtype::fp32, tdn));
  // The loop: ssm_state = dA[:, :, i] * ssm_state + dBu[:, :, i] keeps the previous state,
  // matmul(ssm_state.to(dtype), C[:, i]) keeps the cast state: L + 1 fp32 states in fp32 (the
  // cast is the state itself); in 16 bits L - 1 fp32 states (step 0's zero state is 16-bit, the
  // last state is kept by nothing) and L + 1 16-bit casts. torch.stack makes (B, D, L).
  // Under autocast the state stays fp32 and matmul casts it: each step also saves its 16-bit
  // copy, L of them (aten/src/ATen/autocast_mode.cpp: matmul is a lower_precision_fp op). H100,
  // torch 2.11, mamba-130m 2 x 1024 amp_bf16 was -12.6% without them.
  op scan{.kind = op_kind::elementwise};
  const std::uint64_t state = s.one_state();
  const precision_policy& policy = ops.precision();
  if (in.type == dtype::fp32)
    scan.extra_saved = storage(dtype::fp32, detail::checked_mul(state, s.seq + 1)) +
                       (policy.autocast ? storage(policy.matmul, detail::checked_mul(state, s.seq)) : bytes{});
  else
    scan.extra_saved = storage(dtype::fp32, detail::checked_mul(state, s.seq - 1)) +
                       storage(in.type, detail::checked_mul(state, s.seq + 1));
  // Backward: each step's select of dA and of dBu returns a zero-filled gradient of the whole
  // (B, D, L, N) tensor, accumulated into one buffer per input: two accumulators and the step's
  // new full-size gradient are alive at once (derivatives.yaml select: select_backward).
  scan.bwd_temp = storage(dtype::fp32, detail::checked_mul(tdn, 3));
  scan.bwd_temp_pieces = 3;  // three tensors, each its own block (the H100 falcon_mamba history)
  const tensor stacked = ops.emit(scan, td, in.type);
  // The scan's input gradient is the accumulated (B, D, L, N) gradient of dA (or dBu).
  ops.at(stacked).grad_in = storage(dtype::fp32, tdn);
  ops.keep(discrete_a, stacked);
  ops.keep(c_in, stacked);
  // The list of per-step outputs stays referenced until slow_forward returns.
  ops.hold_in_frame(storage(in.type, td));
  // + hs * D: the mul keeps hs (and the D parameter).
  op skip{.kind = op_kind::elementwise,
          .weight = param_tensor::vector(s.inner),
          .role = param_role::vector,
          .frozen = ctx.adapters.enabled};
  const tensor hs_d = ops.emit(skip, td, hs.type);
  ops.keep(u, hs_d);
  // Made after x_proj's and the scan's reads of hs, so its backward runs first: hs's gradient
  // waits in silu's input buffer through theirs (deltaB_u's part joins it there); the scan's
  // output gradient is the add's, not this one.
  ops.at(hs_d).grad_in = {};
  ops.gradient_waits_for(hs_d, hs, storage(hs.type, td));
  const tensor summed = ops.add(stacked, hs_d);
  // * silu(gate): silu keeps the gate (a view of in_proj's output); the mul keeps both factors.
  const tensor gate = ops.emit(op_kind::activation, td, xz.type);
  ops.keep(xz, gate);
  const tensor gated = ops.product(summed, gate, td, td, summed.type);
  // The gate is a chunk of in_proj's output: silu's backward, made last so run first, hands its
  // gradient to chunk's SplitBackward, which waits for the other half's through the scan's and
  // conv1d's backward (slow_forward: `hidden_states, gate = projected_states.chunk(2, dim=1)`).
  ops.gradient_waits_for(gate, xz, ops.at(gate).grad_in);
  const tensor out = ops.linear(gated, {.rows = s.tokens, .in_features = s.inner, .out_features = s.hidden,
                                        .bias = m.ssm_proj_bias}, base);
  ops.close_frame();  // slow_forward returns
  return out;
}

// The fused path: in_proj (an nn.Linear, keeps its input), then MambaInnerFn, written as the
// ops that own its weights, with what ctx.save_for_backward keeps spread over them: xz as a
// contiguous (B, 2D, L) copy, x_dbl, B and C as contiguous copies, the scan output before the
// gate, the chunk-boundary states (fp32) and, under autocast, the cast x_proj, dt_proj and
// out_proj weights. conv1d's output and delta are recomputed in backward (checkpoint_lvl 1).
constexpr tensor mamba1_mixer_fused(const layer_context& ctx, tensor in) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const precision_policy& p = ops.precision();
  const base_weight base = ctx.adapters.base;
  const bool frozen = ctx.adapters.enabled;
  const mamba_shape s = mamba_shape_of(ctx);
  const dtype a = p.matmul;
  const std::uint64_t td = s.token_elements(s.inner);
  const std::uint64_t proj = detail::checked_add(s.rank, 2 * s.state);
  // in_proj's output is not kept: the Function keeps a contiguous copy of it (below).
  ops.linear(in, {.rows = s.tokens, .in_features = s.hidden, .out_features = 2 * s.inner,
                                    .bias = m.ssm_proj_bias}, base);
  const auto weight_cast = [&](std::uint64_t elements) {
    return p.casts_weights() ? storage(p.matmul, elements) : bytes{};
  };
  // causal_conv1d_fwd on the contiguous xz copy: the conv output lives through the forward only.
  op conv{.kind = op_kind::elementwise,
          .transient = true,
          .weight = {s.inner, s.conv, 1},
          .bias = m.ssm_conv_bias ? param_tensor::vector(s.inner) : param_tensor{},
          .role = param_role::vector,
          .frozen = frozen};
  conv.extra_saved = storage(a, s.token_elements(2 * s.inner));  // xz, contiguous
  // Backward of the whole Function (charged once, here, where its gradients are made): dxz,
  // dout_y, the recomputed conv1d_out and delta, dx_dbl and the scan's fp32 dB and dC.
  conv.bwd_temp = storage(a, detail::checked_add(s.token_elements(2 * s.inner), detail::checked_mul(td, 3))) +
                  storage(a, s.token_elements(proj)) + storage(dtype::fp32, s.token_elements(2 * s.state));
  const tensor conv_out = ops.emit(conv, td, a);
  ops.at(conv_out).grad_in = storage(a, s.token_elements(2 * s.inner));  // dxz
  op x_proj{.kind = op_kind::linear,
            .transient = true,
            .weight = {proj, s.inner, 1},
            .role = param_role::matmul,
            .frozen = frozen};
  x_proj.extra_saved = storage(a, s.token_elements(proj)) + storage(a, s.token_elements(2 * s.state)) +
                       weight_cast(detail::checked_mul(proj, s.inner));
  if (m.ssm_dt_norms == ssm_dt_norm_kind::weightless)
    x_proj.extra_saved += storage(dtype::fp32, detail::checked_mul(s.tokens, 3));  // rstd of dt, B and C
  x_proj.grad_in = storage(a, td);
  ops.emit(x_proj, s.token_elements(proj), a);
  op dt_proj{.kind = op_kind::linear,
             .transient = true,
             .weight = {s.inner, s.rank, 1},
             .bias = param_tensor::vector(s.inner),
             .role = param_role::matmul,
             .frozen = frozen};
  dt_proj.extra_saved = weight_cast(detail::checked_mul(s.inner, s.rank));
  dt_proj.grad_in = storage(a, s.token_elements(s.rank));
  ops.emit(dt_proj, td, a);
  // The scan (A_log, D): keeps its output and the chunk-boundary states.
  op scan{.kind = op_kind::elementwise,
          .weight = {s.inner, s.state, 1},
          .bias = param_tensor::vector(s.inner),
          .role = param_role::vector,
          .frozen = frozen};
  const std::uint64_t chunks = detail::ceil_div(s.seq, selective_scan_chunk);
  scan.extra_saved = storage(a, td) + storage(dtype::fp32, detail::checked_mul(detail::checked_mul(s.batch, s.inner), chunks, 2 * s.state));
  scan.fwd_temp = storage(a, td);  // out_z = out * silu(z)
  const tensor y = ops.emit(scan, td, a);
  ops.at(y).transient = true;
  op out_proj{.kind = op_kind::linear,
              .weight = {s.hidden, s.inner, 1},
              .bias = m.ssm_proj_bias ? param_tensor::vector(s.hidden) : param_tensor{},
              .role = param_role::matmul,
              .frozen = frozen};
  out_proj.extra_saved = weight_cast(detail::checked_mul(s.hidden, s.inner));
  out_proj.grad_in = storage(a, td);
  return ops.emit(out_proj, s.token_elements(s.hidden), a);
}

// A matmul over a transposed (B, D, L) tensor folds it into a contiguous (B*L, D) copy, which mm
// saves in its place (aten/src/ATen/native/LinearAlgebra.cpp _matmul_impl: t1->reshape).
constexpr tensor contiguous_rows(const layer_context& ctx, tensor transposed) {
  return ctx.ops.elementwise(transposed, transposed.elements, transposed.type);
}

// Jamba's kernel path (JambaMambaMixer.cuda_kernels_forward in training, modeling_jamba.py@008f5c8c),
// op by op: in_proj; causal_conv1d_fn on the (B, D, L) half of its output, a transposed view,
// which CausalConv1dFn saves, so the whole output stays (causal_conv1d_interface.py@dedc05ff);
// x_proj on the conv output's contiguous copy; the three JambaRMSNorms as on the torch path;
// dt_proj with its bias zeroed (the scan adds it); A = -exp(A_log.float()); selective_scan_fn;
// out_proj on the scan output's contiguous copy.
constexpr tensor mamba1_mixer_separate_kernels(const layer_context& ctx, tensor in) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const base_weight base = ctx.adapters.base;
  const bool frozen = ctx.adapters.enabled;
  const mamba_shape s = mamba_shape_of(ctx);
  const std::uint64_t td = s.token_elements(s.inner);
  const std::uint64_t tn = s.token_elements(s.state);
  const tensor xz = ops.linear(in, {.rows = s.tokens, .in_features = s.hidden, .out_features = 2 * s.inner,
                                    .bias = m.ssm_proj_bias}, base);
  const dtype e = xz.type;
  op conv{.kind = op_kind::elementwise,
          .weight = {s.inner, s.conv, 1},
          .bias = m.ssm_conv_bias ? param_tensor::vector(s.inner) : param_tensor{},
          .role = param_role::vector,
          .frozen = frozen};
  const tensor u = ops.emit(conv, td, e);  // u: the scan saves it
  ops.keep(xz, u);
  const tensor x_dbl = ops.linear(contiguous_rows(ctx, u), {.rows = s.tokens, .in_features = s.inner,
                                                            .out_features = detail::checked_add(s.rank, 2 * s.state)}, base);
  const tensor dt_in = dt_bc_norm(ctx, x_dbl, s.rank, s);
  const tensor b_in = dt_bc_norm(ctx, x_dbl, s.state, s);
  const tensor c_in = dt_bc_norm(ctx, x_dbl, s.state, s);
  const tensor dt = ops.linear(dt_in, {.rows = s.tokens, .in_features = s.rank, .out_features = s.inner, .bias = true},
                               base);
  ops.at(dt).transient = true;  // the scan saves its contiguous copy
  // A = -exp(A_log.float()): exp keeps its (D, N) fp32 result, the scan saves A.
  op a_op{.kind = op_kind::elementwise,
          .weight = {s.inner, s.state, 1},
          .role = param_role::vector,
          .frozen = frozen};
  a_op.extra_saved = storage(dtype::fp32, detail::checked_mul(s.inner, s.state, 2));
  const tensor a = ops.emit(a_op, detail::checked_mul(s.inner, s.state), dtype::fp32);
  ops.at(a).transient = true;
  // SelectiveScanFn (selective_scan_interface.py@01887ed7): delta (dt_proj's output transposed),
  // B and C (the norms' outputs transposed) and the gate z (a view of in_proj's output) are
  // strided along L, so it saves contiguous copies of them; with u, the chunk-boundary states x
  // (fp32) and out, the scan output before the gate. It returns out_z = out * silu(z).
  op scan{.kind = op_kind::elementwise,
          .weight = param_tensor::vector(s.inner),  // D
          .role = param_role::vector,
          .frozen = frozen};
  const std::uint64_t chunks = detail::ceil_div(s.seq, selective_scan_chunk);
  scan.extra_saved = storage(e, detail::checked_mul(td, 3)) + storage(b_in.type, tn) + storage(c_in.type, tn) +
                     storage(dtype::fp32, detail::checked_mul(detail::checked_mul(s.batch, s.inner), chunks, 2 * s.state));
  // Backward: dout's contiguous copy, ddelta and dz besides du, and fp32 dB and dC
  // (csrc/selective_scan/selective_scan.cpp@23f42a16 selective_scan_bwd: variable B and C in float32).
  scan.bwd_temp = storage(e, detail::checked_mul(td, 3)) + storage(dtype::fp32, detail::checked_mul(tn, 2));
  const tensor y = ops.emit(scan, td, e);
  ops.keep(u, y);
  ops.at(y).transient = true;  // out_proj saves its contiguous copy
  // dz reaches chunk's SplitBackward first and waits there for conv1d's dx.
  ops.gradient_waits_for(y, xz, storage(e, td));
  return ops.linear(contiguous_rows(ctx, y), {.rows = s.tokens, .in_features = s.inner, .out_features = s.hidden,
                                              .bias = m.ssm_proj_bias}, base);
}

// The mixer on the path the run uses (training.hpp ssm_kernels_of); on the kernel path a mixer
// with weighted dt/B/C norms (Jamba) runs its separate kernels.
constexpr tensor mamba1_mixer(const layer_context& ctx, tensor in) {
  if (ssm_kernels_of(ctx.run) == ssm_kernel_choice::torch) return mamba1_mixer_torch(ctx, in);
  return ctx.model.ssm_dt_norms == ssm_dt_norm_kind::weighted ? mamba1_mixer_separate_kernels(ctx, in)
                                                               : mamba1_mixer_fused(ctx, in);
}

// The residual stream's dtype: fp32 under residual_in_fp32, else the parameters'.
constexpr dtype mamba_stream_dtype(const layer_context& ctx) {
  return ctx.model.residual_fp32 ? dtype::fp32 : ctx.ops.stream_dtype();
}

// MambaBlock: residual = x; x = norm(x.to(norm.weight.dtype)); residual.to(float32) under
// residual_in_fp32; residual + mixer(x) (modeling_mamba.py@1160c0f3 MambaBlock.forward).
constexpr tensor mamba1_block(const layer_context& ctx) {
  op_writer& ops = ctx.ops;
  const dtype stream = mamba_stream_dtype(ctx);
  const std::uint64_t width = detail::checked_mul(ctx.tokens, ctx.model.hidden);
  tensor x = ops.emit(op_kind::stream, width, stream);
  const tensor residual = x;
  if (x.type != ops.stream_dtype()) {
    x = ops.elementwise(width, ops.stream_dtype());  // .to(norm.weight.dtype): a 16-bit copy the norm reads
    ops.at(x).transient = true;
  }
  const tensor mixed = mamba1_mixer(ctx, norm(ctx, x));
  return ops.add(residual, mixed);
}

}  // namespace memscale::graph_layers
