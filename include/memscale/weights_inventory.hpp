// memscale/weights_inventory.hpp: what a checkpoint stores, counted by dtype and by what
// each tensor is to the model, without reading any weight.
//
// The JSON layer fills it from safetensors headers (json/safetensors.hpp); the estimators
// take parameter, gradient and optimizer bytes from it (estimate/checkpoint_state.hpp), so
// a model no reader knows is still exact on those three.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "memscale/bytes.hpp"
#include "memscale/detail/math.hpp"
#include "memscale/error.hpp"

namespace memscale {

// The element types a safetensors header may name (safetensors src/tensor.rs, enum Dtype
// @ 24b0b285), in that file's order.
enum class stored_dtype : std::uint8_t {
  boolean, f4, f6_e2m3, f6_e3m2, u8, i8, f8_e5m2, f8_e4m3, f8_e8m0, f8_e4m3fnuz, f8_e5m2fnuz,
  i16, u16, f16, bf16, i32, u32, f32, c64, f64, i64, u64,
};
inline constexpr std::size_t stored_dtype_count = 22;

struct stored_dtype_info {
  stored_dtype type;
  std::string_view name;  // as written in a header
  std::uint64_t bits;     // Dtype::bitsize
};

// safetensors src/tensor.rs Dtype::bitsize @ 24b0b285.
inline constexpr std::array<stored_dtype_info, stored_dtype_count> stored_dtypes{{
    {stored_dtype::boolean, "BOOL", 8},       {stored_dtype::f4, "F4", 4},
    {stored_dtype::f6_e2m3, "F6_E2M3", 6},    {stored_dtype::f6_e3m2, "F6_E3M2", 6},
    {stored_dtype::u8, "U8", 8},              {stored_dtype::i8, "I8", 8},
    {stored_dtype::f8_e5m2, "F8_E5M2", 8},    {stored_dtype::f8_e4m3, "F8_E4M3", 8},
    {stored_dtype::f8_e8m0, "F8_E8M0", 8},    {stored_dtype::f8_e4m3fnuz, "F8_E4M3FNUZ", 8},
    {stored_dtype::f8_e5m2fnuz, "F8_E5M2FNUZ", 8}, {stored_dtype::i16, "I16", 16},
    {stored_dtype::u16, "U16", 16},           {stored_dtype::f16, "F16", 16},
    {stored_dtype::bf16, "BF16", 16},         {stored_dtype::i32, "I32", 32},
    {stored_dtype::u32, "U32", 32},           {stored_dtype::f32, "F32", 32},
    {stored_dtype::c64, "C64", 64},           {stored_dtype::f64, "F64", 64},
    {stored_dtype::i64, "I64", 64},           {stored_dtype::u64, "U64", 64},
}};

constexpr const stored_dtype_info& info_of(stored_dtype t) { return stored_dtypes[static_cast<std::size_t>(t)]; }
constexpr std::uint64_t bits_of(stored_dtype t) { return info_of(t).bits; }
constexpr std::string_view to_string(stored_dtype t) { return info_of(t).name; }

// The types an nn.Parameter is trained in: the floating types with a gradient kernel.
// FP8/FP6/FP4 tensors are quantised storage; integers and bool are never trained.
constexpr bool trainable_type(stored_dtype t) {
  return t == stored_dtype::f16 || t == stored_dtype::bf16 || t == stored_dtype::f32 || t == stored_dtype::f64;
}

// What a stored tensor is to the model.
//   parameter: a floating nn.Parameter (trained in a full fine-tune);
//   quantized: packed codes and their scales, zero points, column indices (frozen, kept as stored);
//   buffer:    a registered buffer saved with the weights (rotary inv_freq, causal masks,
//              position_ids, BatchNorm statistics): not a parameter;
//   metadata:  serialisation data the loader consumes (bitsandbytes' quant_state blob,
//              weight_format): never a tensor on the device.
enum class tensor_role : std::uint8_t { parameter, quantized, buffer, metadata };
inline constexpr std::size_t tensor_role_count = 4;

constexpr std::string_view to_string(tensor_role r) noexcept {
  switch (r) {
    case tensor_role::parameter: return "parameter";
    case tensor_role::quantized: return "quantized";
    case tensor_role::buffer: return "buffer";
    case tensor_role::metadata: return "metadata";
  }
  return "parameter";
}

struct dtype_tally {
  std::uint64_t tensors = 0;
  std::uint64_t elements = 0;
  bytes stored{};
};

// Parameter tensors of one shape: (leading..., rows, cols) with `leading` the product of
// the dimensions before the last two. A vector is (rows = n, cols = 1), a scalar (1, 1);
// `matrix` says the tensor has two dimensions or more (Adafactor factors those).
struct parameter_shape {
  std::uint64_t leading = 1;
  std::uint64_t rows = 1;
  std::uint64_t cols = 1;
  bool matrix = false;
  std::uint64_t tensors = 0;  // how many tensors have this shape

