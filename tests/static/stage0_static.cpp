// DeepSpeed's stage-0 optimizer wrappers evaluate at compile time (estimate/stage0_optimizers.hpp).
#include "memscale/estimate/stage0_optimizers.hpp"
#include "memscale/parallel/strategy.hpp"

namespace {
using namespace memscale;
using detail::stage0_flat_elements;
using detail::stage0_gradient_buffer;
using detail::stage0_step_temporaries;

constexpr training_spec bf16_rank{.prec = precision::pure_bf16, .optimizer = optimizer_kind::adamw,
                                  .optimizer_impl = optimizer_implementation::fused, .data_parallel = 4,
                                  .shard = sharding::optimizer_state, .fp32_master = true,
                                  .stage0 = stage0_optimizer::bf16_optimizer};
// 1001 elements padded to 2 x 4 ranks; a whole fp32 buffer of them.
static_assert(stage0_flat_elements(1001, bf16_rank) == 1008);
static_assert(stage0_gradient_buffer(1001, bf16_rank).value == 4 * 1008);
// After backward the all-reduce's bf16 copy of the buffer (2 x 1008) outweighs one gradient's
// fp32 copy (4 x 100); fused AdamW adds nothing.
static_assert(stage0_step_temporaries(100, 1001, bf16_rank).value == 2 * 1008);

constexpr training_spec fp16_rank{.prec = precision::pure_fp16, .optimizer = optimizer_kind::adamw,
                                  .optimizer_impl = optimizer_implementation::fused, .data_parallel = 4,
                                  .fp32_master = true, .stage0 = stage0_optimizer::fp16_optimizer};
// No fp32 gradient buffer; the step's fp32 copies of the gradients and their flat concatenation.
static_assert(stage0_gradient_buffer(1000, fp16_rank).value == 0);
static_assert(stage0_step_temporaries(100, 1000, fp16_rank).value == 8 * 1000);

static_assert(strategy_from_string("zero0") == strategy::zero0);
static_assert(sharding_of(strategy::zero0) == sharding::optimizer_state);
}  // namespace
