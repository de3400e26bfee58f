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
// - the cache: the prompt's keys and values stay as the layer made them; each new token makes
//   every layer's key and value tensor anew with torch.cat([old, new], dim=-2) while the old
//   one is alive, then drops the old (cache_utils.py DynamicLayer.update). Every new tensor is
//   one position larger than every freed one: the case that fragments most. The token ids and
//   the attention mask grow the same way (torch.cat in _sample and _update_model_kwargs_for_generation).
// Not walked (an error says so): static and sliding-window caches, tuple caches, quantised weights.
#pragma once

#include <cstddef>
#include <cstdint>

#include "memscale/allocator/events.hpp"
#include "memscale/allocator/step_events.hpp"
#include "memscale/graph/graph.hpp"
#include "memscale/inference.hpp"
#include "memscale/graph/model_graph.hpp"

namespace memscale::allocator {

namespace detail {

template <class Sink, std::size_t IdCapacity>
class generate_walker {
 public:
  constexpr generate_walker(const model_spec& m, const inference_spec& r, Sink& sink) : m_(m), r_(r), events_(sink) {
    using memscale::detail::require;
    memscale::detail::require_generate_modelled(m);
    require(r.cache == kv_cache_kind::dynamic && !r.legacy_tuple_cache, error_code::unsupported, "infer.kv_cache",
            "the allocator's generate() stream covers the dynamic cache", static_cast<std::uint64_t>(r.cache));
    require(r.weights == weight_format::native && r.kv_lora_rank == 0, error_code::unsupported, "infer.weights",
            "the allocator's generate() stream covers unquantised weights and ordinary attention",
            static_cast<std::uint64_t>(r.weights));
    require(m.layers <= kv_.size(), error_code::unsupported, "model.layers", "exceeds the generate() stream's capacity",
            m.layers);
    for (auto& layer : kv_) layer = {no_tensor, no_tensor};
    for (auto& layer : prefill_views_) layer = {no_tensor, no_tensor};
  }

  constexpr void walk() {
    const training_spec weights_run = run_for(1);
    const model_graph built = build(m_, weights_run);
    const graph& gw = built.stack();
    events_.enter(0, moment::setup);
    setup(gw);
    events_.enter(1, moment::prefill);
    forward(r_.context, 0);
    if (r_.new_tokens > 1) {
      events_.enter(1, moment::decode);
      std::uint64_t done = r_.context;
      for (std::uint64_t t = 1; t < r_.new_tokens; ++t, ++done) {
        grow(ids_, storage(dtype::int64, memscale::detail::checked_mul(r_.batch, done + 1)).value);
        grow(mask_, storage(dtype::int64, memscale::detail::checked_mul(r_.batch, done + 1)).value);
        forward(1, done);
      }
    }
  }

 private:
  [[nodiscard]] constexpr training_spec run_for(std::uint64_t rows) const {
    training_spec t{.micro_batch = r_.batch, .seq_len = rows, .dropout = false};
    t.prec = r_.compute == dtype::fp32 ? precision::fp32 : r_.compute == dtype::bf16 ? precision::pure_bf16
                                                                                      : precision::pure_fp16;
    t.attention = r_.attention;
    t.transformers_version = r_.transformers_version;
    t.device = r_.device;
    return t;
  }

  constexpr std::uint32_t alloc(std::uint64_t size) { return events_.alloc(size); }
  constexpr void free(std::uint32_t& id) { events_.free(id); }
  // torch.cat([old, new]): the larger tensor is made while the old one lives.
  constexpr void grow(std::uint32_t& id, std::uint64_t size) {
    std::uint32_t old = id;
    id = alloc(size);
    free(old);
  }

