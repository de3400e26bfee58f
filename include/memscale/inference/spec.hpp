// memscale/inference/spec.hpp: how a model is served, as a generate() call sets it up.
// Field order is part of the API: designated initialisers must follow it.
#pragma once

#include <cstdint>
#include <string_view>

#include "memscale/bytes.hpp"
#include "memscale/dtype.hpp"
#include "memscale/error.hpp"
#include "memscale/estimate/workspace.hpp"
#include "memscale/training.hpp"

namespace memscale {

// How the weights are stored on the device. native: in the compute dtype
// (inference_spec::compute: fp32, fp16 or bf16); the others quantise the linear layers
// of the transformer blocks and keep embeddings, norms and the output layer in the
// compute dtype (transformers integrations/bitsandbytes.py get_keys_to_not_convert keeps
// the output embedding; GPTQ and AWQ quantise the blocks' nn.Linear modules only).
enum class weight_format : std::uint8_t { native, bnb_int8, bnb_nf4, bnb_fp4, gptq_4bit, awq_4bit };

// dynamic: DynamicCache, grows by torch.cat every step (transformers cache_utils.py);
// static_preallocated: StaticCache, every layer allocated at max_cache_len up front and
// written in place (index_copy_); sliding_window: SlidingWindowCache, static of the
// model's window.
enum class kv_cache_kind : std::uint8_t { dynamic, static_preallocated, sliding_window };

struct inference_spec {
  std::uint64_t batch = 1;
  std::uint64_t context = 512;     // prompt tokens
  std::uint64_t new_tokens = 128;  // max_new_tokens (greedy, no early stop)
  dtype compute = dtype::fp16;     // torch_dtype: activations, logits, unquantised weights
  weight_format weights = weight_format::native;
  dtype kv = dtype::fp16;          // KV-cache storage (fp16, bf16, fp32, fp8_e4m3, fp8_e5m2, int8)
  kv_cache_kind cache = kv_cache_kind::dynamic;
  std::uint64_t max_cache_len = 0; // static cache length; 0: context + new_tokens (generate's max_length)
  std::uint64_t sliding_window = 0;  // tokens a sliding-window cache keeps per layer (Mistral: 4096)
  // Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434 sec. 2.1): the cache keeps
  // the compressed latent (kv_lora_rank) and the decoupled rotary key (qk_rope_head_dim)
  // per token and layer instead of full keys and values. 0: ordinary attention.
  std::uint64_t kv_lora_rank = 0;
  std::uint64_t qk_rope_head_dim = 0;
  attention_impl attention = attention_impl::flash;  // eager materialises B x H x S x T scores
  std::uint64_t group_size = 128;  // GPTQ / AWQ quantisation group (AutoGPTQ, AutoAWQ default 128)
  std::uint64_t quant_block = 64;  // bitsandbytes 4-bit blocksize (Linear4bit default 64)
  bool double_quant = false;       // bnb_4bit_use_double_quant (compress_statistics)
  // major * 100 + minor of transformers: from 4.45 generate() asks for the last position's
  // logits only (num_logits_to_keep, PR #31292); before, the whole prompt's logits are
  // computed, upcast to fp32 and kept alive into the first decoding step.
  std::uint32_t transformers_version = 445;
  // The model keeps its cache as tuples of tensors whatever the release says (the release's
  // own rule is model_spec::generate_tuple_cache_before): generate() holds the previous step's
  // tuples while the next forward builds new ones, so two caches coexist at the end of every
  // decoding step.
  bool legacy_tuple_cache = false;
  device_kind device = device_kind::cuda;
  bytes blas_workspace = pytorch_cublas_workspace_default;
  bool cuda_lazy_loading = true;
  std::uint32_t torch_version = 205;  // major * 100 + minor: which kernel SDPA picks (attention_kernel.hpp)
};

constexpr bool is_quantized(weight_format w) { return w != weight_format::native; }

constexpr const inference_spec& validate(const inference_spec& r) {
  using detail::require;
  constexpr auto bad = error_code::invalid_run;
  require(r.batch > 0, bad, "infer.batch", "must be > 0", r.batch);
  require(r.context > 0, bad, "infer.context", "must be > 0", r.context);
  require(r.compute == dtype::fp32 || r.compute == dtype::fp16 || r.compute == dtype::bf16, bad, "infer.dtype",
          "must be fp32, fp16 or bf16", bits_of(r.compute));
  require(r.kv == dtype::fp32 || r.kv == dtype::fp16 || r.kv == dtype::bf16 || r.kv == dtype::fp8_e4m3 ||
              r.kv == dtype::fp8_e5m2 || r.kv == dtype::int8,
          bad, "infer.kv_dtype", "must be fp32, fp16, bf16, fp8 or int8", bits_of(r.kv));
  require(r.cache != kv_cache_kind::static_preallocated || r.max_cache_len == 0 ||
              r.max_cache_len >= detail::checked_add(r.context, r.new_tokens),
          bad, "infer.max_cache_len", "must hold context + new_tokens", r.max_cache_len);
  require(r.cache != kv_cache_kind::sliding_window || r.sliding_window > 0, bad, "infer.sliding_window",
          "must be > 0 with a sliding-window cache", r.sliding_window);
  require((r.kv_lora_rank == 0) == (r.qk_rope_head_dim == 0), bad, "infer.qk_rope_head_dim",
          "must be > 0 exactly when infer.kv_lora_rank > 0", r.qk_rope_head_dim);
  require(r.group_size > 0, bad, "infer.group_size", "must be > 0", r.group_size);
  require(r.quant_block > 0, bad, "infer.quant_block", "must be > 0", r.quant_block);
  return r;
}

constexpr std::string_view to_string(weight_format w) noexcept {
  switch (w) {
    case weight_format::native: return "native";
    case weight_format::bnb_int8: return "bnb-int8";
    case weight_format::bnb_nf4: return "bnb-nf4";
    case weight_format::bnb_fp4: return "bnb-fp4";
    case weight_format::gptq_4bit: return "gptq-4bit";
    case weight_format::awq_4bit: return "awq-4bit";
  }
  return "native";
}

constexpr std::string_view to_string(kv_cache_kind k) noexcept {
  return k == kv_cache_kind::dynamic ? "dynamic" : k == kv_cache_kind::static_preallocated ? "static" : "sliding";
}

}  // namespace memscale
