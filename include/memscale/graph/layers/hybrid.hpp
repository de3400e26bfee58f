// memscale/graph/layers/hybrid.hpp: the token mixers of hybrid state-space stacks, their Mamba
// mixers on the path run.ssm_kernels chooses (the torch paths below; the kernel paths in
// mamba.hpp mamba1_mixer_separate_kernels and mamba2.hpp mamba2_mixer_fused):
//   Jamba (transformers models/jamba/modeling_jamba.py@97bb61d0): a layer runs attention or a
//         Mamba-1 mixer (JambaMambaMixer.slow_forward, with weighted RMSNorms on dt, B and C) on
//         its normed input, chosen by position (graph/layers/layer_pattern.hpp);
//   Falcon-H1 (models/falcon_h1/modular_falcon_h1.py@3c0a5c70 FalconH1DecoderLayer): every layer
//         runs a Mamba-2 mixer and attention side by side on the same normed input, each branch's
//         input and output multiplied by a float (muP), and adds both to the residual.
#pragma once

#include <cstdint>

#include "memscale/detail/math.hpp"
#include "memscale/graph/layers/attention.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/mamba.hpp"
#include "memscale/graph/layers/mamba2.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/tensor.hpp"
#include "memscale/model.hpp"

namespace memscale::graph_layers {

// FalconH1Model.compute_mup_vector's (1, 1, 2D + 2GN + h) vector: in_proj's output width.
constexpr std::uint64_t mup_vector_elements(const model_spec& m) {
  return detail::checked_add(detail::checked_add(detail::checked_mul(2, m.ssm_inner),
                                                 detail::checked_mul(2, m.ssm_groups, m.ssm_state)),
                             m.ssm_heads);
}

// A float multiplier on a tensor (x * multiplier): a new tensor; the product saves nothing, so
// the factor is freed once no other op keeps it (derivatives.yaml mul.Scalar).
constexpr tensor scaled_copy(const layer_context& ctx, tensor x) {
  return ctx.ops.elementwise(x, x.elements, x.type);
}

// The layer's state-space mixer on its normed input (layer_pattern.hpp layer_at sets the mixer).
constexpr tensor state_space_mixer(const layer_context& ctx, tensor in) {
  return ctx.model.mixer == mixer_kind::mamba2 ? mamba2_mixer(ctx, in) : mamba1_mixer(ctx, in);
}

// A hybrid layer's Mamba-2 mixer: the Mamba-2 code over the model's own sizes (a hybrid model's
// mixer field names its stack, not this layer).
constexpr tensor hybrid_mamba2_mixer(const layer_context& ctx, tensor in) {
  model_spec ssm = ctx.model;
  ssm.mixer = mixer_kind::mamba2;
  const layer_context ssm_ctx{.ops = ctx.ops,
                              .model = ssm,
                              .run = ctx.run,
                              .adapters = ctx.adapters,
                              .dropout = ctx.dropout,
                              .tokens = ctx.tokens,
                              .cached_keys = ctx.cached_keys};
  return mamba2_mixer(ssm_ctx, in);
}

// FalconH1DecoderLayer's mixers on the normed input: mamba(x * ssm_in_multiplier) (the
// multiplication is FalconH1Mixer's first step) * ssm_out_multiplier, and
// self_attn(x * attention_in_multiplier) * attention_out_multiplier; their sum. Each branch's
// scaled input is what its first projection keeps. The key multiplier's scaled k (a transient
// k-sized copy in the forward; RoPE keeps the product instead of k) is not written.
constexpr tensor falcon_h1_mixers(const layer_context& ctx, tensor normed) {
  op_writer& ops = ctx.ops;
  tensor mixed = hybrid_mamba2_mixer(ctx, scaled_copy(ctx, normed));
  ops.at(mixed).transient = true;
  mixed = scaled_copy(ctx, mixed);
  const tensor attention_in = scaled_copy(ctx, normed);
  // Made after the Mamba branch read `normed`, so its backward runs first: normed's gradient waits
  // in the norm's input buffer through the whole Mamba branch's backward; the Mamba branch's output
  // gradient is the sum's, not this one.
  ops.at(attention_in).grad_in = {};
  ops.gradient_waits_for(attention_in, normed, ops.at(normed).out);
  tensor attended = self_attention(ctx, attention_in);
  ops.at(attended).transient = true;
  attended = scaled_copy(ctx, attended);
  ops.reads(mixed, attended);
  return ops.add(mixed, attended);
}

}  // namespace memscale::graph_layers