  constexpr void setup(const graph& g) {
    for (std::size_t i = 0; i < g.size; ++i) {
      const op& o = g.ops[i];
      const std::uint64_t repeats = repeats_of(g, i);
      for (std::uint64_t l = 0; l < repeats; ++l) {
        if (o.weight.rows != 0 && !o.borrows_weight)
          for (std::uint64_t c = 0; c < o.weight.count; ++c) alloc(storage(r_.compute, o.weight.largest()).value);
        if (o.bias.rows != 0)
          for (std::uint64_t c = 0; c < o.bias.count; ++c) alloc(storage(r_.compute, o.bias.rows).value);
      }
      if (o.weight.rows != 0 && o.borrows_weight) {
        std::uint32_t copy = alloc(storage(r_.compute, o.weight.largest()).value);  // tie_weights drops it
        free(copy);
      }
    }
    if (g.buffers.value != 0)
      for (std::uint64_t l = 0; l < g.block_repeats; ++l) alloc(g.buffers.value / g.block_repeats);
    ids_ = alloc(storage(dtype::int64, memscale::detail::checked_mul(r_.batch, r_.context)).value);
    mask_ = alloc(storage(dtype::int64, memscale::detail::checked_mul(r_.batch, r_.context)).value);
  }

  [[nodiscard]] constexpr bytes act(std::uint64_t elements) const { return storage(r_.compute, elements); }

  // One forward pass over `rows` positions per sequence with `done` positions cached, in the
  // tensors inference.hpp's forward_peak counts (LlamaModel.forward and its layers).
  constexpr void forward(std::uint64_t rows, std::uint64_t done) {
    using memscale::detail::checked_mul;
    const std::uint64_t n = checked_mul(r_.batch, rows);
    const std::uint64_t keys = memscale::detail::checked_add(done, rows);
    const std::uint64_t h = m_.hidden;
    // Per forward: position ids, the rotary tables, eager's 4-D mask, the embeddings' outputs.
    std::uint32_t positions = alloc(storage(dtype::int64, n).value);
    std::uint32_t embeds = alloc(memscale::detail::embeddings_kept(m_, r_, rows).value);
    std::uint32_t rope = alloc(memscale::detail::rotary_tables(m_, r_, rows).value);
    std::uint32_t mask = alloc(memscale::detail::causal_mask(r_, rows, keys).value);
    std::uint32_t stream = alloc(act(checked_mul(n, h)).value);
    for (std::uint64_t l = 0; l < m_.layers; ++l) {
      layer(l, rows, done);
      // The layer's output: the residual sum, made while its input lives.
      std::uint32_t next = alloc(act(checked_mul(n, h)).value);
      free(stream);
      stream = next;
    }
    free(mask);
    free(rope);
    free(embeds);
    // The output layer, then what generate keeps of it until the next step replaces it: from
    // 4.45 an fp32 copy of the last position; before, the whole (upcast) logits of `outputs`.
    std::uint32_t kept = no_tensor;
    if (r_.transformers_version >= 445) {
      std::uint32_t logits = alloc(memscale::detail::logits_in_forward(m_, r_, rows).value);
      kept = alloc(memscale::detail::logits_kept(m_, r_, rows).value);
      free(logits);
    } else {
      const std::uint64_t all = memscale::detail::logits_in_forward(m_, r_, rows).value;
      const std::uint64_t upcast = all - act(checked_mul(memscale::detail::logit_rows(m_, r_, rows), m_.vocab)).value;
      std::uint32_t logits = alloc(all - upcast);
      kept = alloc(upcast);  // logits.float(): outputs.logits
      if (kept == no_tensor) {
        kept = logits;
      } else {
        free(logits);
      }
    }
    free(stream);
    free(positions);
    free(kept_logits_);
    kept_logits_ = kept;
  }

