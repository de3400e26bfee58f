// memscale/parallel/tensor_parallel.hpp: activation memory per transformer layer under
// tensor / sequence parallelism and selective recomputation, Korthikanti et al. 2022
// ("Reducing Activation Recomputation in Large Transformer Models", arXiv 2205.05198), Table 2.
#pragma once

#include <cstdint>

#include "memscale/bytes.hpp"
#include "memscale/training.hpp"

namespace memscale::engines {

struct layer_shape {
  std::uint64_t seq = 0;     // s
  std::uint64_t batch = 0;   // b (micro-batch)
  std::uint64_t hidden = 0;  // h
  std::uint64_t heads = 0;   // a
};

// Bytes of one layer's saved activations, 16-bit activations and 1-byte dropout masks as in
// the paper's sec. 4.1 count: sbh * (10 + 24/t) with tensor parallelism alone (layer-norm
// inputs, dropout masks and residuals stay whole on every rank), sbh * 34/t with sequence
// parallelism, plus 5as^2b/t for the attention scores, softmax and its dropout mask unless
// selective recomputation (or a flash kernel, which never stores them) drops them. Full
// recomputation keeps only the layer input, 2sbh (/t with sequence parallelism).
constexpr bytes korthikanti_layer_activations(const layer_shape& s, std::uint64_t t, bool sequence_parallel,
                                              checkpointing ckpt, bool scores_stored) {
  using detail::checked_mul;
  const std::uint64_t sbh = checked_mul(s.seq, s.batch, s.hidden);
  if (ckpt == checkpointing::full) return bytes{detail::ceil_div(checked_mul(2, sbh), sequence_parallel ? t : 1)};
  const std::uint64_t linear_part = sequence_parallel ? detail::ceil_div(checked_mul(34, sbh), t)
                                                      : detail::checked_add(checked_mul(10, sbh), detail::ceil_div(checked_mul(24, sbh), t));
  const bool keep_scores = scores_stored && ckpt != checkpointing::selective;
  const std::uint64_t scores = keep_scores ? detail::ceil_div(checked_mul(5, s.heads, checked_mul(s.seq, s.seq, s.batch)), t) : 0;
  return bytes{detail::checked_add(linear_part, scores)};
}

}  // namespace memscale::engines
