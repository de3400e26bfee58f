// memscale/graph/layers/ops.hpp: the op writer every layer writes through.
//
// It appends ops in place (graph_builder::push says why ops are never copied whole), fills
// in each op's output and input gradient (the one input-gradient rule: complete), and
// writes the few ops every layer shares: elementwise ops, autocast's matmul input, the
// residual add, dropout, the linear core (trainable, frozen or 4-bit, with autocast's
// weight copy) and a linear over fewer rows than the tokens.
//
// Forward liveness follows from the same calls, by one rule: an op reads the output just
// before it, every input it is given (linear's, add's, dropout's, elementwise(in, ...)'s)
// and every tensor its backward keeps (a saved tensor is one the forward op read). Without
// grad an output is freed after its last reader (graph/forward_liveness.hpp walks it).
#pragma once

#include <cstddef>
#include <cstdint>

#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/torchao_nf4.hpp"
#include "memscale/graph/tensor.hpp"
#include "memscale/graph/graph_builder.hpp"
#include "memscale/lora.hpp"
#include "memscale/model.hpp"
#include "memscale/precision_policy.hpp"
#include "memscale/training.hpp"

namespace memscale::graph_layers {

// Which of the model's dropout modules run: each site is its own flag, read once from the
// model and the run (a run without dropout, or a model whose p is 0, has none). The model's
// per-site flags (model_spec::attention_dropout, hidden_dropout, embedding_dropout) follow the
// family's config keys; T5's dropout_rate sets all of them.
struct dropout_sites {
  bool embeddings = false;       // after the input embeddings
  bool attention_probs = false;  // on the attention probabilities
  bool residual = false;         // on a branch's output before its residual add
  bool mlp_hidden = false;       // between the MLP's two matrices (T5DenseActDense)
  bool stack_output = false;     // after a stack's final norm (T5Stack)
};

constexpr dropout_sites dropout_sites_of(const model_spec& model, const training_spec& run) {
  const bool on = run.dropout && model.dropout;
  return {.embeddings = on && model.embedding_dropout,
          .attention_probs = on && model.attention_dropout,
          .residual = on && model.hidden_dropout,
          .mlp_hidden = on && model.hidden_dropout,
          .stack_output = on && model.hidden_dropout};
}

// A projection's dimensions: `rows` input rows of `in_features` to `out_features`, its
// weight (and bias) stored `copies` times (experts).
struct linear_shape {
  std::uint64_t rows = 0;
  std::uint64_t in_features = 0;
  std::uint64_t out_features = 0;
  std::uint64_t copies = 1;
  bool bias = false;
  lora_modules role = 0;  // the module it is (q, k, ..., router); 0: none a checkpoint names
};

// How a projection's base weight is held, and whether its matmul saves its input.
struct base_weight {
  bool frozen = false;       // no gradient, no optimizer state (a LoRA base)
  bool four_bit = false;     // 4-bit storage (a frozen QLoRA base)
  bool keeps_input = true;   // autograd saves the input for the weight's gradient
  bool torchao = false;      // the 4 bits are torchao's NF4Tensor (torchtune), not bitsandbytes'
  bool unquantized = false;  // the checkpoint keeps it in 16 bits (modules_to_not_convert)
};

// Ops other than matmuls and norms map their input gradient one to one onto the output's;
// the stream and the embeddings have no input gradient.
constexpr bool maps_gradient_one_to_one(op_kind kind) {
  return kind != op_kind::linear && kind != op_kind::norm && kind != op_kind::stream && kind != op_kind::embedding;
}

class op_writer {
 public:
  // Writes into `target`, which must be empty.
  constexpr op_writer(graph& target, const precision_policy& precision, device_kind device)
      : builder_(target), precision_(precision), device_(device) {}

  [[nodiscard]] constexpr const precision_policy& precision() const { return precision_; }
  [[nodiscard]] constexpr device_kind device() const { return device_; }
  // The residual stream: the parameters' dtype.
  [[nodiscard]] constexpr dtype stream_dtype() const { return precision_.param; }
  // Section marks and the graph's totals (begin_block, set_inputs, ...).
  [[nodiscard]] constexpr graph_builder& sections() { return builder_; }