  [[nodiscard]] constexpr std::uint64_t elements() const {
    return detail::checked_mul(leading, rows, cols, detail::quantity{"tensor elements"});
  }
};

using dtype_tallies = std::array<dtype_tally, stored_dtype_count>;

struct weights_inventory {
  // One tally per role (tensor_role order), each by stored dtype.
  std::array<dtype_tallies, tensor_role_count> by_role{};
  std::vector<parameter_shape> parameter_shapes{};  // shapes of the `parameter` tensors (compact() merges equal ones)

  [[nodiscard]] constexpr const dtype_tallies& of(tensor_role r) const { return by_role[static_cast<std::size_t>(r)]; }
  [[nodiscard]] constexpr dtype_tallies& of(tensor_role r) { return by_role[static_cast<std::size_t>(r)]; }
};

inline constexpr detail::quantity checkpoint_elements{"checkpoint element count"};

// Sums over the dtypes of one role.
constexpr dtype_tally total(const dtype_tallies& t) {
  dtype_tally sum{};
  for (const auto& d : t) {
    sum.tensors = detail::checked_add(sum.tensors, d.tensors, checkpoint_elements);
    sum.elements = detail::checked_add(sum.elements, d.elements, checkpoint_elements);
    sum.stored += d.stored;
  }
  return sum;
}

constexpr dtype_tally total(const weights_inventory& w, tensor_role r) { return total(w.of(r)); }

// Every tensor the checkpoint stores: what its index's metadata.total_size counts.
constexpr bytes stored_bytes(const weights_inventory& w) {
  bytes sum{};
  for (const auto& role : w.by_role) sum += total(role).stored;
  return sum;
}

// Elements of the floating parameters: the model's parameter count when nothing is quantised.
constexpr std::uint64_t parameter_elements(const weights_inventory& w) { return total(w, tensor_role::parameter).elements; }

// Elements and bytes of a tensor of `dims` stored as `t`; fails on an element count or a
// bit size beyond 64 bits and on a size that is not whole bytes (safetensors MisalignedSlice).
struct tensor_size {
  std::uint64_t elements = 1;
  bytes stored{};
};

template <class Dims>
constexpr tensor_size size_of_tensor(stored_dtype t, const Dims& dims) {
  tensor_size s{};
  for (const std::uint64_t d : dims) s.elements = detail::checked_mul(s.elements, d, detail::quantity{"tensor element count (product of shape)"});
  const auto bits = detail::checked_mul(s.elements, bits_of(t), detail::quantity{"tensor size in bits (elements x dtype bits)"});
  if (bits % 8 != 0) detail::fail(error_code::invalid_model, "tensor size", "must be whole bytes (elements x dtype bits)", bits);
  s.stored = bytes{bits / 8};
  return s;
}

// Counts one tensor of `dims` (row-major, as stored) in `w`.
template <class Dims>
constexpr void add_tensor(weights_inventory& w, tensor_role role, stored_dtype t, const Dims& dims) {
  const tensor_size s = size_of_tensor(t, dims);
  dtype_tally& tally = w.of(role)[static_cast<std::size_t>(t)];
  tally.tensors = detail::checked_add(tally.tensors, 1, checkpoint_elements);
  tally.elements = detail::checked_add(tally.elements, s.elements, checkpoint_elements);
  tally.stored += s.stored;
  if (role != tensor_role::parameter) return;
  parameter_shape shape{};
  std::size_t rank = 0;
  for (const std::uint64_t d : dims) {
    shape.leading = detail::checked_mul(shape.leading, shape.rows, checkpoint_elements);
    shape.rows = shape.cols;
    shape.cols = d;
    ++rank;
  }
  if (rank == 1) {  // a vector: (n, 1), as the graph's biases are
    shape.rows = shape.cols;
    shape.cols = 1;
  }
  shape.matrix = rank >= 2;
  shape.tensors = 1;
  w.parameter_shapes.push_back(shape);
}

// Merges equal parameter shapes (a checkpoint has a few distinct ones, repeated per layer).
// Sorting first keeps a hostile header of a million distinct shapes at n log n.
constexpr void compact(weights_inventory& w) {
  auto& v = w.parameter_shapes;
  const auto key_less = [](const parameter_shape& a, const parameter_shape& b) {
    if (a.leading != b.leading) return a.leading < b.leading;
    if (a.rows != b.rows) return a.rows < b.rows;
    if (a.cols != b.cols) return a.cols < b.cols;
    return a.matrix < b.matrix;
  };
  std::sort(v.begin(), v.end(), key_less);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (kept > 0 && !key_less(v[kept - 1], v[i]) && !key_less(v[i], v[kept - 1]))
      v[kept - 1].tensors = detail::checked_add(v[kept - 1].tensors, v[i].tensors, checkpoint_elements);
    else
      v[kept++] = v[i];
  }
  v.resize(kept);
}

}  // namespace memscale
