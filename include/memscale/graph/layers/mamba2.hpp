// memscale/graph/layers/mamba2.hpp: the Mamba-2 mixer (chunked state-space duality, SSD) and its
// block, on either code path that runs it in training:
//   torch: the modeling file's torch_forward (transformers models/mamba2/modeling_mamba2.py
//          @4711664e Mamba2Mixer.torch_forward, the "ssd naive implementation without einsums"),
//          written with broadcast products that materialise per-chunk (Q x Q) and per-state tensors;
//   fused: mamba-ssm's MambaSplitConv1dScanCombinedFn (state-spaces/mamba mamba_ssm/ops/triton/
//          ssd_combined.py@d757aef1 mamba_split_conv1d_scan_combined), one autograd Function for
//          conv1d, the chunked scan, the gated RMSNorm and out_proj, which
//          Mamba2Mixer.cuda_kernels_forward calls in training (self.training, no cache).
// What each op saves is listed per block in docs/research/ssm-saved-tensors.txt (torch 1.13).
#pragma once

#include <cstdint>

#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/mamba.hpp"
#include "memscale/graph/layers/norms.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/tensor.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale::graph_layers {

// The sizes one Mamba-2 mixer reads, resolved once.
struct mamba2_shape {
  std::uint64_t tokens = 0;  // T = B * L
  std::uint64_t padded = 0;  // B * L_pad: L rounded up to a whole chunk (pad_tensor_by_size)
  std::uint64_t batch = 0;
  std::uint64_t seq = 0;
  std::uint64_t hidden = 0;  // H
  std::uint64_t inner = 0;   // D = h * P
  std::uint64_t heads = 0;   // h
  std::uint64_t groups = 0;  // G
  std::uint64_t state = 0;   // N
  std::uint64_t conv = 0;    // K
  std::uint64_t chunk = 0;   // Q
  std::uint64_t chunks = 0;  // c = L_pad / Q

  // conv1d runs over x, B and C: D + 2GN channels.
  [[nodiscard]] constexpr std::uint64_t conv_dim() const {
    return detail::checked_add(inner, detail::checked_mul(2, groups, state));
  }
  // in_proj: gate (D), xBC (conv_dim), dt (h).
  [[nodiscard]] constexpr std::uint64_t projection() const {
    return detail::checked_add(detail::checked_add(inner, conv_dim()), heads);
  }
  [[nodiscard]] constexpr std::uint64_t token_elements(std::uint64_t width) const {
    return detail::checked_mul(tokens, width);
  }
  [[nodiscard]] constexpr std::uint64_t padded_elements(std::uint64_t width) const {
    return detail::checked_mul(padded, width, detail::quantity{"Mamba-2 chunked tensors (padded tokens x width)"});
  }
  // (B, c, h, P, N): the states at every chunk boundary.
  [[nodiscard]] constexpr std::uint64_t chunk_states(std::uint64_t boundaries) const {
    return detail::checked_mul(batch, boundaries, detail::checked_mul(inner, state));
  }
};

constexpr mamba2_shape mamba2_shape_of(const layer_context& ctx) {
  const model_spec& m = ctx.model;
  const std::uint64_t chunks = detail::ceil_div(ctx.run.seq_len, m.ssm_chunk);
  return {.tokens = ctx.tokens,
          .padded = detail::checked_mul(ctx.run.micro_batch, chunks, m.ssm_chunk),
          .batch = ctx.run.micro_batch,
          .seq = ctx.run.seq_len,
          .hidden = m.hidden,
          .inner = m.ssm_inner,
          .heads = m.ssm_heads,
          .groups = m.ssm_groups,
          .state = m.ssm_state,
          .conv = m.ssm_conv,
          .chunk = m.ssm_chunk,
          .chunks = chunks};
}

// The gate is a slice of in_proj's output, and the gated norm (or silu) using it was made last, so
// its backward runs first: the gate's gradient waits in split's SplitWithSizesBackward for xBC's,
// which the first op on xBC (conv1d, or Falcon-H1's autocast copy) hands over
// (modeling_mamba2.py@4711664e torch_forward: `_, _, gate, hidden_states_B_C, dt =
// projected_states.split(...)`; Falcon-H1's torch_forward the same).
constexpr void gate_waits(const layer_context& ctx, tensor made_by, tensor projection, dtype gate) {
  ctx.ops.gradient_waits_for(made_by, projection, storage(gate, mamba2_shape_of(ctx).token_elements(ctx.model.ssm_inner)));
}