  // An op built by the caller, completed in its slot rather than in a copy
  // (graph_builder::push says why copies are slow).
  constexpr tensor emit(const op& proto, std::uint64_t elements, dtype type) {
    return complete(builder_.push(proto), elements, type);
  }
  // An op with nothing but its kind and output.
  constexpr tensor emit(op_kind kind, std::uint64_t elements, dtype type) {
    return complete(builder_.append(kind), elements, type);
  }
  constexpr tensor elementwise(std::uint64_t elements, dtype type) {
    return emit(op_kind::elementwise, elements, type);
  }
  // An elementwise op on `in` (a cast, a copy, a rotation): `in` lives until it ran.
  constexpr tensor elementwise(tensor in, std::uint64_t elements, dtype type) {
    const tensor y = elementwise(elements, type);
    reads(in, y);
    return y;
  }
  // `a * b` where both factors need a gradient: the mul saves both, and its backward returns
  // both input gradients at once (tools/autograd/derivatives.yaml @ v2.6.0, mul.Tensor: self and
  // other), so the second one (`b`'s, at `b_elements`) is alive beside the first while it runs.
  constexpr tensor product(tensor a, tensor b, std::uint64_t b_elements, std::uint64_t elements, dtype type) {
    const tensor y = elementwise(elements, type);
    keep(a, y);
    keep(b, y);
    if (untracked_depth_ == 0) at(y).bwd_temp = storage(b.type, b_elements);
    return y;
  }
  // A gradient the backward of `made_by` hands to a node made earlier, where it waits until the
  // backward of `used_by` ran (graph.hpp waiting_gradient): its own tensor in the backward, not a
  // temporary of any op.
  constexpr void gradient_waits(tensor made_by, tensor used_by, bytes size) {
    if (untracked_depth_ == 0) builder_.wait(made_by.op_index, used_by.op_index, size);
  }
  // The same for a gradient of `node`'s output, which its input buffer holds until the backward of
  // every op written after node's has run (all made later): it is taken, summed with the others,
  // once the op right after node's ends.
  constexpr void gradient_waits_for(tensor made_by, tensor node, bytes size) {
    if (untracked_depth_ == 0) builder_.wait(made_by.op_index, node.op_index + 1, size);
  }
  // A tensor produced elsewhere (the encoder output inside the decoder): shape only.
  constexpr tensor alias(std::uint64_t elements, dtype type) {
    const tensor t = elementwise(elements, type);
    op& o = at(t);
    o.out = {};
    o.grad_in = {};
    return t;
  }

  constexpr op& at(tensor t) { return builder_.at(t.op_index); }
  // Records that the backward of `user` needs the output of `producer`.
  constexpr void keep(tensor producer, tensor user) {
    if (untracked_depth_ == 0) builder_.keep(producer.op_index, user.op_index);
    reads(producer, user);
  }
  // Records that `user` reads `producer` in the forward (keep and the inputs above record it),
  // when the graph is built for a forward without grad (record_forward_liveness): a training
  // step's graph skips the bookkeeping (docs/inference.md, "From the graph", has its cost).
  constexpr void reads(tensor producer, tensor user) {
    if (records_reads_) builder_.reads(producer.op_index, user.op_index);
  }
  constexpr void record_forward_liveness() { records_reads_ = true; }
  // A read the training walk honours too (allocator/step_events.hpp): `producer` outlives the op
  // after it, bound by Python until `user` ran.
  constexpr void bound_until(tensor producer, tensor user) { builder_.reads(producer.op_index, user.op_index); }
  // Whether this graph describes a forward without grad (layers then write what only such a
  // forward holds: Python temporaries a training graph's ops already cover or never keep).
  [[nodiscard]] constexpr bool records_forward_liveness() const { return records_reads_; }
  // `t`'s own backward uses its output (softmax, ReLU, tanh, sigmoid).
  constexpr void keep_own_output(tensor t) {
    if (untracked_depth_ == 0) builder_.keep_own_output(t.op_index);
  }

