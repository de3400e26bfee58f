// memscale/allocator/vision_events.hpp: the tensors of vision training steps (a flat
// vision::layer_graph) in the order they are created and freed.
//
// The walk vision/estimate.hpp describes, made literal: forward, a layer's output lives until
// its last consumer has run (or until its backward when one saves it), its temporaries die
// with it; backward in reverse, the gradient flowing into a layer, the one it produces, its
// temporaries, the gradients parked on skip connections and the parameter gradients it
// creates, then the saved tensors it was the last to need. Setup (parameters, BatchNorm
// statistics, the image batch and labels) and the optimizer step are those of the transformer
// walk. A convolution's cuDNN workspace (vision::layer_graph::call_workspace) is taken and
// given back around its forward call and each of its two backward calls (data, then filter).
// Stage checkpointing (vision/estimate.hpp's walk, torch.utils.checkpoint non-reentrant): a
// checkpointed stage's layers save nothing in forward and the stage holds its input; when its
// backward starts its forward is replayed (the gradient coming in waiting meanwhile), keeping
// what its backward functions save, then it runs backward and gives its input back.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "memscale/allocator/events.hpp"
#include "memscale/allocator/optimizer_events.hpp"
#include "memscale/allocator/step_events.hpp"
#include "memscale/estimate/gradients.hpp"
#include "memscale/estimate/parameters.hpp"
#include "memscale/vision/graph.hpp"

namespace memscale::allocator {

namespace detail {

template <class Sink, std::size_t IdCapacity>
class vision_walker {
 public:
  constexpr vision_walker(const vision::layer_graph& g, const training_spec& run, const step_stream_options& o,
                          Sink& sink)
      : g_(g), run_(run), p_(precision_policy_of(run)), o_(o), events_(sink) {  // NOLINT: o_ is the options
    ckpt_ = run.ckpt != checkpointing::none && g.stages > 0;
    persist_ = run.grad_accum > 1 || !run.zero_grad_to_none;
    for (std::size_t i = 0; i < g.size; ++i) {
      saved_[i] = no_tensor;
      release_head_[i] = no_layer;
      dies_head_[i + 1] = no_layer;
    }
    dies_head_[0] = no_layer;
    // Who frees what: a saved output is released by the earliest saver's backward; an output
    // not kept through forward (none saves it, or the checkpoint drops it) dies after its last
    // forward consumer.
    for (std::size_t j = g.size; j-- > 0;) {
      const release_point by = g.ops[j].released_by;
      if (by != not_kept) {
        release_next_[j] = release_head_[by.index()];
        release_head_[by.index()] = static_cast<std::uint16_t>(j);
      }
      if (!vision::output_kept(g, j, ckpt_)) {
        const auto at = static_cast<std::size_t>(g.last_use[j]) + 1;
        dies_next_[j] = dies_head_[at];
        dies_head_[at] = static_cast<std::uint16_t>(j);
      }
    }
  }

  constexpr void walk() {
    events_.enter(0, moment::setup);
    for (std::size_t i = 0; i < g_.size; ++i) {
      const op& o = g_.ops[i];
      const op_elements n = elements_of(o);
      const dtype d = o.frozen ? p_.param : p_.trainable;
      if (o.weight.rows != 0 && !o.borrows_weight) alloc(storage(d, n.weight).value);
      if (o.bias.rows != 0) alloc(storage(d, n.bias).value);
    }
    alloc(g_.buffers.value);
    if (persist_)
      for (std::size_t i = 0; i < g_.size; ++i) gradients_of(g_.ops[i]);
    alloc(g_.inputs.value);
    for (std::uint32_t s = 1; s <= o_.steps; ++s) step(s);
  }

 private:
  constexpr std::uint32_t alloc(std::uint64_t size) { return events_.alloc(size); }
  constexpr void free(std::uint32_t& id) { events_.free(id); }

  // A library call's workspace, taken and given back at once.
  constexpr void call(std::size_t layer) {
    std::uint32_t workspace = alloc(g_.call_workspace[layer].value);
    free(workspace);
  }

  constexpr void gradients_of(const op& o) {
    const bytes own = op_gradient_bytes(o, p_.trainable);
    if (own.value == 0) return;
    if (grad_count_ >= grads_.size())
      memscale::detail::fail(error_code::unsupported, "event stream", "has more gradients than its capacity", grad_count_);
    grads_[grad_count_++] = alloc(own.value);
  }

