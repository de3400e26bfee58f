// EXPECT: non-[^ ]*constexpr[^ ]* function.*fail.*require\(.*"model\.layers"|require\(.*"model\.layers".*non-[^ ]*constexpr[^ ]* function.*fail
// A model with zero layers: validate() (memscale/model.hpp) reaches the non-constexpr
// memscale::detail::fail through require(m.layers > 0, ..., "model.layers", ...), so the
// constant evaluation of estimate() fails. The regex wants both the call to `fail` and
// the failing require(...) naming "model.layers"; the two compilers print them in
// opposite orders:
//   g++ 12:   in 'constexpr' expansion of 'memscale::detail::require(..., "model.layers", ...)'
//             error: call to non-'constexpr' function 'void memscale::detail::fail(...)'
//   clang 14: note: non-constexpr function 'fail' cannot be used in a constant expression
//             note: in call to 'require(false, 2, {12, &"model.layers"[0]}, ...)'
#include <memscale/estimate.hpp>
#include <memscale/presets.hpp>

constexpr memscale::model_spec zero_layers = [] {
  memscale::model_spec m = memscale::presets::gpt2;
  m.layers = 0;
  return m;
}();

static_assert(memscale::estimate(zero_layers, memscale::training_spec{}).parameter_count > 0);
