// memscale/vision/layers.hpp: the layers of a vision network and what autograd keeps.
//
// Each layer appends one op and says which storages its backward saves. The rules are
// PyTorch's tools/autograd/derivatives.yaml (v1.13, unchanged in 2.x for these ops):
//   convolution: input and weight;  native_batch_norm: input, save_mean, save_invstd;
//   relu/threshold_backward: result (in place: the modified storage);  gelu, hardswish,
//   hardsigmoid, silu: self (an in-place variant saves a clone of the original self);
//   sigmoid: result;  max_pool2d_with_indices: self and the int64 indices;
//   _adaptive_avg_pool2d: self;  addmm/mm: both operands;  mul: both operands (only
//   those whose partner needs a gradient);  native_layer_norm: input, mean, rstd;
//   _log_softmax: result;  nll_loss: target and total_weight;  add: nothing.
// Dropout outside CUDA is `input * noise` with a noise tensor of the input's dtype
// (aten/src/ATen/native/Dropout.cpp _dropout_impl; the fused native_dropout with its
// bool mask is taken only on CUDA), and p == 0 returns the input itself.
#pragma once

#include <cstdint>

#include "memscale/graph/layers/norms.hpp"
#include "memscale/vision/graph.hpp"

namespace memscale::vision {

class network {
 public:
  constexpr explicit network(build_context ctx) : ctx_(ctx) {}

  [[nodiscard]] constexpr const layer_graph& graph() const { return g_; }
  [[nodiscard]] constexpr const build_context& context() const { return ctx_; }
  [[nodiscard]] constexpr std::int32_t next_index() const { return static_cast<std::int32_t>(g_.size); }

  // The image batch (N, C, H, W) in the input dtype, plus int64 class labels.
  constexpr tensor image(std::uint64_t channels, std::uint64_t height, std::uint64_t width, dtype type) {
    tensor t{.storage = -1, .channels = channels, .height = height, .width = width, .type = type};
    g_.inputs += bytes_of(t) + storage(dtype::int64, ctx_.batch);
    return t;
  }

  // Conv2d: output (H + 2p - d(k-1) - 1) / s + 1 (torch.nn.Conv2d docs); saves input and weight.
  constexpr tensor conv2d(const tensor& in, const conv2d_spec& c) {
    detail::require(c.out > 0 && c.kernel > 0 && c.stride > 0 && c.dilation > 0 && c.groups > 0,
                    error_code::invalid_model, "conv2d", "needs positive channels, kernel, stride, dilation, groups",
                    c.out);
    detail::require(in.channels % c.groups == 0 && c.out % c.groups == 0, error_code::invalid_model, "conv2d.groups",
                    "must divide the input and output channels", c.groups);
    const std::uint64_t span = detail::checked_mul(c.dilation, c.kernel - 1) + 1;
    detail::require(in.height + 2 * c.padding >= span && in.width + 2 * c.padding >= span, error_code::invalid_model,
                    "image size", "is smaller than a convolution's receptive field", in.height);
    const tensor x = autocast_input(in);
    tensor out{.channels = c.out,
               .height = (in.height + 2 * c.padding - span) / c.stride + 1,
               .width = (in.width + 2 * c.padding - span) / c.stride + 1,
               .type = ctx_.act};
    const std::uint64_t fan_in = detail::checked_mul(in.channels / c.groups, c.kernel, c.kernel);
    op o{.kind = op_kind::linear,
         .weight = param_tensor::matrix(c.out, fan_in),
         .bias = param_tensor::vector(c.bias ? c.out : 0),
         .role = param_role::matmul,
         .extra_saved = autocast_weight_copy(detail::checked_mul(c.out, fan_in)),
         .fwd_temp = onednn_weight_copy(detail::checked_mul(c.out, fan_in)),
         .bwd_temp = onednn_weight_copy(detail::checked_mul(c.out, fan_in)) +
                     (c.groups > 1 && !ctx_.cuda ? bytes_of(in) : bytes{}),
         .grad_in = bytes_of(in)};
    g_.call_workspace[g_.size] = cudnn_workspace(x, out, c);
    return produce(o, out, x);
  }

