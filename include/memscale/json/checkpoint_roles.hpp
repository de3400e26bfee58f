// memscale/json/checkpoint_roles.hpp: what a stored tensor is to the model (a parameter,
// quantised storage, a buffer, serialisation metadata), from its name, dtype and shape and
// from the names stored beside it.
//
// The names are the ones the quantisation libraries write:
//   GPTQ (AutoGPTQ qlinear_cuda_old.py @ c80855e2): qweight, qzeros, scales, g_idx;
//   AWQ (AutoAWQ gemm.py @ d9dc8e56): qweight, qzeros, scales;
//   bitsandbytes (nn/modules.py, functional.py QuantState.as_dict @ 95f9af30): weight (uint8
//     or int8, or any dtype under bnb_4bit_quant_storage) with weight.absmax,
//     weight.quant_map, weight.nested_absmax, weight.nested_quant_map and the
//     weight.quant_state.bitsandbytes__nf4|fp4 blob; 8-bit: weight, SCB, weight_format;
//   fine-grained fp8 (transformers finegrained_fp8.py @ 3c48befb): weight, weight_scale_inv;
//   compressed-tensors (pack_quantized.py @ 0199c6e7, initialize.py @ 9ead292f):
//     weight_packed, weight_shape, weight_scale, weight_zero_point, weight_g_idx, input_scale;
//   MXFP4 (transformers mxfp4.py @ 93a1c400): <proj>_blocks, <proj>_scales (uint8).
// Buffers saved with the weights: rotary inv_freq (Llama-2 checkpoints store one per layer),
// GPT-2's attn.bias causal mask (1, 1, n, n) and attn.masked_bias, position_ids,
// BatchNorm running statistics.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "memscale/weights_inventory.hpp"

namespace memscale::json_io {

// The part of a quantised layer a tensor holds.
enum class quant_part : std::uint8_t { codes, scales, zero_points, column_index, code_tables, other };
inline constexpr std::size_t quant_part_count = 6;

constexpr std::string_view to_string(quant_part p) noexcept {
  switch (p) {
    case quant_part::codes: return "packed weights";
    case quant_part::scales: return "scales";
    case quant_part::zero_points: return "zero points";
    case quant_part::column_index: return "g_idx";
    case quant_part::code_tables: return "code tables";
    case quant_part::other: return "other";
  }
  return "other";
}

struct tensor_class {
  tensor_role role = tensor_role::parameter;
  quant_part part = quant_part::other;  // for tensor_role::quantized
};

namespace detail {

inline std::string_view last_component(std::string_view name) {
  const auto dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

inline bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

struct named_part {
  std::string_view name;
  quant_part part;
};

// Last name components that only quantised layers store.
inline constexpr std::array<named_part, 24> quantized_names{{
    {"qweight", quant_part::codes},
    {"weight_packed", quant_part::codes},
    {"scales", quant_part::scales},
    {"weight_scale", quant_part::scales},
    {"weight_scale_inv", quant_part::scales},
    {"weight_global_scale", quant_part::scales},
    {"absmax", quant_part::scales},
    {"nested_absmax", quant_part::scales},
    {"SCB", quant_part::scales},
    {"input_scale", quant_part::scales},
    {"input_global_scale", quant_part::scales},
    {"output_scale", quant_part::scales},
    {"q_scale", quant_part::scales},
    {"k_scale", quant_part::scales},
    {"v_scale", quant_part::scales},
    {"qzeros", quant_part::zero_points},
    {"weight_zero_point", quant_part::zero_points},
    {"input_zero_point", quant_part::zero_points},
    {"output_zero_point", quant_part::zero_points},
    {"g_idx", quant_part::column_index},
    {"weight_g_idx", quant_part::column_index},
    {"quant_map", quant_part::code_tables},
    {"nested_quant_map", quant_part::code_tables},
    {"weight_shape", quant_part::other},
}};

inline constexpr std::array<std::string_view, 4> float_buffer_names{"inv_freq", "masked_bias", "running_mean", "running_var"};
inline constexpr std::array<std::string_view, 4> integer_buffer_names{"position_ids", "token_type_ids", "num_batches_tracked",
                                                                     "bias"};

constexpr bool listed(std::string_view name, const auto& list) {
  for (std::string_view n : list)
    if (n == name) return true;
  return false;
}

// A causal-mask buffer: `bias` of shape (1, 1, n, n) (GPT-2's attn.bias, GPT-Neo's).
inline bool causal_mask_shape(std::string_view last, const std::vector<std::uint64_t>& shape) {
  return last == "bias" && shape.size() == 4 && shape[0] == 1 && shape[1] == 1 && shape[2] == shape[3];
}

}  // namespace detail

// Classifies the tensors of one checkpoint; built from all of its tensor names, since a
// bitsandbytes weight is recognised by the absmax or quant_state stored beside it (in
// whatever dtype bnb_4bit_quant_storage gave the weight), possibly in another shard.
class tensor_classifier {
 public:
  template <class Names>
  explicit tensor_classifier(const Names& names) {
    constexpr std::string_view absmax = ".absmax";
    constexpr std::string_view quant_state = ".quant_state.bitsandbytes__";
    for (const auto& n : names) {
      const std::string_view name(n);
      if (detail::ends_with(name, absmax)) bnb_weights_.emplace(name.substr(0, name.size() - absmax.size()));
      const auto at = name.find(quant_state);
      if (at != std::string_view::npos) bnb_weights_.emplace(name.substr(0, at));
    }
  }

  [[nodiscard]] tensor_class classify(std::string_view name, stored_dtype type, const std::vector<std::uint64_t>& shape) const {
    const std::string_view last = detail::last_component(name);
    if (name.find("quant_state.bitsandbytes__") != std::string_view::npos || last == "weight_format")
      return {tensor_role::metadata, quant_part::other};
    for (const auto& q : detail::quantized_names)
      if (q.name == last) return {tensor_role::quantized, q.part};
    const bool trainable = trainable_type(type);
    if (!trainable && detail::ends_with(last, "_blocks")) return {tensor_role::quantized, quant_part::codes};
    if (!trainable && detail::ends_with(last, "_scales")) return {tensor_role::quantized, quant_part::scales};
    if (bnb_weights_.count(std::string(name)) != 0) return {tensor_role::quantized, quant_part::codes};
    if (trainable) {
      if (detail::listed(last, detail::float_buffer_names) || detail::causal_mask_shape(last, shape))
        return {tensor_role::buffer, quant_part::other};
      return {tensor_role::parameter, quant_part::other};
    }
    // Not a trainable type: a quantised weight (int8, uint8, fp8, fp4 codes) or a buffer.
    if (type == stored_dtype::boolean || type == stored_dtype::c64 || detail::listed(last, detail::integer_buffer_names))
      return {tensor_role::buffer, quant_part::other};
    const bool low_precision_float = type == stored_dtype::f4 || type == stored_dtype::f6_e2m3 ||
                                     type == stored_dtype::f6_e3m2 || type == stored_dtype::f8_e4m3 ||
                                     type == stored_dtype::f8_e5m2 || type == stored_dtype::f8_e4m3fnuz ||
                                     type == stored_dtype::f8_e5m2fnuz || type == stored_dtype::f8_e8m0;
    if (last == "weight" || low_precision_float) return {tensor_role::quantized, quant_part::codes};
    return {tensor_role::buffer, quant_part::other};  // e.g. Swin's relative_position_index (int64)
  }

 private:
  std::unordered_set<std::string> bnb_weights_;
};

}  // namespace memscale::json_io
