// EXPECT: model.kv_heads.*must divide model.heads
// An invalid model (kv_heads does not divide heads) must fail constant evaluation at the
// validate() check that names model.kv_heads.
#include <memscale/memscale.hpp>

constexpr memscale::model_spec broken = [] {
  memscale::model_spec m = memscale::presets::llama_2_7b;
  m.kv_heads = 5;  // 32 heads cannot be split into 5 groups
  return m;
}();

static_assert(memscale::parameter_count(broken) > 0);