  // BatchNorm2d in training mode: batch statistics; running_mean/var (+ the int64
  // num_batches_tracked) are buffers.
  constexpr tensor batch_norm(const tensor& in) {
    tensor out = in;
    out.type = ctx_.autocast ? ctx_.norm_act : in.type;
    const tensor x = in.type == out.type ? in : cast(in, out.type);
    g_.buffers += storage(dtype::fp32, 2 * in.channels) + storage(dtype::int64, 1);
    op o{.kind = op_kind::norm,
         .weight = param_tensor::vector(in.channels),
         .bias = param_tensor::vector(in.channels),
         .role = param_role::vector,
         .extra_saved = storage(dtype::fp32, 2 * in.channels),  // save_mean, save_invstd
         .grad_in = bytes_of(x)};
    keep(x, next_index());
    return produce(o, out, x);
  }

  // LayerNorm over the channels at every position (nn.LayerNorm on tokens or on an
  // NHWC permute, torchvision's LayerNorm2d): per-position mean and rstd are saved.
  // On a permuted (non-contiguous) view, the CPU kernels work on contiguous copies:
  // layer_norm_cpu and layer_norm_backward_cpu call expect_contiguous() on the input
  // and on the incoming gradient (aten/src/ATen/native/layer_norm.cpp).
  constexpr tensor layer_norm(const tensor& in, bool permuted = false) {
    tensor out = in;
    out.type = ctx_.autocast ? dtype::fp32 : in.type;  // layer_norm is on autocast's fp32 list
    const tensor x = in.type == out.type ? in : cast(in, out.type);
    const std::uint64_t positions = detail::checked_mul(ctx_.batch, in.height, in.width);
    op o{.kind = op_kind::norm,
         .weight = param_tensor::vector(in.channels),
         .bias = param_tensor::vector(in.channels),
         .role = param_role::vector,
         .extra_saved = storage(dtype::fp32, detail::checked_mul(positions, 2)),
         .fwd_temp = permuted ? bytes_of(x) : bytes{},
         .bwd_temp = permuted ? bytes_of(x) + bytes_of(out) : bytes{},
         .grad_in = bytes_of(x)};
    keep(x, next_index());
    return produce(o, out, x);
  }

  constexpr tensor act(const tensor& in, activation kind, bool in_place) {
    const bool keeps_result = kind == activation::relu || kind == activation::sigmoid || kind == activation::softmax;
    op o{.kind = op_kind::activation, .grad_in = bytes_of(in)};
    if (in_place) {
      // The result overwrites the input's storage; a backward that needs the original
      // input gets a clone of it (autograd's in-place rule for formulas using `self`).
      if (keeps_result) keep(in, next_index());
      else o.extra_saved = bytes_of(in);
      use(in, next_index());
      push(o, bytes_of(in));
      return in;
    }
    tensor out = in;
    if (!keeps_result) keep(in, next_index());
    out = produce(o, out, in);
    if (keeps_result) keep(out, static_cast<std::int32_t>(out.storage));
    return out;
  }

  // MaxPool2d: saves its input and the argmax indices (int64, one per output element).
  constexpr tensor max_pool(const tensor& in, std::uint64_t kernel, std::uint64_t stride, std::uint64_t padding) {
    tensor out = in;
    out.height = (in.height + 2 * padding - kernel) / stride + 1;
    out.width = (in.width + 2 * padding - kernel) / stride + 1;
    op o{.kind = op_kind::elementwise,
         .extra_saved = storage(dtype::int64, detail::checked_mul(ctx_.batch, out.per_sample())),
         .grad_in = bytes_of(in)};
    keep(in, next_index());
    return produce(o, out, in);
  }

  // AdaptiveAvgPool2d(1): saves its input (for the shape of the gradient).
  constexpr tensor global_avg_pool(const tensor& in) {
    tensor out = in;
    out.height = 1;
    out.width = 1;
    keep(in, next_index());
    return produce(op{.kind = op_kind::elementwise, .grad_in = bytes_of(in)}, out, in);
  }

