// EXPECT: run_does_not_fit_required_vs_budget_bytes(<[0-9]+U?L*, [0-9]+U?L*>|.. .with [a-z ]+ RequiredBytes = [0-9]+. [a-z ]+ BudgetBytes = [0-9]+.)
// llama-2-70b trained in fp32 with AdamW (micro-batch 1, seq 512) cannot fit an RTX 3090
// in any mode: assert_fits reaches the non-constexpr
// run_does_not_fit_required_vs_budget_bytes<required, budget>, and both numbers appear
// in the diagnostic as template arguments. The EXPECT regex accepts both spellings below
// (no ';' in it: ctest would split PASS_REGULAR_EXPRESSION there).
// g++ 12:   call to non-'constexpr' function 'void memscale::run_does_not_fit_required_vs_budget_bytes()
//           [with long unsigned int RequiredBytes = 421843705568; long unsigned int BudgetBytes = 21630094540]'
// clang 14: non-constexpr function 'run_does_not_fit_required_vs_budget_bytes<421843705568UL, 21630094540UL>'
//           cannot be used in a constant expression
#include <memscale/gpus.hpp>
#include <memscale/planner.hpp>
#include <memscale/presets.hpp>
#include <memscale/training.hpp>

inline constexpr memscale::gpu_spec rtx3090 = *memscale::find_gpu("rtx3090");
inline constexpr memscale::training_spec run{.micro_batch = 1, .seq_len = 512};  // fp32, AdamW

static_assert(memscale::assert_fits<memscale::presets::llama_2_70b, run, rtx3090>());
