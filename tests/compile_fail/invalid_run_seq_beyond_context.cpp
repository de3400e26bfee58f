// EXPECT: (non-'constexpr'|non-constexpr) function.*fail_sequence
// A run longer than the model's max_position_embeddings (model_spec::context_length) is
// refused in constant evaluation by memscale::validate(model, run), the check every path
// (--cases, --config, the run options) reaches.
#include <memscale/memscale.hpp>

constexpr memscale::model_spec short_context() {
  memscale::model_spec m = memscale::presets::llama_2_7b;
  m.context_length = 4096;
  return m;
}

static_assert(memscale::estimate(short_context(), memscale::training_spec{.micro_batch = 1, .seq_len = 8192})
                  .steady.tensor.value > 0);