// A broadcast product's backward (MulBackward0, derivatives.yaml mul: grad * other, grad * self)
// returns both input gradients at the product's full shape; the engine reduces each to its
// input's shape only after the node returns (torch/csrc/autograd/engine.cpp validate_outputs:
// at::sum_to), so two product-sized tensors are alive at once.
//
// The torch path (torch_forward without a cache), op by op; `in` is the block norm's output.
// Every tensor the SSD part makes is fp32 (hidden_states, B and C are .float()-ed). torch_forward
// binds G_intermediate, M_intermediate, D_residual, Y_diag, C_times_states and Y_off to locals,
// which live until it returns (after out_proj). Returns out_proj's output.
constexpr tensor mamba2_mixer_torch(const layer_context& ctx, tensor in) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const base_weight base = ctx.adapters.base;
  const bool frozen = ctx.adapters.enabled;
  const mamba2_shape s = mamba2_shape_of(ctx);
  constexpr dtype f = dtype::fp32;
  const std::uint64_t td = s.token_elements(s.inner);
  const std::uint64_t pd = s.padded_elements(s.inner);
  const std::uint64_t phn = s.padded_elements(detail::checked_mul(s.heads, s.state));
  const std::uint64_t pq = s.padded_elements(detail::checked_mul(s.chunk, s.heads));  // (b, c, Q, Q, h)
  // in_proj: (B, L, 2D + 2GN + h); gate, xBC and dt are views of it.
  tensor zxbcdt = ops.linear(in, {.rows = s.tokens, .in_features = s.hidden, .out_features = s.projection(),
                                  .bias = m.ssm_proj_bias}, base);
  // conv1d runs in the matmul dtype under autocast (autocast_mode.cpp lower_precision_fp list).
  const dtype e = zxbcdt.type;
  tensor conv_in = zxbcdt;
  if (m.mup_multipliers) {
    // Falcon-H1: projected_states * mup_vector, a (1, 1, projection) float buffer
    // (register_buffer), in the parameters' dtype: under autocast (fp32 parameters) the product
    // is promoted to fp32 (the falcon_h1 H100 history keeps a 26.19 MiB product, 2 x 1024 x 3352
    // x 4 bytes); it replaces in_proj's output, which nothing keeps (modular_falcon_h1.py@3c0a5c70
    // FalconH1Mixer.torch_forward).
    ops.at(zxbcdt).transient = true;
    const dtype product = ops.precision().autocast ? ops.precision().param : zxbcdt.type;
    zxbcdt = ops.elementwise(zxbcdt.elements, product);
    conv_in = zxbcdt;
    // conv1d's autocast copy of the fp32 xBC slice is what it keeps.
    if (product != e) conv_in = ops.elementwise(s.token_elements(s.conv_dim()), e);
  }
  const dtype dt_type = zxbcdt.type;  // dt is a view of the (promoted) projection
  // Depthwise conv1d over xBC.transpose(1, 2), padding K - 1: (B, conv_dim, L + K - 1); it keeps
  // its input, a view of in_proj's output.
  op conv{.kind = op_kind::elementwise,
          .weight = {s.conv_dim(), s.conv, 1},
          .bias = m.ssm_conv_bias ? param_tensor::vector(s.conv_dim()) : param_tensor{},
          .role = param_role::vector,
          .frozen = frozen};
  const tensor conv_out =
      ops.emit(conv, detail::checked_mul(s.batch, s.conv_dim(), detail::checked_add(s.seq, s.conv - 1)), e);
  ops.keep(conv_in, conv_out);
  // silu on the view [..., :L]: keeps the whole conv output.
  const tensor xbc = ops.emit(op_kind::activation, s.token_elements(s.conv_dim()), e);
  ops.keep(conv_out, xbc);
  // dt = clamp(softplus(dt + dt_bias), time_step_limit); A = -exp(A_log.float()). The add's
  // output (softplus's input) and softplus's (clamp's input) are saved; the (h,) A is noise.
  op dt_op{.kind = op_kind::elementwise,
           .weight = param_tensor::vector(s.heads),  // A_log
           .bias = param_tensor::vector(s.heads),    // dt_bias
           .role = param_role::vector,
           .frozen = frozen};
  dt_op.extra_saved = storage(dt_type, s.token_elements(2 * s.heads)) + storage(f, 2 * s.heads);
  const tensor dt = ops.emit(dt_op, s.token_elements(s.heads), dt_type);
  // hidden_states.reshape(b, L, h, P).float(): splitting the last dim of the slice is a view, so
  // in fp32 hs is xBC's storage itself; in 16 bits .float() makes a (b, L, h, P) fp32 copy.
  const tensor hs = e == f ? xbc : ops.elementwise(td, f);
  // D_residual = D[..., None] * pad(hs): keeps the padded copy; D_residual is a local.
  op skip{.kind = op_kind::elementwise,
          .weight = param_tensor::vector(s.heads),
          .role = param_role::vector,
          .frozen = frozen};
  skip.extra_saved = storage(f, pd);
  const tensor d_residual = ops.emit(skip, pd, f);
  ops.keep(hs, d_residual);
  ops.at(d_residual).transient = true;
  ops.hold_in_frame(storage(f, pd));
  // hs * dt[..., None] (keeps hs and dt), then its chunked padded copy, which the intra-chunk
  // product and the chunk states keep.
  const tensor hs_dt = ops.elementwise(td, f);
  ops.keep(hs, hs_dt);
  ops.keep(dt, hs_dt);
  ops.at(hs_dt).transient = true;
  // Its backward hands hs's gradient to hs's node, which D_residual's product read first: the
  // gradient waits there through D_residual's backward; what goes on down the chain is dt's.
  ops.at(hs_dt).grad_in = storage(f, s.token_elements(s.heads));
  ops.gradient_waits_for(hs_dt, hs, storage(f, td));
  const tensor hs_chunked = ops.elementwise(pd, f);
  // B and C: .float() copies of (b, L, G, N), repeated to every head (B.repeat(1, 1, h // G, 1)),
  // then padded into chunks: two (b, L_pad, h, N) fp32 tensors; while the second is padded the
  // first's padded copy and the second's repeat are alive.
  op bc{.kind = op_kind::elementwise};
  bc.fwd_temp = storage(f, s.token_elements(detail::checked_mul(s.heads, s.state)));
  const tensor b_c = ops.emit(bc, detail::checked_mul(phn, 2), f);
  // A * dt, chunked, cumsum; L = exp(segment_sum(A)): (b, h, c, Q, Q), kept by its mul. The
  // segment sum's masked_fill keeps its (Q, Q) bool masks; exp(A_cumsum[..., -1:] - A_cumsum)
  // and exp(A_cumsum) keep their (b, h, c, Q) results. segment_sum's expand -> masked_fill ->
  // cumsum -> masked_fill makes two (b, h, c, Q, Q) temporaries.
  op decay{.kind = op_kind::elementwise};
  decay.extra_saved = storage(dtype::boolean, detail::checked_mul(s.chunk, s.chunk, 2)) +
                      storage(f, s.padded_elements(2 * s.heads));
  decay.fwd_temp = storage(f, detail::checked_mul(pq, 2));
  const tensor l_mask = ops.emit(decay, pq, f);
  ops.keep_own_output(l_mask);
  // G_intermediate = C[:, :, :, None] * B[:, :, None]: (b, c, Q, Q, h, N); G its sum. The H100
  // histories (docs/data/gpu_allocator_history, mamba2 and falcon_h1, transformers 5.17) free the
  // product right after G's sum and M_intermediate right after M's: no frame keeps them.
  const std::uint64_t g_intermediate = detail::checked_mul(pq, s.state);
  op g_op{.kind = op_kind::elementwise};
  g_op.fwd_temp = storage(f, g_intermediate);
  g_op.bwd_temp = storage(f, detail::checked_mul(g_intermediate, 2));  // broadcast_backward
  g_op.bwd_temp_pieces = 2;
  g_op.grad_in = storage(f, phn);  // C's; B's is reduced once C's full-size gradient is gone
  const tensor g = ops.emit(g_op, pq, f);
  ops.keep(b_c, g);
  // M_intermediate = G[..., None] * L ((b, c, Q, Q, h, 1)); M = its sum over the last dim.
  const tensor m_op = ops.elementwise(pq, f);
  ops.keep(g, m_op);
  ops.keep(l_mask, m_op);
  // Y_diag = (M[..., None] * hs[:, :, None]).sum(3): the (b, c, Q, Q, h, P) product lives until
  // the sum; backward makes it again for each factor's gradient, one at a time.
  const std::uint64_t product = s.padded_elements(detail::checked_mul(s.chunk, s.inner));
  op y_diag_op{.kind = op_kind::elementwise};
  y_diag_op.fwd_temp = storage(f, product);
  y_diag_op.bwd_temp = storage(f, detail::checked_mul(product, 2));  // broadcast_backward
  y_diag_op.bwd_temp_pieces = 2;
  y_diag_op.grad_in = storage(f, pq);  // M's; hs's is reduced once M's full-size gradient is gone
  const tensor y_diag = ops.emit(y_diag_op, pd, f);
  ops.keep(m_op, y_diag);
  ops.keep(hs_chunked, y_diag);
  ops.at(y_diag).transient = true;
  ops.hold_in_frame(storage(f, pd));
  // B_decay = B * decay_states: (b, c, Q, h, N), kept by the states' product.
  const tensor b_decay = ops.elementwise(phn, f);
  ops.keep(b_c, b_decay);
  // B's gradient waits for G_intermediate's (the chunked B feeds both, G's made first) and for
  // the backward of everything made after the chunked B; what goes on down the chain is
  // decay_states' (b, h, c, Q).
  ops.at(b_decay).grad_in = storage(f, s.padded_elements(s.heads));
  // states = (B_decay[..., None, :] * hs[..., None]).sum(dim=2): a (b, c, Q, h, P, N) product,
  // summed to (b, c, h, P, N), then cat with the zero initial state: (b, c + 1, h, P, N).
  const std::uint64_t state_product = s.padded_elements(detail::checked_mul(s.inner, s.state));
  op states_op{.kind = op_kind::elementwise};
  states_op.fwd_temp = storage(f, detail::checked_add(state_product, s.chunk_states(s.chunks)));
  states_op.bwd_temp = storage(f, detail::checked_mul(state_product, 2));  // broadcast_backward
  states_op.bwd_temp_pieces = 2;
  states_op.grad_in = storage(f, phn);  // B_decay's; hs's waits for Y_diag's (below)
  const tensor states = ops.emit(states_op, s.chunk_states(s.chunks + 1), f);
  ops.keep(b_decay, states);
  ops.keep(hs_chunked, states);
  ops.gradient_waits_for(b_decay, b_c, storage(f, phn));
  ops.gradient_waits_for(states, hs_chunked, storage(f, pd));  // Y_diag's part joins it in the buffer
  // new_states = (decay_chunk[..., None, None] * states[:, :, None]).sum(dim=1): a
  // (b, c + 1, c + 1, h, P, N) product; decay_chunk (b, c + 1, c + 1, h) is exp's kept result.
  const std::uint64_t boundary_product = detail::checked_mul(s.chunk_states(s.chunks + 1), s.chunks + 1);
  op new_states_op{.kind = op_kind::elementwise};
  const std::uint64_t boundary_pairs = detail::checked_mul(s.chunks + 1, s.chunks + 1);
  new_states_op.extra_saved = storage(f, detail::checked_mul(s.batch, s.heads, boundary_pairs)) +
                              storage(dtype::boolean, detail::checked_mul(boundary_pairs, 2));  // segment_sum's masks
  new_states_op.fwd_temp = storage(f, boundary_product);
  new_states_op.bwd_temp = storage(f, detail::checked_mul(boundary_product, 2));  // broadcast_backward
  new_states_op.bwd_temp_pieces = 2;
  const tensor new_states = ops.emit(new_states_op, s.chunk_states(s.chunks + 1), f);
  ops.keep(states, new_states);
  // C_times_states = C[..., None, :] * states[:, :, None]: (b, c, Q, h, P, N), a local; its
  // sum over N is kept by the mul with exp(A_cumsum).
  op cts{.kind = op_kind::elementwise};
  cts.fwd_temp = storage(f, state_product);
  cts.bwd_temp = storage(f, detail::checked_mul(state_product, 2));  // broadcast_backward
  cts.bwd_temp_pieces = 2;
  cts.grad_in = storage(f, s.chunk_states(s.chunks + 1));  // the states'; C's waits for G's (below)
  const tensor c_states = ops.emit(cts, pd, f);
  ops.keep(b_c, c_states);
  ops.keep(new_states, c_states);
  ops.gradient_waits_for(c_states, b_c, storage(f, phn));  // G's part joins it in the buffer
  ops.hold_in_frame(storage(f, state_product));
  // Y_off = C_times_states.sum(-1) * exp(A_cumsum): a local.
  const tensor y_off = ops.elementwise(pd, f);
  ops.keep(c_states, y_off);
  ops.at(y_off).transient = true;
  ops.hold_in_frame(storage(f, pd));
  // y = Y_diag + Y_off, + D_residual, [:, :L] and reshape (a copy when padded).
  const tensor y_sum = ops.elementwise(pd, f);
  ops.at(y_sum).transient = true;
  tensor y = ops.elementwise(pd, f);
  if (s.padded != s.tokens) {
    ops.at(y).transient = true;
    y = ops.elementwise(td, f);
  }
  // The scan's locals (D_residual, Y_diag, C_times_states, Y_off) die here, before the norm: the
  // H100 histories (mamba2, falcon_h1; transformers 5.17) free them right after y + D_residual.
  ops.close_frame();
  // MambaRMSNormGated(y, gate): y.to(float32) (y is fp32), y * silu(gate.to(float32)), pow(2).mean,
  // * rsqrt, weight * .to(input dtype) (fp32: y's). Saved: y, the fp32 gate copy when 16-bit,
  // silu's output, the gated product (pow's and the rsqrt mul's input), x^2 before torch 2.2
  // (norms.hpp mean_keeps_input), rsqrt, and the normalised product the weight mul keeps.
  if (!m.ssm_gated_norm) {
    // Falcon-H1 with mamba_rms_norm False: y * silu(gate). silu keeps the gate (a view of the
    // projection), the mul keeps y and silu's output (modular_falcon_h1.py@3c0a5c70).
    const tensor gate = ops.emit(op_kind::activation, td, dt_type);
    ops.keep(zxbcdt, gate);
    gate_waits(ctx, gate, zxbcdt, dt_type);
    tensor gated_y = ops.product(y, gate, td, td, f);
    if (e != f) gated_y = ops.elementwise(td, e);  // scan_output.to(dtype)
    const tensor out = ops.linear(gated_y, {.rows = s.tokens, .in_features = s.inner, .out_features = s.hidden,
                                            .bias = m.ssm_proj_bias}, base);
    return out;
  }
  op gated{.kind = op_kind::norm,
           .weight = param_tensor::vector(s.inner),
           .role = param_role::vector,
           .frozen = frozen};
  const std::uint64_t kept_products = mean_keeps_input(ctx.run.torch_version) ? 4 : 3;
  gated.extra_saved = storage(f, detail::checked_mul(td, kept_products)) + storage(f, s.tokens);
  if (e != f) gated.extra_saved += storage(f, td);  // gate.to(float32)
  gated.grad_in = storage(f, td);
  tensor normed = ops.emit(gated, td, f);
  ops.keep(y, normed);
  gate_waits(ctx, normed, zxbcdt, dt_type);
  // out_proj(scan_output.to(dtype)): a 16-bit model's copy is what the matmul keeps.
  if (e != f) normed = ops.elementwise(td, e);
  const tensor out = ops.linear(normed, {.rows = s.tokens, .in_features = s.inner, .out_features = s.hidden,
                                         .bias = m.ssm_proj_bias}, base);
  return out;
}