  // Ops written between untracked_from() and track_from(first) read only tensors that need no
  // gradient, through frozen weights: autograd records none of them (an op gets a grad_fn only
  // when an input requires grad: torch/csrc/autograd/VariableTypeUtils.h@v2.6.0
  // compute_requires_grad), so none keeps a tensor, makes an input gradient or runs a backward.
  // What they would have saved is made all the same and dies in their forward. Nests.
  [[nodiscard]] constexpr std::size_t untracked_from() {
    ++untracked_depth_;
    return builder_.result().size;
  }
  constexpr void track_from(std::size_t first) {
    for (std::size_t i = first; i < builder_.result().size; ++i) {
      op& o = builder_.at(i);
      o.fwd_temp += o.extra_saved;
      o.extra_saved = {};
      o.grad_in = {};
      o.grad_out = {};
      o.bwd_temp = {};
      o.bwd_temp_pieces = 0;
    }
    --untracked_depth_;
  }
  // The ops `write()` appends, untracked (above) unless `tracked`; returns what it returns.
  template <class Write>
  constexpr auto tracked_if(bool tracked, Write&& write) {
    if (tracked) return write();
    const std::size_t first = untracked_from();
    const auto result = write();
    track_from(first);
    return result;
  }

  // Tensors the running Python frame still references: every op written until the frame
  // closes carries them among its forward temporaries (model_spec::attention_keeps_locals).
  constexpr void hold_in_frame(bytes b) { frame_locals_ += b; }
  constexpr void close_frame() { frame_locals_ = {}; }

  // Under autocast a matmul casts an fp32 input to 16 bits and saves the cast copy
  // (aten/src/ATen/autocast_mode.cpp cached_cast: only leaf weights are cached).
  constexpr tensor matmul_input(tensor in) {
    if (!precision_.autocast || in.type == precision_.matmul) return in;
    return elementwise(in, in.elements, precision_.matmul);
  }

  constexpr tensor add(tensor a, tensor b) {
    const dtype out = (a.type == dtype::fp32 || b.type == dtype::fp32) ? dtype::fp32 : a.type;
    const tensor sum = elementwise(a, a.elements > b.elements ? a.elements : b.elements, out);
    reads(b, sum);
    return sum;
  }

  // The mask dropout keeps for backward. CUDA runs the fused native_dropout with a bool
  // mask (derivatives.yaml: native_dropout_backward); elsewhere aten's _dropout_impl
  // (aten/src/ATen/native/Dropout.cpp) multiplies by a noise tensor of the input's dtype.
  [[nodiscard]] constexpr bytes dropout_mask(std::uint64_t elements, dtype input) const {
    return storage(device_ == device_kind::cuda ? dtype::boolean : input, elements);
  }

  // nn.Dropout when the site's module runs, else nothing.
  constexpr tensor dropout(tensor in, bool runs) {
    if (!runs) return in;
    const bytes mask = dropout_mask(in.elements, in.type);
    const std::size_t index = builder_.append(op_kind::dropout);  // in its slot, as linear
    builder_.at(index).extra_saved = mask;
    const tensor y = complete(index, in.elements, in.type);
    reads(in, y);
    return y;
  }

