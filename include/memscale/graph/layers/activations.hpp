// memscale/graph/layers/activations.hpp: activation functions as autograd saves them: those
// whose backward uses the input (GELU, SiLU), the output (ReLU, sigmoid, tanh), and
// Hugging Face's gelu_new and gelu_fast written out as Python ops.
#pragma once

#include "memscale/dtype.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/tensor.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale::graph_layers {

// gelu / silu backward use the input (derivatives.yaml: gelu_backward, silu_backward).
constexpr tensor input_keeping_activation(op_writer& ops, tensor in) {
  const tensor y = ops.emit(op_kind::activation, in.elements, in.type);
  ops.keep(in, y);
  return y;
}

// relu, sigmoid and tanh backward use the result (derivatives.yaml: threshold_backward,
// sigmoid_backward, tanh_backward).
constexpr tensor output_keeping_activation(op_writer& ops, tensor in) {
  const tensor y = ops.emit(op_kind::activation, in.elements, in.type);
  ops.keep_own_output(y);
  return y;
}

// CUDA autocast runs pow in fp32 (aten/src/ATen/autocast_mode.cpp, fp32 cast policy: pow);
// CPU autocast has no pow entry.
constexpr bool autocast_runs_pow_in_fp32(const precision_policy& p, device_kind device, dtype input) {
  return p.autocast && device == device_kind::cuda && input != dtype::fp32;
}

// Hugging Face gelu_new, written as Python: 0.5*x*(1+tanh(c*(x+0.044715*x^3))).
// Autograd keeps x (pow), tanh's output, 0.5*x and (1+tanh) for the final mul. With
// `pow_in_fp32`, pow keeps an fp32 copy of x and the chain after it is fp32; 0.5*x stays
// 16-bit (measured on torch 2.11, docs/gpu-measurements.md).
constexpr tensor gelu_tanh_as_python_ops(op_writer& ops, tensor in, bool pow_in_fp32) {
  const dtype chain = pow_in_fp32 ? dtype::fp32 : in.type;
  const tensor x = pow_in_fp32 ? ops.elementwise(in.elements, dtype::fp32) : in;
  const tensor cube = ops.elementwise(in.elements, chain);
  ops.keep(x, cube);
  ops.elementwise(in.elements, chain);  // c * (x + 0.044715 * x^3)
  const tensor th = ops.emit(op_kind::activation, in.elements, chain);
  ops.keep_own_output(th);
  const tensor one_plus = ops.elementwise(in.elements, chain);
  const tensor half_x = ops.elementwise(in.elements, in.type);
  return ops.product(one_plus, half_x, in.elements, in.elements, chain);
}

// Hugging Face FastGELUActivation, written as Python: 0.5*x*(1+tanh(x*c*(1+0.044715*x*x)))
// (transformers src/transformers/activations.py @ 00e12e7c). Each product of two tensors keeps
// both (derivatives.yaml mul.Tensor: self and other), tanh its result; there is no pow, so
// autocast leaves the whole chain in the input's type (measured: every intermediate of
// santacoder's amp bf16 MLP is 16-bit, docs/data/gpu_allocator_history/).
constexpr tensor gelu_fast_as_python_ops(op_writer& ops, tensor in) {
  const std::uint64_t n = in.elements;
  const tensor half_x = ops.elementwise(in, n, in.type);  // 0.5 * x
  const tensor scaled_x = ops.elementwise(in, n, in.type);  // x * 0.7978845608
  const tensor coef_x = ops.elementwise(in, n, in.type);  // 0.044715 * x
  ops.product(coef_x, in, n, n, in.type);  // (0.044715 * x) * x
  const tensor one_plus_square = ops.elementwise(n, in.type);
  ops.product(scaled_x, one_plus_square, n, n, in.type);  // x * c * (1 + 0.044715 * x * x)
  const tensor th = ops.emit(op_kind::activation, n, in.type);
  ops.keep_own_output(th);
  const tensor one_plus = ops.elementwise(n, in.type);
  return ops.product(half_x, one_plus, n, n, in.type);
}

// ReLUSquaredActivation, config "relu2" (what NemotronHMLP's ACT2FN[mlp_hidden_act] runs,
// modeling_nemotron_h.py@897753a0): torch.square(relu(x)). relu keeps its result, square (pow(x, 2),
// derivatives.yaml pow.Tensor_Scalar) keeps its input, the same tensor; under CUDA autocast pow
// runs on an fp32 copy, which it keeps, and its output is fp32.
constexpr tensor relu_squared_ops(const layer_context& ctx, tensor in) {
  op_writer& ops = ctx.ops;
  const tensor relu = output_keeping_activation(ops, in);
  const bool fp32 = autocast_runs_pow_in_fp32(ops.precision(), ctx.run.device, in.type);
  const tensor x = fp32 ? ops.elementwise(relu, relu.elements, dtype::fp32) : relu;
  const tensor y = ops.elementwise(x, x.elements, x.type);
  ops.keep(x, y);
  return y;
}

constexpr tensor activation_ops(const layer_context& ctx, tensor in) {
  switch (ctx.model.mlp) {
    case mlp_kind::relu: return output_keeping_activation(ctx.ops, in);
    case mlp_kind::gelu_tanh:
      return gelu_tanh_as_python_ops(ctx.ops, in,
                                     autocast_runs_pow_in_fp32(ctx.ops.precision(), ctx.run.device, in.type));
    case mlp_kind::gelu_fast: return gelu_fast_as_python_ops(ctx.ops, in);
    case mlp_kind::relu_squared: return relu_squared_ops(ctx, in);
    case mlp_kind::gelu:
    case mlp_kind::swiglu:
    case mlp_kind::geglu:
    case mlp_kind::clamped_swiglu: return input_keeping_activation(ctx.ops, in);  // its experts: mlp.hpp
  }
  return in;
}

// The model's MLP activation (the gate's, in a gated MLP). The caller's frame binds its input
// until it returns (modeling_gpt2.py GPT2MLP.forward: hidden_states = self.act(hidden_states)).
constexpr tensor activation(const layer_context& ctx, tensor in) {
  const tensor y = activation_ops(ctx, in);
  if (y.op_index != in.op_index) ctx.ops.reads(in, y);
  return y;
}

}  // namespace memscale::graph_layers