// The fused path: in_proj (an nn.Linear, keeps its input), then MambaSplitConv1dScanCombinedFn,
// written as the ops that own its weights. ctx.save_for_backward keeps zxbcdt (in_proj's output
// itself), out_x (the scan output before the gated norm), the norm's rstd (b, L, G) and the
// parameters; conv1d's output, x, B, C, the chunk states, the norm output and out_proj's input
// are recomputed in backward (ssd_combined.py@d757aef1 MambaSplitConv1dScanCombinedFn).
// Falcon-H1 (modular_falcon_h1.py@3c0a5c70 FalconH1Mixer.cuda_kernels_forward) passes in_proj's
// output times its mup_vector, the product the torch path makes, and no norm weight unless
// mamba_rms_norm: the Function then gates in the scan (y * silu(z)) and saves no rstd.
// Nemotron-H's NemotronHMamba2Mixer (modeling_nemotron_h.py@897753a0) is Mamba2Mixer's call with
// its n_groups-group norm.
constexpr tensor mamba2_mixer_fused(const layer_context& ctx, tensor in) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  const precision_policy& p = ops.precision();
  const base_weight base = ctx.adapters.base;
  const bool frozen = ctx.adapters.enabled;
  const mamba2_shape s = mamba2_shape_of(ctx);
  const std::uint64_t td = s.token_elements(s.inner);
  tensor zxbcdt = ops.linear(in, {.rows = s.tokens, .in_features = s.hidden, .out_features = s.projection(),
                                  .bias = m.ssm_proj_bias}, base);
  if (m.mup_multipliers) {
    // The product replaces in_proj's output; under autocast it is promoted to the fp32 buffer's
    // dtype, and the kernels run in fp32 until out_proj's autocast cast.
    ops.at(zxbcdt).transient = true;
    zxbcdt = ops.elementwise(zxbcdt.elements, p.autocast ? p.param : zxbcdt.type);
  }
  const dtype a = zxbcdt.type;
  const dtype out_type = p.autocast ? p.matmul : a;
  // causal_conv1d_fwd over xBC: its output lives through the forward only.
  op conv{.kind = op_kind::elementwise,
          .transient = true,
          .weight = {s.conv_dim(), s.conv, 1},
          .bias = m.ssm_conv_bias ? param_tensor::vector(s.conv_dim()) : param_tensor{},
          .role = param_role::vector,
          .frozen = frozen};
  // Backward of the whole Function (charged once, here, where dzxbcdt is made): the recomputed
  // conv output and its gradient, the recomputed norm input, and the chunk states with their
  // gradient (fp32, (b, c, h, P, N)).
  conv.bwd_temp = storage(a, detail::checked_add(s.token_elements(2 * s.conv_dim()), td)) +
                  storage(dtype::fp32, detail::checked_mul(s.chunk_states(s.chunks), 2));
  const tensor conv_out = ops.emit(conv, s.token_elements(s.conv_dim()), a);
  ops.keep(zxbcdt, conv_out);
  ops.at(conv_out).grad_in = storage(a, s.token_elements(s.projection()));  // dzxbcdt
  // The chunked scan (A_log, D, dt_bias): out_x is saved; its chunk states live in the forward.
  op scan{.kind = op_kind::elementwise,
          .weight = {s.heads, 3, 1},
          .role = param_role::vector,
          .frozen = frozen};
  scan.fwd_temp = storage(dtype::fp32, s.chunk_states(s.chunks));
  if (!m.ssm_gated_norm) scan.fwd_temp += storage(a, td);  // out = out_x * silu(z), out_proj's input
  const tensor out_x = ops.emit(scan, td, a);
  if (m.ssm_gated_norm) {
    // The gated RMSNorm (weight D): keeps rstd; its output is out_proj's input, recomputed.
    op gated{.kind = op_kind::norm,
             .transient = true,
             .weight = param_tensor::vector(s.inner),
             .role = param_role::vector,
             .frozen = frozen};
    gated.extra_saved = storage(dtype::fp32, s.token_elements(s.groups));
    gated.grad_in = storage(a, td);
    const tensor normed = ops.emit(gated, td, a);
    ops.keep(out_x, normed);
  }
  op out_proj{.kind = op_kind::linear,
              .weight = {s.hidden, s.inner, 1},
              .bias = m.ssm_proj_bias ? param_tensor::vector(s.hidden) : param_tensor{},
              .role = param_role::matmul,
              .frozen = frozen};
  out_proj.extra_saved = p.casts_weights() ? storage(p.matmul, detail::checked_mul(s.hidden, s.inner)) : bytes{};
  out_proj.grad_in = storage(a, td);
  const tensor out = ops.emit(out_proj, s.token_elements(s.hidden), out_type);
  if (!m.ssm_gated_norm) ops.keep(out_x, out);  // saved by the Function, which out_proj closes
  return out;
}

