// memscale/allocator/generate_events.hpp: the tensors of a greedy generate() with a growing
// (Hugging Face DynamicCache) KV cache, in the order they are created and freed.
//
// - setup: the weights op by op (a tied head's own weight is created and dropped: tie_weights),
//   buffers, the prompt's token ids and generate()'s attention mask.
// - every forward pass (the prompt, then one position per sequence per new token) walks the op
//   graph of those rows under torch.no_grad: an op's output lives while the next op runs, its
//   temporaries (and what autograd would have saved) die with it; the block's input lives
//   until the block's last op (the residual). The output layer computes the last position's
//   logits only from transformers 4.45 (logits_to_keep; all positions before), and generate
//   keeps an fp32 copy of the last position until the next step's copy replaces it
//   (GenerationMixin._sample: outputs.logits[:, -1, :].to(copy=True, dtype=torch.float32)).
// - the cache: before transformers 5 the prompt's keys and values stay as the layer made them;
//   from 5 the cache copies them once the rotation has returned (copy_prompt below); each new token
//   makes every layer's key and value tensor anew with torch.cat([old, new], dim=-2) while the old
//   one is alive, then drops the old (cache_utils.py DynamicLayer.update).
// - Hugging Face's RMSNorm, apply_rotary_pos_emb and SDPA's additive copy of a padded batch's mask
//   as their code makes them (with_temporaries below), the final norm before the head. Every new tensor is
//   one position larger than every freed one: the case that fragments most. The token ids and
//   the attention mask grow the same way (torch.cat in _sample and _update_model_kwargs_for_generation).
// - a quantized cache (QuantizedCache): packed keys and values per layer, the residual windows
//   growing by torch.cat, the dequantised and concatenated copies of the layer being updated
//   (quantized_update below).
// - gpt-fast's generate() (inference/gpt_fast.hpp, gpt-fast@32971d31): the static cache, freqs_cis and
//   the causal mask made once by setup_caches; each forward writes the new keys and values into
//   the cache in place and attends over all of it through repeat_interleave copies (for every
//   query head, also at a ratio of 1); the decoding steps on the math kernel, whose scaled copy of
//   the keys lives while the scores are computed; the logits of every position until sample()
//   returns; each step's probabilities cloned into new_probs and kept. Its weight-only int8 and
//   int4 layers (inference/gpt_fast_weights.hpp) as stored, and each call's copies (gpt_fast_linear).
// - Hugging Face's StaticCache (static_update below): each layer's keys and values allocated once, at
//   the cache's whole length, when the layer first updates; every forward attends over all of it
//   with a mask the base model makes, and under GQA from 5.0 through repeat_kv copies of it.
// - gpt-oss (inference/generate_peak.hpp require_gpt_oss_generate): the forward graph's sink attention and
//   experts as the estimate counts them, each sliding layer placed by the model's period, the attention
//   weights its decoder layer binds until the MLP returns held as the softmax's own tensor (frame_),
//   MXFP4 experts as blocks and scales (mxfp4_stored below).
// Not walked (an error says so): the sliding-window cache, transformers' quantised weights but
// gpt-oss's MXFP4, sliding layers placed by no period.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "memscale/allocator/events.hpp"
#include "memscale/allocator/step_events.hpp"
#include "memscale/graph/forward_liveness.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/graph/layers/embeddings.hpp"
#include "memscale/inference/generate_peak.hpp"
#include "memscale/inference/gpt_fast_weights.hpp"
#include "memscale/inference/kv_cache.hpp"
#include "memscale/inference/spec.hpp"
#include "memscale/inference/weights.hpp"
#include "memscale/quant_format.hpp"
#include "memscale/graph/model_graph.hpp"

namespace memscale::allocator {

namespace detail {

template <class Sink, std::size_t IdCapacity>
class generate_walker {
 public:
  constexpr generate_walker(const model_spec& m, const inference_spec& r, Sink& sink) : m_(m), r_(r), events_(sink) {
    using memscale::detail::require;
    memscale::detail::require_generate_modelled(m);
    memscale::detail::require_padded_prompts_modelled(m, r);
    memscale::detail::require_gpt_fast_weights_loop(r);
    require(r.cache != kv_cache_kind::sliding_window || gpt_fast_, error_code::unsupported, "infer.kv_cache",
            "the allocator's generate() stream covers the dynamic, the quantized and the static cache, not the "
            "sliding-window one",
            r.cache);
    require((r.weights == weight_format::native || r.weights == weight_format::mxfp4 ||
             memscale::detail::is_gpt_fast_weights(r.weights)) &&
                r.kv_lora_rank == 0,
            error_code::unsupported, "infer.weights",
            "the allocator's generate() stream covers unquantised weights (and gpt-fast's int8 and int4 layers, "
            "gpt-oss's MXFP4 experts) and ordinary attention",
            r.weights);
    require(m.layers <= kv_.size(), error_code::unsupported, "model.layers", "exceeds the generate() stream's capacity",
            m.layers);
    for (auto& layer : kv_) layer = {no_tensor, no_tensor};
    for (auto& layer : previous_) layer = {no_tensor, no_tensor};
    for (auto& layer : packed_) layer = {no_tensor, no_tensor};
  }

