// EXPECT: non-[^ ]*constexpr[^ ]* function.*fail.*require\(.*"run\.micro_batch"|require\(.*"run\.micro_batch".*non-[^ ]*constexpr[^ ]* function.*fail
// A run with micro_batch = 0: validate(const training_spec&) (memscale/training.hpp) fails on
// require(t.micro_batch > 0, ..., "run.micro_batch", ...).
//   g++ 12:   in 'constexpr' expansion of 'memscale::detail::require(..., "run.micro_batch", ...)'
//             error: call to non-'constexpr' function 'void memscale::detail::fail(...)'
//   clang 14: note: non-constexpr function 'fail' cannot be used in a constant expression
//             note: in call to 'require(false, 3, {15, &"run.micro_batch"[0]}, ...)'
#include <memscale/estimate.hpp>
#include <memscale/presets.hpp>

static_assert(memscale::estimate(memscale::presets::gpt2, memscale::training_spec{.micro_batch = 0}).parameter_count > 0);
