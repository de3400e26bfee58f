// EXPECT: attention scores \(micro_batch x heads x seq_len\^2\)
// Eager attention keeps micro_batch x heads x seq^2 scores: with 2^31 tokens per sequence
// that count overflows 64 bits, and the compiler's backtrace names it.
#include <memscale/estimate.hpp>
#include <memscale/presets.hpp>

static_assert(memscale::estimate(memscale::presets::llama_2_7b,
                                 memscale::training_spec{.micro_batch = 1, .seq_len = 1ULL << 31,
                                                         .attention = memscale::attention_impl::eager})
                  .steady.tensor.value > 0);
