// EXPECT: (non-'constexpr'|non-constexpr) function.*fail_bf16_without_support
// A bf16 run planned on a GPU without bf16 arithmetic (the T4): the planner's input check
// (detail::validate_plan_input, memscale/detail/plan_steps.hpp) reaches the non-constexpr
// detail::fail_bf16_without_support, whose run-time message names the GPU and amp_fp16.
//   g++ 12:   error: call to non-'constexpr' function 'void memscale::detail::fail_bf16_without_support(...)'
//   clang 14: note: non-constexpr function 'fail_bf16_without_support' cannot be used in a constant expression
#include <memscale/planner.hpp>
#include <memscale/presets.hpp>

static_assert(memscale::fits(memscale::presets::gpt2,
                             memscale::training_spec{.micro_batch = 4, .seq_len = 512,
                                                     .prec = memscale::precision::amp_bf16},
                             *memscale::find_gpu("t4")));
