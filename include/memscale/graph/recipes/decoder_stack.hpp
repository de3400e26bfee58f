// memscale/graph/recipes/decoder_stack.hpp: one training step of a decoder or encoder stack
// (GPT, LLaMA, BERT and their families) from the shared layers: embeddings, one block
// that repeats, the head, and what the step holds beside its ops.
//
// What each op keeps follows the backward formulas in PyTorch's
// tools/autograd/derivatives.yaml and the forward code of the implementation named by
// model_spec::impl (Hugging Face transformers modeling_*.py, lit-gpt model.py).
#pragma once

#include <cstdint>

#include "memscale/detail/math.hpp"
#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/recipes/altup_stack.hpp"
#include "memscale/graph/layers/adapters.hpp"
#include "memscale/graph/layers/attention.hpp"
#include "memscale/graph/layers/attention_inputs.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/context_parallel.hpp"
#include "memscale/graph/layers/embeddings.hpp"
#include "memscale/graph/layers/generation_head.hpp"
#include "memscale/graph/layers/heads.hpp"
#include "memscale/graph/layers/hybrid.hpp"
#include "memscale/graph/layers/idle_tower.hpp"
#include "memscale/graph/layers/input_require_grads.hpp"
#include "memscale/graph/layers/latent_attention.hpp"
#include "memscale/graph/layers/layer_pattern.hpp"
#include "memscale/graph/layers/litgpt_rope_cache.hpp"
#include "memscale/graph/layers/litgpt_validation.hpp"
#include "memscale/graph/layers/mamba.hpp"
#include "memscale/graph/layers/mamba2.hpp"
#include "memscale/graph/layers/mlp.hpp"
#include "memscale/graph/layers/norms.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/layers/mask_buffers.hpp"
#include "memscale/graph/layers/rotary_tables.hpp"
#include "memscale/graph/layers/sequence_parallel.hpp"
#include "memscale/graph/tensor.hpp"
#include "memscale/model.hpp"
#include "memscale/precision_policy.hpp"
#include "memscale/training.hpp"
#include "memscale/validate.hpp"