  // Linear on the last dimension (flattened features or tokens): saves input and weight.
  // When its result is permuted before use, the gradient arrives non-contiguous and
  // matmul's backward reshapes it into a contiguous copy.
  constexpr tensor linear(const tensor& in, std::uint64_t out_features, bool bias, bool permuted_grad = false) {
    const tensor x = autocast_input(in);
    tensor out = in;
    out.channels = out_features;
    out.type = ctx_.act;
    op o{.kind = op_kind::linear,
         .weight = param_tensor::matrix(out_features, in.channels),
         .bias = param_tensor::vector(bias ? out_features : 0),
         .role = param_role::matmul,
         .extra_saved = autocast_weight_copy(detail::checked_mul(out_features, in.channels)),
         .bwd_temp = permuted_grad ? bytes_of(out) : bytes{},
         .grad_in = bytes_of(in)};
    return produce(o, out, x);
  }

  // a + b: saves nothing; `in_place` is `a += b` (no new storage, a's is reused).
  constexpr tensor add(const tensor& a, const tensor& b, bool in_place) {
    use(b, next_index());
    if (in_place) {
      use(a, next_index());
      push(op{.kind = op_kind::elementwise}, bytes_of(a));
      return a;
    }
    return produce(op{.kind = op_kind::elementwise}, a, a);
  }

  // a * b (b broadcast, e.g. an SE scale or a layer-scale vector): each operand is saved
  // for the other's gradient.
  constexpr tensor mul(const tensor& a, const tensor& b) {
    keep(a, next_index());
    keep(b, next_index());
    use(b, next_index());
    tensor out = a;
    out.type = a.type;
    // A broadcast factor's gradient is made at the product's shape and reduced to its own only
    // after the backward returned both (torch/csrc/autograd/engine.cpp @ v2.6.0 validate_outputs).
    const bytes unreduced = b.per_sample() < a.per_sample() ? bytes_of(a) : bytes{};
    return produce(op{.kind = op_kind::elementwise, .bwd_temp = unreduced, .grad_in = bytes_of(a) + bytes_of(b)}, out, a);
  }

  // A product of two activations (bmm of attention): both saved, a new result of `shape`.
  constexpr tensor matmul(const tensor& a, const tensor& b, tensor shape) {
    const tensor x = autocast_input(a);
    const tensor y = autocast_input(b);
    use(y, next_index());
    shape.type = ctx_.act;
    return produce(op{.kind = op_kind::attention, .grad_in = bytes_of(a) + bytes_of(b)}, shape, x);
  }

  // A fused F.scaled_dot_product_attention over q, k, v (views of one projection's
  // storage `qkv`): it saves q, k, v, its output and a per-row fp32 log-sum-exp
  // (aten/src/ATen/native/transformers/attention.cpp), never the N x N probabilities.
  constexpr tensor fused_attention(const tensor& qkv, tensor context, std::uint64_t heads, bytes backward_temp = {}) {
    return fused_attention(qkv, qkv, qkv, context, heads, backward_temp);
  }
  // The same over q, k and v in storages of their own (EVA02's rotated q and k).
  constexpr tensor fused_attention(const tensor& q, const tensor& k, const tensor& v, tensor context,
                                   std::uint64_t heads, bytes backward_temp = {}) {
    const tensor x = autocast_input(q);
    const tensor y = k.storage == q.storage ? x : autocast_input(k);
    const tensor z = v.storage == q.storage ? x : autocast_input(v);
    use(y, next_index());
    use(z, next_index());
    const std::uint64_t rows = detail::checked_mul(ctx_.batch, heads, context.height);
    context.type = ctx_.act;
    const bytes grad_in = q.storage == k.storage ? bytes_of(x) : bytes_of(x) + bytes_of(y) + bytes_of(z);
    op o{.kind = op_kind::attention, .extra_saved = storage(dtype::fp32, rows), .bwd_temp = backward_temp,
         .grad_in = grad_in};
    tensor out = produce(o, context, x);
    keep(out, out.storage);
    return out;
  }

  // A new tensor of `in`'s shape in another dtype (a cast, or an op whose type promotion
  // with an fp32 buffer gives fp32); saves nothing.
  constexpr tensor convert(const tensor& in, dtype to) { return cast(in, to); }

  // A buffer the module registers (a cached table): held like the parameters.
  constexpr void buffer(bytes size) { g_.buffers += size; }

