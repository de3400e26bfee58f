// Properties of the caching allocator simulation (memscale/allocator/caching_allocator.hpp) on
// random event streams and of the device estimate (memscale/device_peak.hpp) on random preset
// runs: the reserved peak covers the tensor peak; a larger cap turns a fitting replay into an OOM
// only where the smaller cap's replay had to release its cache (docs/allocator.md, "Properties");
// expandable segments never change what is allocated.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "memscale/allocator/caching_allocator.hpp"
#include "memscale/device_peak.hpp"
#include "memscale/plan_result.hpp"
#include "memscale/presets.hpp"

namespace allocator_properties_test {
namespace {

using namespace memscale;
using namespace memscale::allocator;

constexpr std::uint64_t KiB = 1ULL << 10;
constexpr std::uint64_t MiB = 1ULL << 20;

using sim = caching_allocator<1024, 1024>;

struct event {
  bool allocate = true;
  std::uint32_t id = 0;
  std::uint64_t size = 0;
};

// A stream of tensors of every pool's sizes (small, 1–10 MiB, large), each freed at a random
// later point, the rest freed at the end; and its peak of live bytes as requested.
struct stream {
  std::vector<event> events;
  std::uint64_t live_peak = 0;
};

stream random_stream(std::mt19937_64& rng) {
  const auto pick = [&](std::uint64_t lo, std::uint64_t hi) { return lo + rng() % (hi - lo + 1); };
  stream s;
  std::vector<std::uint32_t> live;
  std::vector<std::uint64_t> size_of;
  std::uint64_t now = 0;
  const std::uint64_t count = pick(20, 120);
  for (std::uint32_t id = 0; id < count; ++id) {
    std::uint64_t size = 0;
    switch (rng() % 3) {
      case 0: size = pick(1, 1 * MiB); break;
      case 1: size = pick(1 * MiB + 1, 10 * MiB); break;
      default: size = pick(10 * MiB, 120 * MiB); break;
    }
    if (rng() % 4 == 0) size = size / (64 * KiB) * (64 * KiB) + 64 * KiB;  // tensor-like round sizes
    s.events.push_back({.allocate = true, .id = id, .size = size});
    size_of.push_back(size);
    live.push_back(id);
    now += size;
    s.live_peak = std::max(s.live_peak, now);
    while (!live.empty() && rng() % 5 < 2) {
      const std::size_t at = rng() % live.size();
      s.events.push_back({.allocate = false, .id = live[at]});
      now -= size_of[live[at]];
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(at));
    }
  }
  for (const std::uint32_t id : live) s.events.push_back({.allocate = false, .id = id});
  return s;
}

options random_options(std::mt19937_64& rng) {
  options o{};
  switch (rng() % 4) {
    case 0: break;
    case 1: o.expandable_segments = true; break;
    case 2: o.max_split_size = bytes{(20 + rng() % 80) * MiB}; break;
    default: o.roundup_power2_divisions.fill(static_cast<std::uint16_t>(1U << (1 + rng() % 3))); break;
  }
  return o;
}

struct outcome {
  bool fits = true;
  allocator_stats stats{};
};

// Replays the stream; after an OOM the failed tensor is never made (later frees of it skipped).
outcome replay(const stream& s, const options& o, std::uint64_t cap) {
  auto a = std::make_unique<sim>(o, bytes{cap});
  std::vector<bool> made(s.events.size(), false);
  outcome out;
  for (const event& e : s.events) {
    if (e.allocate) {
      made[e.id] = a->allocate(e.id, e.size);
      if (!made[e.id]) {
        out.fits = false;
        break;
      }
    } else if (made[e.id]) {
      a->release(e.id);
    }
  }
  out.stats = a->stats();
  return out;
}

std::string describe(const options& o) {
  if (o.expandable_segments) return "expandable_segments";
  if (o.max_split_size.value != memscale::detail::u64_max) return "max_split_size " + std::to_string(o.max_split_size.value / MiB) + " MiB";
  if (o.roundup_power2_divisions[0] > 0) return "roundup_power2_divisions " + std::to_string(o.roundup_power2_divisions[0]);
  return "default";
}

}  // namespace

TEST_CASE("random streams: reserved >= allocated >= requested >= the live bytes, every option", "[allocator][property]") {
  std::mt19937_64 rng(20);
  for (int n = 0; n < 400; ++n) {
    const stream s = random_stream(rng);
    const options o = random_options(rng);
    INFO("stream " << n << ", " << describe(o));
    const outcome free_run = replay(s, o, 0);
    REQUIRE(free_run.fits);
    CHECK(free_run.stats.requested_peak.value == s.live_peak);
    CHECK(free_run.stats.allocated_peak >= free_run.stats.requested_peak);
    CHECK(free_run.stats.reserved_peak >= free_run.stats.allocated_peak);
    CHECK(free_run.stats.alloc_retries == 0);
    // Every tensor freed: nothing allocated, and the cache still holds every segment.
    CHECK(free_run.stats.allocated.value == 0);
    CHECK(free_run.stats.reserved == free_run.stats.reserved_peak);
  }
}