  constexpr void step(std::uint32_t s) {
    events_.enter(s, moment::first_block_forward);
    for (std::size_t i = 0; i < g_.size; ++i) {
      for (std::uint16_t j = dies_head_[i]; j != no_layer; j = dies_next_[j]) free(out_[j]);
      const op& o = g_.ops[i];
      if (ckpt_ && vision::starts_stage(g_, i)) stage_input_[g_.stage[i]] = alloc(g_.stage_input[g_.stage[i]].value);
      if (s == 1 && o.kind == op_kind::linear && workspace_ == no_tensor && run_.torch_version >= 200)
        workspace_ = alloc(run_.blas_workspace.value);
      out_[i] = alloc(o.out.value);
      call(i);
      if (!vision::in_checkpointed_stage(g_, i, ckpt_)) extra_[i] = alloc(o.extra_saved.value);
      std::uint32_t temp = alloc(o.fwd_temp.value);
      free(temp);
      if (vision::output_kept(g_, i, ckpt_)) {
        saved_[i] = out_[i];
        out_[i] = no_tensor;
      }
    }
    // Outputs whose last use is the last layer die with the forward (the logits).
    for (std::uint16_t j = dies_head_[g_.size]; j != no_layer; j = dies_next_[j]) free(out_[j]);
    events_.enter(s, moment::first_block_backward);
    // Segments of equal stage from the end (one segment when nothing is checkpointed).
    for (std::size_t end = g_.size; end > 0;) {
      std::size_t begin = ckpt_ ? end - 1 : 0;
      while (begin > 0 && g_.stage[begin - 1] == g_.stage[begin]) --begin;
      const std::uint16_t stage = ckpt_ ? g_.stage[begin] : std::uint16_t{0};
      if (stage != 0) replay_forward(begin, end);
      backward(begin, end);
      if (stage != 0) free(stage_input_[stage]);
      end = begin;
    }
    events_.enter(s, moment::optimizer_step);
    optimizer_step_events(
        run_, p_.trainable, s == 1,
        [&](auto&& fn) {
          for (std::size_t i = 0; i < g_.size; ++i) {
            const op& o = g_.ops[i];
            if (o.frozen) continue;
            if (!o.borrows_weight && o.weight.rows != 0) fn(o.weight.rows, o.weight.cols, std::uint64_t{1});
            if (o.bias.rows != 0) fn(o.bias.rows, std::uint64_t{1}, std::uint64_t{1});
          }
        },
        events_, temps_);
    if (!persist_) {
      for (std::size_t i = 0; i < grad_count_; ++i) free(grads_[i]);
      grad_count_ = 0;
    }
  }

  // A checkpointed stage's forward again, before its backward: what a backward inside the stage
  // saves is kept; the rest dies after its last use or, used past the stage, with the replay.
  constexpr void replay_forward(std::size_t begin, std::size_t end) {
    std::uint32_t grad_out = alloc(g_.grad_out[end - 1].value);
    std::uint32_t carried = alloc(g_.carried[end - 1].value);
    for (std::size_t i = begin; i < end; ++i) {
      for (std::uint16_t j = dies_head_[i]; j != no_layer; j = dies_next_[j])
        if (!saved_by_replay(j, end)) free(out_[j]);
      const op& o = g_.ops[i];
      out_[i] = alloc(o.out.value);
      call(i);
      extra_[i] = alloc(o.extra_saved.value);
      std::uint32_t temp = alloc(o.fwd_temp.value);
      free(temp);
      if (saved_by_replay(i, end)) {
        saved_[i] = out_[i];
        out_[i] = no_tensor;
      }
    }
    for (std::size_t i = begin; i < end; ++i) free(out_[i]);
    free(carried);
    free(grad_out);
  }

  // Whether a backward in the segment ending at `end` saves layer i's replayed output.
  constexpr bool saved_by_replay(std::size_t i, std::size_t end) const {
    const release_point by = g_.ops[i].released_by;
    return by != not_kept && by.index() < end;
  }

  // Layers [begin, end) in reverse, everything they save present.
  constexpr void backward(std::size_t begin, std::size_t end) {
    for (std::size_t k = end; k-- > begin;) {
      const op& o = g_.ops[k];
      std::uint32_t grad_out = alloc(g_.grad_out[k].value);
      std::uint32_t carried = alloc(g_.carried[k].value);
      std::uint32_t grad_in = alloc(o.grad_in.value);
      call(k);
      std::uint32_t temp = alloc(o.bwd_temp.value);
      if (!persist_) gradients_of(o);
      call(k);
      free(temp);
      free(grad_out);
      free(carried);
      free(grad_in);
      for (std::uint16_t j = release_head_[k]; j != no_layer; j = release_next_[j]) free(saved_[j]);
      free(extra_[k]);
    }
  }

  static constexpr std::uint16_t no_layer = 0xffff;
  const vision::layer_graph& g_;
  const training_spec& run_;
  precision_policy p_;
  step_stream_options o_;
  tensor_events<Sink, IdCapacity> events_;
  bool persist_ = false;
  bool ckpt_ = false;  // stage checkpointing on a graph with stages
  std::array<std::uint32_t, vision::layer_capacity> out_{};
  std::array<std::uint32_t, vision::layer_capacity> extra_{};
  std::array<std::uint32_t, vision::layer_capacity> saved_{};
  std::array<std::uint32_t, vision::stage_capacity> stage_input_{};
  std::array<std::uint16_t, vision::layer_capacity> release_head_{};
  std::array<std::uint16_t, vision::layer_capacity> release_next_{};
  std::array<std::uint16_t, vision::layer_capacity + 1> dies_head_{};
  std::array<std::uint16_t, vision::layer_capacity> dies_next_{};
  std::array<std::uint32_t, IdCapacity> grads_{};
  std::size_t grad_count_ = 0;
  std::array<std::uint32_t, IdCapacity> temps_{};
  std::uint32_t workspace_ = no_tensor;
};

}  // namespace detail

// Emits setup and `options.steps` training steps of a vision model into `sink`.
template <std::size_t IdCapacity, class Sink>
constexpr void emit_vision_training_steps(const vision::layer_graph& g, const training_spec& run,
                                          const step_stream_options& options, Sink& sink) {
  detail::vision_walker<Sink, IdCapacity> walker(g, run, options, sink);
  walker.walk();
}

}  // namespace memscale::allocator
