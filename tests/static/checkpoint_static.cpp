// Static checks for the quantised formats (memscale/quant_format.hpp) and the checkpoint state
// of a full fine-tune (memscale/weights_inventory.hpp, estimate/checkpoint_state.hpp): the
// same calls as at run time, in constant evaluation. Values by hand in the comments.
#include <array>
#include <cstdint>

#include "memscale/estimate/checkpoint_state.hpp"
#include "memscale/inference/weights.hpp"
#include "memscale/quant_format.hpp"
#include "memscale/weights_inventory.hpp"

namespace {

using namespace memscale;

// ---- one 4096 x 4096 linear in each format -------------------------------------------
constexpr std::uint64_t n = 4096;
// GPTQ 4-bit, group 128: qweight 512 x 4096 x 4 = 8,388,608; qzeros 32 x 512 x 4 = 65,536;
// scales 32 x 4096 x 2 = 262,144; g_idx 4096 x 4 = 16,384.
static_assert(quantized_linear_bytes({.method = quant_method::gptq, .bits = 4, .group_size = 128}, n, n) == bytes{8'732'672});
// AWQ: the same without g_idx.
static_assert(quantized_linear_bytes({.method = quant_method::awq, .bits = 4, .group_size = 128}, n, n) == bytes{8'716'288});
// GPTQ 3-bit: qweight 384 x 4096 x 4, qzeros 32 x 384 x 4, scales and g_idx as above.
static_assert(quantized_linear_bytes({.method = quant_method::gptq, .bits = 3, .group_size = 128}, n, n) ==
              bytes{6'291'456 + 49'152 + 262'144 + 16'384});
// NF4: 8,388,608 codes, 262,144 fp32 absmax, 16 fp32 code entries.
static_assert(quantized_linear_bytes({.method = quant_method::bnb_4bit}, n, n) == bytes{8'388'608 + 1'048'576 + 64});
// NF4 double quant: absmax as 262,144 uint8 + 1,024 fp32 second-level absmax + 256-entry map + offset.
static_assert(quantized_linear_bytes({.method = quant_method::bnb_4bit, .double_quant = true}, n, n) ==
              bytes{8'388'608 + 64 + 262'144 + 4'096 + 1'024 + 4});
// LLM.int8: int8 weight and one fp32 scale per row.
static_assert(quantized_linear_bytes({.method = quant_method::bnb_int8}, n, n) == bytes{16'777'216 + 16'384});
// fp8, 128 x 128 tiles: 32 x 32 fp32 scales.
static_assert(quantized_linear_bytes({.method = quant_method::fp8_block}, n, n) == bytes{16'777'216 + 4'096});
// MXFP4: half a byte a weight and one byte per 32.
static_assert(quantized_linear_bytes({.method = quant_method::mxfp4}, n, n) == bytes{8'388'608 + 524'288});

// The inference path's formats are the same description.
static_assert(detail::quantized_matrix_bytes(n, n, inference_spec{.weights = weight_format::gptq_4bit}) ==
              quantized_linear_bytes({.method = quant_method::gptq, .bits = 4, .group_size = 128}, n, n));
static_assert(detail::quantized_matrix_bytes(n, n, inference_spec{.weights = weight_format::bnb_nf4, .double_quant = true}) ==
              quantized_linear_bytes({.method = quant_method::bnb_4bit, .double_quant = true}, n, n));

// Dequantisation temporaries: bnb 4-bit for more than one row, GPTQ/AWQ from 1,024 rows.
static_assert(dequantization_temporary({.method = quant_method::bnb_4bit}, n * n, 1, dtype::bf16) == bytes{});
static_assert(dequantization_temporary({.method = quant_method::bnb_4bit}, n * n, 2, dtype::bf16) == bytes{33'554'432});
static_assert(dequantization_temporary({.method = quant_method::awq}, n * n, 1023, dtype::bf16) == bytes{});
static_assert(dequantization_temporary({.method = quant_method::awq}, n * n, 1024, dtype::bf16) == bytes{33'554'432});
// compressed-tensors: four bf16 copies per call once FROZEN (and the float8 codes for float);
// FP8Linear's act_quant: a byte an input element and an fp32 scale per 128 columns.
static_assert(dequantization_temporary({.method = quant_method::ct_int}, n * n, 1, dtype::bf16) == bytes{4 * 33'554'432});
static_assert(dequantization_temporary({.method = quant_method::ct_float}, n * n, 1, dtype::bf16) == bytes{4 * 33'554'432 + n * n});
static_assert(input_quantization_temporary({.method = quant_method::fp8_block}, 2 * n, n, dtype::bf16) == bytes{2 * n + 2 * 32 * 4});
// A decompressed float-quantized layer: the dense weight in place of the float8 one, its scale.
constexpr inference_spec ct_fp8{.weights = weight_format::ct_float,
                                .quant_scheme = {.zero_points = false, .scales = scale_granularity::tensor}};
static_assert(detail::quantized_matrix_bytes(n, n, ct_fp8) == storage(dtype::fp16, n * n) + storage(dtype::fp16, 1));

// ---- a checkpoint inventory in constant evaluation -------------------------------------
// Two 4096 x 4096 bf16 weights, a 4096 norm, one expert stack (8, 1024, 4096), a GPTQ qweight
// (frozen) and an inv_freq buffer.
constexpr weights_inventory small_checkpoint() {
  weights_inventory w{};
  add_tensor(w, tensor_role::parameter, stored_dtype::bf16, std::array<std::uint64_t, 2>{n, n});
  add_tensor(w, tensor_role::parameter, stored_dtype::bf16, std::array<std::uint64_t, 2>{n, n});
  add_tensor(w, tensor_role::parameter, stored_dtype::f32, std::array<std::uint64_t, 1>{n});
  add_tensor(w, tensor_role::parameter, stored_dtype::bf16, std::array<std::uint64_t, 3>{8, 1024, n});
  add_tensor(w, tensor_role::quantized, stored_dtype::i32, std::array<std::uint64_t, 2>{512, n});
  add_tensor(w, tensor_role::buffer, stored_dtype::f32, std::array<std::uint64_t, 1>{64});
  compact(w);
  return w;
}

constexpr std::uint64_t params = 2 * n * n + n + 8 * 1024 * n;  // 33,554,432 + 4,096 + 33,554,432
static_assert(parameter_elements(small_checkpoint()) == params);
static_assert(small_checkpoint().parameter_shapes.size() == 3);  // the two equal weights merged
static_assert(stored_bytes(small_checkpoint()) == bytes{4 * n * n + 4 * n + 2 * 8 * 1024 * n + 4 * 512 * n + 256});

constexpr checkpoint_state state_of(optimizer_kind o) {
  return checkpoint_state_of(small_checkpoint(), training_spec{.micro_batch = 1, .seq_len = 8, .optimizer = o});
}
// fp32 training: parameters 4 B each, plus the frozen qweight and the buffer as stored.
static_assert(state_of(optimizer_kind::adamw).parameter_bytes == bytes{4 * params + 4 * 512 * n + 256});
static_assert(state_of(optimizer_kind::adamw).gradient_bytes == bytes{4 * params});
static_assert(state_of(optimizer_kind::adamw).optimizer_bytes == bytes{8 * params});
// Adafactor factors every tensor of two dimensions or more: (4096 + 4096) x 2 for the weights,
// 4096 for the norm, 8 x 1024 + 8 x 4096 for the expert stack (transformers Adafactor).
static_assert(state_of(optimizer_kind::adafactor).optimizer_bytes == bytes{4 * (2 * 8'192 + 4'096 + 8 * 1'024 + 8 * 4'096)});
// AdamW 8-bit: int8 states and one fp32 absmax per 256 for the large tensors, fp32 states for
// the norm (4,096 elements is not below min_8bit_size 4,096: 8-bit too).
static_assert(state_of(optimizer_kind::adamw_8bit).optimizer_bytes ==
              bytes{2 * params + 2 * 4 * (params / 256)});

}  // namespace
