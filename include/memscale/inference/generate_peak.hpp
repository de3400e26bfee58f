// memscale/inference/generate_peak.hpp: GPU memory of generate(): weights in their stored format, the
// KV cache, and the transient peaks of the prefill and of the decoding steps.
//
// The forward pass runs under torch.no_grad (generate's decorator), so nothing is saved
// for a backward: a tensor lives while Python holds it. The moments below follow
// transformers' LlamaForCausalLM eager path and GenerationMixin._sample (4.44 and, where
// they differ, 4.45), which the CPU traces in docs/data/cpu_traced_inference.json check.
#pragma once

#include <cstdint>
#include <string_view>

#include "memscale/attention_kernel.hpp"
#include "memscale/dtype.hpp"
#include "memscale/estimate.hpp"
#include "memscale/inference/kv_cache.hpp"
#include "memscale/inference/spec.hpp"
#include "memscale/inference/weights.hpp"
#include "memscale/model.hpp"
#include "memscale/graph/forward_liveness.hpp"
#include "memscale/graph/layers/mask_buffers.hpp"
#include "memscale/graph/layers/rotary_tables.hpp"
#include "memscale/graph/model_graph.hpp"
#include "memscale/precision_policy.hpp"
#include "memscale/release_text.hpp"
#include "memscale/validate.hpp"

namespace memscale {

enum class inference_phase : std::uint8_t { prefill, decode };

constexpr std::string_view to_string(inference_phase p) noexcept {
  return p == inference_phase::prefill ? "prefill" : "decode";
}

// What is on the device at the peak moment of a phase.
struct inference_breakdown {
  bytes weights{};      // parameters in their stored format and registered buffers
  bytes kv_cache{};     // keys and values of every layer (and a torch.cat copy in flight)
  bytes activations{};  // hidden states, attention scores, masks, token ids
  bytes logits{};       // output-layer logits alive at that moment
  bytes workspace{};    // cuBLAS workspace, dequantised weights