  constexpr void walk() {
    const training_spec weights_run = memscale::detail::forward_run(r_, 1);
    const model_graph built = build(gpt_fast_ ? memscale::detail::gpt_fast_model(m_) : m_, weights_run);
    const graph& gw = built.stack();
    events_.enter(0, moment::setup);
    setup(gw);
    if (gpt_fast_) gpt_fast_setup();
    events_.enter(1, moment::prefill);
    forward(r_.context, 0);
    if (r_.new_tokens > 1) {
      events_.enter(1, moment::decode);
      std::uint64_t done = r_.context;
      for (std::uint64_t t = 1; t < r_.new_tokens; ++t, ++done) {
        if (!gpt_fast_) {
          grow(ids_, storage(dtype::int64, memscale::detail::checked_mul(r_.batch, done + 1)).value);
          grow(mask_, storage(dtype::int64, memscale::detail::checked_mul(r_.batch, done + 1)).value);
        }
        forward(1, done);
      }
    }
  }

 private:
  constexpr std::uint32_t alloc(std::uint64_t size) { return events_.alloc(size); }
  // A layer's slot in the per-layer tables (at most 256 layers: checked in the constructor).
  static constexpr std::size_t slot_of(std::uint64_t layer) { return static_cast<std::size_t>(layer); }
  constexpr void free(std::uint32_t& id) { events_.free(id); }
  // torch.cat([old, new]): the larger tensor is made while the old one lives.
  constexpr void grow(std::uint32_t& id, std::uint64_t size) {
    std::uint32_t old = id;
    id = alloc(size);
    free(old);
  }

  // The weights op by op, experts as the release stores them: one tensor per expert, or stacked
  // (transformers 5's experts interface: one [E, 2F, H] gate_up and one [E, H, F] down tensor,
  // allocator/step_events.hpp layout_of).
  constexpr void setup(const graph& g) {
    std::array<stack_role, graph_capacity> roles{};
    find_stacked_experts(g, roles);
    for (std::size_t i = 0; i < g.size; ++i) {
      const op& o = g.ops[i];
      const std::uint64_t repeats = repeats_of(g, i);
      const stored_layout n = layout_of(g, roles, i);
      for (std::uint64_t l = 0; l < repeats; ++l) {
        if (memscale::detail::gpt_fast_quantized_op(o, r_)) {
          gpt_fast_stored(o);
          continue;
        }
        if (memscale::detail::mxfp4_experts_op(g, i, r_)) {
          mxfp4_stored(o, n);
          continue;
        }
        if (o.weight.rows != 0 && !o.borrows_weight)
          for (std::uint64_t c = 0; c < n.weight_tensors; ++c)
            alloc(storage(r_.compute, n.weight / n.weight_tensors).value);
        if (o.bias.rows != 0)
          for (std::uint64_t c = 0; c < n.bias_tensors; ++c) alloc(storage(r_.compute, n.bias / n.bias_tensors).value);
      }
      if (o.weight.rows != 0 && o.borrows_weight) {
        std::uint32_t copy = alloc(storage(r_.compute, o.weight.largest()).value);  // tie_weights drops it
        free(copy);
      }
    }
    if (gpt_fast_) return;  // its buffers are setup_caches' (gpt_fast_setup)
    if (g.buffers.value != 0)
      for (std::uint64_t l = 0; l < g.block_repeats; ++l) alloc(g.buffers.value / g.block_repeats);
    ids_ = alloc(storage(dtype::int64, memscale::detail::checked_mul(r_.batch, r_.context)).value);
    mask_ = alloc(storage(dtype::int64, memscale::detail::checked_mul(r_.batch, r_.context)).value);
  }

