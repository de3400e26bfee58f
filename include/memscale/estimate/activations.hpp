// memscale/estimate/activations.hpp: saved activations and the live-memory profile of
// forward and backward, section by section.
//
// Forward: an op's output lives while the op runs; whatever a later backward needs stays.
// Backward runs the ops in reverse: a kept tensor is freed after the backward of the
// earliest op that needs it, an op's extra saved tensors after its own backward. The
// block section repeats, and every cross-layer term is linear in the layer index, so
// the maximum over layers is at the first or last layer: no walk over all layers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "memscale/estimate/gradients.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/training.hpp"

namespace memscale {

// Bytes an op keeps from forward until backward. `Sum`: bytes, or detail::unchecked_bytes where
// the caller proved the walk's sums fit (estimate/walk_bound.hpp).
template <class Sum = bytes>
constexpr Sum op_saved_bytes(const op& o) {
  return Sum{o.released_by != not_kept ? o.out : bytes{}} + o.extra_saved;
}

// A cached key or value (op::kv_cached) in a training graph that autograd does not save: the
// model's outputs hold it until forward returns, so it lives through the loss and is freed
// before backward (graph/layers/attention.hpp keeps_cache_in_training). One autograd saves is
// alive then anyway.
constexpr bool kept_until_loss(const op& o) { return o.kv_cached && o.released_by == not_kept; }

struct section {
  std::size_t begin = 0;
  std::size_t end = 0;
};

constexpr section prologue_of(const graph& g) { return {0, g.block_begin}; }
constexpr section block_of(const graph& g) { return {g.block_begin, g.block_end}; }
constexpr section epilogue_of(const graph& g) { return {g.block_end, g.size}; }

// The part of a section before its first loss op (the whole section when it has none).
constexpr section until_loss(const graph& g, section s) {
  for (std::size_t i = s.begin; i < s.end; ++i)
    if (g.ops[i].kind == op_kind::loss) return {s.begin, i};
  return s;
}

// Bytes one pass through a section leaves alive until the loss (kept_until_loss).
constexpr bytes section_cache_bytes(const graph& g, section s) {
  bytes total{};
  for (std::size_t i = s.begin; i < s.end; ++i)
    if (kept_until_loss(g.ops[i])) total += g.ops[i].out;
  return total;
}

// Whether selective checkpointing recomputes (so does not keep) op `o`'s tensors.
constexpr bool dropped_by_selective(const op& o, const training_spec& run) {
  return run.ckpt == checkpointing::selective && o.recomputed_by_selective;
}

// Saved bytes of one pass through a section, as seen by later sections.
constexpr bytes section_saved_bytes(const graph& g, section s, const training_spec& run, bool checkpointed) {
  bytes total{};
  for (std::size_t i = s.begin; i < s.end; ++i) {
    const op& o = g.ops[i];
    // torch.utils.checkpoint keeps only the block's input (its first, stream op), whether
    // or not an op inside the block would have saved it (a 16-bit RMSNorm input is upcast
    // first and not saved itself): checkpoint.py saves the inputs for the recomputation.
    if (checkpointed) {
      if (o.kind == op_kind::stream) total += o.out;
      continue;
    }
    if (dropped_by_selective(o, run)) continue;
    total += op_saved_bytes(o);
  }
  return total;
}

// The part of a checkpointed block's input that no op of the block saves as it is (a 16-bit
// RMSNorm upcasts it first): the block's walks do not count it, yet the checkpoint keeps it
// referenced until the block's backward ends (the non-reentrant frame's saved inputs, the reentrant
// function's save_for_backward: torch/utils/checkpoint.py@0008d771).
constexpr bytes checkpoint_input_unsaved(const graph& g, section s, const training_spec& run) {
  bytes total{};
  for (std::size_t i = s.begin; i < s.end; ++i) {
    const op& o = g.ops[i];
    if (o.kind == op_kind::stream && (o.released_by == not_kept || dropped_by_selective(o, run))) total += o.out;
  }
  return total;
}

// Highest live activation bytes inside one forward pass through a section, counted
// from the section start: saved so far (and kept until the loss) + the running op's output,
// temporaries and its input when nothing keeps that input.
// With `held`, outputs nobody saves stay alive until the section ends: the loss code
// holds logits and their shifted copy in local variables until forward returns
// (modeling_gpt2.py GPT2LMHeadModel.forward: lm_logits, shift_logits).
// With `saving` false (a checkpointed block's forward) nothing accumulates for backward.
constexpr bytes section_forward_peak(const graph& g, section s, const training_spec& run, bool held = false,
                                     bool saving = true) {
  bytes saved{};
  bytes loose{};
  bytes peak{};
  for (std::size_t i = s.begin; i < s.end; ++i) {
    const op& o = g.ops[i];
    const bool prev_loose =
        i > s.begin && ((g.ops[i - 1].released_by == not_kept && !kept_until_loss(g.ops[i - 1])) || !saving);
    const bool prev_transient = i > s.begin && g.ops[i - 1].transient && g.ops[i - 1].released_by == not_kept;
    const bytes previous = held ? loose + (prev_transient ? g.ops[i - 1].out : bytes{})
                                : (prev_loose ? g.ops[i - 1].out : bytes{});
    const bytes live = saved + o.out + o.fwd_temp + o.extra_saved + previous;
    peak = max(peak, live);
    if (saving && !dropped_by_selective(o, run)) saved += op_saved_bytes(o);
    if (kept_until_loss(o)) saved += o.out;
    if (o.released_by == not_kept && !o.transient && !kept_until_loss(o)) loose += o.out;
  }
  return peak;
}

// What one forward pass through a section yields, walked once: the figures of section_saved_bytes,
// section_cache_bytes and section_forward_peak above (and of the peak before the loss), which the
// estimate reads together (tests/runtime/section_walks_test.cpp holds them equal).
struct forward_pass {
  bytes saved{};             // kept for backward, as later sections see it (section_saved_bytes)
  bytes checkpoint_saved{};  // the same when the section is a checkpointed block: its input
  bytes cache{};             // kept until the loss (section_cache_bytes)
  bytes peak{};              // highest live bytes (section_forward_peak)
  bytes peak_before_loss{};  // `peak` over the ops before the first loss op (until_loss)
};

// `held` and `saving` as in section_forward_peak; `Sum` as in op_saved_bytes.
template <class Sum = bytes>
constexpr forward_pass forward_walk(const graph& g, section s, const training_spec& run, bool held,
                                    bool saving = true) {
  Sum saved{};
  Sum checkpoint_saved{};
  Sum cache{};
  Sum peak{};
  Sum peak_before_loss{};
  Sum kept{};  // what the peak counts as saved so far: the saved bytes when saving, and the cache
  Sum loose{};
  bool before_loss = true;
  for (std::size_t i = s.begin; i < s.end; ++i) {
    const op& o = g.ops[i];
    Sum previous{};
    if (i > s.begin) {
      const op& prev = g.ops[i - 1];
      if (held)
        previous = loose + (prev.transient && prev.released_by == not_kept ? prev.out : bytes{});
      else if (!saving || (prev.released_by == not_kept && !kept_until_loss(prev)))
        previous = prev.out;
    }
    peak = max(peak, kept + o.out + o.fwd_temp + o.extra_saved + previous);
    if (o.kind == op_kind::loss) before_loss = false;
    if (before_loss) peak_before_loss = peak;
    if (o.kind == op_kind::stream) checkpoint_saved += o.out;  // the checkpoint's input
    if (!dropped_by_selective(o, run)) {
      const Sum own = op_saved_bytes<Sum>(o);
      saved += own;
      if (saving) kept += own;
    }
    if (kept_until_loss(o)) {
      cache += o.out;
      kept += o.out;
    }
    if (o.released_by == not_kept && !o.transient && !kept_until_loss(o)) loose += o.out;
  }
  return {.saved = bytes{saved.value},
          .checkpoint_saved = bytes{checkpoint_saved.value},
          .cache = bytes{cache.value},
          .peak = bytes{peak.value},
          .peak_before_loss = bytes{peak_before_loss.value}};
}

struct backward_profile {
  bytes peak{};              // activations + transient gradients + gradients created in the section
  bytes grads_at_peak{};     // the part of `peak` that is parameter gradients
};

// Which gradients of an FSDP1 unit's views to count: those autograd makes (a tied head's borrowed
// weight gets a whole one; the embeddings' gradient of that weight is the op's bwd_temp, added to
// it) or those the flat gradient stores (a tied weight once, as its owner's).
enum class view_gradients : std::uint8_t { computed, stored };

// The gradient of an op's weight and bias when they are views of an FSDP1 flat parameter that
// requires grad (training_spec::fsdp_flat_views), in elements: a frozen tensor gets one too when
// use_orig_params lets it share the flat parameter with trainable ones (FSDP's docstring warns of
// it from torch 2.1, pytorch PR #104967).
constexpr std::uint64_t flat_view_gradient_elements(const op& o, const training_spec& run, view_gradients which) {
  if ((o.weight.rows == 0 && o.bias.rows == 0) || (o.frozen && !run.fsdp_use_orig_params)) return 0;
  const op_elements n = elements_of(o);
  const bool weight = which == view_gradients::computed ? !o.weight_grad_exists : !o.borrows_weight;
  return detail::checked_add(weight ? n.weight : 0, n.bias);
}

// The view gradients of section `s`'s weights in the parameter dtype.
constexpr bytes section_view_gradient_bytes(const graph& g, section s, const training_spec& run, view_gradients which) {
  std::uint64_t elements = 0;
  for (std::size_t i = s.begin; i < s.end; ++i)
    elements = detail::checked_add(elements, flat_view_gradient_elements(g.ops[i], run, which));
  return storage(precision_policy_of(run).param, elements);
}

// A section whose weights are views of one FSDP1 flat parameter that requires grad. A block is a
// unit of its own; the root unit spans the epilogue (back-propagated first) and the prologue, so
// the epilogue's view gradients wait through every block's backward for the split that follows
// the prologue's.
struct flat_view_unit {
  bool views = false;
  bool split_after = false;  // the unit's split backward runs when this section's backward ends
  bytes waiting{};           // view gradients of the unit's sections back-propagated before this one
  bytes flat{};              // split_after: the unit's flat gradient (stored tensors: a tied weight once)
  // split_after: of `waiting`, the gradients of borrowed (tied) weights, to which their owners'
  // gradients are added in this section's backward.
  bytes borrowed{};
};

// Highest live bytes during one backward pass through a section, counted over: the
// section's saved tensors still needed, gradients created so far in the section (when
// gradients do not persist), the gradients of the op's output and input, its temporaries and
// the gradients waiting in autograd's input buffers (graph.hpp waiting_gradient).
// unit.views: the section belongs to an FSDP1 unit whose flat parameter requires grad. Its
// weights are split views of it (torch 2.1 _flat_param.py _get_unflat_views_aligned: torch.split,
// then .view), so every weight gradient waits in the split's backward until the unit's last op
// is done, which then concatenates them into the flat gradient (FunctionsManual.cpp
// split_with_sizes_backward: at::cat) before AccumulateGrad adds it to the one kept (or keeps
// it). Traced: docs/data/cpu_traced_fsdp1_flat_views.json, 2.02 flat parameters at that moment.
// `Sum` as in op_saved_bytes, for the sums of tensors alive (the gradients' stay checked), and only
// without flat views (unit.views false), whose gradients estimate/walk_bound.hpp does not bound.
template <class Sum = bytes>
constexpr backward_profile section_backward_peak(const graph& g, section s, const training_spec& run,
                                                 bool grads_persist, bytes carried_grad, flat_view_unit unit = {}) {
  const bool flat_views = unit.views;
  const std::size_t n = s.end - s.begin;
  const dtype trainable = precision_policy_of(run).trainable;
  const dtype view_grad = precision_policy_of(run).param;  // flat_views: the flat parameter's dtype
  // Outputs and extra saved tensors still alive at the backward of op k are those released at
  // k or later: the section's totals less what the ops after k released (walked in reverse).
  // Bytes freed after the backward of index k: the outputs it is the last backward to need and its
  // own extra saved tensors. Only the section's n entries are zeroed: a value-initialised array
  // costs more than the walk (left uninitialised is allowed in constant evaluation since C++20,
  // P1331, as no entry is read before it is written).
  std::array<std::uint64_t, graph_capacity> freed_at;
  for (std::size_t k = 0; k < n; ++k) freed_at[k] = 0;
  Sum alive{};
  // An entry of freed_at is a part of `alive`, whose sum is checked or bounded: it cannot overflow.
  for (std::size_t i = s.begin; i < s.end; ++i) {
    const op& o = g.ops[i];
    alive += o.extra_saved;
    freed_at[i - s.begin] += o.extra_saved.value;
    if (o.released_by == not_kept || dropped_by_selective(o, run)) continue;
    // Kept for a later section's backward, which runs first: already freed here.
    const auto k = o.released_by.index() - s.begin;
    if (k >= n) continue;
    alive += o.out;
    freed_at[k] += o.out.value;
  }
  // Waiting gradients (graph.hpp waiting_gradient) alive from the backward of index k on (made as
  // k + 1's ends), and those freed after the backward of index k. Skipped for a graph without any:
  // the walk's steps count against the constant-evaluation limit of a static_assert'ed plan.
  const bool any_waiting = g.waiting_count > 0;
  std::array<std::uint64_t, graph_capacity> waiting_from;
  std::array<std::uint64_t, graph_capacity> waiting_until;
  if (any_waiting)
    for (std::size_t k = 0; k < n; ++k) waiting_from[k] = waiting_until[k] = 0;
  for (std::size_t w = 0; w < g.waiting_count; ++w) {
    const waiting_gradient& wg = g.waiting[w];
    if (wg.used_by < s.begin || wg.made_by >= s.end) continue;
    const std::size_t from = wg.made_by - 1 - s.begin;
    waiting_from[from] = detail::checked_add(waiting_from[from], wg.size.value);
    waiting_until[wg.used_by - s.begin] = detail::checked_add(waiting_until[wg.used_by - s.begin], wg.size.value);
  }
  Sum waiting{};
  backward_profile result{};
  bytes grads_after{};  // gradients created by ops later in the section (already processed)
  bytes view_grads{};   // flat_views: the weight gradients waiting for the split's backward
  for (std::size_t k = n; k-- > 0;) {
    const op& o = g.ops[s.begin + k];
    const bytes own_grad = op_gradient_bytes(o, trainable);
    const bytes grad_out = o.grad_out.value != 0 ? o.grad_out : o.out;  // usually the output's size
    if (flat_views) view_grads += storage(view_grad, flat_view_gradient_elements(o, run, view_gradients::computed));
    const bytes created = flat_views ? unit.waiting + view_grads : grads_persist ? own_grad : grads_after + own_grad;
    if (any_waiting) waiting += Sum{waiting_from[k]};
    const bytes live = bytes{(alive + grad_out + o.grad_in + o.bwd_temp + waiting + carried_grad).value} + created;
    if (live > result.peak) result = {live, created};
    grads_after += own_grad;
    // Moving to op k - 1: what op k released and its own extra tensors are gone.
    alive -= Sum{freed_at[k]};
    if (any_waiting) waiting -= Sum{waiting_until[k]};
  }
  const bytes left{alive.value};  // what the section's backward leaves alive
  if (flat_views && unit.split_after) {
    // A tied weight's two gradients meet in its view's input buffer, summed out of place
    // (torch/csrc/autograd/input_buffer.cpp@00d40e7f accumulate: dense + dense is old_var + var):
    // the waiting one, the embeddings' and the sum.
    const bytes summing = unit.waiting + view_grads + unit.borrowed * std::uint64_t{2};
    if (unit.borrowed.value != 0 && left + carried_grad + summing > result.peak)
      result = {left + carried_grad + summing, summing};
    // The split's backward: the waiting gradients (a tied weight's summed into one) beside their
    // concatenation.
    const bytes live = left + carried_grad + unit.flat * std::uint64_t{2};
    if (live > result.peak) result = {live, unit.flat * std::uint64_t{2}};
  }
  return result;
}

// torchtune's OffloadActivations (training/_activation_offloading.py @ a6290a5b, use_streams,
// max_fwd_stash_size 5) keeps an offloaded tensor on the device until four later ones are
// packed; a checkpointed block packs only its input, so while a block runs forward the inputs of
// the last four blocks below it (of `blocks_below`) still wait there.
constexpr std::uint64_t offload_stashed_blocks(const training_spec& run, std::uint64_t blocks_below) {
  const bool stashes = run.offload_activations && run.ckpt == checkpointing::full &&
                       run.framework == framework_kind::torchtune && run.device == device_kind::cuda;
  if (!stashes) return 0;
  return blocks_below < 4 ? blocks_below : 4;
}

}  // namespace memscale
