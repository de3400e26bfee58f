// memscale/inference/gpt_fast.hpp: GPU memory of gpt-fast's generate() (pytorch-labs/gpt-fast
// generate.py and model.py @ 32971d31), eager (no torch.compile), greedy, no speculative draft.
//
// - setup_caches: per layer KVCache buffers torch.zeros((batch, kv_heads, M, head_dim)) in the
//   model dtype, M = min(prompt + new tokens, block_size) rounded up to 8; the model's
//   causal_mask torch.tril(torch.ones(M, M, dtype=torch.bool)) and freqs_cis of block_size rows
//   ((block_size, head_dim / 2, 2) in the model dtype). gpt-fast has no quantized KV cache at
//   32971d31; with kv int8 the cache is torchao's (_models/llama/model.py@1f66d47
//   AffineQuantizedKVCache): int8 keys and values and a (batch, kv_heads, M, 1) scale in the
//   model dtype, and every update multiplies the whole layer back to the model dtype
//   (k_out = self.k_cache * self.k_cache_scale), keys and values.
// - Attention.forward: one wqkv projection; the cache written in place (k_out[:, :, input_pos] =
//   k_val) and returned whole; k.repeat_interleave(n_head // n_local_heads, dim=1) copies all M
//   positions for every query head (also when the ratio is 1); SDPA with the bool mask over M keys.
//   The decoding steps run under sdp_kernel(enable_math=True) only (decode_n_tokens); the prefill
//   under the run's attention.
// - Transformer.forward returns every position's logits in the model dtype; sample() divides the
//   last position's by the temperature and takes a softmax (logits_to_probs); decode_n_tokens keeps
//   a clone of every step's probabilities (new_probs).
// - quantize.py's weight-only int8 and int4 layers: inference/gpt_fast_weights.hpp.
#pragma once

#include <cstdint>

#include "memscale/dtype.hpp"
#include "memscale/inference/generate_peak.hpp"
#include "memscale/inference/gpt_fast_weights.hpp"
#include "memscale/inference/kv_cache.hpp"
#include "memscale/inference/spec.hpp"
#include "memscale/model.hpp"