  // One forward pass over `rows` positions per sequence with `done` positions cached: the ops of
  // the forward graph the estimate walks (inference/generate_peak.hpp forward_moments_of).
  constexpr void forward(std::uint64_t rows, std::uint64_t done) {
    using memscale::detail::checked_mul;
    const std::uint64_t n = checked_mul(r_.batch, rows);
    const std::uint64_t keys = gpt_fast_  ? gpt_fast_cache_length(m_, r_)
                               : static_ ? static_cache_length(r_)
                                         : memscale::detail::checked_add(done, rows);
    std::uint32_t positions = alloc(storage(dtype::int64, gpt_fast_ ? rows : n).value);
    const graph g = gpt_fast_ ? memscale::detail::forward_graph(memscale::detail::gpt_fast_model(m_),
                                                                gpt_fast_step(done), rows, keys)
                              : memscale::detail::forward_graph(m_, r_, rows, keys);
    // What the base model binds through its blocks (embeddings' lookups, rotary tables, eager's
    // mask), in the order it makes them; the stream its first block reads.
    std::array<std::uint32_t, graph_capacity> held{};
    std::size_t held_count = 0;
    std::uint32_t stream = no_tensor;
    if (m_.leading_dense_layers > 0) {
      if (workspace_ == no_tensor && r_.device == device_kind::cuda) workspace_ = alloc(r_.blas_workspace.value);
      prologue(g, rows, done, held, held_count, stream);
    } else {
      for (std::size_t i = 0; i < g.block_begin; ++i)
        if (freed_after(g, i) >= g.block_end && !g.ops[i].kv_cached) held[held_count++] = alloc(g.ops[i].out.value);
      // The first block reads the held token lookup itself, or a tensor made from it.
      if (gpt_fast_ || !graph_layers::stream_is_token_lookup(m_)) stream = alloc(g.ops[g.block_begin].out.value);
      if (workspace_ == no_tensor && r_.device == device_kind::cuda) workspace_ = alloc(r_.blas_workspace.value);
    }
    const bytes static_mask_bytes = memscale::detail::static_cache_mask(m_, r_, rows);
    std::uint32_t static_mask = static_mask_bytes.value != 0 ? alloc(static_mask_bytes.value) : no_tensor;
    for (std::uint64_t l = m_.leading_dense_layers; l < m_.layers; ++l) layer(g, l, rows, done, stream);
    free(static_mask);
    // The final norm, its temporaries included: hidden_states = self.norm(hidden_states) drops the
    // last block's output once the norm's is made (modeling_llama.py@v5.17.0 LlamaModel.forward).
    for (std::size_t i = g.block_end; i < memscale::detail::head_begin(g); ++i) {
      const op& o = g.ops[i];
      if (o.kind == op_kind::stream) continue;
      std::uint32_t made = no_tensor;
      with_temporaries(o, [&] { made = alloc(o.out.value); });
      free(stream);
      stream = made;
    }
    while (held_count > 0) free(held[--held_count]);
    // The output layer: each of its ops reads the one before, which the next rebinds. Then what
    // generate keeps until the next step replaces it: from 4.45 an fp32 copy of the last
    // position; before, the logits forward() returned (`outputs` stays bound).
    std::uint32_t returned = no_tensor;
    for (std::size_t i = memscale::detail::head_begin(g); i < g.size; ++i) {
      std::uint32_t made = no_tensor;
      const auto make = [&] { made = alloc(g.ops[i].out.value); };
      if (memscale::detail::gpt_fast_quantized_op(g.ops[i], r_))
        gpt_fast_linear(g.ops[i], make);
      else
        make();
      free(returned);
      returned = made;
      if (gpt_fast_) free(stream);  // x = self.norm(x) drops the last block's output
    }
    free(stream);  // the final norm's output, bound until forward() returns
    if (gpt_fast_) {
      gpt_fast_sample(returned, done);
      free(positions);
      return;
    }
    std::uint32_t kept = returned;
    if (r_.transformers_version >= 445) {
      kept = alloc(memscale::detail::logits_kept(m_, r_, g.ops[g.size - 1].out).value);
      free(returned);
    }
    free(positions);
    free(kept_logits_);
    kept_logits_ = kept;
    // Tuple caches: the previous step's tuples die when generate() rebinds model_kwargs and
    // model_inputs, after this forward returned.
    for (auto& layer : previous_)
      for (auto& id : layer) free(id);
  }

  // DeepSeek's leading dense layers are ops of the prologue (graph/recipes/decoder_stack.hpp
  // generation_forward): the prologue is walked op by op as a layer is. What the base model binds
  // through the blocks stays bound (`held`), the last op's output is the first block's stream, and
  // the keys and values the dense layers cache fill the first layers' slots in order.
  constexpr void prologue(const graph& g, std::uint64_t rows, std::uint64_t done,
                          std::array<std::uint32_t, graph_capacity>& held, std::size_t& held_count,
                          std::uint32_t& stream) {
    const std::size_t end = g.block_begin;
    std::uint64_t per_layer = 0;
    for (std::size_t i = g.block_begin; i < g.block_end; ++i) per_layer += g.ops[i].kv_cached ? 1 : 0;
    std::array<std::uint32_t, graph_capacity> ids{};
    std::uint64_t cached_seen = 0;
    for (std::size_t k = 0; k < end; ++k) {
      const op& o = g.ops[k];
      ids[k] = no_tensor;
      const auto make = [&] {
        if (o.kv_cached && per_layer > 0) {
          cache_update(cached_seen / per_layer, rows, done, cached_seen % per_layer, per_layer);
          ++cached_seen;
        } else if (freed_after(g, k) >= g.block_end) {
          held[held_count++] = alloc(o.out.value);
        } else {
          ids[k] = alloc(o.out.value);
        }
      };
      with_temporaries(o, make);
      for (std::size_t j = 0; j < k; ++j)
        if (freed_after(g, j) == k) free(ids[j]);
    }
    stream = ids[end - 1];
    ids[end - 1] = no_tensor;
    for (std::size_t j = 0; j < end; ++j) free(ids[j]);  // read by the first block: freed as its stream would be
  }

