// memscale/vision/graph.hpp: a vision network as a constexpr sequence of layers.
//
// Transformers repeat one block, so memscale::graph stores one. Convnets change shape
// stage by stage, so a layer_graph lists every layer (a resnet101 has ~350): the same
// `op` records (parameters, output, what backward keeps), plus per layer the size of
// the gradient flowing into its backward and the gradients waiting on skip paths.
//
// Storage, not tensors, is what memory counts: an in-place op (ReLU(inplace=True),
// `out += identity`) allocates nothing, and a tensor that several backward functions
// save is kept once, until the backward of the earliest of them has run.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "memscale/attention_kernel.hpp"
#include "memscale/bytes.hpp"
#include "memscale/dtype.hpp"
#include "memscale/error.hpp"
#include "memscale/graph/graph.hpp"

namespace memscale::vision {

inline constexpr std::size_t layer_capacity = 1280;  // EVA02-L with autocast, LayerScale and DropPath: ~1,100
inline constexpr std::size_t stage_capacity = 64;

struct layer_graph {
  std::array<op, layer_capacity> ops{};
  std::array<bytes, layer_capacity> grad_out{};  // gradient w.r.t. the layer's result, alive through its backward
  std::array<bytes, layer_capacity> carried{};   // gradients parked on skip connections during its backward
  std::array<std::int32_t, layer_capacity> last_use{};  // last forward consumer of the layer's output
  std::array<std::uint16_t, layer_capacity> stage{};    // checkpointable stage (0: not checkpointed)
  std::array<bytes, stage_capacity> stage_input{};     // what a checkpointed stage keeps: its input
  std::array<bytes, layer_capacity> call_workspace{};  // taken and given back by each library call of the layer
  std::size_t size = 0;
  std::uint16_t stages = 0;
  bytes inputs{};   // the image batch and the labels
  bytes buffers{};  // BatchNorm running statistics, cached rotary tables
};

// Every layer runs once per step (the estimators' repeats_of for a flat graph).
constexpr std::uint64_t repeats_of(const layer_graph&, std::size_t) { return 1; }

// Whether layer i's saved tensors are dropped in forward: it is in a checkpointed stage.
constexpr bool in_checkpointed_stage(const layer_graph& g, std::size_t i, bool ckpt) { return ckpt && g.stage[i] != 0; }

// Whether layer i's output stays for backward: a backward saves it, and that backward's
// layer is not in a checkpointed stage (then the checkpoint keeps its input instead).
constexpr bool output_kept(const layer_graph& g, std::size_t i, bool ckpt) {
  const auto by = g.ops[i].released_by;
  return by != not_kept && !in_checkpointed_stage(g, i, ckpt) && !in_checkpointed_stage(g, by.index(), ckpt);
}

constexpr bool starts_stage(const layer_graph& g, std::size_t i) {
  return g.stage[i] != 0 && (i == 0 || g.stage[i - 1] != g.stage[i]);
}

// A tensor in the forward pass: its per-sample shape and the layer that allocated its
// storage (-1: the input batch, which the data loader owns).
struct tensor {
  std::int32_t storage = -1;
  std::uint64_t channels = 0;
  std::uint64_t height = 1;  // for token sequences: tokens
  std::uint64_t width = 1;
  dtype type = dtype::fp32;
  [[nodiscard]] constexpr std::uint64_t per_sample() const { return detail::checked_mul(channels, height, width); }
};

// softmax keeps its result like sigmoid (derivatives.yaml _softmax: result).
enum class activation : std::uint8_t { relu, silu, gelu, hardswish, hardsigmoid, sigmoid, softmax };

struct conv2d_spec {
  std::uint64_t out = 0;
  std::uint64_t kernel = 1;
  std::uint64_t stride = 1;
  std::uint64_t padding = 0;
  std::uint64_t dilation = 1;
  std::uint64_t groups = 1;
  bool bias = false;
};

// How the step runs: which device (dropout and BatchNorm kernels differ) and the dtypes.
struct build_context {
  std::uint64_t batch = 1;
  dtype act = dtype::fp32;        // activations of convs and linears (autocast: the low dtype)
  dtype norm_act = dtype::fp32;   // outputs of ops autocast keeps in fp32 (CPU autocast: batch_norm)
  bool cuda = true;
  bool autocast = false;
  bool channels_last = false;
  std::uint32_t torch_version = 205;  // major * 100 + minor (mean's saved input before 2.0)
  bool fused_attention = false;       // timm Attention runs a fused SDPA kernel (no N x N scores kept)
  attention_kernel mha_kernel = attention_kernel::math;  // the SDPA kernel torchvision's MultiheadAttention runs
};

}  // namespace memscale::vision
