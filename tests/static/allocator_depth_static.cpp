// A deeper model's allocator replay in constant evaluation, within each compiler's budget: clang
// at CI's -fconstexpr-steps=960000 (tests/CMakeLists.txt), g++ at its default
// -fconstexpr-ops-limit (2^25). With std::array tables, whose every subscript is two calls in
// constant evaluation, neither depth fitted (docs/performance.md, docs/allocator.md).
#include <cstdint>

#include <memscale/allocator/replay.hpp>
#include <memscale/estimate.hpp>
#include <memscale/presets.hpp>

namespace {

using namespace memscale;
using namespace memscale::allocator;

#if defined(__clang__)
inline constexpr std::uint64_t depth = 4;
#else
inline constexpr std::uint64_t depth = 16;
#endif

constexpr model_spec deeper = presets::llama_base("deeper", depth, 256, 4, 2, 688, 1000);
constexpr training_spec deeper_run{.micro_batch = 2, .seq_len = 64, .prec = precision::amp_bf16};
constexpr replay_result deeper_replay() {
  const graph g = build(deeper, deeper_run).stack();
  return replay_training<2048, 2048, 2048>(g, deeper_run, {.stream = {.blas_handles = 1}});
}
constexpr replay_result replayed = deeper_replay();
static_assert(replayed.layers_walked == depth);
static_assert(replayed.requested_peak == estimate(deeper, deeper_run).steady.tensor);
static_assert(replayed.reserved_peak >= replayed.allocated_peak && replayed.allocated_peak >= replayed.requested_peak);

}  // namespace