  // One decoder layer: the no_grad walk of the forward graph's block (graph/forward_liveness.hpp)
  // as tensors. Each output is made when its op runs and freed after its last reader; an op's
  // temporaries live while it runs; the block's input (`stream`) is freed after the residual add
  // that reads it last, and its output becomes `stream`. The keys and values a cache takes
  // (op::kv_cached) go to the cache instead.
  constexpr void layer(const graph& g, std::uint64_t l, std::uint64_t rows, std::uint64_t done, std::uint32_t& stream) {
    const std::size_t begin = g.block_begin;
    const std::size_t count = g.block_end - begin;
    std::array<std::uint32_t, graph_capacity> ids{};
    std::uint64_t cached_seen = 0;
    std::uint64_t cached_ops = 0;
    std::size_t attended = begin;  // the last reader of the cached keys and values
    bool scaled_keys_made = false;
    bool copy_now = false;
    for (std::size_t i = begin; i < g.block_end; ++i) {
      cached_ops += g.ops[i].kv_cached ? 1 : 0;
      if (g.ops[i].kv_cached && freed_after(g, i) > attended) attended = freed_after(g, i);
    }
    for (std::size_t k = 0; k < count; ++k) {
      const op& o = g.ops[begin + k];
      ids[k] = no_tensor;
      // Made before the kernel's output and freed with its temporaries.
      std::array<std::uint32_t, 3> attending{no_tensor, no_tensor, no_tensor};
      if (static_ && o.kind == op_kind::attention && !scaled_keys_made) {
        scaled_keys_made = true;
        static_attention_copies(rows, attending);
      }
      const auto make = [&] {
        if (k == 0) {
          ids[k] = stream;
        } else if (o.kv_cached && gpt_fast_) {
          ids[k] = gpt_fast_attended(o);
        } else if (o.kv_cached && static_) {
          ids[k] = static_update(l, rows, done, o, ++cached_seen == cached_ops);
        } else if (o.kv_cached && done == 0 && copies_prompt_) {
          ids[k] = alloc(o.out.value);
          prompt_made_[static_cast<std::size_t>(cached_seen)] = k;
          copy_now = ++cached_seen == cached_ops;
        } else if (o.kv_cached) {
          cache_update(l, rows, done, cached_seen++, cached_ops);
        } else {
          ids[k] = alloc(o.out.value);
        }
        if (gpt_fast_ && o.kind == op_kind::attention && !scaled_keys_made) {
          scaled_keys_made = true;
          gpt_fast_scaled_keys(done);
        }
      };
      frame_.follow(frame_locals_bytes(o), events_);
      with_temporaries(o, make);
      for (auto& id : attending) free(id);
      // An output the next op's frame binds as a local (gpt-oss's attention weights, bound until the
      // MLP returns: graph/layers/attention.hpp sink_attention_without_grad) stays the same tensor.
      const std::uint64_t next_locals = k + 1 < count ? frame_locals_bytes(g.ops[begin + k + 1]) : 0;
      for (std::size_t j = 0; j <= k; ++j) {
        if (freed_after(g, begin + j) != begin + k || ids[j] == no_tensor) continue;
        if (next_locals > frame_.held() && next_locals - frame_.held() == g.ops[begin + j].out.value)
          frame_.adopt(ids[j], g.ops[begin + j].out.value);
        else
          free(ids[j]);
      }
      // The cache's update runs once the rotation has returned and its inputs are dropped
      // (the 5.17 frames: q_proj's and k_proj's outputs freed before the copies).
      if (copy_now) copy_prompt(l, ids, cached_ops);
      copy_now = false;
      if (begin + k == attended)
        for (auto& id : returned_) free(id);  // a quantized cache's keys and values, once attended
    }
    frame_.follow(0, events_);
    stream = ids[count - 1];
  }

  // QuantizedCache.update (cache_utils.py v4.45), at the layer's last cached op; the quantities
  // are inference/kv_cache.hpp's and generate_peak.hpp quantized_update_of's. Prefill: the
  // prompt's keys and values are quantised (two working copies in the compute dtype each) and
  // handed back as they are. Decoding: both dequantised, the concatenations [dequantised,
  // residual, new] made, then either everything re-quantised (old packed tensors and windows
  // dropped after both) or the new token torch.cat'ed to the windows; the dequantised tensors die
  // on return, the concatenations once the attention has read them.
  constexpr void quantized_update(std::uint64_t layer, std::uint64_t rows, std::uint64_t done) {
    using memscale::detail::checked_add;
    const std::uint64_t total = checked_add(done, rows);
    const auto half = [&](std::uint64_t positions) { return kv_layer_half_bytes(m_, r_, positions).value; };
    const auto packed = [&](std::uint64_t positions) {
      return quantized_kv_bytes(r_, kv_layer_half_elements(m_, r_, positions)).value;
    };
    auto quantize = [&](std::uint32_t& slot) {
      std::uint32_t working = alloc(half(total) * 2);
      free(working);
      std::uint32_t old = slot;
      slot = alloc(packed(total));
      return old;
    };
    if (done == 0) {
      returned_[0] = alloc(half(total));
      returned_[1] = alloc(half(total));
      for (auto& slot : packed_[slot_of(layer)]) quantize(slot);
      return;
    }
    const quantized_split before = split_quantized(r_, done);
    std::uint32_t dk = alloc(half(before.packed));
    std::uint32_t dv = alloc(half(before.packed));
    returned_[0] = alloc(half(total));
    returned_[1] = alloc(half(total));
    if (requantizes(r_, done)) {
      std::array<std::uint32_t, 2> old{quantize(packed_[slot_of(layer)][0]), quantize(packed_[slot_of(layer)][1])};
      for (auto& id : old) free(id);
      for (auto& id : kv_[slot_of(layer)]) free(id);
    } else {
      for (auto& id : kv_[slot_of(layer)]) grow(id, half(before.residual + 1));
    }
    free(dk);
    free(dv);
  }