  // x[:, first:].mean(dim=1) over tokens (timm's global_pool 'avg'): a (channels) result;
  // mean.dim keeps its input before torch 2.2 (graph_layers::mean_keeps_input).
  constexpr tensor token_mean(const tensor& in) {
    if (graph_layers::mean_keeps_input(ctx_.torch_version)) keep(in, next_index());
    tensor out = in;
    out.height = 1;
    out.width = 1;
    return produce(op{.kind = op_kind::elementwise, .grad_in = bytes_of(in)}, out, in);
  }

  // A learned per-channel scale (ConvNeXt's layer_scale * x): the parameter and x are saved. The
  // parameter's gradient is grad * x at x's shape until validate_outputs reduces it (mul above).
  constexpr tensor scale(const tensor& in) {
    keep(in, next_index());
    op o{.kind = op_kind::elementwise, .weight = param_tensor::vector(in.channels), .role = param_role::vector,
         .bwd_temp = bytes_of(in), .grad_in = bytes_of(in)};
    return produce(o, in, in);
  }

  constexpr tensor dropout(const tensor& in, bool active, bool in_place) {
    if (!active) return in;
    // CUDA's fused kernel keeps a bool mask; elsewhere (and for in-place dropout) the
    // noise tensor in the input's dtype is what mul saves.
    const bool fused = ctx_.cuda && !in_place;
    const std::uint64_t n = detail::checked_mul(ctx_.batch, in.per_sample());
    op o{.kind = op_kind::dropout, .extra_saved = fused ? storage(dtype::boolean, n) : storage(in.type, n),
         .grad_in = bytes_of(in)};
    if (in_place) {
      use(in, next_index());
      push(o, bytes_of(in));
      return in;
    }
    return produce(o, in, in);
  }

  // torchvision.ops.stochastic_depth, mode "row": input * noise[N,1,1,1]; p == 0 returns input.
  constexpr tensor stochastic_depth(const tensor& in, bool active) {
    if (!active) return in;
    op o{.kind = op_kind::dropout, .extra_saved = storage(in.type, ctx_.batch), .grad_in = bytes_of(in)};
    return produce(o, in, in);
  }

  // A copy to new storage (contiguous(), an autocast cast); copy_as gives it another
  // shape (torch.cat with a learned token).
  constexpr tensor copy(const tensor& in) { return produce(op{.kind = op_kind::elementwise}, in, in); }
  constexpr tensor copy_as(const tensor& in, tensor shape) {
    shape.type = in.type;
    return produce(op{.kind = op_kind::elementwise, .grad_in = bytes_of(in)}, shape, in);
  }

  // A view that changes the shape, not the storage (flatten, permute, reshape).
  [[nodiscard]] constexpr tensor view(const tensor& in, std::uint64_t channels, std::uint64_t height,
                                      std::uint64_t width) const {
    tensor out = in;
    out.channels = channels;
    out.height = height;
    out.width = width;
    detail::require(out.per_sample() == in.per_sample(), error_code::invalid_model, "view", "must keep the element count",
                    out.per_sample());
    return out;
  }

  // A learned tensor added to the input (ViT's class token and position embedding).
  constexpr void parameter(std::uint64_t elements) {
    push(op{.kind = op_kind::embedding, .weight = param_tensor::vector(elements), .role = param_role::vector}, bytes{});
  }

  // F.cross_entropy = log_softmax (result saved, fp32 under autocast) + nll_loss
  // (total_weight saved); the logits themselves are not kept.
  constexpr void cross_entropy(const tensor& logits) {
    const dtype t = ctx_.autocast ? dtype::fp32 : logits.type;
    const std::uint64_t n = detail::checked_mul(ctx_.batch, logits.per_sample());
    const bytes upcast = t == logits.type ? bytes{} : storage(t, n);
    op o{.kind = op_kind::loss, .out = storage(t, 1), .extra_saved = storage(t, n) + storage(t, 1),
         .fwd_temp = upcast, .grad_in = bytes_of(logits) + upcast};
    use(logits, next_index());
    push(o, storage(t, 1));
  }

  // Layers added from now on belong to a new checkpointable stage with this input.
  constexpr void begin_stage(const tensor& input) {
    detail::require(g_.stages + 1u < stage_capacity, error_code::invalid_model, "vision network",
                    "has more checkpointable stages than fit", g_.stages);
    current_stage_ = ++g_.stages;
    g_.stage_input[current_stage_] = bytes_of(input);
  }
  constexpr void end_stage() { current_stage_ = 0; }