  // One decoder layer (layer_transient: normed + the larger of rotary, attention and MLP).
  constexpr void layer(std::uint64_t l, std::uint64_t rows, std::uint64_t done) {
    using memscale::detail::checked_mul;
    const std::uint64_t n = checked_mul(r_.batch, rows);
    const std::uint64_t keys = memscale::detail::checked_add(done, rows);
    const std::uint64_t q_w = checked_mul(m_.heads, head_dim_of(m_));
    const std::uint64_t kv_w = checked_mul(kv_heads_of(m_), head_dim_of(m_));
    const std::uint64_t q = act(checked_mul(n, q_w)).value;
    const std::uint64_t kv = act(checked_mul(n, kv_w)).value;
    if (workspace_ == no_tensor && r_.device == device_kind::cuda) workspace_ = alloc(r_.blas_workspace.value);
    std::uint32_t normed = alloc(act(checked_mul(n, m_.hidden)).value);
    std::uint32_t qs = alloc(q);
    std::uint32_t ks = alloc(kv);
    std::uint32_t vs = alloc(kv);
    if (m_.positions == position_kind::rotary) {
      // apply_rotary_pos_emb: q * cos, rotate_half(q), rotate_half(q) * sin, their sum; then k.
      std::uint32_t a = alloc(q);
      std::uint32_t b = alloc(q);
      std::uint32_t c = alloc(q);
      free(b);
      std::uint32_t q_embed = alloc(q);
      free(a);
      free(c);
      a = alloc(kv);
      b = alloc(kv);
      c = alloc(kv);
      free(b);
      std::uint32_t k_embed = alloc(kv);
      free(a);
      free(c);
      if (m_.fused_qkv && done == 0) {
        prefill_views_[l] = {qs, ks};  // views of the fused output, kept by the cached values
      } else {
        free(qs);
        free(ks);
      }
      qs = q_embed;
      ks = k_embed;
    } else if (m_.fused_qkv && done == 0) {
      prefill_views_[l][0] = qs;  // the query part of the fused output the cached values keep
      qs = no_tensor;
    }
    cache_update(l, rows, done, ks, vs);
    // repeat_kv's copies and the attention core (its output, and eager's score matrices).
    const std::uint64_t repeated = memscale::detail::repeated_kv(m_, r_, keys).value;
    std::uint32_t rk = alloc(repeated / 2);
    std::uint32_t rv = alloc(repeated - repeated / 2);
    std::uint32_t core = alloc(memscale::detail::attention_core(m_, r_, rows, keys).value);
    free(rk);
    free(rv);
    free(qs);
    free(core);
    // MLP: act(gate), up and their product coexist (four tensors for GPT-2's gelu_new, two
    // for a plain two-matrix MLP).
    const std::uint64_t f_rows = checked_mul(n, m_.experts > 0 ? checked_mul(m_.ffn, m_.experts_per_token) : m_.ffn);
    const std::uint64_t mlp_tensors = gated_mlp(m_) ? 3 : m_.mlp == mlp_kind::gelu_tanh ? 4 : 2;
    std::array<std::uint32_t, 4> mlp{no_tensor, no_tensor, no_tensor, no_tensor};
    for (std::uint64_t t = 0; t < mlp_tensors; ++t) mlp[t] = alloc(act(f_rows).value);
    for (std::uint64_t t = 0; t < mlp_tensors; ++t) free(mlp[t]);
    free(normed);
  }

  // DynamicLayer.update: the prompt's keys and values are kept as the layer made them (a fused
  // projection's values are views that keep its whole output); each new token torch.cat()s.
  constexpr void cache_update(std::uint64_t layer, std::uint64_t rows, std::uint64_t done, std::uint32_t& k,
                              std::uint32_t& v) {
    const std::uint64_t half = kv_layer_half_bytes(m_, r_, memscale::detail::checked_add(done, rows)).value;
    if (done == 0) {
      kv_[layer][0] = k;
      kv_[layer][1] = v;
      k = no_tensor;
      v = no_tensor;
      return;
    }
    grow(kv_[layer][0], half);
    grow(kv_[layer][1], half);
    free(prefill_views_[layer][0]);  // the first torch.cat drops the prefill's views
    free(prefill_views_[layer][1]);
    free(k);
    free(v);
  }

  const model_spec& m_;
  const inference_spec& r_;
  tensor_events<Sink, IdCapacity> events_;
  std::array<std::array<std::uint32_t, 2>, 256> kv_{};             // filled with no_tensor
  std::array<std::array<std::uint32_t, 2>, 256> prefill_views_{};
  std::uint32_t ids_ = no_tensor;
  std::uint32_t mask_ = no_tensor;
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
