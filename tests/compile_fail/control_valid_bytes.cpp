// Positive control for the compile-fail harness: this must compile. If it fails, the
// compile_fail.* results prove nothing (broken include path, flags or harness).
#include <memscale/bytes.hpp>

static_assert(memscale::bytes{1} + memscale::bytes{2} == memscale::bytes{3});
