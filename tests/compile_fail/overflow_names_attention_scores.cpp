// EXPECT: attention scores \(micro_batch x heads x seq_len\^2\)
// Eager attention keeps micro_batch x heads x seq^2 scores: with 2^31 tokens per sequence
// that count overflows 64 bits, and the compiler's backtrace names it.
#include <memscale/estimate.hpp>
#include <memscale/presets.hpp>

// Llama-2-7B without its 4096-token context (a config without max_position_embeddings), so
// the sequence reaches the overflow check instead of the context check.
constexpr memscale::model_spec llama_without_context = [] {
  memscale::model_spec m = memscale::presets::llama_2_7b;
  m.context_length = 0;
  return m;
}();

static_assert(memscale::estimate(llama_without_context,
                                 memscale::training_spec{.micro_batch = 1, .seq_len = 1ULL << 31,
                                                         .attention = memscale::attention_impl::eager})
                  .steady.tensor.value > 0);