  // An op's output (`make` allocates it, or hands it to the cache) and its temporaries, in the
  // order its code makes them (graph.hpp forward_temporaries).
  template <class Make>
  constexpr void with_temporaries(const op& o, Make make) {
    const std::uint64_t out = o.out.value;
    if (memscale::detail::gpt_fast_quantized_op(o, r_)) return gpt_fast_linear(o, make);
    switch (o.temporaries) {
      case forward_temporaries::pieces:
        make();
        temporaries(o);
        return;
      case forward_temporaries::rms_norm_upcast: {
        // gpt-fast's RMSNorm (model.py@32971d31): x.float(); x * x, freed after its mean; the
        // product by rsqrt; .type_as(x), after which the product is dropped; the weight product.
        // LlamaRMSNorm (modeling_llama.py@v5.17.0, and its copies) binds the product to
        // hidden_states until it returns self.weight * hidden_states.to(input_dtype): the cast and
        // the product die after the output (the 5.17 H100 frames: +128 +128 -128 +128 -128 +64 +64
        // -64 -128 MiB per norm of Llama-2-7B at 4 x 2048).
        std::uint32_t upcast = alloc(out * 2);
        std::uint32_t squares = alloc(out * 2);
        free(squares);
        std::uint32_t product = alloc(out * 2);
        free(upcast);
        std::uint32_t cast = alloc(out);
        if (gpt_fast_) free(product);
        make();
        free(cast);
        free(product);
        return;
      }
      case forward_temporaries::rms_norm_fp32: {
        std::uint32_t squares = alloc(out);
        free(squares);
        std::uint32_t product = alloc(out);
        make();
        free(product);
        return;
      }
      case forward_temporaries::mask_before_output: {
        // scaled_dot_product_attention converts the bool mask (convert_boolean_attn_mask) before
        // the kernel runs; the kernel's output and log-sum-exp follow; the copy dies with the call.
        std::uint32_t additive = alloc(o.fwd_temp.value - frame_locals_bytes(o));
        make();
        std::uint32_t statistics = alloc(o.extra_saved.value);
        free(additive);
        free(statistics);
        return;
      }
      case forward_temporaries::rotary_half: {
        // apply_rotary_pos_emb (modeling_llama.py@v5.17.0): x * cos; rotate_half's -x2 (half the
        // size) and its cat, the negation freed after the cat; rotate_half(x) * sin, the cat freed
        // after it; the sum (the output); then both products (the 5.17 H100 frames: +64 +32 +64
        // -32 +64 -64 +64 -64 -64 MiB per q of Llama-2-7B at 4 x 2048).
        std::uint32_t by_cos = alloc(out);
        std::uint32_t negated = alloc(out / 2);
        std::uint32_t rotated = alloc(out);
        free(negated);
        std::uint32_t by_sin = alloc(out);
        free(rotated);
        make();
        free(by_cos);
        free(by_sin);
        return;
      }
      case forward_temporaries::rotary_stacked: {
        // gpt-fast's apply_rotary_emb (model.py@32971d31): x.float() (a copy unless fp32); the real
        // part's two products and difference; the imaginary part's two products and sum;
        // torch.stack of both; .type_as(x) (a copy unless fp32, else the stack is the output).
        const bool upcast = r_.compute != dtype::fp32;
        const std::uint64_t half = upcast ? out : out / 2;
        std::uint32_t copy = upcast ? alloc(half * 2) : no_tensor;
        std::array<std::uint32_t, 3> part{};
        std::array<std::uint32_t, 2> sums{};
        for (auto& sum : sums) {
          for (auto& id : part) id = alloc(half);
          free(part[0]);
          free(part[1]);
          sum = part[2];
        }
        if (!upcast) {
          make();
          for (auto& sum : sums) free(sum);
          return;
        }
        std::uint32_t stacked = alloc(half * 2);
        for (auto& sum : sums) free(sum);
        if (o.kv_cached) {
          // The rotated keys are copied into the static cache and dropped when update() rebinds k.
          std::uint32_t cast = alloc(out);
          free(stacked);
          free(copy);
          free(cast);
          make();
          return;
        }
        make();
        free(stacked);
        free(copy);
        return;
      }
    }
    // Hugging Face's LlamaRMSNorm makes the same tensors (the fp32 copy, x^2, the product, its cast:
    // 128, 128, 128, 64 MiB in the TinyLlama history) but its walk stays one block: replayed alone,
    // without the attention's per-layer tensors that are not walked yet (docs/allocator.md), it
    // moved Llama-2-7B generate() b8 from -2.1% to -11% reserved.
    make();
    temporaries(o);
  }