namespace memscale::detail {

// The model as gpt-fast's model.py builds it: one wqkv projection (Attention.wqkv) and a head
// without the LLaMA-family fp32 upcast (Transformer.forward: logits = self.output(x)).
constexpr model_spec gpt_fast_model(const model_spec& m) {
  model_spec fast = m;
  fast.fused_qkv = true;
  fast.upcast_logits = false;
  fast.rotary_stacked_pairs = true;
  return fast;
}

// The buffers and attributes setup_caches makes besides the KV cache: freqs_cis of block_size
// rows and the (M, M) bool mask.
constexpr bytes gpt_fast_tables(const model_spec& m, const inference_spec& r) {
  const std::uint64_t length = gpt_fast_cache_length(m, r);
  const std::uint64_t block = m.context_length != 0 ? m.context_length : length;
  return storage(r.compute, checked_mul(block, head_dim_of(m))) + storage(dtype::boolean, checked_mul(length, length));
}

// One forward pass of `rows` positions per sequence with `done` cached, `kept` of the earlier
// steps' probabilities bound.
constexpr inference_breakdown gpt_fast_forward(const model_spec& m, const inference_spec& r, bytes weights,
                                               std::uint64_t done, std::uint64_t rows, bytes kept) {
  const model_spec fast = gpt_fast_model(m);
  const std::uint64_t length = gpt_fast_cache_length(m, r);
  inference_spec step = r;
  if (done > 0) step.attention = attention_impl::sdpa_math;
  // Weight-only int8/int4 layers: each call's dequantized weight or padded input (gpt_fast_weights.hpp).
  const forward_moments f = forward_moments_of_graph(
      fast, with_gpt_fast_linear_temporaries(forward_graph(fast, step, rows, length), r, checked_mul(r.batch, rows)));
  const bytes cache = kv_cache_bytes(m, r, length) + gpt_fast_tables(m, r);
  // seq (batch, prompt + new) and the prompt repeated over the batch in the prompt's int32
  // (encode_tokens), input_pos.
  const std::uint64_t total = checked_add(r.context, r.new_tokens);
  constexpr std::uint64_t int32_bytes = 4;  // torch.int (generate.py encode_tokens)
  const bytes ids = bytes{checked_mul(r.batch, checked_add(total, r.context), int32_bytes)} + storage(dtype::int64, rows);
  const bytes workspace = r.device == device_kind::cuda ? r.blas_workspace : bytes{};
  // The whole-length copies repeat_interleave makes; the graph makes them for GQA (repeat_kv).
  const bytes half = storage(r.compute, checked_mul(checked_mul(r.batch, length), kv_heads_of(m), head_dim_of(m)));
  const bytes repeated = kv_heads_of(m) == m.heads ? half * 2u : bytes{};
  // torchao's int8 cache: keys and values multiplied back to the model dtype.
  const bytes dequantized = r.kv == dtype::int8 ? half * 2u : bytes{};
  // torch's math SDPA scales q and k^T each by sqrt(scale) (aten/src/ATen/native/transformers/
  // attention.cpp _scaled_dot_product_attention_math, torch 2.0-2.5): a copy of the repeated keys
  // that the graph's eager attention does not make.
  const bytes scaled_keys = attention_kernel_of(m, step) == attention_kernel::math
                                ? storage(r.compute, checked_mul(checked_mul(r.batch, length), m.heads, head_dim_of(m)))
                                : bytes{};
  inference_breakdown in_layer{.weights = weights,
                               .kv_cache = cache + max(repeated, dequantized),
                               .activations = ids + f.held + f.layer,
                               .logits = kept,
                               .workspace = workspace};
  const inference_breakdown attending{.weights = weights,
                                      .kv_cache = cache + repeated + scaled_keys,
                                      .activations = ids + f.held + f.while_attending,
                                      .logits = kept,
                                      .workspace = workspace};
  if (in_layer.total() < attending.total()) in_layer = attending;
  const inference_breakdown head{.weights = weights,
                                 .kv_cache = cache,
                                 .activations = ids + (f.after_blocks - f.head_outputs),
                                 .logits = kept + f.head_outputs,
                                 .workspace = workspace};
  // sample(): logits[:, -1] / temperature and its softmax while the logits are bound.
  const bytes row = storage(r.compute, checked_mul(r.batch, m.vocab));
  const inference_breakdown sampled{.weights = weights,
                                    .kv_cache = cache,
                                    .activations = ids,
                                    .logits = kept + f.returned + row * 2u,
                                    .workspace = workspace};
  inference_breakdown peak = in_layer.total() < head.total() ? head : in_layer;
  if (peak.total() < sampled.total()) peak = sampled;
  return peak;
}

// Declared in generate_peak.hpp, which estimate_inference dispatches from.
constexpr inference_result estimate_gpt_fast(const model_spec& model, const inference_spec& run, const graph& g) {
  inference_result res{};
  res.parameter_count = parameter_count(g);
  res.weight_bytes = inference_weight_bytes(g, run);
  res.kv_bytes_per_token = kv_bytes_per_token(model, run);
  res.kv_cache_bytes = kv_cache_bytes(model, run, gpt_fast_cache_length(model, run));
  const bytes weights = res.weight_bytes;
  res.prefill = to_peak(g, run, model, inference_phase::prefill,
                        gpt_fast_forward(model, run, weights, 0, run.context, bytes{}));
  res.decode = res.prefill;
  if (run.new_tokens > 1) {
    // The last step holds the most: every earlier step's probabilities (new_probs) and the
    // previous step's next_prob.
    const std::uint64_t generated = run.new_tokens - 1;
    const bytes row = storage(run.compute, checked_mul(run.batch, model.vocab));
    res.decode = to_peak(g, run, model, inference_phase::decode,
                         gpt_fast_forward(model, run, weights, checked_add(run.context, generated - 1), 1,
                                          row * (generated - 1) + (generated > 1 ? row : bytes{})));
  }
  res.peak = res.decode.tensor > res.prefill.tensor ? res.decode : res.prefill;
  return res;
}

}  // namespace memscale::detail