TEST_CASE("random streams: at the unconstrained reserved peak nothing changes, below the live peak nothing fits",
          "[allocator][property]") {
  std::mt19937_64 rng(2020);
  for (int n = 0; n < 300; ++n) {
    const stream s = random_stream(rng);
    const options o = random_options(rng);
    INFO("stream " << n << ", " << describe(o));
    const outcome free_run = replay(s, o, 0);
    // Under expandable segments alloc_block compares reserved + the request's allocation size
    // with the cap before it maps pages (CUDACachingAllocator.cpp @ 001074d2: set_fraction), so a
    // cap at the reserved peak can fail a request the pages would hold; the largest allocation
    // size (120 MiB) above it cannot.
    const std::uint64_t headroom = o.expandable_segments ? 120 * MiB : 0;
    const outcome at_peak = replay(s, o, free_run.stats.reserved_peak.value + headroom);
    CHECK(at_peak.fits);
    CHECK(at_peak.stats.alloc_retries == 0);
    CHECK(at_peak.stats.reserved_peak == free_run.stats.reserved_peak);
    CHECK(at_peak.stats.allocated_peak == free_run.stats.allocated_peak);
    // Expandable segments check only the request's allocation size against the cap and then map
    // whole 20 MiB pages, so they may reserve up to a page past it.
    const std::uint64_t slack = o.expandable_segments ? large_buffer : 0;
    if (s.live_peak > slack + MiB) CHECK_FALSE(replay(s, o, s.live_peak - slack - MiB).fits);
  }
}

TEST_CASE("random streams: a larger cap fails where a smaller one fits only after the smaller one released its cache",
          "[allocator][property]") {
  // A replay that fits without releasing anything never reached its cap, so every larger cap replays it
  // identically. An inversion (docs/allocator.md, "Properties") therefore needs the smaller cap
  // to have released cached segments, and the larger cap to lie below the unconstrained peak.
  std::mt19937_64 rng(4090);
  int inversions = 0;
  int capped_fits = 0;
  for (int n = 0; n < 300; ++n) {
    const stream s = random_stream(rng);
    const options o = random_options(rng);
    const outcome free_run = replay(s, o, 0);
    const std::uint64_t lo = s.live_peak;
    const std::uint64_t hi = free_run.stats.reserved_peak.value;
    std::vector<std::uint64_t> caps;
    for (int k = 0; k <= 12; ++k) caps.push_back(lo + (hi - lo) * static_cast<std::uint64_t>(k) / 12);
    caps.push_back(hi + 20 * MiB);
    std::vector<outcome> at;
    for (const std::uint64_t cap : caps) at.push_back(replay(s, o, cap));
    for (std::size_t i = 0; i < caps.size(); ++i) {
      if (!at[i].fits) continue;
      ++capped_fits;
      CHECK(at[i].stats.reserved_peak.value <= caps[i] + (o.expandable_segments ? large_buffer : 0));
      for (std::size_t j = i + 1; j < caps.size(); ++j) {
        if (at[j].fits) continue;
        ++inversions;
        INFO("stream " << n << ", " << describe(o) << ": fits at " << caps[i] << ", not at " << caps[j]);
        CHECK(at[i].stats.segment_releases > 0);
        CHECK(caps[j] < hi);
      }
    }
  }
  CHECK(capped_fits > 1000);  // the property was exercised
  // The inversion is real but rare (6 with this seed).
  CHECK(inversions > 0);
  CHECK(inversions * 100 < capped_fits);
}

TEST_CASE("random streams: expandable segments request the same bytes, reserve whole pages, can reserve more",
          "[allocator][property]") {
  // docs/allocator.md ("Properties"): expandable segments can reserve more than the default
  // (best fit splits a large hole rather than growing the segment), so that is not asserted;
  // what holds is that they request the same bytes and reserve whole pages.
  std::mt19937_64 rng(8);
  int above = 0;
  for (int n = 0; n < 300; ++n) {
    const stream s = random_stream(rng);
    options e{};
    e.expandable_segments = true;
    const outcome d = replay(s, {}, 0);
    const outcome x = replay(s, e, 0);
    INFO("stream " << n);
    CHECK(x.stats.requested_peak == d.stats.requested_peak);
    CHECK(x.stats.reserved_peak >= x.stats.allocated_peak);
    CHECK(x.stats.reserved_peak.value % small_buffer == 0);
    if (x.stats.reserved_peak > d.stats.reserved_peak) ++above;
  }
  // The "never reserves more than the default" does not hold (35 of 300 with this seed).
  CHECK(above > 0);
}

TEST_CASE("random preset runs: the replayed reserved peak covers the tensor peak, the capped verdict agrees at its ends",
          "[device_peak][property]") {
  std::mt19937_64 rng(48);
  static const gpu_spec h100 = *find_gpu("h100-80gb");
  const model_spec models[] = {presets::gpt2, presets::gpt2_medium, presets::bert_base_uncased, presets::llama_2_7b};
  const precision precs[] = {precision::fp32, precision::amp_bf16, precision::pure_bf16, precision::amp_fp16};
  int checked = 0;
  for (int n = 0; n < 24; ++n) {
    const model_spec& model = models[rng() % std::size(models)];
    training_spec run{.micro_batch = 1 + rng() % 4, .seq_len = 128U << (rng() % 3), .prec = precs[rng() % std::size(precs)],
                      .ckpt = rng() % 2 == 0 ? checkpointing::none : checkpointing::full};
    run = on_gpu(run, h100);
    options o{};
    if (rng() % 3 == 0) o.expandable_segments = true;
    device_estimate d{};
    try {
      d = estimate_on_device(model, run, &h100, {.allocator = o});
    } catch (const error&) {
      continue;  // a precision the model cannot run
    }
    if (!d.replayed()) continue;
    ++checked;
    INFO(model.name << " b" << run.micro_batch << " s" << run.seq_len << " " << describe(o));
    CHECK(d.replay_allocated >= d.tensor);
    CHECK(d.reserved >= d.replay_allocated);
    CHECK(d.device == d.reserved + d.context.total());
    // At the unconstrained device figure the run fits; below its allocated peak + context it does not.
    CHECK(fit_on_device(model, run, d, d.device).fits);
    CHECK_FALSE(fit_on_device(model, run, d, d.context.total() + d.replay_allocated - bytes{MiB}).fits);
  }
  CHECK(checked >= 20);
}

}  // namespace allocator_properties_test
