// EXPECT: non-[^ ]*constexpr[^ ]* function.*fail.*require\(.*"model\.kv_heads".*"must divide model\.heads"|require\(.*"model\.kv_heads".*"must divide model\.heads".*non-[^ ]*constexpr[^ ]* function.*fail
// 5 key/value heads cannot be shared evenly by 32 query heads: validate() fails on
// require(m.heads % kv_heads_of(m) == 0, ..., "model.kv_heads", "must divide model.heads", ...)
// (5 <= 32, so the earlier "must be <= model.heads" check passes and must not be the reason).
//   g++ 12:   in 'constexpr' expansion of 'memscale::detail::require(..., "model.kv_heads", "must divide model.heads", ...)'
//             error: call to non-'constexpr' function 'void memscale::detail::fail(...)'
//   clang 14: note: non-constexpr function 'fail' cannot be used in a constant expression
//             note: in call to 'require(false, 2, {14, &"model.kv_heads"[0]}, {23, &"must divide model.heads"[0]}, 5)'
#include <memscale/estimate.hpp>
#include <memscale/presets.hpp>

constexpr memscale::model_spec five_kv_heads = [] {
  memscale::model_spec m = memscale::presets::llama_2_7b;  // 32 heads
  m.kv_heads = 5;
  return m;
}();

static_assert(memscale::estimate(five_kv_heads, memscale::training_spec{}).parameter_count > 0);