  // y = x W^T + b. Saves its input (for the weight gradient) and, under autocast, the
  // 16-bit weight copy (the autocast weight cache lives until this op's backward).
  constexpr tensor linear(tensor in, const linear_shape& shape, const base_weight& weight) {
    const tensor x = matmul_input(in);
    // The most frequent op is written in its slot (graph_builder::push says why).
    const std::size_t index = builder_.append(op_kind::linear);
    op& o = builder_.at(index);
    o.weight = {shape.out_features, shape.in_features, shape.copies};
    o.bias = shape.bias ? param_tensor{shape.out_features, 1, shape.copies} : param_tensor{};
    o.role = param_role::matmul;
    o.frozen = weight.frozen;
    o.unquantized_base = weight.unquantized;
    const bool four_bit = weight.four_bit;
    // A 4-bit weight is uint8 storage behind a custom autograd Function: autocast never
    // casts it (autocast_mode.cpp is_eligible: floating-point tensors only), so no 16-bit
    // copy is saved (bitsandbytes 0.42.0 @ 4870580f, autograd/_functions.py MatMul4Bit).
    if (precision_.casts_weights() && !four_bit)
      o.extra_saved = storage(precision_.matmul, detail::checked_mul(shape.in_features, shape.out_features, shape.copies));
    if (four_bit && !weight.torchao) {
      // bitsandbytes dequantizes the 4-bit weight to the compute dtype for each matmul
      // and transposes it (bitsandbytes/autograd/_functions.py MatMul4Bit): two copies,
      // freed afterwards.
      o.fwd_temp = storage(precision_.matmul, detail::checked_mul(shape.in_features, shape.out_features, 2));
      o.bwd_temp = o.fwd_temp;
    }
    o.grad_in = storage(x.type, x.elements);
    const tensor y = complete(index, detail::checked_mul(shape.rows, shape.out_features), precision_.matmul);
    if (four_bit && weight.torchao) {
      op& q = builder_.at(index);
      const std::uint64_t elements = detail::checked_mul(shape.in_features, shape.out_features, shape.copies);
      q.fwd_temp = torchao_linear_temporaries(elements, precision_.matmul, q.out);
      q.bwd_temp = torchao_linear_temporaries(elements, precision_.matmul, q.grad_in);
    }
    reads(x, y);
    // Autograd saves only what a needed gradient uses: a frozen nn.Linear keeps nothing
    // (derivatives.yaml: mm's self is needed only for mat2's gradient); bitsandbytes'
    // version decides for a 4-bit one (adapters.hpp, base_weight_of).
    if (weight.keeps_input) keep(x, y);
    return y;
  }

  // A LoRA matrix (adapter role, trainable) of `rows` x `cols`, `copies` times, written in
  // its slot: adapters add several per projection.
  constexpr tensor adapter_matrix(const param_tensor& weight, std::uint64_t elements, dtype type) {
    const std::size_t index = builder_.append(op_kind::linear);
    op& o = builder_.at(index);
    o.weight = weight;
    o.role = param_role::adapter;
    return complete(index, elements, type);
  }

  // A linear layer with a bias over `rows` rows instead of every token (pooler,
  // classifier): its input is used as it is and kept.
  constexpr tensor linear_over_rows(tensor in, std::uint64_t rows, std::uint64_t in_features,
                                    std::uint64_t out_features, bool frozen) {
    const op proto{.kind = op_kind::linear,
                   .weight = {out_features, in_features, 1},
                   .bias = {out_features, 1, 1},
                   .role = param_role::matmul,
                   .frozen = frozen};
    const tensor y = emit(proto, detail::checked_mul(rows, out_features), precision_.matmul);
    keep(in, y);
    return y;
  }

 private:
  constexpr tensor complete(std::size_t index, std::uint64_t elements, dtype type) {
    op& o = builder_.at(index);
    o.out = storage(type, elements);
    o.fwd_temp += frame_locals_;
    // Locals beyond 2 TiB (a run no device holds, which a plan's batch and context searches probe)
    // keep their bytes in fwd_temp: the allocator walks place the rest as the op's temporaries.
    constexpr std::uint64_t most_blocks = 0xffffffffULL;
    const std::uint64_t frame_blocks = frame_locals_.value / 512;
    o.frame_locals_blocks = static_cast<std::uint32_t>(frame_blocks < most_blocks ? frame_blocks : most_blocks);
    // An op that set its input gradients itself (a broadcast product's two) keeps them.
    if (maps_gradient_one_to_one(o.kind) && o.grad_in.value == 0) o.grad_in = o.out;
    return {.op_index = static_cast<std::uint32_t>(index), .type = type, .elements = elements};
  }

  graph_builder builder_;
  precision_policy precision_;
  device_kind device_;
  bytes frame_locals_{};
  bool records_reads_ = false;
  std::uint32_t untracked_depth_ = 0;  // > 0: between untracked_from() and track_from()
};

}  // namespace memscale::graph_layers