namespace memscale::recipes {

// Norms around a sequential branch (model_spec::block_norms).
constexpr graph_layers::tensor branch_in(const graph_layers::layer_context& ctx, graph_layers::tensor x) {
  return ctx.model.block_norms == branch_norms::post ? x : graph_layers::norm(ctx, x);
}
constexpr graph_layers::tensor branch_out(const graph_layers::layer_context& ctx, graph_layers::tensor y) {
  return ctx.model.block_norms == branch_norms::pre ? y : graph_layers::norm(ctx, y);
}

// The block's attention: the model's self-attention, or multi-head latent attention; a hybrid
// layer's state-space mixer in its place (Jamba) or beside it (Falcon-H1).
constexpr graph_layers::tensor block_attention(const graph_layers::layer_context& ctx, graph_layers::tensor in) {
  if (ctx.model.ssm_beside_attention) return graph_layers::falcon_h1_mixers(ctx, in);
  if (!has_attention(ctx.model)) return graph_layers::state_space_mixer(ctx, in);
  return has_latent_attention(ctx.model) ? graph_layers::latent_attention(ctx, in) : graph_layers::self_attention(ctx, in);
}

// The block's MLP; Falcon-H1 multiplies its output by mlp_multipliers[1], a new tensor
// (modular_falcon_h1.py@3c0a5c70 FalconH1MLP.forward). Its gate's multiplier makes a scaled copy
// that silu keeps instead of gate_proj's output: the same bytes kept, a transient not written.
constexpr graph_layers::tensor block_mlp(const graph_layers::layer_context& ctx, graph_layers::tensor in) {
  graph_layers::tensor y = graph_layers::mlp(ctx, in);
  if (!ctx.model.mup_multipliers) return y;
  ctx.ops.at(y).transient = true;
  return graph_layers::scaled_copy(ctx, y);
}

// One TP rank's llama3 layer under torchtitan's apply_tp (graph/layers/sequence_parallel.hpp): the
// norms on the rank's sequence shard, each branch on the all-gathered sequence with the rank's
// heads or MLP width, its output reduce-scattered back onto the shard before the residual add.
constexpr graph_layers::tensor sequence_parallel_layer(const graph_layers::layer_context& ctx, graph_layers::tensor x) {
  using namespace graph_layers;
  op_writer& ops = ctx.ops;
  const norm_shape shard{.width = ctx.model.hidden, .rows = stream_rows(ctx)};
  const tensor attended = reduce_scatter_sequence(ctx, block_attention(ctx, all_gather_sequence(ctx, norm(ctx, x, shard))));
  const tensor mid = ops.add(x, attended);
  ops.close_frame();
  const tensor fed = reduce_scatter_sequence(ctx, block_mlp(ctx, all_gather_sequence(ctx, norm(ctx, mid, shard))));
  return ops.add(mid, fed);
}

// One transformer layer on the residual stream `x`, in the model's layout; returns its output.
constexpr graph_layers::tensor transformer_layer(const graph_layers::layer_context& ctx, graph_layers::tensor x) {
  using namespace graph_layers;
  if (sequence_parallel(ctx.run)) return sequence_parallel_layer(ctx, x);
  op_writer& ops = ctx.ops;
  const bool residual_dropout = ctx.dropout.residual;
  tensor out{};
  switch (ctx.model.layout) {
    case block_layout::sequential: {
      // The layer's frame binds each branch's normed input until the branch's output rebinds
      // the name (modeling_llama.py LlamaDecoderLayer.forward: hidden_states = self.self_attn(...)).
      const tensor attention_in = ops.tracked_if(ctx.stream_needs_grad, [&] { return branch_in(ctx, x); });
      const tensor attended = ops.dropout(branch_out(ctx, block_attention(ctx, attention_in)), residual_dropout);
      ops.reads(attention_in, attended);
      const tensor mid = ops.add(x, attended);
      // The attention's frame ends with its residual add; gpt-oss's layer binds the attention
      // weights until the MLP returns (sink_attention_without_grad).
      const bool weights_bound = ctx.model.attention_sinks && ops.records_forward_liveness();
      if (!weights_bound) ops.close_frame();
      const tensor mlp_in = branch_in(ctx, mid);
      const tensor mlp_out = block_mlp(ctx, mlp_in);
      if (weights_bound) ops.close_frame();
      const tensor fed = ops.dropout(branch_out(ctx, mlp_out), residual_dropout);
      ops.reads(mlp_in, fed);
      out = ops.add(mid, fed);
      break;
    }
    case block_layout::parallel: {
      // GPT-NeoX post_attention_dropout / post_mlp_dropout, Phi and GPT-J resid_dropout:
      // one dropout per branch. (Falcon drops out the branches' sum once: one mask fewer.)
      const tensor normed = norm(ctx, x);
      const tensor attended = ops.dropout(self_attention(ctx, normed), residual_dropout);
      ops.close_frame();
      const tensor fed = ops.dropout(mlp(ctx, ctx.model.shared_attention_norm ? normed : norm(ctx, x)), residual_dropout);
      out = ops.add(ops.add(attended, fed), x);
      break;
    }
    case block_layout::post_norm: {
      const tensor attended = ops.dropout(self_attention(ctx, x), residual_dropout);
      ops.close_frame();
      const tensor mid = norm(ctx, ops.add(attended, x));
      const tensor fed = ops.dropout(mlp(ctx, mid), residual_dropout);
      out = norm(ctx, ops.add(fed, mid));
      break;
    }
  }
  for (std::uint64_t i = 0; i < ctx.model.extra_norms_per_block; ++i) out = norm(ctx, out);
  return out;
}

// A single-mixer stack's dense MLP layer when the model also has MoE layers: the model without
// its experts, its MLP of dense_ffn.
constexpr model_spec without_experts(const model_spec& m) { return with_dense_mlp(m, m.dense_ffn); }

// NemotronHBlock.forward (modeling_nemotron_h.py@897753a0): residual + mixer(norm(x)), the mixer
// the layer's block type names: NemotronHMamba2Mixer (Mamba2Mixer's code), NemotronHAttention (no
// positional encoding), NemotronHMLP (up_proj, relu2, down_proj) or NemotronHMoE (DeepSeek-V3's
// fp32 sigmoid router, routed relu2 experts without a gate, then the shared expert added).
constexpr graph_layers::tensor single_mixer_layer(const graph_layers::layer_context& ctx, graph_layers::tensor x,
                                                  layer_block_kind kind) {
  using namespace graph_layers;
  op_writer& ops = ctx.ops;
  const tensor in = norm(ctx, x);
  tensor y{};
  switch (kind) {
    case layer_block_kind::mamba2: y = hybrid_mamba2_mixer(ctx, in); break;
    case layer_block_kind::attention: y = self_attention(ctx, in); break;
    case layer_block_kind::mlp: {
      if (ctx.model.experts == 0) {
        y = mlp(ctx, in);
        break;
      }
      const model_spec dense = without_experts(ctx.model);
      y = mlp(layer_context{.ops = ctx.ops,
                            .model = dense,
                            .run = ctx.run,
                            .adapters = ctx.adapters,
                            .dropout = ctx.dropout,
                            .tokens = ctx.tokens,
                            .cached_keys = ctx.cached_keys},
              in);
      break;
    }
    case layer_block_kind::moe: y = mlp(ctx, in); break;
  }
  ops.reads(in, y);
  const tensor out = ops.add(x, y);
  ops.close_frame();
  return out;
}

// One transformer block: the residual stream entering it, then one layer.
constexpr graph_layers::tensor transformer_block(const graph_layers::layer_context& ctx) {
  using namespace graph_layers;
  op_writer& ops = ctx.ops;
  const tensor x = ops.emit(op_kind::stream, detail::checked_mul(stream_rows(ctx), ctx.model.hidden), ops.stream_dtype());
  const tensor out = transformer_layer(ctx, x);
  // Without grad the caller binds the block's input until the block returns (modeling_llama.py
  // LlamaModel.forward: hidden_states = decoder_layer(hidden_states, ...); the H100 generate()
  // histories hold four (batch, prompt, hidden) tensors at the last layer's MLP: the embeddings,
  // the layer's input, its residual and the normed copy).
  ops.reads(x, out);
  return out;
}

// The block of a model whose layers differ by position: one period of them
// (graph/layers/layer_pattern.hpp), each on the previous one's output.
constexpr void transformer_period(const graph_layers::layer_context& ctx) {
  using namespace graph_layers;
  if (!has_layer_pattern(ctx.model)) {
    transformer_block(ctx);
    return;
  }
  op_writer& ops = ctx.ops;
  tensor x = ops.emit(op_kind::stream, detail::checked_mul(ctx.tokens, ctx.model.hidden), ops.stream_dtype());
  if (ctx.model.single_mixer_blocks) {
    const single_mixer_grouping g = group_single_mixer_layers(ctx.model);
    for (std::size_t k = 0; k < g.kinds; ++k)
      for (std::uint64_t i = 0; i < g.unit[static_cast<std::size_t>(g.order[k])]; ++i)
        x = single_mixer_layer(ctx, x, g.order[k]);
    return;
  }
  for (std::uint64_t i = 0; i < layers_per_block(ctx.model); ++i) {
    const model_spec layer = layer_at(ctx.model, i);
    const layer_context at{.ops = ctx.ops,
                           .model = layer,
                           .run = ctx.run,
                           .adapters = ctx.adapters,
                           .dropout = ctx.dropout,
                           .tokens = ctx.tokens,
                           .cached_keys = ctx.cached_keys};
    x = transformer_layer(at, x);
  }
}

// The first model.leading_dense_layers layers (DeepSeek's first_k_dense_replace: layer_idx <
// first_k_dense_replace gets DeepseekV3MLP(config), modeling_deepseek_v3.py@00b676f8
// DeepseekV3DecoderLayer): the block with a dense MLP of leading_dense_ffn, each written out
// after the embeddings, so the repeated block is the sparse layer. Returns the stream after them.
constexpr graph_layers::tensor leading_dense_layers(const graph_layers::layer_context& ctx, graph_layers::tensor x) {
  if (ctx.model.leading_dense_layers == 0) return x;
  model_spec dense = without_experts(ctx.model);
  dense.ffn = ctx.model.leading_dense_ffn;
  const graph_layers::layer_context layer{.ops = ctx.ops,
                                          .model = dense,
                                          .run = ctx.run,
                                          .adapters = ctx.adapters,
                                          .dropout = ctx.dropout,
                                          .tokens = ctx.tokens,
                                          .cached_keys = ctx.cached_keys};
  for (std::uint64_t i = 0; i < ctx.model.leading_dense_layers; ++i) x = transformer_layer(layer, x);
  return x;
}

// Whether the stack's first layer is written apart from the repeated block, on an input that
// needs no gradient: a LoRA or QLoRA run freezes the embeddings, so their output requires none
// and autograd records nothing that reads only it through frozen weights (ops.hpp
// untracked_from): the first layer's input norm keeps nothing and its frozen q, k and v
// projections take no input gradient; the layers after it read a stream the adapters made.
// Written for a pre-norm sequential attention layer whose attention is adapted (then the residual
// after it needs a gradient and the rest of the layer is the others'). Under checkpointing the
// first layer stays in the block: the reentrant checkpoint runs with the embeddings' output
// requiring grad (layers/input_require_grads.hpp); under the non-reentrant one, without that hook,
// the block still writes the first layer's input gradients (the upper side, in a backward below the
// top block's). Sharded
// parameters only under FSDP2, whose units know the layer (graph::first_layer_apart).
constexpr bool first_layer_apart(const model_spec& model, const training_spec& run) {
  const graph_layers::adapter_plan adapters = graph_layers::adapter_plan_of(model, run);
  const bool attention_adapted = adapters.adapts(lora_target::q) || adapters.adapts(lora_target::k) ||
                                 adapters.adapts(lora_target::v) || adapters.adapts(lora_target::o);
  return adapters.enabled && attention_adapted && run.ckpt == checkpointing::none &&
         run.sac == selective_ac::none && model.layers >= 2 && model.leading_dense_layers == 0 &&
         !graph_layers::has_layer_pattern(model) && model.layout == block_layout::sequential &&
         model.block_norms == branch_norms::pre && has_attention(model) && !has_latent_attention(model) &&
         !model.ssm_beside_attention && !graph_layers::sequence_parallel(run) &&
         (run.shard != sharding::full || runs_fsdp2(run));
}

// The first layer on the embeddings' output when first_layer_apart. Returns its output.
constexpr graph_layers::tensor first_layer(const graph_layers::layer_context& ctx, graph_layers::tensor x) {
  if (!first_layer_apart(ctx.model, ctx.run)) return x;
  const graph_layers::layer_context first{.ops = ctx.ops,
                                          .model = ctx.model,
                                          .run = ctx.run,
                                          .adapters = ctx.adapters,
                                          .dropout = ctx.dropout,
                                          .tokens = ctx.tokens,
                                          .cached_keys = ctx.cached_keys,
                                          .stream_needs_grad = false};
  return transformer_layer(first, x);
}

// A single-mixer stack's layers left over from its repeated unit (layer_pattern.hpp
// group_single_mixer_layers), written once each after the embeddings. Returns the stream after them.
constexpr graph_layers::tensor single_mixer_leading_layers(const graph_layers::layer_context& ctx,
                                                           graph_layers::tensor x) {
  if (!ctx.model.single_mixer_blocks) return x;
  const graph_layers::single_mixer_grouping g = graph_layers::group_single_mixer_layers(ctx.model);
  for (std::size_t k = 0; k < g.kinds; ++k)
    for (std::uint64_t i = 0; i < g.leading[static_cast<std::size_t>(g.order[k])]; ++i)
      x = single_mixer_layer(ctx, x, g.order[k]);
  return x;
}

// What the base model's forward makes once and keeps in local variables through its
// blocks, freed when it returns, before the head (transformers v4.48 modeling_opt.py
// OPTDecoder.forward, modeling_bloom.py BloomModel.forward). Both make an all-ones 2-D
// attention_mask when none is given (torch.ones: fp32); with a 2-D mask,
// _prepare_4d_causal_attention_mask_with_cache_position clones the expanded causal mask
// into (b, 1, s, s) of the embeddings' dtype. OPT derives its position ids from that mask
// ((cumsum(mask) * mask - 1).long(): (b, s) int64); BLOOM's build_alibi_tensor returns
// (b * heads, 1, s) in the embeddings' dtype.
constexpr bytes base_model_held(const model_spec& model, const training_spec& run, const precision_policy& p,
                                std::uint64_t tokens) {
  bytes held{};
  if (model.builds_attention_mask) {
    held += storage(dtype::fp32, tokens);
    held += storage(p.param, detail::checked_mul(tokens, run.seq_len, detail::quantity{"causal mask (micro_batch x seq_len^2)"}));
    if (model.positions == position_kind::learned) held += storage(dtype::int64, tokens);
  }
  if (model.alibi) held += storage(p.param, detail::checked_mul(tokens, model.heads, detail::quantity{"ALiBi bias (tokens x heads)"}));
  // A padding-free row's (1, 1, tokens, tokens) block-diagonal mask or a padded batch's
  // (batch, 1, seq_len, seq_len) mask, made once by create_causal_mask and passed to every layer
  // (masking_utils.py@00c4411c): sdpa_mask's bool mask, or eager_mask's torch.where copy of it in
  // the embeddings' dtype (the bool one freed).
  if (padded_row_mask(run)) {
    const bool additive = run.attention == attention_impl::eager || !bool_attention_mask(run);
    const dtype mask_type = additive ? p.param : dtype::boolean;
    held += storage(mask_type, detail::checked_mul(run.micro_batch, run.seq_len, run.seq_len,
                                                   detail::quantity{"attention mask (micro_batch x seq_len^2)"}));
  }
  return held;
}

// One forward of a decoder without grad and without labels, as generate() runs it: the
// embeddings and what the base model makes for every layer's attention, the block, the final
// norm and the generation head. The base model's forward binds the lookups' outputs, the rotary
// tables and the mask until it returns after its final norm (LlamaModel.forward, v4.44.0); the
// head runs after it returned. No idle tower: without images it never runs.
constexpr void generation_forward(const graph_layers::layer_context& ctx) {
  using namespace graph_layers;
  op_writer& ops = ctx.ops;
  const model_spec& model = ctx.model;
  require_attention_mixer(model, "a forward with a KV cache is built for attention layers");
  // Gemma 3n's generate() shares the last layers' keys and values (num_kv_shared_layers) and runs
  // AltUp on every new token: not written for a forward with a cache.
  detail::require(model.altup_inputs == 0, error_code::unsupported, "model.altup_inputs",
                  "is Gemma 3n's AltUp: generate() (a forward with a KV cache, shared by the last "
                  "num_kv_shared_layers layers) is not modelled for it; training is",
                  model.altup_inputs);
  if (has_layer_pattern(model) || model.experts_on_every_token)
    detail::fail(error_code::unsupported, "model.moe_layer_step",
                 "is a layer pattern (Llama 4): a forward with a KV cache of layers that differ by position, "
                 "chunked caches and experts on every token, is not modelled");
  const embedded embeddings = embed(ctx);
  const attention_inputs made = make_attention_inputs(ctx);
  // DeepSeek's leading dense layers run on the embeddings' stream before the repeated sparse block.
  leading_dense_layers(ctx, embeddings.stream);
  graph_builder& sections = ops.sections();
  sections.begin_block();
  transformer_block(ctx);
  sections.end_block(model.layers - model.leading_dense_layers);
  tensor x = ops.emit(op_kind::stream, detail::checked_mul(ctx.tokens, model.hidden), ops.stream_dtype());
  if (model.final_norm) x = norm(ctx, x, {.width = model.hidden, .rows = ctx.tokens, .site = norm_site::final});
  for (const tensor& held : {embeddings.token_lookup, embeddings.position_lookup, made.cos, made.sin, made.mask,
                             made.sliding_mask, made.local_cos, made.local_sin})
    if (held.elements != 0) ops.reads(held, x);
  generation_head(ctx, x);
}

// The op sequence of one training step of `model` (one TP rank's share) under `run` (the rows and
// positions its layers see; `requested` as given), written into `out` (empty). build_decoder_stack
// below checks the run first.
constexpr void write_decoder_stack(const model_spec& model, const training_spec& run, const training_spec& requested,
                                   graph& out, bool no_grad_forward, std::uint64_t cached_keys) {
  using namespace graph_layers;
  const precision_policy precision = precision_policy_of(run);
  const auto tokens = detail::checked_mul(run.micro_batch, run.seq_len, detail::quantity{"tokens (micro_batch x seq_len)"});
  op_writer ops(out, precision, run.device);
  if (no_grad_forward) ops.record_forward_liveness();
  const layer_context ctx{.ops = ops,
                          .model = model,
                          .run = run,
                          .adapters = adapter_plan_of(model, run),
                          .dropout = dropout_sites_of(model, run),
                          .tokens = tokens,
                          .cached_keys = cached_keys};
  if (no_grad_forward) {
    generation_forward(ctx);
    return;
  }
  if (model.altup_inputs > 0) {
    build_altup_stack(ctx, requested);
    return;
  }
  idle_tower(ctx);
  const embedded lookups = embed(ctx);
  ops.sections().set_kept_input_embeddings(kept_input_embeddings(run, lookups));
  const tensor embedded = lookups.stream;
  // RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)) on tok_embeddings: the
  // lookup of the rank's vocabulary rows, reduce-scattered onto its sequence shard.
  first_layer(ctx, single_mixer_leading_layers(
                       ctx, leading_dense_layers(ctx, sequence_parallel(run) ? reduce_scatter_sequence(ctx, embedded)
                                                                             : embedded)));
  graph_builder& sections = ops.sections();
  // A block of several layers is one unit to the walkers: checkpointed, it keeps one input per
  // period instead of one per layer and recomputes the whole period at once, which overstates the
  // recompute peak by more than the inputs it leaves out (the upper side). torchtitan's every k-th
  // block would count periods, not layers: refused.
  const std::uint64_t period = layers_per_block(model);
  const std::uint64_t repeats = model.single_mixer_blocks ? group_single_mixer_layers(model).repeats
                                : (model.layers - model.leading_dense_layers - (first_layer_apart(model, run) ? 1 : 0)) /
                                      period;
  detail::require(model.single_mixer_blocks || model.layers % period == 0, error_code::unsupported, "model.layers",
                  "must be a multiple of the layer pattern's period (lcm of model.moe_layer_step and "
                  "model.nope_layer_interval)", model.layers);
  detail::require(period == 1 || run.sac == selective_ac::none, error_code::unsupported, "run.sac",
                  "must be none for a model whose layers differ by position (Llama 4): its blocks are periods "
                  "of layers", run.sac);
  sections.set_first_layer_apart(first_layer_apart(model, run));
  sections.begin_block();
  if (has_attention(model))
    transformer_period(ctx);
  else if (model.mixer == mixer_kind::mamba2)
    mamba2_block(ctx);
  else
    mamba1_block(ctx);
  sections.end_block(repeats);
  const dtype stream = has_attention(model) ? ops.stream_dtype() : mamba_stream_dtype(ctx);
  tensor x = ops.emit(op_kind::stream, detail::checked_mul(stream_rows(ctx), model.hidden), stream);
  if (model.final_norm) x = norm(ctx, x, {.width = model.hidden, .rows = stream_rows(ctx), .site = norm_site::final});
  // ColwiseParallel(input_layouts=Shard(1)) on output: the normed shard all-gathered; with
  // loss_parallel (Shard(-1) outputs) the rank's logits are its vocabulary columns.
  if (sequence_parallel(run)) x = all_gather_sequence(ctx, x);
  // An fp32 stream (residual_in_fp32) reaches a 16-bit head as a cast copy, which its matmul keeps
  // (modeling_mamba.py@1160c0f3 MambaForCausalLM: lm_head(hidden_states.to(lm_head.weight.dtype))).
  if (!has_attention(model) && x.type != precision.param && !precision.autocast) x = ops.elementwise(x.elements, precision.param);
  head(ctx, x);
  // input_ids and labels: int64 each (PyTorch's default index dtype); a flattened batch also
  // brings its position_ids (DataCollatorWithFlattening returns them in place of the mask).
  const std::uint64_t index_tensors = requested.packing == batch_packing::padding_free ? 3 : 2;
  // CP's inputs and labels are sharded in place by resize_: they keep the whole sequence's storage.
  sections.set_inputs(storage(dtype::int64, detail::checked_mul(tokens, run.context_parallel, index_tensors)));
  sections.add_buffers(bytes{detail::checked_mul(model.buffer_bytes_per_layer, model.layers)});
  sections.add_buffers(bytes{model.model_buffer_bytes});
  // DeepseekV3TopkRouter's register_buffer("e_score_correction_bias", torch.zeros(n_routed_experts))
  // in every sparse layer (modeling_deepseek_v3.py@00b676f8), cast with the model.
  if (model.router_score_correction)
    sections.add_buffers(storage(precision.param, detail::checked_mul(model.experts, graph_layers::moe_layers(model))));
  // FalconH1Model.compute_mup_vector: a non-persistent (1, 1, 2D + 2GN + h) buffer per layer,
  // cast with the model (modular_falcon_h1.py@3c0a5c70).
  if (model.mup_multipliers)
    sections.add_buffers(storage(precision.param, detail::checked_mul(graph_layers::mup_vector_elements(model), model.layers)));
  if (run.framework == framework_kind::torchtitan && model.positions == position_kind::rotary) {
    // torchtitan's freqs_cis buffer: complex64 (max_seq_len x head_dim / 2), max_seq_len being
    // training.seq_len (models/llama3/model/model.py _precompute_freqs_cis, args.py
    // update_from_config @ f7084fc7); FSDP2 does not shard buffers.
    // Under CP, context_parallel keeps a clone to restore it after the step (freqs_cis is not in
    // cp_no_restore_buffers, train.py @ f7084fc7) and shards the buffer with resize_, which keeps
    // its storage (torch/distributed/tensor/experimental/_attention.py context_parallel @ 0123248a).
    const std::uint64_t copies = run.context_parallel > 1 ? 2 : 1;
    sections.add_buffers(storage(dtype::fp32, detail::checked_mul(copies, requested.seq_len, head_dim_of(model))));
  }
  if (graph_layers::litgpt_keeps_rope_cache(model, run))
    sections.add_buffers(graph_layers::litgpt_rope_cache_bytes(model, requested, precision.param));
  if (rotary_tables_per_layer(model, ctx.run.transformers_version))
    sections.add_buffers(rotary_table_buffers(model, precision.param));
  if (mask_buffers_per_layer(model, ctx.run.transformers_version))
    sections.add_buffers(mask_buffer_bytes(model, precision.param));
  sections.set_stream_grad(storage(stream, detail::checked_mul(stream_rows(ctx), model.hidden)));
  // lit-gpt's fine-tuning loop binds `logits = model(input_ids, lm_head_chunk_size=128)`
  // and keeps the list of chunks until the next step's forward returns and rebinds it
  // (finetune/lora.py fit(), Lightning-AI/lit-gpt @ 8641822 and @ 3cf6493c). The HF
  // Trainer returns loss.detach() from training_step and drops the outputs.
  // full.py's loop binds the one logits tensor Fabric's wrapper returned: in its output dtype.
  if (model.impl == implementation::litgpt && model.head == head_kind::causal_lm) {
    const dtype carried = graph_layers::litgpt_full_logits_loop(model, run)
                              ? graph_layers::logits_output_dtype(model, run, precision.matmul)
                              : precision.matmul;
    sections.set_carried(storage(carried, detail::checked_mul(tokens, model.vocab)));
  }
  if (graph_layers::litgpt_validates_whole_logits(model, run))
    sections.set_validation(graph_layers::litgpt_validation_peak(ctx, precision.matmul),
                            graph_layers::litgpt_step_logits_bound(ctx, precision.matmul));
  sections.set_held(base_model_held(model, run, precision, tokens) + hooked_lookup_held(run, lookups));
}

// `whole_model`'s stack, as the run writes its layers (layers_as_written): the run checked, then one
// TP rank's share written. The 1 KB model is copied only where TP changes it (two copies were 2% of
// an estimate).
constexpr void decoder_stack_of(const model_spec& whole_model, const training_spec& requested, graph& out,
                                bool no_grad_forward, std::uint64_t cached_keys, bool model_validated) {
  using namespace graph_layers;
  if (whole_model.arch == architecture::encoder_decoder)
    detail::fail(error_code::unsupported, "model.arch",
                 "is encoder_decoder: the decoder-stack recipe writes one stack (build() writes an "
                 "encoder-decoder's two)");
  if (model_validated)
    detail::validate_run_of_valid_model(whole_model, requested);
  else
    validate(whole_model, requested);
  // The layers see the rows the collator makes: a padding-free micro-batch is one row of all its
  // tokens (training.hpp as_rows); the attention reads the example boundaries (attention.hpp).
  // torchtitan's CP: the layers see the rank's seq_len / cp positions (context_parallel.hpp).
  const training_spec run = context_parallel_local(as_rows(requested));
  // torchtitan's TP: the layers build the rank's share of the model (sequence_parallel.hpp).
  if (run.tensor_parallel == 1)
    write_decoder_stack(whole_model, run, requested, out, no_grad_forward, cached_keys);
  else
    write_decoder_stack(tensor_parallel_local(whole_model, run), run, requested, out, no_grad_forward, cached_keys);
}

// The op sequence of one training step of `model` under `run`, written into `out` (empty).
// With `no_grad_forward`, each op also records its last forward reader (op::last_reader) and
// the attention reads `cached_keys` positions per sequence a KV cache holds (a generate()
// decoding step) besides the new rows. `model_validated`: the caller ran validate(model).
constexpr void build_decoder_stack(const model_spec& declared, const training_spec& requested, graph& out,
                                   bool no_grad_forward = false, std::uint64_t cached_keys = 0,
                                   bool model_validated = false) {
  const bool checkpointed_or_no_grad =
      no_grad_forward || requested.ckpt != checkpointing::none || requested.sac != selective_ac::none;
  if (graph_layers::rewrites_layers(declared, checkpointed_or_no_grad))
    decoder_stack_of(graph_layers::layers_as_written(declared, true), requested, out, no_grad_forward, cached_keys,
                     model_validated);
  else
    decoder_stack_of(declared, requested, out, no_grad_forward, cached_keys, model_validated);
}

constexpr graph build_decoder_stack(const model_spec& model, const training_spec& run) {
  graph g;  // default-initialised: the op slots are left unwritten (graph/graph.hpp op_slots)
  build_decoder_stack(model, run, g);
  return g;
}

}  // namespace memscale::recipes