  // An op's temporaries live while it runs. Temporaries that are a whole number of the op's output
  // are an elementwise chain's products, separate tensors of that size (apply_rotary_pos_emb's
  // q*cos, the cat of rotate_half and its *sin: graph/layers/attention.hpp rotary_temporaries),
  // which best fit places apart; others are one block. The frame's locals are held apart (frame_).
  constexpr void temporaries(const op& o) {
    std::uint64_t left = o.fwd_temp.value - frame_locals_bytes(o);
    if (o.out.value == 0 || left == 0 || left % o.out.value != 0) {
      std::uint32_t block = alloc(left + o.extra_saved.value);
      free(block);
      return;
    }
    std::array<std::uint32_t, 4> ids{};
    std::size_t n = 0;
    while (left > 0) {
      const std::uint64_t size = n + 2 == ids.size() ? left : o.out.value;  // at most three pieces
      ids[n++] = alloc(size);
      left -= size;
    }
    if (o.extra_saved.value > 0) ids[n++] = alloc(o.extra_saved.value);
    for (std::size_t i = 0; i < n; ++i) free(ids[i]);
  }

  // From transformers 5 (inference/generate_peak.hpp copies_prompt): at the layer's last cached op
  // the cache copies the prompt's keys and values; rebinding key_states and value_states drops the
  // layer's own tensors, except the fused projection's output, which the queries still view until
  // the attention is done (freed then as any other tensor).
  constexpr void copy_prompt(std::uint64_t layer, std::array<std::uint32_t, graph_capacity>& ids, std::uint64_t count) {
    kv_[slot_of(layer)][0] = alloc(kv_layer_half_bytes(m_, r_, r_.context).value);
    kv_[slot_of(layer)][1] = alloc(kv_layer_value_bytes(m_, r_, r_.context).value);
    for (std::uint64_t i = 0; i < count; ++i) {
      const bool rotated_keys = i == 1 && m_.positions == position_kind::rotary;
      if (!m_.fused_qkv || rotated_keys) free(ids[prompt_made_[static_cast<std::size_t>(i)]]);
    }
  }

  // DynamicLayer.update, at the block's `index`-th of `count` cached ops. The prompt's keys and
  // values are kept as the layer made them: the value tensor first (with a fused projection its
  // whole output, of which the values are a view), then the rotated keys (none apart when the
  // keys are a view of the same output). Each new token torch.cat()s: the larger tensor is made
  // while the old one lives.
  constexpr void cache_update(std::uint64_t layer, std::uint64_t rows, std::uint64_t done, std::uint64_t index,
                              std::uint64_t count) {
    if (r_.cache == kv_cache_kind::quantized) {
      if (index + 1 == count) quantized_update(layer, rows, done);
      return;
    }
    if (done == 0) {
      if (index == 0)
        kv_[slot_of(layer)][1] = alloc(memscale::detail::prefill_value_storage(m_, r_).value);
      else
        kv_[slot_of(layer)][0] = alloc(kv_layer_half_bytes(m_, r_, r_.context).value);
      if (count == 1) kv_[slot_of(layer)][0] = no_tensor;
      return;
    }
    std::uint32_t& slot = kv_[slot_of(layer)][index == 0 ? 0 : 1];
    // A sliding layer's torch.cat of its window - 1 kept positions and the new one (inference/kv_cache.hpp
    // sliding_layer_positions); the cat frees the prompt's storage its view held after the prefill.
    const std::uint64_t total = memscale::detail::checked_add(done, rows);
    const std::uint64_t positions = is_sliding_layer(m_, layer) ? sliding_layer_positions(m_, r_, total) : total;
    const std::uint64_t size =
        (index == 0 ? kv_layer_half_bytes(m_, r_, positions) : kv_layer_value_bytes(m_, r_, positions)).value;
    if (!tuple_cache_) {
      grow(slot, size);
      return;
    }
    // A tuple cache: the old tensor stays referenced by the previous step's tuples.
    previous_[slot_of(layer)][index == 0 ? 0 : 1] = slot;
    slot = alloc(size);
  }

  // StaticLayer.update (cache_utils.py@004999d9) at the layer's `last` cached op: at the first update
  // (the prefill) lazy_initialization's torch.zeros of the keys and then the values at the cache's
  // length, while the new keys and values (the graph's ops before) are bound; index_copy_ writes
  // them in place, so no step allocates cache again. The graph's cached op is what the attention
  // reads, the cache itself: nothing new, but where the graph attends over the new positions only
  // (a cache as long as the prompt), whose tensor it then is.
  constexpr std::uint32_t static_update(std::uint64_t layer, std::uint64_t rows, std::uint64_t done, const op& o,
                                        bool last) {
    const std::uint64_t length = static_cache_length(r_);
    if (last && done == 0) {
      kv_[slot_of(layer)][0] = alloc(kv_layer_half_bytes(m_, r_, length).value);
      kv_[slot_of(layer)][1] = alloc(kv_layer_value_bytes(m_, r_, length).value);
    }
    return length == rows ? alloc(o.out.value) : no_tensor;
  }

