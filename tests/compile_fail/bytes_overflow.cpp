// EXPECT: (non-'constexpr'|non-constexpr) function.*fail
// 2^40 bytes * 2^40 overflows 64 bits: detail::checked_mul reaches the non-constexpr
// memscale::detail::fail, so the constant expression is rejected instead of wrapping.
// g++ 12:   call to non-'constexpr' function '... memscale::detail::fail(...)'
// clang 14: non-constexpr function 'fail' cannot be used in a constant expression
#include <memscale/bytes.hpp>

static_assert((memscale::bytes{1ULL << 40} * (1ULL << 40)).value != 0);
