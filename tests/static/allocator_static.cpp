// The caching allocator simulation in constant evaluation (memscale/allocator/).
#include <memscale/allocator/alloc_conf.hpp>
#include <memscale/allocator/caching_allocator.hpp>
#include <memscale/allocator/context.hpp>
#include <memscale/allocator/replay.hpp>
#include <memscale/estimate.hpp>
#include <memscale/presets.hpp>

namespace {

using namespace memscale;
using namespace memscale::allocator;
using namespace memscale::literals;

// Rounding and segment sizes (CUDACachingAllocator.cpp round_size, get_allocation_size).
static_assert(round_size({}, 1) == 512);
static_assert(round_size({}, 513) == 1024);
static_assert(allocation_size((1_MiB).value) == (2_MiB).value);
static_assert(allocation_size((5_MiB).value) == (20_MiB).value);
static_assert(allocation_size((11_MiB).value) == (12_MiB).value);
static_assert(round_to_power2_division(1200, 4) == 1280);

// PYTORCH_CUDA_ALLOC_CONF in constant evaluation.
static_assert(parse_alloc_conf("expandable_segments:True").settings.expandable_segments);
static_assert(parse_alloc_conf("max_split_size_mb:512").settings.max_split_size == 512_MiB);
static_assert(parse_alloc_conf("roundup_power2_divisions:[>:8]").settings.roundup_power2_divisions[15] == 8);

// A hand-made stream: an 11 MiB tensor takes a 12 MiB segment whose 1 MiB tail is not split.
constexpr allocator_stats eleven() {
  caching_allocator<16, 16> a{};
  a.allocate(0, (11_MiB).value);
  a.allocate(1, 100);
  a.release(0);
  return a.stats();
}
static_assert(eleven().allocated_peak == 12_MiB + 512_B);
static_assert(eleven().reserved_peak == 14_MiB);

// The capped replay: at 80 MiB the cached segment is released and the run fits.
constexpr bool fits_at(std::uint64_t cap_mib) {
  caching_allocator<16, 16> a{{}, bytes{cap_mib << 20}};
  if (!a.allocate(0, (40_MiB).value)) return false;
  a.release(0);
  if (!a.allocate(1, (50_MiB).value) || !a.allocate(2, (24_MiB).value)) return false;
  a.release(1);
  return a.allocate(3, (56_MiB).value);
}
static_assert(fits_at(80));
static_assert(!fits_at(90));  // a larger cap, a later flush, a trapped 16 MiB: OOM

// The free set in constant evaluation: one size's array grows past its first allocation, a
// size that empties gives its array to the next new size, and the order is (size, address).
constexpr bool free_set_in_order() {
  free_set<64> s;
  for (std::uint32_t i = 0; i < 20; ++i) s.insert({512, 1000 - 10ULL * i, i});
  s.insert({1024, 5, 20});
  s.erase(s.lower_bound(1024, 0));
  s.insert({256, 7, 21});
  s.erase_if([](const free_entry& e) { return e.address % 20 == 0; });
  std::uint64_t last_size = 0;
  std::uint64_t last_address = 0;
  bool ordered = true;
  s.for_each([&](const free_entry& e) {
    ordered = ordered && (e.size > last_size || (e.size == last_size && e.address > last_address));
    last_size = e.size;
    last_address = e.address;
  });
  return ordered && s.size() == 11 && s.at(s.lower_bound(512, 0)).address == 810 && s.at({}).block == 21;
}
static_assert(free_set_in_order());

// A training run of a small model, replayed in constant evaluation: two steps, every event.
constexpr model_spec tiny = presets::llama_base("tiny", 2, 256, 4, 2, 688, 1000);
constexpr training_spec tiny_run{.micro_batch = 2, .seq_len = 64, .prec = precision::amp_bf16};
constexpr replay_result tiny_replay() {
  const graph g = build(tiny, tiny_run).stack();
  return replay_training<512, 512, 512>(g, tiny_run, {.stream = {.blas_handles = 1}});
}
constexpr replay_result replayed = tiny_replay();
static_assert(replayed.requested_peak == estimate(tiny, tiny_run).steady.tensor);
static_assert(replayed.allocated_peak >= replayed.requested_peak);
static_assert(replayed.reserved_peak >= replayed.allocated_peak);

// The CUDA context of an H100 SXM training run (132 SMs x 2048 threads): 740 MiB.
static_assert(context_memory({.streaming_multiprocessors = 132, .max_threads_per_sm = 2048}).total() == 740_MiB);

}  // namespace
