// memscale/graph/layers/attention_inputs.hpp: what a decoder's base model makes once per
// forward for every layer's attention and binds in its frame until it returns: the rotary cos
// and sin of this forward's positions, and a 4-D mask: eager attention's, or a padded batch's.
//
// Written for a forward without grad (generate()'s prologue). A training step's graph does not
// write them yet: with flash or SDPA they are a few MiB beside its activations, and the models
// whose base model keeps a mask of its own (OPT, BLOOM) count it as graph::held.
#pragma once

#include <cstdint>

#include "memscale/attention_kernel.hpp"
#include "memscale/detail/math.hpp"
#include "memscale/graph/layers/context.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/tensor.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"

namespace memscale::graph_layers {

struct attention_inputs {
  tensor cos{};   // elements 0: none
  tensor sin{};
  tensor mask{};
  tensor sliding_mask{};  // the sliding-window layers' own mask (model_spec::sliding_layers)
  tensor local_cos{};     // the sliding layers' own rotary pair (model_spec::rotary_per_layer_type)
  tensor local_sin{};
};

constexpr attention_inputs make_attention_inputs(const layer_context& ctx) {
  op_writer& ops = ctx.ops;
  const model_spec& m = ctx.model;
  attention_inputs made{};
  // SDPA: create_sliding_window_causal_mask's sdpa_mask skips the mask only while the keys stay
  // below the window (masking_utils.py@2ccc6cae _ignore_causal_mask_sdpa: kv_length <
  // local_attention_size); otherwise a (batch, 1, rows, keys) bool mask, bound through the blocks
  // (the infer-gemma3-1b history: 16 MiB for 4 x 2048 x 2048 in the prefill, made before the rotary pairs).
  if (ctx.run.attention == attention_impl::sdpa && !m.attention_sinks && m.sliding_layers > 0) {
    const std::uint64_t keys = ctx.cached_keys == 0 ? ctx.keys() : detail::min(ctx.keys(), m.sliding_window);
    if (keys >= m.sliding_window)
      made.sliding_mask =
          ops.elementwise(detail::checked_mul(ctx.run.micro_batch, ctx.run.seq_len, keys), dtype::boolean);
  }
  // LlamaRotaryEmbedding.forward (modeling_llama.py, v4.44.0): cos and sin of
  // (batch, positions, head_dim) in the hidden states' dtype, once per forward.
  if (m.positions == position_kind::rotary) {
    const auto elements = detail::checked_mul(ctx.tokens, head_dim_of(m));
    made.cos = ops.elementwise(elements, ops.stream_dtype());
    made.sin = ops.elementwise(elements, ops.stream_dtype());
    // Gemma 3: a second pair from rope_local_base_freq for the sliding layers, made after the
    // first (the infer-gemma3-1b history: two 4 MiB pairs, both bound through the blocks).
    if (m.rotary_per_layer_type) {
      made.local_cos = ops.elementwise(elements, ops.stream_dtype());
      made.local_sin = ops.elementwise(elements, ops.stream_dtype());
    }
  }
  // LlamaModel._update_causal_mask (v4.44.0): eager attention adds a (batch, 1, rows, keys) mask
  // of the model's dtype; SDPA gets is_causal instead (AttentionMaskConverter._ignore_causal_mask_sdpa),
  // whatever kernel then runs, and a fused kernel as asked for takes no mask.
  // Attention sinks have no SDPA path: an sdpa request runs eager (attention_kernel.hpp).
  const attention_impl impl = ctx.run.attention;
  const bool eager = impl == attention_impl::eager || impl == attention_impl::sdpa_math ||
                     (m.attention_sinks && impl == attention_impl::sdpa);
  // A padded batch's mask reaches SDPA too (attention_kernel.hpp padded_row_mask): sdpa_mask's bool
  // mask from 5.0, an additive copy in the model's dtype before (bool_attention_mask).
  const bool padded_sdpa = !eager && padded_row_mask(ctx.run);
  const dtype mask_type = padded_sdpa && bool_attention_mask(ctx.run) ? dtype::boolean : ops.stream_dtype();
  if (eager || padded_sdpa)
    made.mask = ops.elementwise(detail::checked_mul(ctx.run.micro_batch, ctx.run.seq_len, ctx.keys()), mask_type);
  // GptOssModel.forward makes both masks every forward (modeling_gpt_oss.py@00d4b3d2:
  // create_causal_mask and create_sliding_window_causal_mask); the sliding one spans the keys its
  // layer's cache hands back: the prompt in a prefill, at most the window when decoding
  // (cache_utils.py@004999d9 DynamicSlidingWindowLayer.get_mask_sizes).
  // (Under SDPA a sliding mask made above is that mask: a padded batch adds none of its own.)
  if ((eager || padded_sdpa) && m.sliding_layers > 0 && made.sliding_mask.elements == 0) {
    const std::uint64_t keys = ctx.cached_keys == 0 ? ctx.keys() : detail::min(ctx.keys(), m.sliding_window);
    made.sliding_mask = ops.elementwise(detail::checked_mul(ctx.run.micro_batch, ctx.run.seq_len, keys), mask_type);
  }
  return made;
}

}  // namespace memscale::graph_layers
