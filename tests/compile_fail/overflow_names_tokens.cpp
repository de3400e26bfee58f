// EXPECT: tokens \(micro_batch x seq_len\)
// 2^40 sequences of 2^30 tokens: the token count overflows 64 bits while the transformer
// graph is built, and the compiler's backtrace names the quantity (detail::quantity).
#include <memscale/estimate.hpp>
#include <memscale/presets.hpp>

static_assert(memscale::estimate(memscale::presets::llama_2_7b,
                                 memscale::training_spec{.micro_batch = 1ULL << 40, .seq_len = 1ULL << 30})
                  .steady.tensor.value > 0);
