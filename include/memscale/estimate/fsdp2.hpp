// memscale/estimate/fsdp2.hpp: one rank's step under FSDP2 (fully_shard per block and the root):
// torchtitan's (fp32 shards, bf16 compute) and torchtune's distributed recipes (bf16 throughout),
// and torchtitan's activation checkpointing.
// The moments of forward and backward, ranked by what differs between them (gathered units,
// gradients, activations); single_graph.hpp adds the shards, the optimizer state and the step.
#pragma once

#include <algorithm>
#include <cstdint>

#include "memscale/estimate/activations.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/training.hpp"

namespace memscale::detail {

// What the FSDP2 units hold, from the graph's parameter and gradient totals.
struct fsdp2_units {
  bytes block{};             // one block's unsharded bf16 parameters (param_dtype)
  bytes root{};              // the root unit's (embeddings, final norm, output) unsharded parameters
  bytes block_grads{};       // one block's unsharded bf16 gradients
  bytes block_grads_fp32{};  // its reduce-scatter input (the reduce dtype, the unit's full size)
  bytes head_grads{};        // the final norm's and output's bf16 gradients
  bytes root_grads{};        // every root gradient in bf16
  bytes root_grads_fp32{};   // the root's reduce-scatter input
  std::uint64_t ranks = 1;
  // torchtitan keeps the last block gathered after forward (apply_fsdp: reshard_after_forward =
  // int(layer_id) < len(model.layers) - 1); torchtune reshards every layer (shard_model's
  // reshard_after_forward=True for all, training/_distributed.py v0.6.1).
  bool last_block_kept = true;
  // torchtune's custom_sharded_layers: the embedding's and the output projection's unsharded
  // parameters and gradients when they are units of their own (then out of `root`, `head_grads`
  // holds the output's 1/N shard); reduced in their own dtype (torchtune: no MixedPrecisionPolicy).
  bytes embedding_unit{};
  bytes embedding_grads{};
  bytes output_unit{};
  bytes output_grads{};
  // fsdp_cpu_offload (CPUOffloadPolicy, training/_distributed.py shard_model @ v0.6.1): the shards
  // live on the host. An all-gather copies the unit's 1/N shard to the device and frees that
  // copy once it is in the flat output, before the copy-out (foreach_all_gather's
  // `del param_all_gather_inputs`, _fsdp_collectives.py @ v2.6.0), so it never adds to the
  // output-plus-unsharded pair; each reduce-scatter output is copied to the host and freed
  // (foreach_reduce, same file), so the device keeps no sharded gradient between units.
  bool host_shards = false;
  // torchtune's optimizer_in_bwd: each shard steps in its unit's reduce, as foreach_reduce sets its
  // gradient and runs its post-accumulate-grad hooks (_fsdp_collectives.py @ v2.6.0); the hook's
  // zero_grad then drops it (training/memory.py register_optim_in_bwd_hooks @ v0.6.1), so no unit
  // keeps a sharded gradient. `hook_step`: one shard's step temporaries (one optimizer per parameter);
  // none with host_shards, where the hook steps a host shard with the host copy of its gradient.
  bool stepped_in_backward = false;
  bytes hook_step{};
  // What the training loop binds across the step: litgpt's `logits` list, the previous step's until
  // the model returns (graph::carried), this step's through backward (finetune/lora.py fit() binds it
  // before fabric.backward, lines 355-359 @ 26857050).
  bytes carried{};
  bytes bound_in_backward{};
  // FSDP2's own overlap of all-gathers with compute (_fsdp_param_group.py @ pytorch 002a76fb, the
  // same in torch 2.6: the prefetch target unchecked since 2.4, a stray one freed in
  // finalize_backward since 2.6): in forward, wait_for_unshard keeps a unit's flat all-gather
  // output after its copy-out (comm_ctx.all_gather_state) until the next unit's copy-out or the
  // root's post-forward, so a unit runs beside its own flat output; in backward, pre_backward's
  // _backward_prefetch all-gathers the unit before it in post-forward order (the root's pre-backward
  // the top block or an output unit's last chunk, each block the one below, block 0 an embedding
  // unit of its own) and that flat output waits for the unit's own pre-backward. None of the three
  // frameworks sets an explicit prefetch (set_modules_to_backward_prefetch): all run this default.
  bool overlapped_all_gathers = false;
};

// Where a moment is and what it holds besides the shards, the state and the inputs.
struct fsdp2_moment {
  bool backward = false;
  bytes gathered{};     // unsharded parameters and all-gather outputs
  bytes grads{};        // unsharded bf16 gradients, reduce-scatter buffers, sharded fp32 gradients
  bytes activations{};  // saved tensors and the running op's tensors
  bytes step{};         // an optimizer step's temporaries inside backward (optimizer_in_bwd)