  [[nodiscard]] constexpr bytes total() const { return weights + kv_cache + activations + logits + workspace; }
};

struct inference_peak {
  bytes tensor{};    // torch.cuda.max_memory_allocated
  bytes reserved{};  // torch.cuda.max_memory_reserved
  bytes device{};    // nvidia-smi: reserved + CUDA context
  inference_phase at = inference_phase::prefill;
  inference_breakdown breakdown{};
};

struct inference_result {
  std::uint64_t parameter_count = 0;
  bytes weight_bytes{};
  bytes kv_bytes_per_token{};  // all layers, one sequence
  bytes kv_cache_bytes{};      // the batch's cache after the last token
  inference_peak prefill{};
  inference_peak decode{};     // equals prefill when no decoding step runs (new_tokens <= 1)
  inference_peak peak{};       // the larger of the two
};

// The attention kernel a generate() call of `m` runs under `r` (no dropout in eval mode).
constexpr attention_kernel attention_kernel_of(const model_spec& m, const inference_spec& r) {
  switch (r.attention) {
    case attention_impl::eager:
    case attention_impl::sdpa_math: return attention_kernel::math;
    case attention_impl::flash: return attention_kernel::flash;
    case attention_impl::sdpa: {
      if (m.attention_sinks) return attention_kernel::math;  // _supports_sdpa = False: eager runs
      // Padded prompts hand every forward a mask (training_spec::padded; a StaticCache's own mask aside).
      const bool padded = r.padded && r.cache != kv_cache_kind::static_preallocated;
      return sdpa_kernel(sdpa_call{.device = r.device,
                                   .type = r.compute,
                                   .has_mask = m.alibi || padded,
                                   .dropout = false,
                                   .head_dim = head_dim_of(m),
                                   .torch_version = r.torch_version,
                                   .gqa = kv_heads_of(m) != m.heads && m.impl == implementation::hf_transformers &&
                                          r.transformers_version >= 500 && !padded});
    }
  }
  return attention_kernel::math;
}

namespace detail {

// Bytes of `elements` in the compute dtype.
constexpr bytes act(const inference_spec& r, std::uint64_t elements) { return storage(r.compute, elements); }

// The run one generate() forward is built for: `rows` new positions per sequence in the
// run's dtype, eval mode (no dropout), the attention implementation, release and device the
// attention kernel follows from (attention_kernel_of).
constexpr training_spec forward_run(const inference_spec& r, std::uint64_t rows) {
  training_spec t{.micro_batch = r.batch, .seq_len = rows, .dropout = false};
  t.prec = r.compute == dtype::fp32 ? precision::fp32 : r.compute == dtype::bf16 ? precision::pure_bf16
                                                                                    : precision::pure_fp16;
  t.attention = r.attention;
  t.transformers_version = r.transformers_version;
  t.device = r.device;
  t.torch_version = r.torch_version;
  // A StaticCache's forwards are handed their mask whatever the padding (static_cache_mask).
  t.padded = r.padded && r.cache != kv_cache_kind::static_preallocated;
  t.mxfp4_experts = r.weights == weight_format::mxfp4;
  t.unquantized = r.unquantized;
  t.flash_attention_2 = r.flash_attention_2;
  return t;
}

// The graph of one generate() forward: `rows` new positions per sequence attending over
// `keys`, the same layers the training estimators read (build_forward). The model's position
// limit is not the graph's business here: a caller checks the prompt and the new tokens
// against it (check_sequence), and plan_inference probes longer contexts on purpose.
// `model_validated`: the caller ran validate(m) (raising the position limits below keeps it valid:
// validate(m) only asks them to be above zero).
constexpr graph forward_graph(const model_spec& m, const inference_spec& r, std::uint64_t rows, std::uint64_t keys,
                              bool model_validated = false) {
  model_spec unlimited = m;
  if (unlimited.context_length != 0 && unlimited.context_length < keys) unlimited.context_length = keys;
  if (unlimited.max_positions != 0 && unlimited.max_positions < keys) unlimited.max_positions = keys;
  return build_forward_stack(unlimited, forward_run(r, rows), keys - rows, model_validated);
}

// The largest moment of the last decoder layer, its input stream included and the cache
// apart: the no_grad walk of the forward graph (graph/forward_liveness.hpp).
constexpr bytes layer_peak(const model_spec& m, const inference_spec& r, std::uint64_t rows, std::uint64_t keys) {
  return no_grad_block_peak(forward_graph(m, r, rows, keys)).live;
}

// What survives of a step's logits into the next forward pass, given the logits the forward
// handed back (`returned`, the graph's last op): before 4.45 `outputs` stays bound until the
// next call returns; from 4.45 generate clones the last position to fp32 and deletes `outputs`
// (GenerationMixin._sample).
constexpr bytes logits_kept(const model_spec& m, const inference_spec& r, bytes returned) {
  if (r.transformers_version >= 445) return storage(dtype::fp32, checked_mul(r.batch, m.vocab));
  return returned;
}

// Token ids, attention mask (int64, growing by one column a step), position ids.
constexpr bytes token_tensors(const inference_spec& r, std::uint64_t length, std::uint64_t rows) {
  return storage(dtype::int64, checked_mul(r.batch, checked_add(checked_mul(length, 2), rows)));
}

// Dequantised weight in flight: the format's dequantization_temporary (quant_format.hpp:
// bitsandbytes 4-bit for more than one row, AWQ/GPTQ GEMMs for >= 1024 rows); LLM.int8
// quantises the input rows and accumulates in int32. FP8Linear quantises its input
// (input_quantization_temporary) and writes its output directly. A compressed-tensors layer
// decompresses its weight in the first forward (`first_forward`: decompression_temporary) and
// fake-quantises it in every later one (dequantization_temporary), with its fake-quantised input
// bound meanwhile; quantising that input is a moment of its own. The largest weight and the widest
// input are taken together: the upper side where they are different layers.
constexpr bytes quant_workspace(const graph& g, const model_spec& m, const inference_spec& r, std::uint64_t rows,
                                bool first_forward) {
  const auto n = checked_mul(r.batch, rows);
  switch (r.weights) {
    case weight_format::native:
    case weight_format::gptfast_int8:  // gpt-fast's per-call copies: gpt_fast_weights.hpp
    case weight_format::gptfast_int4:
    case weight_format::mxfp4: return {};  // matmul_ogs reads MXFP4 as stored; its tensors: gpt_oss_mxfp4.hpp
    case weight_format::bnb_nf4:
    case weight_format::bnb_fp4:
    case weight_format::gptq_4bit:
    case weight_format::awq_4bit:
      return dequantization_temporary(detail::quant_format_of(r), largest_block_matmul(g), n, r.compute);
    case weight_format::bnb_int8: {
      const auto widest = max(m.ffn, checked_mul(m.heads, head_dim_of(m)));
      // int8 input rows, int32 accumulator (4 bytes an element).
      return storage(dtype::int8, checked_mul(n, widest)) + storage(dtype::fp32, checked_mul(n, widest));
    }
    case weight_format::fp8_block: {
      const auto columns = widest_block_matmul_input(g);
      return input_quantization_temporary(detail::quant_format_of(r), checked_mul(n, columns), columns, r.compute);
    }
    case weight_format::ct_float:
    case weight_format::ct_int: {
      const quant_format f = detail::quant_format_of(r);
      const auto columns = widest_block_matmul_input(g);
      const auto weight = largest_block_matmul(g);
      const bytes quantising_input = input_quantization_temporary(f, checked_mul(n, columns), columns, r.compute);
      const bytes quantised_input = f.quantized_inputs ? act(r, checked_mul(n, columns)) : bytes{};
      const bytes weight_copies = first_forward ? decompression_temporary(f, weight, r.compute)
                                                : dequantization_temporary(f, weight, n, r.compute);
      return max(quantising_input, quantised_input + weight_copies);
    }
  }
  return {};
}

// The tensors a layer's attention makes for its prompt's keys and values, which a cache before
// transformers 5 keeps as they are: with a fused qkv projection the keys and values are views of its
// output, so all of it stays (GPT-2 c_attn); rotary keys are new tensors, values without
// rotation are views of their projection (DynamicCache.update appends them as they are).
// Under multi-head latent attention the key is a new tensor (the torch.cat of the nope and the
// rotated parts) and the value a view of kv_b_proj's output, whose nope keys it keeps too.
constexpr bytes prompt_tensors(const model_spec& m, const inference_spec& r) {
  const auto tokens = checked_mul(r.batch, r.context);
  const bytes kv = kv_layer_half_bytes(m, r, r.context) + kv_layer_value_bytes(m, r, r.context);
  if (has_latent_attention(m) && r.kv == r.compute && r.cache == kv_cache_kind::dynamic)
    return kv_layer_half_bytes(m, r, r.context) +
           act(r, checked_mul(tokens, m.heads, checked_add(m.qk_nope_head_dim, m.v_head_dim)));
  if (!m.fused_qkv || r.kv != r.compute || r.cache != kv_cache_kind::dynamic) return kv;
  const auto qkv = checked_mul(tokens, checked_mul(m.heads + 2 * kv_heads_of(m), head_dim_of(m)));
  const bytes rotated = m.positions == position_kind::rotary ? kv_layer_half_bytes(m, r, r.context) : bytes{};
  return act(r, qkv) + rotated;
}

// From transformers 5 a DynamicLayer starts empty (lazy_initialization) and its first update is
// torch.cat([empty, key_states]): the cache holds copies of the prompt's keys and values, and what
// the layer made for them (prompt_tensors) lives only until the attention is done with it
// (cache_utils.py@67dd5524 DynamicLayer.update; the H100 histories of transformers 5.17: GPT-2's
// 24 x 6.3 MB copies where c_attn's 18.9 MB outputs were kept, Llama-2-7B's +128 +128 MiB then
// -128 -128 MiB per layer). Latent attention and tuple caches keep their own rules.
constexpr bool copies_prompt(const model_spec& m, const inference_spec& r) {
  return r.transformers_version >= 500 && r.cache == kv_cache_kind::dynamic && r.loop == generate_loop::transformers &&
         r.kv == r.compute && !has_latent_attention(m) && !keeps_tuple_cache(m, r);
}

// What a layer's cache holds after the prefill: the tensors the attention made (prompt_tensors),
// or from transformers 5 their copies (copies_prompt).
constexpr bytes prefill_layer_storage(const model_spec& m, const inference_spec& r) {
  if (copies_prompt(m, r)) return kv_layer_half_bytes(m, r, r.context) + kv_layer_value_bytes(m, r, r.context);
  return prompt_tensors(m, r);
}

// What keeps a layer's prefill value tensor alive until the first torch.cat replaces it:
// the fused projection's whole output, or the value tensor itself.
constexpr bytes prefill_value_storage(const model_spec& m, const inference_spec& r) {
  if (copies_prompt(m, r)) return kv_layer_value_bytes(m, r, r.context);
  if (has_latent_attention(m)) return prefill_layer_storage(m, r) - kv_layer_half_bytes(m, r, r.context);
  const bytes rotated = (m.fused_qkv && m.positions == position_kind::rotary) ? kv_layer_half_bytes(m, r, r.context)
                                                                              : bytes{};
  return m.fused_qkv ? prefill_layer_storage(m, r) - rotated : kv_layer_half_bytes(m, r, r.context);
}

// What a QuantizedCache layer holds beyond the stored cache while the last layer updates
// (cache_utils.py v4.45 QuantizedCache.update; the quantiser as quanto's affine one).
struct quantized_update {
  bytes attending{};  // through the attention: the keys and values update() returned
  bytes updating{};   // the largest moment inside update()
};

constexpr quantized_update quantized_update_of(const model_spec& m, const inference_spec& r, std::uint64_t done,
                                               std::uint64_t rows) {
  if (r.cache != kv_cache_kind::quantized) return {};
  const std::uint64_t total = checked_add(done, rows);
  const bytes returned = kv_layer_half_bytes(m, r, total) * 2u;
  // The quantiser's working copies of one tensor in the compute dtype: (x - min) and its
  // division by the scale (quanto AffineQuantizer: round(x / scale) + shift, clamped) before
  // the codes are cast to uint8 and packed.
  const bytes working = kv_layer_half_bytes(m, r, total) * 2u;
  if (done == 0) {
    // Prefill: the prompt's keys and values are quantised and returned as they are.
    return {.attending = returned, .updating = returned + working};
  }
  const quantized_split before = split_quantized(r, done);
  // dequant_key and dequant_value stay bound while the concatenations are made.
  const bytes dequantized = kv_layer_half_bytes(m, r, before.packed) * 2u;
  if (requantizes(r, done)) {
    // Quantising the values: the old packed values and both old residual windows are still bound
    // (the layer's entries are replaced after both quantisations).
    const bytes old = quantized_kv_bytes(r, kv_layer_half_elements(m, r, before.packed)) +
                      kv_layer_half_bytes(m, r, before.residual) * 2u;
    return {.attending = returned, .updating = dequantized + returned + working + old};
  }
  // torch.cat([key_cache, key_states]) of the values: the old value window is still bound.
  return {.attending = returned, .updating = dequantized + returned + kv_layer_half_bytes(m, r, before.residual)};
}

// The mask a forward over a StaticCache attends with under SDPA, bound by the base model through its
// blocks (eager's is the graph's own; flash takes none). From 5.0 a bool (batch, 1, rows, cache
// length) mask: a compileable cache never skips it (masking_utils.py create_causal_mask:
// allow_is_causal_skip = not past_key_values.is_compileable; the 5.17 histories: 35,635,200 bytes
// for 8 x 2048 x 2175); before, _update_causal_mask's 4-D mask of the model's dtype
// (modeling_llama.py@v4.44.0: the SDPA skip excludes using_static_cache).
constexpr bytes static_cache_mask(const model_spec& m, const inference_spec& r, std::uint64_t rows) {
  if (r.cache != kv_cache_kind::static_preallocated || r.loop == generate_loop::gpt_fast ||
      r.attention != attention_impl::sdpa || m.attention_sinks)
    return {};
  const std::uint64_t elements = checked_mul(r.batch, rows, static_cache_length(r));
  return storage(r.transformers_version >= 500 ? dtype::boolean : r.compute, elements);
}

// What SDPA's call over a StaticCache makes besides the kernel's output, from 5.0: with a mask
// sdpa_attention_forward passes no enable_gqa (integrations/sdpa_attention.py use_gqa_in_sdpa: only
// without a mask), so repeat_kv copies the keys and the values of the whole cache to every query
// head; and torch converts the bool mask to the query's dtype (aten/src/ATen/native/transformers/
// attention.cpp convert_boolean_attn_mask). The 5.17 TinyLlama history: two 83,820,544-byte copies
// (16 x 32 heads x 1279 x 64 bf16) and a 40,928-byte mask per layer and decoding step.
struct static_attending {
  bytes repeated{};    // each of the key and the value copy
  bytes float_mask{};
};

constexpr static_attending static_attending_of(const model_spec& m, const inference_spec& r, std::uint64_t rows) {
  if (static_cache_mask(m, r, rows).value == 0 || r.transformers_version < 500) return {};
  const std::uint64_t length = static_cache_length(r);
  const bool grouped = kv_heads_of(m) != m.heads && m.impl == implementation::hf_transformers;
  return {.repeated = grouped ? storage(r.kv, checked_mul(checked_mul(r.batch, m.heads, length), head_dim_of(m))) : bytes{},
          .float_mask = act(r, checked_mul(r.batch, rows, length))};
}

// The moments of one forward read from its graph (forward_graph).
struct forward_moments {
  bytes held{};          // what the base model binds through the blocks (embeddings, rotary tables, mask)
  bytes layer{};         // the last decoder layer's largest moment, its input stream included
  bytes after_blocks{};  // the final norm's and the head's largest moment, its input stream included
  bytes head_outputs{};  // of which the head's outputs (logits) bound at that moment
  bytes returned{};      // the logits forward() hands back
  bytes while_attending{};  // the last decoder layer's largest moment up to the last reader of its cached keys and values
};

// The last decoder layer's largest moment from its start to the op that reads its cached keys
// and values last (the attention): where a cache that hands the layer a copy (QuantizedCache)
// holds it.
constexpr bytes attending_peak(const graph& g) {
  std::size_t last = g.block_begin;
  for (std::size_t i = g.block_begin; i < g.block_end; ++i) {
    const std::size_t freed = g.ops[i].kv_cached ? freed_after(g, i) : last;
    if (freed > last) last = freed;
  }
  const std::size_t end = last + 1 < g.block_end ? last + 1 : g.block_end;
  return no_grad_forward_peak(g, g.block_begin, end).live;
}

// The head's first op: the output layer, the first projection after the blocks.
constexpr std::size_t head_begin(const graph& g) {
  std::size_t i = g.block_end;
  while (i < g.size && g.ops[i].kind != op_kind::linear) ++i;
  return i;
}

// The moments of `g`, a forward graph of `m`.
constexpr forward_moments forward_moments_of_graph(const model_spec& m, const graph& g) {
  const no_grad_moment tail = no_grad_epilogue_peak(g);
  const bytes held = no_grad_held_through_blocks(g);
  // DeepSeek's leading dense layers run before the repeated block, in the prologue: their largest
  // moment is the prologue's, less what the prologue binds through the blocks.
  bytes layer = no_grad_block_peak(g).live;
  if (m.leading_dense_layers > 0) layer = max(layer, no_grad_forward_peak(g, 0, g.block_begin).live - held);
  return {.held = held,
          .layer = layer,
          .after_blocks = tail.live,
          .head_outputs = no_grad_live_at(g, head_begin(g), tail.at),
          .returned = g.ops[g.size - 1].out,
          .while_attending = attending_peak(g)};
}

constexpr forward_moments forward_moments_of(const model_spec& m, const inference_spec& r, std::uint64_t rows,
                                             std::uint64_t keys, bool model_validated = false) {
  return forward_moments_of_graph(m, forward_graph(m, r, rows, keys, model_validated));
}

struct forward_result {
  inference_breakdown peak{};
  bytes returned{};  // the logits forward() hands back
};

// One forward pass over `rows` new positions per sequence, with `done` positions cached
// before it and `kept_logits` of the previous step still alive.
constexpr forward_result forward_peak(const graph& g, const model_spec& m, const inference_spec& r, bytes weights,
                                      std::uint64_t done, std::uint64_t rows, bytes kept_logits) {
  const std::uint64_t total = checked_add(done, rows);
  // Keys attended: a static cache is attended over its whole length; a sliding-window
  // cache over its window once decoding (the prefill attends the whole prompt).
  std::uint64_t keys = total;
  if (r.cache == kv_cache_kind::static_preallocated) keys = cached_positions(r, total);
  if (r.cache == kv_cache_kind::sliding_window && done > 0) keys = cached_positions(r, total);
  const bytes cache_after = kv_cache_bytes(m, r, total);
  const bytes ids = token_tensors(r, total, rows);
  const bytes workspace = (r.device == device_kind::cuda ? r.blas_workspace : bytes{}) + quant_workspace(g, m, r, rows, done == 0);

  // The last layer: every other layer's cache is complete. DynamicCache.update appends
  // the prefill's keys as they are and afterwards replaces each layer's tensors by
  // torch.cat([old, new]): the old value tensor and the new one coexist.
  const bool grows = r.cache == kv_cache_kind::dynamic;
  const bool first_step = done == r.context;
  const bytes prefill_extra =
      prefill_layer_storage(m, r) - kv_layer_half_bytes(m, r, r.context) - kv_layer_value_bytes(m, r, r.context);
  bytes cache = cache_after;
  if (grows && done == 0) cache += prefill_extra * m.layers;  // the prefill's views
  bytes cat_copy{};
  bytes old_cache{};
  if (grows && done > 0) {
    // The last layer's old tensors while torch.cat makes the new ones: its prefill storage
    // in the first step, its old value tensor later.
    cat_copy = first_step ? prefill_value_storage(m, r) : kv_layer_half_bytes(m, r, done);
    // Tuple caches: the whole previous cache is still referenced.
    if (keeps_tuple_cache(m, r))
      old_cache = first_step ? prefill_layer_storage(m, r) * m.layers : kv_cache_bytes(m, r, done);
  }
  // Under multi-head latent attention a layer's prefill storage (the key and kv_b_proj's whole
  // output) outweighs its cache after the first torch.cat, so the first decoding step's largest
  // cache is at its first layer: every layer still holds its prefill storage while the first
  // layer's new key is made.
  bytes step_cache = cache + max(old_cache, cat_copy);
  if (has_latent_attention(m) && grows && first_step && !keeps_tuple_cache(m, r))
    step_cache = max(step_cache, prefill_layer_storage(m, r) * m.layers + kv_layer_half_bytes(m, r, total));
  // Sliding-window layers shrink from the prompt to the window in the first decoding step: at its
  // first layer every layer still holds its prefill storage while that layer's new key is made
  // (written as a full layer's key: the upper side by the prompt less the window when it slides).
  if (m.sliding_layers > 0 && grows && first_step)
    step_cache = max(step_cache, prefill_layer_storage(m, r) * m.layers + kv_layer_half_bytes(m, r, total));
  // estimate_checked_inference's model passed check_inference.
  const forward_moments f = forward_moments_of(m, r, rows, keys, true);
  const quantized_update q = quantized_update_of(m, r, done, rows);
  // A StaticCache's mask lives through the blocks; its attention's copies while the kernel runs.
  const bytes static_mask = static_cache_mask(m, r, rows);
  const static_attending static_copies = static_attending_of(m, r, rows);
  inference_breakdown in_layer{.weights = weights,
                               .kv_cache = step_cache,
                               .activations = ids + f.held + static_mask + f.layer,
                               .logits = kept_logits,
                               .workspace = workspace};
  // Copied prompt keys and values: the last layer's own tensors for them until the attention is done.
  const bytes originals = done == 0 && copies_prompt(m, r) ? prompt_tensors(m, r) : bytes{};
  const inference_breakdown attending{.weights = weights,
                                      .kv_cache = cache + q.attending,
                                      .activations = ids + f.held + static_mask + f.while_attending +
                                                     static_copies.repeated * 2u + static_copies.float_mask + originals,
                                      .logits = kept_logits,
                                      .workspace = workspace};
  if (in_layer.total() < attending.total()) in_layer = attending;
  // QuantizedCache.update, before the attention runs: the block's input, its normed copy and the
  // queries are what the layer holds besides the cache's tensors.
  const inference_breakdown updating{
      .weights = weights,
      .kv_cache = cache + q.updating,
      .activations = ids + f.held +
                     act(r, checked_mul(r.batch, rows, 2 * m.hidden + checked_mul(m.heads, head_dim_of(m)))),
      .logits = kept_logits,
      .workspace = workspace};
  if (in_layer.total() < updating.total()) in_layer = updating;
  // After the blocks: what the base model bound is gone with its frame.
  inference_breakdown head{.weights = weights,
                           .kv_cache = cache + old_cache,
                           .activations = ids + (f.after_blocks - f.head_outputs),
                           .logits = kept_logits + f.head_outputs,
                           .workspace = workspace};
  // Once forward returned, generate() copies the last position's logits to fp32 while `outputs`
  // still holds what forward() returned and the previous step's copy is still bound
  // (GenerationMixin._sample, v4.45.0: outputs.logits[:, -1, :].to(copy=True, dtype=torch.float32)).
  const bytes copy = r.transformers_version >= 445 ? storage(dtype::fp32, checked_mul(r.batch, m.vocab)) : bytes{};
  const inference_breakdown returned{.weights = weights,
                                     .kv_cache = cache + old_cache,
                                     .activations = ids,
                                     .logits = kept_logits + f.returned + copy,
                                     .workspace = workspace};
  inference_breakdown peak = in_layer.total() < head.total() ? head : in_layer;
  if (peak.total() < returned.total()) peak = returned;
  return {.peak = peak, .returned = f.returned};
}

constexpr inference_peak to_peak(const graph& g, const inference_spec& r, const model_spec& m, inference_phase at,
                                 const inference_breakdown& b) {
  inference_peak p{.tensor = b.total(), .reserved = b.total(), .device = b.total(), .at = at, .breakdown = b};
  if (r.device == device_kind::cuda) {
    // Large blocks waste half of the 2 MiB rounding granule on average
    // (CUDACachingAllocator.cpp kRoundLarge): the weights and each layer's keys and values.
    const auto large = checked_add(large_weight_tensors(g, r), checked_mul(m.layers, 2));
    p.reserved = round_up(p.tensor + bytes{checked_mul(large, cuda_round_large.value / 2)}, cuda_round_large);
    p.device = p.reserved + cuda_context_bytes(r.cuda_lazy_loading);
  }
  return p;
}

}  // namespace detail

namespace detail {

// The decode forward the estimate describes: decoder-only causal LMs.
constexpr void require_generate_estimated(const model_spec& model) {
  require(model.arch == architecture::decoder && model.head == head_kind::causal_lm, error_code::unsupported,
          "model.arch", "inference estimates cover decoder-only causal language models",
          model.arch);
  // Mamba keeps per-layer conv and ssm states instead of a KV cache, and its decoding step is
  // the recurrent cuda_kernels path: neither is described here.
  require_attention_mixer(model, "generate() keeps conv and ssm states instead of a KV cache, which is not "
                                 "modelled yet");
  // Gemma 3n's last num_kv_shared_layers layers read the cache of an earlier layer, and AltUp runs
  // on every new token: graph/recipes/altup_stack.hpp writes the training step only.
  require(model.altup_inputs == 0, error_code::unsupported, "model.altup_inputs",
          "is Gemma 3n's AltUp: generate() (a KV cache shared by the last num_kv_shared_layers layers) is not "
          "modelled for it; training is",
          model.altup_inputs);
}

// What the allocator's event walk (allocator/generate_events.hpp) describes besides: not sliding-window
// cache layers placed by no stated period (gpt-oss's layer_types other than the alternation), whose
// torch.cat moments the walk cannot place, which the estimate alone models.
constexpr bool generate_walk_covers(const model_spec& model) {
  return model.sliding_layers == 0 || model.sliding_period > 0;
}

// Padded prompts as modelled (training_spec::padded): Hugging Face's generate() under SDPA or eager
// attention. flash_attention_2 unpads q, k and v into new tensors (_upad_input, index_first_axis) in
// every forward, gpt-fast's generate.py pads nothing, and a model that builds its own mask (OPT,
// BLOOM, ALiBi) already holds one whatever the padding: none of them is described with padding.
constexpr void require_padded_prompts_modelled(const model_spec& model, const inference_spec& run) {
  if (!run.padded) return;
  require(run.loop == generate_loop::transformers, error_code::unsupported, "infer.padded",
          "applies to Hugging Face generate() only (gpt-fast's generate.py takes unpadded prompts)", 1);
  require(run.attention != attention_impl::flash, error_code::unsupported, "infer.padded",
          "is modelled under sdpa and eager attention, not under flash (a fused kernel asked for by name) nor "
          "flash_attention_2 (its unpadding copies, _upad_input)", 1);
  require(!model.builds_attention_mask && !model.alibi, error_code::unsupported, "infer.padded",
          "is not modelled for a model that builds its own attention mask (OPT, BLOOM, ALiBi): its mask is made "
          "whatever the padding", 1);
}

constexpr void require_generate_modelled(const model_spec& model) {
  require_generate_estimated(model);
  require(generate_walk_covers(model), error_code::unsupported, "model.sliding_period",
          "must be stated for the allocator walk of generate() of a model with sliding-window cache layers "
          "(gpt-oss's layer_types other than sliding and full alternating): estimate_inference models it, the "
          "walk does not",
          model.sliding_period);
}

// A DynamicCache of sliding-window layers (cache_utils.py@004999d9 DynamicSlidingWindowLayer) is what
// generate() is modelled with; Gemma 3's static "hybrid" cache layers are not.
constexpr void require_sliding_generate(const model_spec& model, const inference_spec& run) {
  if (model.sliding_layers == 0) return;
  require(!keeps_tuple_cache(model, run), error_code::unsupported, "infer.legacy_tuple_cache",
          "must be off for a model with sliding-window layers: a tuple cache does not have them",
          run.transformers_version);
  require(run.cache == kv_cache_kind::dynamic, error_code::unsupported, "infer.kv_cache",
          "must be dynamic for a model with sliding-window layers (model.sliding_layers > 0): static, sliding and "
          "quantized caches of such layers are not modelled",
          run.cache);
  require(model.sliding_layers < model.layers, error_code::unsupported, "model.sliding_layers",
          "must be below model.layers for generate(): a cache of sliding-window layers only is not modelled",
          model.sliding_layers);
}

// gpt-oss's generate() as modelled: transformers 4.55-4.57 (modeling_gpt_oss.py@00d4b3d2: the
// experts' bmm branch in eval mode) and 5.x (the experts interface's grouped_mm, batched_mm for the
// decoding steps on CUDA: graph/layers/mlp.hpp gpt_oss_experts_interface_without_grad), eager
// attention (an sdpa request runs eager), a DynamicCache with sliding-window layers
// (cache_utils.py@004999d9), weights in their load dtype (native) or MXFP4 experts.
constexpr void require_gpt_oss_generate(const model_spec& model, const inference_spec& run) {
  const bool gpt_oss = model.attention_sinks || model.expert_weight_copies ||
                       (model.sliding_layers > 0 && model.sliding_period == 0);
  require(run.weights != weight_format::mxfp4 || model.expert_weight_copies, error_code::unsupported, "infer.weights",
          "mxfp4 stores gpt-oss's 3-D experts: the model has none (model.expert_weight_copies is off)",
          run.weights);
  if (!gpt_oss) return require_sliding_generate(model, run);
  require(run.weights == weight_format::native || run.weights == weight_format::mxfp4, error_code::unsupported,
          "infer.weights",
          "must be native or mxfp4 for gpt-oss: its experts are nn.Parameters that no bitsandbytes, GPTQ or AWQ "
          "layer replaces",
          run.weights);
  // With triton >= 3.4 and the kernels package, Mxfp4GptOssExperts keeps the experts in MXFP4 and
  // mlp_forward routes through triton_kernels' routing and matmul_ogs (integrations/mxfp4.py@0189b1d0;
  // graph/layers/gpt_oss_mxfp4.hpp); without them, and on a CPU, transformers dequantizes the experts to
  // bf16 at load (quantizer_mxfp4.py@787b952b validate_environment: dequantize = True), a native bf16 run.
  require(run.weights != weight_format::mxfp4 || run.device == device_kind::cuda, error_code::unsupported,
          "infer.weights",
          "mxfp4 (the triton matmul_ogs experts) runs on CUDA only: on a CPU transformers dequantizes the "
          "experts to bf16 at load, so state native bf16 weights (--weights bf16 beside a config)",
          run.weights);
  require(run.attention != attention_impl::flash, error_code::unsupported, "infer.attention",
          "must be eager or sdpa (which runs eager) for gpt-oss (--attention eager or sdpa): the hub flash "
          "kernel with sinks is not modelled",
          run.attention);
  require(!keeps_tuple_cache(model, run), error_code::unsupported, "infer.legacy_tuple_cache",
          "must be off for gpt-oss at a release from 4.42: its model takes a DynamicCache, whose sliding-window "
          "layers a tuple cache does not have",
          run.transformers_version);
  require(run.cache == kv_cache_kind::dynamic, error_code::unsupported, "infer.kv_cache",
          "must be dynamic for gpt-oss: static, sliding and quantized caches of sliding-window layers are not "
          "modelled",
          run.cache);
  require(model.sliding_layers < model.layers, error_code::unsupported, "model.sliding_layers",
          "must be below model.layers for generate(): a cache of sliding-window layers only is not modelled",
          model.sliding_layers);
}

// The op graph that gives every weight matrix of `model` (one row, one sequence), the linears
// the checkpoint keeps in 16 bits marked: the same for every run of one model and checkpoint,
// so a plan builds it once for all its estimates. Modules differ by release only from
// transformers 5.0 (a MoE's experts and router become bare parameters: graph/layers/mlp.hpp
// stacked_expert_parameters, router_is_parameter), so an older release builds the 4.x layout.
constexpr model_graph weights_graph(const model_spec& model, lora_modules unquantized = 0,
                                    std::uint32_t transformers_version = 0) {
  training_spec t{.micro_batch = 1, .seq_len = 1, .dropout = false};
  t.unquantized = unquantized;
  t.transformers_version = transformers_version >= 500 ? transformers_version : 0;
  return build(model, t);
}

// gpt-fast's generate() and its model (inference/gpt_fast.hpp, included at the end of this file).
constexpr model_spec gpt_fast_model(const model_spec& m);
constexpr inference_result estimate_gpt_fast(const model_spec& model, const inference_spec& run, const graph& g);

// FP8Linear quantises its input in blocks of weight_block_size[1] columns and asserts they divide
// it (transformers integrations/finegrained_fp8.py @ 3c48befb act_quant: x.shape[-1] % block_size
// == 0): a model with a narrower or odd-sized linear input does not run.
constexpr void require_fp8_block_inputs(const graph& g, const inference_spec& run) {
  if (run.weights != weight_format::fp8_block) return;
  require(run.quant_scheme.block_in > 0, error_code::invalid_run, "infer.quant_scheme.block_in", "must be > 0",
          run.quant_scheme.block_in);
  for (std::size_t i = g.block_begin; i < g.block_end; ++i) {
    const op& o = g.ops[i];
    if (o.kind != op_kind::linear || o.role != param_role::matmul) continue;
    require(o.weight.cols % run.quant_scheme.block_in == 0, error_code::unsupported, "infer.weights",
            "fp8-block needs every block linear's input width to be a multiple of weight_block_size[1] "
            "(FP8Linear's act_quant asserts it); this input width is not",
            o.weight.cols);
  }
}

// estimate_inference over a validated model and run and the model's weights_graph.
constexpr inference_result estimate_generate(const model_spec& model, const inference_spec& run, const graph& g) {
  require_fp8_block_inputs(g, run);
  inference_result res{};
  res.parameter_count = parameter_count(g);
  // The weights graph is built at no stated release in fp32: the rotary tables a layer holds are
  // the run's, in the dtype the model was loaded in.
  const bytes tables_in_g = model.rotary_cache_per_layer ? rotary_table_buffers(model, dtype::fp32) : bytes{};
  const dtype load = precision_policy_of(forward_run(run, 1)).param;
  const bytes tables = (rotary_tables_per_layer(model, run.transformers_version) ? rotary_table_buffers(model, load)
                                                                                 : bytes{}) +
                       (mask_buffers_per_layer(model, run.transformers_version) ? mask_buffer_bytes(model, load)
                                                                                : bytes{});
  res.weight_bytes = inference_weight_bytes(g, run) + (g.buffers - tables_in_g) + tables;
  res.kv_bytes_per_token = kv_bytes_per_token(model, run);
  const auto generated = run.new_tokens == 0 ? std::uint64_t{0} : run.new_tokens - 1;  // tokens fed back
  res.kv_cache_bytes = kv_cache_bytes(model, run, checked_add(run.context, generated));

  const bytes weights = res.weight_bytes;
  const forward_result pre = forward_peak(g, model, run, weights, 0, run.context, bytes{});
  res.prefill = to_peak(g, run, model, inference_phase::prefill, pre.peak);
  res.decode = res.prefill;
  if (run.new_tokens > 1) {
    // The first decoding step still holds the prefill's logits; the last one the largest cache.
    // With two new tokens they are one step.
    const forward_result first =
        forward_peak(g, model, run, weights, run.context, 1, logits_kept(model, run, pre.returned));
    const forward_result last =
        generated == 1 ? first
                       : forward_peak(g, model, run, weights, checked_add(run.context, generated - 1), 1,
                                      logits_kept(model, run, first.returned));
    inference_breakdown decode = first.peak.total() < last.peak.total() ? last.peak : first.peak;
    // A quantized cache's last re-quantising step holds the most besides the last step.
    if (run.cache == kv_cache_kind::quantized && generated >= quantized_period(run)) {
      const std::uint64_t step = generated / quantized_period(run) * quantized_period(run);
      const forward_result requant = forward_peak(g, model, run, weights, checked_add(run.context, step - 1), 1,
                                                  logits_kept(model, run, first.returned));
      if (decode.total() < requant.peak.total()) decode = requant.peak;
    }
    res.decode = to_peak(g, run, model, inference_phase::decode, decode);
  }
  res.peak = res.decode.tensor > res.prefill.tensor ? res.decode : res.prefill;
  return res;
}

}  // namespace detail

namespace detail {

// Quantised checkpoints over experts held as bare nn.Parameters whose load leaves nothing to
// estimate (inference/weights.hpp expert_parameters_quantized counts the others).
constexpr void check_quantized_parameter_experts(const model_spec& model, const inference_spec& run) {
  training_spec layout{};
  layout.transformers_version = run.transformers_version;
  // A bitsandbytes checkpoint saved before 5.0 stores each expert's nn.Linear in 4 or 8 bits
  // (packed uint8 plus absmax, quant_map and quant_state; int8 plus SCB). 5.x's converters
  // (conversion_mapping.py@000c33fd) come before the quantizer's, so they stack those codes into
  // the 3-D 16-bit parameters, cast to the parameter's dtype (NF4's packed bytes in another shape),
  // and drop the statistics as unexpected keys (unslothai/unsloth-zoo PR #856). A checkpoint saved
  // by 5.x stores the experts as bitsandbytes left them, 16-bit, and loads.
  if (is_bitsandbytes(run.weights) && run.prequantized && run.saved_by_transformers < 500 &&
      graph_layers::experts_merged_at_load(model, layout))
    fail(error_code::unsupported, "config.transformers_version",
         "must be 5.0 or later for a pre-quantised bitsandbytes checkpoint of this MoE under transformers 5.x: a "
         "checkpoint saved before 5.0 (or one that does not say) holds per-expert quantised Linears, whose codes "
         "5.x's expert converters merge as 16-bit weights (NF4's packed bytes in another shape), dropping their "
         "quantisation statistics (the model does not load into anything worth estimating)",
         release_text(run.saved_by_transformers));
  if (!graph_layers::experts_parameters_in_every_release(model)) return;
  // FP8Linear replaces nn.Linear modules, and FP8Expert (integrations/finegrained_fp8.py@0095b976,
  // transformers PR #42654) the experts interface's [E, 2F, H] gate_up_proj and [E, H, F] down_proj
  // without biases, run on routed rows. gpt-oss's biased [E, H, 2F] experts, GraniteMoE's
  // input_linear and output_linear and Llama 4's bmm over every expert are none of them.
  require(run.weights != weight_format::fp8_block, error_code::unsupported, "infer.weights",
          "must not be fp8-block for gpt-oss, GraniteMoE or Llama 4: fine-grained FP8's FP8Linear and FP8Expert fit "
          "neither these experts' layout nor their forward (not modelled)",
          run.weights);
  // compressed-tensors quantises nn.Linear modules (its config groups target "Linear"), and 5.x
  // decompresses per-expert tensors only through a family's expert converters, which gpt-oss and
  // GraniteMoE have none of (conversion_mapping.py@000c33fd); Llama 4's experts are swapped for
  // per-expert Linears first (graph/layers/mlp.hpp experts_swapped_for_prequantized).
  require((run.weights != weight_format::ct_float && run.weights != weight_format::ct_int) ||
              graph_layers::experts_swapped_for_prequantized(model),
          error_code::unsupported, "infer.weights",
          "must not be compressed-tensors for gpt-oss or GraniteMoE: their experts are 3-D parameters, no "
          "compressed-tensors module replaces them and no converter takes a checkpoint's per-expert tensors",
          run.weights);
}

// estimate_inference's checks of a model and a run.
constexpr void check_inference(const model_spec& model, const inference_spec& run) {
  validate(model);
  validate(run);
  check_transformers_release(model, run.transformers_version);
  detail::require_generate_estimated(model);
  detail::require_gpt_oss_generate(model, run);
  detail::require_padded_prompts_modelled(model, run);
  // A quantised checkpoint's vision tower: counted in the compute dtype, which it is when the
  // checkpoint's modules_to_not_convert lists it (AWQ and GPTQ VLMs); bitsandbytes quantises its
  // Linear layers otherwise, whose bytes are not described yet.
  detail::require(model.idle_tower_parameters == 0 || run.weights == weight_format::native || run.unquantized_tower,
                  error_code::unsupported, "infer.weights",
                  "must be native for a model with a vision tower, unless the checkpoint keeps the tower and its projector "
                  "unquantised (its quantised bytes are not modelled yet)",
                  run.weights);
  // transformers' MLA attention caches every head's decompressed keys and values
  // (modeling_deepseek_v3.py@00b676f8 DeepseekV3Attention.forward: past_key_value.update(key_states,
  // value_states)), so generate() never holds the latent cache absorbed-MLA serving engines keep.
  detail::require(run.kv_lora_rank == 0, error_code::unsupported, "infer.kv_lora_rank",
                  "must be 0 for generate(): transformers caches MLA's decompressed keys and values per head "
                  "(describe the model's heads and head_dim); a latent cache (kv_bytes_per_token) is a serving "
                  "engine's, which is not modelled",
                  run.kv_lora_rank);
  // QuantizedCache is a Cache object generate() hands the model: the family needs Cache support
  // (_supports_quantized_cache, transformers 4.42+), not tuples.
  detail::require(run.cache != kv_cache_kind::quantized ||
                      (run.transformers_version >= 442 && !keeps_tuple_cache(model, run)),
                  error_code::unsupported, "infer.kv_cache",
                  "quantized needs transformers >= 4.42 and a model that takes a Cache object (not tuples)",
                  run.transformers_version);
  // GPTQ and AWQ replace nn.Linear modules only (optimum gptq/quantizer.py convert_model: get_layers'
  // Conv1D, Conv2d and nn.Linear under the blocks; integrations/awq.py@027f76a8 replace_with_awq_linear):
  // experts held as bare nn.Parameters (transformers 5's stacked experts, gpt-oss's, GraniteMoE's,
  // Llama 4's) get no quantised module, and the checkpoint's per-expert qweight, qzeros and scales
  // match neither them nor 5.x's expert converters (conversion_mapping.py@000c33fd merges
  // mlp.experts.*.gate_proj.weight only; quantizers/base.py@302dcb5e patches Llama 4's for
  // compressed-tensors and bitsandbytes only).
  if (run.weights == weight_format::gptq_4bit || run.weights == weight_format::awq_4bit) {
    training_spec layout{};
    layout.transformers_version = run.transformers_version;
    detail::require(!graph_layers::expert_parameters(model, layout), error_code::unsupported, "infer.weights",
                    "must not be GPTQ or AWQ for a model whose experts are bare nn.Parameters in this transformers "
                    "release (5.x's stacked experts, gpt-oss's, GraniteMoE's, Llama 4's): GPTQ and AWQ replace "
                    "nn.Linear modules only, so the checkpoint's per-expert quantised tensors load into nothing",
                    run.weights);
  }
  check_quantized_parameter_experts(model, run);
  require_gpt_fast_weights_loop(run);
  if (run.loop == generate_loop::gpt_fast) {
    detail::require(run.weights == weight_format::native || is_gpt_fast_weights(run.weights), error_code::unsupported,
                    "infer.weights",
                    "must be native, gptfast-int8 or gptfast-int4 with gpt-fast (its own quantize.py layers; "
                    "bitsandbytes, GPTQ, AWQ and MXFP4 are transformers')",
                    run.weights);
    if (run.weights == weight_format::gptfast_int4) require_gpt_fast_int4_shapes(model);
    detail::require(model.positions == position_kind::rotary && model.norm == norm_kind::rmsnorm &&
                        gated_mlp(model) && !model.tied_embeddings && model.experts == 0,
                    error_code::unsupported, "model.arch",
                    "gpt-fast's model.py is a LLaMA-style decoder (rotary, RMSNorm, SwiGLU, untied head, no experts)",
                    model.positions);
  }
}

// The weights graph an estimate of `run` reads: gpt-fast's model or the model itself. Only the
// loop decides it, so a plan's searches over batch and prompt share one.
constexpr model_graph inference_weights_graph(const model_spec& model, const inference_spec& run) {
  return weights_graph(run.loop == generate_loop::gpt_fast ? gpt_fast_model(model) : model, run.unquantized,
                       run.transformers_version);
}

// estimate_inference of a checked model and run (check_inference) over `weights`, the run's
// inference_weights_graph.
constexpr inference_result estimate_checked_inference(const model_spec& model, const inference_spec& run,
                                                      const graph& weights) {
  return run.loop == generate_loop::gpt_fast ? estimate_gpt_fast(model, run, weights)
                                             : estimate_generate(model, run, weights);
}

}  // namespace detail

constexpr inference_result estimate_inference(const model_spec& model, const inference_spec& run) {
  detail::check_inference(model, run);
  const model_graph built = detail::inference_weights_graph(model, run);
  return detail::estimate_checked_inference(model, run, built.stack());
}

}  // namespace memscale

#include "memscale/inference/gpt_fast.hpp"  // IWYU pragma: keep