  // What SDPA's call over a static cache makes besides the graph's attention op (inference/generate_peak.hpp
  // static_attending_of): from 5.0, the mask turns enable_gqa off, so repeat_kv copies the keys and values
  // of the whole cache to every query head; torch converts the boolean mask to the query's dtype.
  constexpr void static_attention_copies(std::uint64_t rows, std::array<std::uint32_t, 3>& ids) {
    const memscale::detail::static_attending a = memscale::detail::static_attending_of(m_, r_, rows);
    if (a.repeated.value != 0) {
      ids[0] = alloc(a.repeated.value);
      ids[1] = alloc(a.repeated.value);
    }
    if (a.float_mask.value != 0) ids[2] = alloc(a.float_mask.value);
  }

  // A gpt-fast int8 or int4 layer as _load_model's model.to(device) moves it: its buffers in
  // registration order (quantize.py@32971d31: weight, then scales or scales_and_zeros).
  constexpr void gpt_fast_stored(const op& o) {
    const bool int8 = r_.weights == weight_format::gptfast_int8;
    const std::uint64_t out = o.weight.rows;
    const std::uint64_t k = int8 ? o.weight.cols : memscale::detail::gpt_fast_int4_in_features(o.weight.cols, r_.group_size);
    const std::uint64_t scales = int8 ? storage(r_.compute, out).value
                                      : storage(dtype::bf16, memscale::detail::checked_mul(k / r_.group_size, out, 2)).value;
    const std::uint64_t whole = memscale::detail::gpt_fast_linear_bytes(out, o.weight.cols, r_).value;
    for (std::uint64_t c = 0; c < o.weight.count; ++c) {
      alloc(whole - scales);
      alloc(scales);
    }
    if (o.bias.rows != 0) alloc(storage(r_.compute, o.bias.elements()).value);
  }

  // gpt-oss's 3-D experts under MXFP4 as Mxfp4GptOssExperts holds them (inference/weights.hpp
  // mxfp4_experts_op): each projection's uint8 blocks, then its uint8 scales (quant_format.hpp
  // mxfp4_bytes), then its bias in the compute dtype as the estimate counts it.
  constexpr void mxfp4_stored(const op& o, const stored_layout& n) {
    const std::uint64_t rows = n.weight / n.weight_tensors / o.weight.cols;
    const bytes scales = memscale::detail::mxfp4_scale_bytes(rows, o.weight.cols);
    for (std::uint64_t c = 0; c < n.weight_tensors; ++c) {
      alloc((memscale::detail::mxfp4_bytes(rows, o.weight.cols) - scales).value);
      alloc(scales.value);
    }
    if (o.bias.rows != 0)
      for (std::uint64_t c = 0; c < n.bias_tensors; ++c) alloc(storage(r_.compute, n.bias / n.bias_tensors).value);
  }

  // One call of a gpt-fast int8 or int4 layer (`make` allocates its output). int8
  // (WeightOnlyInt8Linear.forward): self.weight.to(dtype), F.linear's product, the dequantized weight
  // dropped when F.linear returns, `* self.scales` (the output), the product dropped. int4
  // (WeightOnlyInt4Linear.forward): F.pad's padded input when in_features was padded, then
  // _weight_int4pack_mm's output.
  template <class Make>
  constexpr void gpt_fast_linear(const op& o, Make make) {
    const std::uint64_t out_features = o.weight.rows;
    const std::uint64_t tokens = o.out.value / storage(r_.compute, out_features).value;
    if (r_.weights == weight_format::gptfast_int8) {
      std::uint32_t dequantized = alloc(storage(r_.compute, memscale::detail::checked_mul(out_features, o.weight.cols)).value);
      std::uint32_t product = alloc(o.out.value);
      free(dequantized);
      make();
      free(product);
      return;
    }
    const bytes padded = memscale::detail::gpt_fast_linear_temporary(o, r_, tokens);
    std::uint32_t input = padded.value != 0 ? alloc(padded.value) : no_tensor;
    make();
    free(input);
  }

  // gpt-fast (inference/gpt_fast.hpp). The forward a step runs: the decoding steps on the math
  // kernel only (generate.py decode_n_tokens: sdp_kernel(enable_math=True)), the prefill on the run's.
  constexpr inference_spec gpt_fast_step(std::uint64_t done) const {
    inference_spec step = r_;
    if (done > 0) step.attention = attention_impl::sdpa_math;
    return step;
  }