// The mixer on the path the run uses (training.hpp ssm_kernels_of).
constexpr tensor mamba2_mixer(const layer_context& ctx, tensor in) {
  return ssm_kernels_of(ctx.run) == ssm_kernel_choice::fused ? mamba2_mixer_fused(ctx, in)
                                                             : mamba2_mixer_torch(ctx, in);
}

// Mamba2Block: as MambaBlock (norm of x.to(norm.weight.dtype), fp32 residual under
// residual_in_fp32, residual + mixer(x)) (modeling_mamba2.py@4711664e Mamba2Block.forward).
constexpr tensor mamba2_block(const layer_context& ctx) {
  op_writer& ops = ctx.ops;
  const dtype stream = mamba_stream_dtype(ctx);
  const std::uint64_t width = detail::checked_mul(ctx.tokens, ctx.model.hidden);
  tensor x = ops.emit(op_kind::stream, width, stream);
  const tensor residual = x;
  if (x.type != ops.stream_dtype()) {
    x = ops.elementwise(width, ops.stream_dtype());  // .to(norm.weight.dtype)
    ops.at(x).transient = true;
  }
  const tensor mixed = mamba2_mixer(ctx, norm(ctx, x));
  return ops.add(residual, mixed);
}

}  // namespace memscale::graph_layers
