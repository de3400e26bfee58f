// memscale/parallel/deepspeed_estimator.hpp: DeepSpeed's own ZeRO-2/ZeRO-3 "model states"
// estimators, reproduced operation for operation so memscale can be checked against the
// figures DeepSpeed prints. They count parameters, gradients and optimizer state only (no
// activations, buffers, allocator rounding or CUDA context); memscale's full estimate in
// parallel/engines.hpp adds those (docs/multi-gpu.md).
#pragma once

#include <cstdint>

#include "memscale/bytes.hpp"
#include "memscale/error.hpp"

namespace memscale::deepspeed {

// The ZeRO-2 GPU formula changed in DeepSpeed 0.14.3 (PR #5099, commit f4cb866c): before it
// counted 4 bytes of parameters per element, from then 2. ZeRO-3 is unchanged since 0.4.2.
enum class estimator_version : std::uint8_t { v0_4_to_0_14_2, v0_14_3_on };

struct model_states_inputs {
  std::uint64_t total_params = 0;          // model_to_params: shared tensors counted once
  std::uint64_t largest_layer_params = 0;  // the module with most direct (recurse=False) parameters
  std::uint64_t num_gpus_per_node = 1;
  std::uint64_t num_nodes = 1;
  bool cpu_offload = true;         // offload_optimizer: cpu (old name cpu_offload)
  bool cpu_offload_params = true;  // offload_param: cpu (ZeRO-3 only)
  bool zero_init = true;           // deepspeed.zero.Init: the model is built partitioned (ZeRO-3 only)
  double additional_buffer_factor = 1.5;
  estimator_version version = estimator_version::v0_14_3_on;
};

struct model_states_need {
  bytes cpu{};  // per node
  bytes gpu{};  // per GPU
  bytes largest_layer{};  // ZeRO-3: 4 bytes per element of the largest layer (gathered 16-bit param + grad)
};

namespace detail {

constexpr void validate(const model_states_inputs& in) {
  using memscale::detail::require;
  constexpr auto bad = error_code::invalid_run;
  require(in.num_gpus_per_node > 0, bad, "deepspeed.num_gpus_per_node", "must be > 0", in.num_gpus_per_node);
  require(in.num_nodes > 0, bad, "deepspeed.num_nodes", "must be > 0", in.num_nodes);
  require(in.total_params < (std::uint64_t{1} << 50), bad, "deepspeed.total_params", "must be < 2^50",
          in.total_params);
  require(in.largest_layer_params <= in.total_params, bad, "deepspeed.largest_layer_params",
          "must be <= total_params", in.largest_layer_params);
  require(in.additional_buffer_factor > 0.0 && in.additional_buffer_factor < 1e6, bad,
          "deepspeed.additional_buffer_factor", "must be in (0, 1e6)", 0);
}

// Python's int(x) of a non-negative float: truncation.
constexpr bytes truncated(double x) { return bytes{static_cast<std::uint64_t>(x)}; }

// int(k * total_params / total_gpus): an exact product, a float quotient, truncated.
constexpr bytes per_gpu_share(std::uint64_t k, std::uint64_t params, std::uint64_t gpus) {
  return truncated(static_cast<double>(memscale::detail::checked_mul(k, params)) / static_cast<double>(gpus));
}

}  // namespace detail

// deepspeed/runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs
// (v0.16.5, commit 38327e07; before v0.14.3: deepspeed/runtime/zero/stage2.py, commit 0c1802cc).
constexpr model_states_need zero2_model_states_mem_needs(const model_states_inputs& in) {
  detail::validate(in);
  const std::uint64_t total_gpus = memscale::detail::checked_mul(in.num_nodes, in.num_gpus_per_node);
  const std::uint64_t p = in.total_params;
  const double factor = in.additional_buffer_factor;
  model_states_need r{};
  if (in.cpu_offload) {
    r.gpu = bytes{memscale::detail::checked_mul(2, p)};
    const std::uint64_t per_param = memscale::detail::max(memscale::detail::checked_mul(4, total_gpus), 16);
    r.cpu = detail::truncated(static_cast<double>(memscale::detail::checked_mul(p, per_param)) * factor);
  } else {
    // v0.14.3 on: 2 (16-bit params) + 18/N (16-bit and 32-bit grads, 32-bit params, Adam moments);
    // before: 4 + 16/N.
    r.gpu = in.version == estimator_version::v0_14_3_on
                ? bytes{memscale::detail::checked_mul(2, p)} + detail::per_gpu_share(18, p, total_gpus)
                : bytes{memscale::detail::checked_mul(4, p)} + detail::per_gpu_share(16, p, total_gpus);
    r.cpu = detail::truncated(static_cast<double>(memscale::detail::checked_mul(p, 4, in.num_gpus_per_node)) * factor);
  }
  return r;
}

// deepspeed/runtime/zero/stage3.py estimate_zero3_model_states_mem_needs (v0.16.5, commit
// 38327e07; the arithmetic is the same as at its introduction, v0.4.2, commit 0c1802cc).
constexpr model_states_need zero3_model_states_mem_needs(const model_states_inputs& in) {
  detail::validate(in);
  const std::uint64_t total_gpus = memscale::detail::checked_mul(in.num_nodes, in.num_gpus_per_node);
  const std::uint64_t p = in.total_params;
  const double factor = in.additional_buffer_factor;
  const double gpus_factor = 1.0 / static_cast<double>(in.num_nodes);
  // max(4 * num_gpus_per_node, k * gpus_factor): an int against a float, the larger kept.
  auto per_param_without_init = [&](std::uint64_t k) {
    const double a = static_cast<double>(memscale::detail::checked_mul(4, in.num_gpus_per_node));
    const double b = static_cast<double>(k) * gpus_factor;
    return a < b ? b : a;
  };
  model_states_need r{};
  r.largest_layer = bytes{memscale::detail::checked_mul(4, in.largest_layer_params)};
  const auto pd = static_cast<double>(p);
  if (in.cpu_offload) {
    const std::uint64_t k = in.cpu_offload_params ? 18 : 16;
    r.gpu = in.cpu_offload_params ? r.largest_layer : r.largest_layer + detail::per_gpu_share(2, p, total_gpus);
    r.cpu = in.zero_init ? detail::truncated(static_cast<double>(memscale::detail::checked_mul(p, k)) * gpus_factor * factor)
                         : detail::truncated(pd * per_param_without_init(k) * factor);
  } else {
    r.gpu = r.largest_layer + detail::per_gpu_share(18, p, total_gpus);
    r.cpu = in.zero_init ? detail::truncated(static_cast<double>(memscale::detail::checked_mul(
                                                 in.largest_layer_params, 4, in.num_gpus_per_node)) *
                                             factor)
                         : detail::truncated(static_cast<double>(memscale::detail::checked_mul(p, 4, in.num_gpus_per_node)) *
                                             factor);
  }
  return r;
}

// What f"{b / 2**30:.2f}" prints, in hundredths of a GiB: the exact quotient rounded half
// to even (Python formats a float's exact binary value; b / 2**30 is exact below 2^53).
constexpr std::uint64_t printed_gib_hundredths(bytes b) {
  const std::uint64_t scaled = memscale::detail::checked_mul(b.value, 100);
  const std::uint64_t q = scaled >> 30;
  const std::uint64_t rem = scaled & ((std::uint64_t{1} << 30) - 1);
  const std::uint64_t half = std::uint64_t{1} << 29;
  return rem > half || (rem == half && (q & 1) != 0) ? q + 1 : q;
}

// What f"{b >> 20}MB" prints (the docs' hand-written ZeRO-3 snippet, memory.rst).
constexpr std::uint64_t printed_mib_floor(bytes b) { return b.value >> 20; }

}  // namespace memscale::deepspeed