  // setup_caches (model.py@32971d31): per layer the KVCache's two buffers (torchao's int8 cache:
  // int8 codes and a per-position scale in the model dtype, AffineQuantizedKVCache@1f66d47), then
  // freqs_cis (precompute_freqs_cis: the (block_size, head_dim / 2, 2) fp32 stack cast to the model
  // dtype) and torch.tril of a (M, M) torch.ones; then generate()'s int32 `empty` of every position
  // and the prompt repeated over the batch.
  constexpr void gpt_fast_setup() {
    using memscale::detail::checked_mul;
    const std::uint64_t length = gpt_fast_cache_length(m_, r_);
    const std::uint64_t elements = kv_layer_half_elements(m_, r_, length);
    for (std::uint64_t l = 0; l < m_.layers; ++l)
      for (int half = 0; half < 2; ++half) {
        alloc(storage(r_.kv, elements).value);
        if (r_.kv == dtype::int8) alloc(storage(r_.compute, checked_mul(r_.batch, kv_heads_of(m_), length)).value);
      }
    const std::uint64_t block = m_.context_length != 0 ? m_.context_length : length;
    std::uint32_t stacked = alloc(storage(dtype::fp32, checked_mul(block, head_dim_of(m_))).value);
    alloc(storage(r_.compute, checked_mul(block, head_dim_of(m_))).value);
    free(stacked);
    std::uint32_t ones = alloc(storage(dtype::boolean, checked_mul(length, length)).value);
    alloc(storage(dtype::boolean, checked_mul(length, length)).value);
    free(ones);
    constexpr std::uint64_t int32_bytes = 4;  // the prompt's torch.int (generate.py encode_tokens)
    ids_ = alloc(checked_mul(r_.batch, memscale::detail::checked_add(r_.context, r_.new_tokens), int32_bytes));
    prompt_ = alloc(checked_mul(r_.batch, r_.context, int32_bytes));  // prompt.view(1, -1).repeat(batch_size, 1)
  }

  // What Attention.forward attends over after kv_cache.update, at the op the graph marks as a cached
  // key or value (of the whole cache length): the cache itself, so nothing new under ratio > 1, where
  // the graph's repeat ops make the copies; at a ratio of 1 repeat_interleave still copies it. torchao's
  // int8 cache hands back k_cache * k_cache_scale first, which the copy's rebinding frees.
  constexpr std::uint32_t gpt_fast_attended(const op& o) {
    std::uint32_t dequantized = r_.kv == dtype::int8 ? alloc(o.out.value) : no_tensor;
    if (kv_heads_of(m_) != m_.heads) return dequantized;
    std::uint32_t copy = alloc(o.out.value);
    free(dequantized);
    return copy;
  }

  // torch's math SDPA multiplies the (repeated) keys by sqrt(scale) into a new tensor for the scores'
  // matmul (aten/src/ATen/native/transformers/attention.cpp _scaled_dot_product_attention_math).
  constexpr void gpt_fast_scaled_keys(std::uint64_t done) {
    if (attention_kernel_of(m_, gpt_fast_step(done)) != attention_kernel::math) return;
    using memscale::detail::checked_mul;
    const std::uint64_t keys = checked_mul(r_.batch, gpt_fast_cache_length(m_, r_));
    std::uint32_t scaled = alloc(storage(r_.compute, checked_mul(keys, m_.heads, head_dim_of(m_))).value);
    free(scaled);
  }

  // sample() over the last position while the logits are bound (generate.py logits_to_probs: the
  // logits divided by the temperature, their softmax), then the logits die as prefill() or
  // decode_one_token() returns. A decoding step's probabilities stay bound as next_prob until the
  // next step's replace them, and a clone of each joins new_probs for good.
  constexpr void gpt_fast_sample(std::uint32_t& logits, std::uint64_t done) {
    const std::uint64_t row = storage(r_.compute, memscale::detail::checked_mul(r_.batch, m_.vocab)).value;
    std::uint32_t scaled = alloc(row);
    std::uint32_t probs = alloc(row);
    free(scaled);
    free(logits);
    if (done == 0) {
      free(probs);
      return;
    }
    free(kept_logits_);
    kept_logits_ = probs;
    alloc(row);  // new_probs.append(next_prob.clone())
  }

  const model_spec& m_;
  const inference_spec& r_;
  tensor_events<Sink, IdCapacity> events_;
  frame_locals frame_{};  // a decoder layer's locals bound across its ops (gpt-oss's attention weights)
  std::array<std::array<std::uint32_t, 2>, 256> kv_{};             // filled with no_tensor
  std::array<std::array<std::uint32_t, 2>, 256> previous_{};       // a tuple cache's old tensors (no_tensor: none)
  std::array<std::array<std::uint32_t, 2>, 256> packed_{};         // a quantized cache's packed keys and values
  std::array<std::uint32_t, 2> returned_{no_tensor, no_tensor};    // the keys and values a quantized cache handed back
  bool tuple_cache_ = keeps_tuple_cache(m_, r_);
  bool gpt_fast_ = r_.loop == generate_loop::gpt_fast;
  bool static_ = !gpt_fast_ && r_.cache == kv_cache_kind::static_preallocated;
  bool copies_prompt_ = memscale::detail::copies_prompt(m_, r_);
  std::array<std::size_t, 2> prompt_made_{};  // the layer's cached ops (their index in the block), in order
  std::uint32_t ids_ = no_tensor;
  std::uint32_t mask_ = no_tensor;
  std::uint32_t prompt_ = no_tensor;  // gpt-fast's prompt repeated over the batch
  std::uint32_t kept_logits_ = no_tensor;
  std::uint32_t workspace_ = no_tensor;
};

}  // namespace detail

// Emits setup, the prefill and every decoding step of generate(model, run) into `sink`.
template <std::size_t IdCapacity, class Sink>
constexpr void emit_generate(const model_spec& model, const inference_spec& run, Sink& sink) {
  validate(model);
  validate(run);
  detail::generate_walker<Sink, IdCapacity> walker(model, run, sink);
  walker.walk();
}

}  // namespace memscale::allocator
