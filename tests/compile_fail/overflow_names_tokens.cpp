// EXPECT: tokens \(micro_batch x seq_len\)
// 2^40 sequences of 2^30 tokens: the token count overflows 64 bits while the transformer
// graph is built, and the compiler's backtrace names the quantity (detail::quantity).
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
                                 memscale::training_spec{.micro_batch = 1ULL << 40, .seq_len = 1ULL << 30})
                  .steady.tensor.value > 0);