  [[nodiscard]] constexpr bytes ranked() const { return gathered + grads + activations + step; }
};

// Whether block `i` (0-based) runs under checkpoint_wrapper: every block with mode full, every
// k-th with selective_ac_option "<k>" (apply_ac: `ac_freq`, checkpointed when
// ptr_id % ac_freq == 0 after counting the block, infra/parallelize.py @ f7084fc7).
constexpr bool fsdp2_block_checkpointed(const training_spec& run, std::uint64_t i) {
  if (run.ckpt == checkpointing::full) return true;
  return run.sac == selective_ac::every_kth_block && (i + 1) % run.sac_every == 0;
}

// What one block keeps under the per-op policy: its input (kept by the checkpoint for the
// recomputation) and the outputs of the ops on _save_list: every other aten.mm, counted from the
// first in each block (the odd ones are saved: `mm_count % 2 == 0` is recomputed), and SDPA's
// output and log-sum-exp (_save_list: aten._scaled_dot_product_flash_attention /
// efficient_attention), infra/parallelize.py _apply_ac_to_transformer_block @ f7084fc7.
constexpr bytes op_save_list_bytes(const graph& g) {
  bytes kept{};
  std::uint64_t mm = 0;
  for (std::size_t i = g.block_begin; i < g.block_end; ++i) {
    const op& o = g.ops[i];
    if (o.kind == op_kind::stream) kept += o.out;
    if (o.kind == op_kind::linear && ++mm % 2 == 1) kept += o.out;
    if (o.kind == op_kind::attention) kept += o.out + o.extra_saved;
  }
  return kept;
}

// One chunk's logits of the head's output projection (the recipe's num_output_chunks; the whole
// logits without chunks): what the last chunk's call has not made yet.
constexpr bytes last_output_chunk(const graph& g, section head, const training_spec& run) {
  bytes logits{};
  for (std::size_t i = head.begin; i < head.end; ++i)
    if (g.ops[i].kind == op_kind::linear) logits = g.ops[i].out;
  return run.loss == loss_impl::chunked && run.loss_chunks > 0 ? ceil_div(logits, run.loss_chunks) : logits;
}

// The largest moment of one step under FSDP2, FSDP2's rules read from torch's
// torch/distributed/_composable/fsdp (_fsdp_param_group.py, _fsdp_collectives.py @ v2.6.0):
// a unit's parameters are all-gathered (a flat bf16 output beside the unsharded parameters it is
// copied into) before its forward and again before its backward; after forward a unit frees them
// (reshard_after_forward) except the last block, which torchtitan keeps (apply_fsdp:
// reshard_after_forward = int(layer_id) < len(model.layers) - 1); the root gathers in its
// pre-forward and stays gathered through the loss and backward (FSDPState._lazy_init sets the
// root group's post_forward_mesh_info = None, _fsdp_state.py, torch 2.4-2.6), reduce-scattering
// its gradients only in the final callback. A block's bf16 gradients are copied into an fp32 reduce-scatter input of the
// unit's full size whose 1/N output becomes the sharded fp32 gradient; the bf16 gradients are freed
// before that output is allocated (foreach_reduce: unsharded_grads.clear() after the copy-in).
constexpr fsdp2_moment fsdp2_largest_moment(const graph& g, const training_spec& run, const fsdp2_units& u) {
  const std::uint64_t L = g.block_repeats;
  // Block units with a gradient shard: the repeated blocks and a first layer written apart (its
  // saved tensors are the prologue's).
  const std::uint64_t block_units = L + (g.first_layer_apart ? 1 : 0);
  const std::uint64_t n = u.ranks;
  const bytes block_shard_grads = ceil_div(u.block_grads_fp32, n);
  // What a unit keeps on the device of its reduce-scatter output once its reduce returned.
  const auto kept = [&](bytes shard) { return u.stepped_in_backward || u.host_shards ? bytes{} : shard; };
  const bytes kept_block_shard = kept(block_shard_grads);
  const std::uint64_t top = L - 1;
  // The top block's forward saves nothing when it is recomputed in backward.
  const bool top_recomputed = fsdp2_block_checkpointed(run, top) || run.sac == selective_ac::op_save_list;
  const forward_pass block = forward_walk(g, block_of(g), run, false, !top_recomputed);
  const bytes ckpt_saved = block.checkpoint_saved;
  const bytes policy_saved = run.sac == selective_ac::op_save_list ? op_save_list_bytes(g) : block.saved;
  // Offloaded activations (OffloadActivations: the recipes require activation checkpointing)
  // leave only what offload_stashed_blocks keeps during a block's forward.
  const bytes ckpt_kept = run.offload_activations ? bytes{} : ckpt_saved;
  const auto saved_of = [&](std::uint64_t i) { return fsdp2_block_checkpointed(run, i) ? ckpt_kept : policy_saved; };
  // What blocks below i keep (blocks 0..i-1).
  const auto saved_below = [&](std::uint64_t i) {
    bytes total{};
    for (std::uint64_t j = 0; j < i; ++j) total += saved_of(j);
    return total;
  };
  const bytes saved_p = section_saved_bytes(g, prologue_of(g), run, false);
  const bytes all_blocks = saved_below(L);
  const section epi = epilogue_of(g);
  const section head = until_loss(g, epi);
  // The loss code holds its outputs until forward returns (forward_walk's `held`).
  const forward_pass epilogue = forward_walk(g, epi, run, true);
  const section loss{head.end, epi.end};

  fsdp2_moment best{};
  // Gradient accumulation: torchtune's recipes call neither no_sync nor set_requires_gradient_sync,
  // so every micro-batch reduce-scatters and the later ones add into the stored shards
  // (foreach_reduce: `sharded_param.grad._local_tensor += new_sharded_grad`, _fsdp_collectives.py
  // @ v2.6.0): each moment of a later micro-batch also holds every unit's sharded gradient, less
  // those it already counts (`stored`); a reduce-scatter's own 1/N output is then a temporary.
  const bytes output_shard = ceil_div(u.output_grads, n);
  const bytes kept_output_shard = kept(output_shard);
  const bytes root_shard = ceil_div(u.root_grads_fp32, n);
  const bytes all_shards =
      kept_block_shard * block_units + kept(root_shard) + kept_output_shard + kept(ceil_div(u.embedding_grads, n));
  const bool accumulating = run.grad_accum > 1;
  const auto consider_holding = [&](fsdp2_moment m, bytes stored) {
    if (m.ranked() > best.ranked()) best = m;
    if (!accumulating) return;
    m.grads += all_shards - stored;
    if (m.ranked() > best.ranked()) best = m;
  };
  const auto consider = [&](const fsdp2_moment& m) { consider_holding(m, bytes{}); };
  // Forward: the root stays gathered from its pre-forward through the output projection.
  // The top block's all-gather: its unsharded parameters beside the flat output.
  const bytes stashed = ckpt_saved * offload_stashed_blocks(run, top);
  consider({false, u.root + u.block * 2U, {}, u.carried + g.held + saved_p + saved_below(top) + stashed});
  // A block's forward, beside its own flat all-gather output where it is kept.
  const bytes forward_flat = u.overlapped_all_gathers ? u.block : bytes{};
  consider({false, u.root + u.block + forward_flat, {},
            u.carried + g.held + saved_p + saved_below(top) + stashed + (top_recomputed ? saved_of(top) : bytes{}) +
                block.peak});
  // Block 0's all-gather where the flat output of the unit before it is still kept (the root's, or an
  // embedding unit's), beside the embedding's output (a step whose forward gathers the root; after
  // validate() it stays gathered).
  const bool embedding_apart = u.embedding_unit.value != 0;
  if (u.overlapped_all_gathers)
    consider({false, u.root + (embedding_apart ? u.embedding_unit : u.root) + u.block, {},
              u.carried + g.held + g.stream_grad});
  // The embedding as a unit of its own: its all-gather before the lookup (its flat output and its
  // unsharded parameters), where the overlap keeps the root's flat output until its copy-out.
  if (embedding_apart) {
    consider({false, u.root + u.embedding_unit * 2U, {}, {}});
    if (u.overlapped_all_gathers) consider({false, u.root * 2U + u.embedding_unit, {}, {}});
  }
  // The head and the loss, the root still gathered (and torchtitan's last block).
  const bytes after_blocks = u.root + (u.last_block_kept ? u.block : bytes{});
  const bytes head_saved = saved_p + all_blocks + epilogue.peak_before_loss;
  // The output projection runs inside the root's forward beside the last flat output kept: an output
  // unit's own, else the top block's. (An output unit's first all-gather, beside the top block's flat
  // output and before any logits, stays below this moment while that unit is the larger.)
  const bytes projection_flat = u.overlapped_all_gathers && u.output_unit.value != 0 ? u.output_unit : forward_flat;
  consider({false, after_blocks + u.output_unit + projection_flat, {}, u.carried + head_saved});
  consider({false, after_blocks, {}, saved_p + all_blocks + epilogue.peak});
  // The output projection as a unit of its own is gathered around each chunk's call
  // (TransformerDecoder.chunked_output, modules/transformer.py @ v0.6.1): the last chunk's
  // all-gather sees every earlier chunk's logits.
  if (u.output_unit.value != 0)
    consider({false, after_blocks + u.output_unit * 2U, {}, head_saved - last_output_chunk(g, head, run)});

  // The flat all-gather output block i's pre-backward prefetched: the block below; below block 0 a
  // first layer written apart or an embedding unit of its own (even a frozen one, which runs no
  // backward: _backward_prefetch does not ask, and the final callback's finalize_backward frees it,
  // _fsdp_param_group.py @ 002a76fb); i == L: the top block's, from the root's pre-backward (an
  // output unit's, from its first chunk's), through the head's backward, unless torchtitan kept the
  // top block gathered after forward (the prefetch is then a no-op).
  const auto prefetched = [&](std::uint64_t i) {
    if (!u.overlapped_all_gathers) return bytes{};
    if (i == 0) return g.first_layer_apart ? u.block : u.embedding_unit;
    return i == L && u.last_block_kept ? bytes{} : u.block;
  };
  // Backward of the loss (`del pred` first: only what the loss saved): every loss chunk's backward
  // runs before the first logits gradient reaches the root's pre-backward hook. Then the head's.
  const auto lb = section_backward_peak(g, loss, run, false, bytes{});
  consider({true, after_blocks, {}, saved_p + all_blocks + section_saved_bytes(g, head, run, false) + lb.peak});
  const auto hb = section_backward_peak(g, head, run, false, bytes{});
  consider({true, after_blocks + u.output_unit + prefetched(L), hb.grads_at_peak,
            saved_p + all_blocks + (hb.peak - hb.grads_at_peak)});
  // An output unit of its own is gathered again before each chunk's backward and reduce-scatters
  // that chunk's gradient into its shard right after it (post_backward, _fsdp_param_group.py @ v2.6.0).
  if (u.output_unit.value != 0) {
    const bytes head_kept = saved_p + all_blocks + section_saved_bytes(g, head, run, false);
    consider_holding({true, after_blocks + u.output_unit * 2U, kept_output_shard, head_kept}, output_shard);
    // Its reduce-scatter's two moments, as a block's (below); the first chunk's beside the top block's
    // prefetched flat output.
    const bytes output_units = after_blocks + u.output_unit + prefetched(L);
    consider_holding({true, output_units, u.output_grads * 2U + kept_output_shard, head_kept}, output_shard);
    consider_holding({true, output_units, u.output_grads + output_shard + kept_output_shard, head_kept},
                     output_shard);
    // optimizer_in_bwd: the hook steps beside the reduce-scatter input and output (post_backward
    // resharded the unit before foreach_reduce, _fsdp_param_group.py @ v2.6.0).
    if (u.stepped_in_backward)
      consider({true, after_blocks + prefetched(L), u.output_grads + output_shard, head_kept, u.hook_step});
  }

  // A block's backward: the root and this block gathered, the head's bf16 gradients waiting
  // for the final callback, the sharded gradients of the blocks above; a checkpointed block
  // first runs its forward again.
  const auto bp = section_backward_peak(g, block_of(g), run, false, g.stream_grad);
  const bytes local = bp.peak - bp.grads_at_peak;
  const bytes rerun = g.stream_grad + section_forward_peak(g, block_of(g), run, false, true);
  // Block 1 besides: the lowest block that runs beside a prefetched unit.
  for (const std::uint64_t i : {top, std::min(top, std::uint64_t{1}), std::uint64_t{0}}) {
    const bytes above = kept_block_shard * (L - 1 - i);
    const bool recomputed = fsdp2_block_checkpointed(run, i) || run.sac == selective_ac::op_save_list;
    // A checkpointed block's own input, where no op of the block saves it (checkpoint_input_unsaved).
    const bytes own_input = fsdp2_block_checkpointed(run, i) && !run.offload_activations
                                ? checkpoint_input_unsaved(g, block_of(g), run)
                                : bytes{};
    const bytes below = u.bound_in_backward + saved_p + saved_below(i) + own_input;
    // post_backward reshards block i before its reduce-scatter; the prefetched output stays.
    const bytes units = u.root + u.block + prefetched(i);
    const bytes stored = above + kept_output_shard;  // head_grads holds an output unit's shard
    consider_holding({true, units, u.head_grads + above + bp.grads_at_peak, below + local}, stored);
    if (recomputed) consider_holding({true, units, u.head_grads + above, below + rerun}, stored);
    // Its reduce-scatter: the bf16 gradients copied into the input (foreach_reduce_scatter_copy_in),
    // then, the gradients dropped (`unsharded_grads.clear()`), the input and the 1/N output
    // (foreach_reduce, _fsdp_collectives.py @ v2.6.0).
    consider_holding({true, units, u.head_grads + above + u.block_grads + u.block_grads_fp32,
                      below + g.stream_grad},
                     stored);
    consider_holding({true, units, u.head_grads + above + u.block_grads_fp32 + block_shard_grads,
                      below + g.stream_grad},
                     stored);
    // optimizer_in_bwd: each shard's hook steps beside the output (post_backward resharded the unit
    // before foreach_reduce, _fsdp_param_group.py @ v2.6.0).
    if (u.stepped_in_backward)
      consider({true, u.root + prefetched(i), u.head_grads + above + u.block_grads_fp32 + block_shard_grads,
                below + g.stream_grad, u.hook_step});
  }
  // The embeddings' backward (an embedding unit of its own is all-gathered first), then the
  // root's reduce-scatter in the final callback.
  const auto pp = section_backward_peak(g, prologue_of(g), run, false, bytes{});
  const bytes blocks_stored = kept_block_shard * block_units + kept_output_shard;
  if (u.embedding_unit.value != 0)
    consider_holding(
        {true, u.root + u.embedding_unit * 2U, u.head_grads + kept_block_shard * block_units, saved_p + g.stream_grad},
        blocks_stored);
  // A first layer written in the prologue runs its backward there, its unit gathered.
  const bytes prologue_units = u.root + u.embedding_unit + (g.first_layer_apart ? u.block : bytes{});
  consider_holding({true, prologue_units, u.head_grads + kept_block_shard * block_units + pp.grads_at_peak,
                    u.bound_in_backward + pp.peak - pp.grads_at_peak},
                   blocks_stored);
  consider_holding({true, u.root + u.embedding_unit,
                    u.embedding_grads + u.root_grads + u.root_grads_fp32 + blocks_stored, u.bound_in_backward},
                   blocks_stored);
  consider_holding({true, u.root + u.embedding_unit,
                    u.embedding_grads + u.root_grads_fp32 + root_shard + blocks_stored, u.bound_in_backward},
                   blocks_stored);
  if (u.stepped_in_backward)
    consider({true, u.embedding_unit, u.embedding_grads + u.root_grads_fp32 + root_shard, {}, u.hook_step});
  // An embedding unit of its own has no post-backward hook (its input, the tokens, needs no
  // gradient), so the final callback reduces it after the root, in named_modules() order
  // (_root_post_backward_final_callback, _fsdp_state.py @ v2.6.0).
  if (u.embedding_unit.value != 0) {
    consider_holding({true, u.embedding_unit, u.embedding_grads * 2U + kept(root_shard) + blocks_stored, {}},
                     blocks_stored + root_shard);
    const bytes embedding_shard = ceil_div(u.embedding_grads, n);
    consider_holding(
        {true, u.embedding_unit, u.embedding_grads + embedding_shard + kept(root_shard) + blocks_stored, {}},
        blocks_stored + root_shard);
    if (u.stepped_in_backward) consider({true, {}, u.embedding_grads + embedding_shard, {}, u.hook_step});
  }
  return best;
}

}  // namespace memscale::detail
