// memscale/parallel/ddp.hpp: torch DistributedDataParallel's gradient buckets.
#pragma once

#include "memscale/bytes.hpp"
#include "memscale/parallel/strategy.hpp"

namespace memscale::engines {

// Reducer::initialize_buckets allocates one flat `gradients` tensor per bucket, the
// buckets together covering every trainable parameter (torch/csrc/distributed/c10d/reducer.cpp,
// v2.x: bucket.gradients = at::empty({offset})). bucket_cap_mb (25 MiB; the first bucket
// 1 MiB) only sets how they are cut, not their sum. With gradient_as_bucket_view each
// param.grad is a view into its bucket, so the buckets replace the gradients; without it
// they are a second, persistent copy of every gradient.
constexpr bytes ddp_bucket_bytes(bytes trainable_gradient_bytes, const ddp_settings& s) {
  return s.gradient_as_bucket_view ? bytes{} : trainable_gradient_bytes;
}

// Number of buckets (for the per-step all-reduce count of the cost model).
constexpr std::uint64_t ddp_bucket_count(bytes trainable_gradient_bytes, const ddp_settings& s) {
  if (trainable_gradient_bytes.value == 0) return 0;
  if (trainable_gradient_bytes <= s.first_bucket) return 1;
  return 1 + detail::ceil_div((trainable_gradient_bytes - s.first_bucket).value, s.bucket_cap.value);
}

}  // namespace memscale::engines