  // Gradients of a skip connection wait while the layers [from, next_index()) run backward.
  constexpr void carry(std::int32_t from, const tensor& skip) {
    for (auto i = static_cast<std::size_t>(from); i < g_.size; ++i) g_.carried[i] += bytes_of(skip);
  }

  [[nodiscard]] constexpr bytes bytes_of(const tensor& t) const {
    return storage(t.type, detail::checked_mul(ctx_.batch, t.per_sample()));
  }

 private:
  constexpr std::int32_t push(op o, bytes grad_out) {
    detail::require(g_.size < layer_capacity, error_code::invalid_model, "vision network", "has more layers than fit",
                    g_.size);
    const auto i = g_.size++;
    o.released_by = not_kept;
    g_.ops[i] = o;
    g_.grad_out[i] = grad_out;
    g_.last_use[i] = static_cast<std::int32_t>(i);
    g_.stage[i] = current_stage_;
    return static_cast<std::int32_t>(i);
  }

  // A layer allocating `shape` as its result from input `in`.
  constexpr tensor produce(op o, tensor shape, const tensor& in) {
    use(in, next_index());
    o.out = bytes_of(shape);
    shape.storage = push(o, o.out);
    return shape;
  }

  // The backward of layer `by` needs t's storage: it stays until that backward has run.
  constexpr void keep(const tensor& t, std::int32_t by) {
    if (t.storage < 0) return;
    op& owner = g_.ops[static_cast<std::size_t>(t.storage)];
    const auto point = release_point::at(static_cast<std::size_t>(by));
    if (point.before(owner.released_by)) owner.released_by = point;
  }

  constexpr void use(const tensor& t, std::int32_t by) {
    if (t.storage < 0) return;
    auto& last = g_.last_use[static_cast<std::size_t>(t.storage)];
    if (by > last) last = by;
  }

  constexpr tensor cast(const tensor& in, dtype to) {
    tensor out = in;
    out.type = to;
    return produce(op{.kind = op_kind::elementwise, .grad_in = bytes_of(in)}, out, in);
  }

  // Autocast casts a matmul's input to the low dtype (a copy, which the op then saves)
  // and keeps the cast weight for backward.
  constexpr tensor autocast_input(const tensor& in) {
    const tensor x = (ctx_.autocast && in.type != ctx_.act) ? cast(in, ctx_.act) : in;
    keep(x, next_index());
    return x;
  }
  // On CPU, ideep reorders the weight into oneDNN's blocked layout on every call
  // (aten/src/ATen/native/mkldnn/Conv.cpp -> ideep convolution_forward/backward: the
  // reordered copy comes from the c10 allocator), a weight-sized temporary.
  [[nodiscard]] constexpr bytes onednn_weight_copy(std::uint64_t elements) const {
    return ctx_.cuda ? bytes{} : storage(ctx_.act, elements);
  }
  // cuDNN's convolution workspace: the plan's workspace comes from the caching allocator and
  // is given back when the call returns (aten/src/ATen/native/cudnn/Conv_v8.cpp@v2.0.0
  // run_conv_plan), once for the forward and once for each backward call (data, filter).
  // Its size is that of the engine cuDNN's heuristics pick (benchmark off), which no formula
  // in PyTorch gives. This is a bound read off the recorded H100 allocator histories
  // (docs/data/gpu_allocator_history/resnet50-*.json.gz): a spatial or strided kernel's
  // call took about its input plus its output, a 1x1 stride-1 one (a plain GEMM) a few MiB
  // at most. Grouped and depthwise convolutions are not in those histories: none counted.
  [[nodiscard]] constexpr bytes cudnn_workspace(const tensor& x, const tensor& out, const conv2d_spec& c) const {
    if (!ctx_.cuda || c.groups > 1 || (c.kernel == 1 && c.stride == 1)) return {};
    return bytes_of(x) + bytes_of(out);
  }
  [[nodiscard]] constexpr bytes autocast_weight_copy(std::uint64_t elements) const {
    return ctx_.autocast ? storage(ctx_.act, elements) : bytes{};
  }

  build_context ctx_;
  layer_graph g_{};
  std::uint16_t current_stage_ = 0;
};

}  // namespace memscale::vision
