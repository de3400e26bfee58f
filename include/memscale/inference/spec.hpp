// memscale/inference/spec.hpp: how a model is served, as a generate() call sets it up.
// Field order is part of the API: designated initialisers must follow it.
#pragma once

#include <cstdint>
#include <string_view>

#include "memscale/bytes.hpp"
#include "memscale/dtype.hpp"
#include "memscale/error.hpp"
#include "memscale/estimate/workspace.hpp"
#include "memscale/quant_format.hpp"
#include "memscale/training.hpp"

namespace memscale {

// How the weights are stored on the device. native: in the compute dtype
// (inference_spec::compute: fp32, fp16 or bf16); the others quantise the linear layers
// of the transformer blocks and keep embeddings, norms and the output layer in the
// compute dtype (transformers integrations/bitsandbytes.py get_keys_to_not_convert keeps
// the output embedding; GPTQ and AWQ quantise the blocks' nn.Linear modules only), and the
// block linears the checkpoint keeps unquantised (inference_spec::unquantized).
// mxfp4: gpt-oss's experts as the checkpoint stores them (blocks and scales, quant_format.hpp),
// everything else in the compute dtype (its modules_to_not_convert: attention, router,
// embeddings, head).
// gptfast_int8 / gptfast_int4: gpt-fast's weight-only layers (quantize.py@32971d31
// WeightOnlyInt8Linear, WeightOnlyInt4Linear with group_size) in place of every nn.Linear, the
// head included (inference/gpt_fast_weights.hpp); gpt-fast's generate() only.
// fp8_block: transformers' FP8Linear (FineGrainedFP8Config), e4m3 weights with fp32 block scales
// (inference_spec::quant_scheme's block_out x block_in). ct_float / ct_int: compressed-tensors
// float-quantized (fp8) and pack-quantized (int) CompressedLinear layers (the scheme:
// inference_spec::quant_scheme), which keep a dense weight once decompressed (dense_copy_kept).
enum class weight_format : std::uint8_t {
  native,
  bnb_int8,
  bnb_nf4,
  bnb_fp4,
  gptq_4bit,
  awq_4bit,
  mxfp4,
  gptfast_int8,
  gptfast_int4,
  fp8_block,
  ct_float,
  ct_int
};

// dynamic: DynamicCache, grows by torch.cat every step (transformers cache_utils.py);
// static_preallocated: StaticCache, every layer allocated at max_cache_len up front and
// written in place (index_copy_); sliding_window: SlidingWindowCache, static of the
// model's window; quantized: QuantizedCache (cache_implementation="quantized"), the tokens
// before the last residual window packed to inference_spec::kv_bits with a scale and a zero
// point per kv_group values, the window in the compute dtype.
enum class kv_cache_kind : std::uint8_t { dynamic, static_preallocated, sliding_window, quantized };

// The code that runs generate(): transformers' GenerationMixin, or gpt-fast's generate.py
// (pytorch-labs/gpt-fast generate.py@32971d31: setup_caches, prefill, decode_n_tokens).
enum class generate_loop : std::uint8_t { transformers, gpt_fast };

// QuantizedCacheConfig.backend: optimum-quanto (QuantoQuantizedCache) or HQQ (HQQQuantizedCache).
enum class kv_quant_backend : std::uint8_t { quanto, hqq };

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
  std::uint64_t group_size = 128;  // GPTQ / AWQ / gpt-fast int4 quantisation group (AutoGPTQ, AutoAWQ,
                                   // WeightOnlyInt4QuantHandler default 128)
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
  std::uint32_t cuda_version = 0;  // major * 100 + minor as stated (software.cuda); 0: not stated
  std::uint32_t torch_version = 205;  // major * 100 + minor: which kernel SDPA picks (attention_kernel.hpp)
  // gpt-fast: its static KVCache buffers in the model dtype (kv int8: torchao's int8 cache with
  // a per-token scale), a (max_seq, max_seq) bool mask; cache must be static_preallocated.
  generate_loop loop = generate_loop::transformers;
  // QuantizedCacheConfig (transformers cache_utils.py, 4.42-4.46): backend, nbits, q_group_size,
  // residual_length; defaults quanto, 4, 64, 128.
  kv_quant_backend kv_backend = kv_quant_backend::quanto;
  std::uint32_t kv_bits = 4;
  std::uint64_t kv_group = 64;
  std::uint64_t kv_residual = 128;
  // Left-padded prompts (the attention_mask has zeros; generate() also masks every prompt token
  // equal to pad_token_id): every forward then builds a (batch, 1, rows, keys) mask and SDPA runs
  // without flash and without enable_gqa (training_spec::padded).
  bool padded = false;
  // The stored scheme of fp8_block (block_out, block_in) and compressed-tensors (bits, scales,
  // group_size, zero points, g_idx, input quantisation) weights, as their quantization_config says
  // (json/hf/quantization.hpp apply_quantization); its method and scale dtype follow `weights` and
  // `compute`. The other formats read group_size, quant_block and double_quant above.
  quant_format quant_scheme{};
  // The block linear layers a quantised checkpoint keeps in the compute dtype (its
  // modules_to_not_convert, by role: memscale/unquantized_modules.hpp).
  lora_modules unquantized = 0;
  // The checkpoint keeps the vision tower and its projector in the compute dtype (they are
  // counted so: graph/layers/idle_tower.hpp), as AWQ and GPTQ checkpoints of VLMs list them.
  bool unquantized_tower = false;
  // The checkpoint stores the weights quantised (its config carries a quantization_config:
  // from_pretrained's pre_quantized), against quantised as a 16-bit checkpoint loads
  // (BitsAndBytesConfig passed to from_pretrained). They differ for Llama 4's experts
  // (inference/weights.hpp expert_parameters_quantized).
  bool prequantized = false;
  // The transformers release that saved the pre-quantised checkpoint (its config.json's
  // transformers_version as major * 100 + minor; 0 when it does not say): what a release stored
  // decides whether 5.x's merged experts can load it (generate_peak.hpp check_quantized_parameter_experts).
  std::uint32_t saved_by_transformers = 0;
  // attention flash asked for as transformers' attn_implementation "flash_attention_2": flash-attn's
  // flash_attn_func takes k and v with their kv heads (no repeat_kv copies); `flash` alone is
  // SDPA's fused kernel (training_spec::flash_attention_2).
  bool flash_attention_2 = false;
};

constexpr bool is_quantized(weight_format w) { return w != weight_format::native; }
// The formats bitsandbytes loads (its Linear8bitLt / Linear4bit replace nn.Linear modules).
constexpr bool is_bitsandbytes(weight_format w) {
  return w == weight_format::bnb_int8 || w == weight_format::bnb_nf4 || w == weight_format::bnb_fp4;
}

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
  if (r.cache == kv_cache_kind::quantized) {
    // HQQQuantizedCache quantises with hqq's Quantizer.quantize, optimize=True by default: its
    // proximal optimiser's working copies are not described.
    require(r.kv_backend == kv_quant_backend::quanto, error_code::unsupported, "infer.kv_quant_backend",
            "must be quanto: HQQ's quantiser (optimize_weights_proximal and its working copies) is not modelled yet",
            r.kv_backend);
    // QuantoQuantizedCache.__init__: nbits must be 2 or 4 (qint2, qint4).
    require(r.kv_bits == 2 || r.kv_bits == 4, bad, "infer.kv_bits", "must be 2 or 4 with the quanto backend",
            r.kv_bits);
    require(r.kv_group > 0, bad, "infer.kv_group_size", "must be > 0", r.kv_group);
    require(r.kv_residual > 0, bad, "infer.kv_residual_length", "must be > 0", r.kv_residual);
    // The residual window and the dequantised keys and values are in the keys' own dtype.
    require(r.kv == r.compute, bad, "infer.kv_dtype",
            "must be the compute dtype with a quantized cache (its packed width is infer.kv_bits)", bits_of(r.kv));
  }
  if (r.flash_attention_2) {
    require(r.attention == attention_impl::flash, bad, "infer.attention",
            "must be flash when flash_attention_2 is asked for (flash-attn's kernels are fused ones)", r.attention);
    // _flash_attention_forward casts fp32 q, k and v to a 16-bit copy (flash-attn runs fp16 and bf16 only).
    require(r.compute != dtype::fp32, error_code::unsupported, "infer.dtype",
            "must be fp16 or bf16 with flash_attention_2: its casts of fp32 q, k and v are not modelled",
            bits_of(r.compute));
    require(r.loop == generate_loop::transformers, error_code::unsupported, "infer.attention",
            "flash_attention_2 is transformers' attn_implementation; gpt-fast's model.py calls SDPA (flash)", r.loop);
  }
  if (r.loop == generate_loop::gpt_fast) {
    require(r.cache == kv_cache_kind::static_preallocated, bad, "infer.kv_cache",
            "must be static with gpt-fast (model.py KVCache is its only cache)", r.cache);
    require(r.kv == r.compute || r.kv == dtype::int8, bad, "infer.kv_dtype",
            "must be the model dtype or int8 (torchao's int8 KV cache) with gpt-fast", bits_of(r.kv));
  }
  // Block-scaled compressed-tensors weights: their decompression and fake-quantisation copies are
  // not described (json/hf/quantization.hpp refuses them from a config the same way).
  require((r.weights != weight_format::ct_float && r.weights != weight_format::ct_int) ||
              r.quant_scheme.scales != scale_granularity::block,
          error_code::unsupported, "infer.quant_scheme.scales",
          "must be tensor, channel or group for compressed-tensors weights", r.weights);
  if (r.weights == weight_format::gptfast_int4) {
    // quantize.py@32971d31 WeightOnlyInt4QuantHandler.__init__: assert groupsize in [32, 64, 128, 256].
    require(r.group_size == 32 || r.group_size == 64 || r.group_size == 128 || r.group_size == 256, bad,
            "infer.group_size", "must be 32, 64, 128 or 256 with gptfast-int4 (quantize.py's groupsize)", r.group_size);
    // WeightOnlyInt4Linear.forward casts the input to bf16 and _weight_int4pack_mm takes bf16 scales
    // and zeros (int4mm.cu@05f814fe: TORCH_CHECK(A.dtype() == at::kBFloat16)); model.to(precision)
    // casts scales_and_zeros to the model dtype.
    require(r.compute == dtype::bf16, bad, "infer.dtype", "must be bf16 with gptfast-int4 (_weight_int4pack_mm's)",
            bits_of(r.compute));
  }
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
    case weight_format::mxfp4: return "mxfp4";
    case weight_format::gptfast_int8: return "gptfast-int8";
    case weight_format::gptfast_int4: return "gptfast-int4";
    case weight_format::fp8_block: return "fp8-block";
    case weight_format::ct_float: return "compressed-tensors-fp8";
    case weight_format::ct_int: return "compressed-tensors-int";
  }
  return "native";
}

constexpr std::string_view to_string(kv_cache_kind k) noexcept {
  switch (k) {
    case kv_cache_kind::dynamic: return "dynamic";
    case kv_cache_kind::static_preallocated: return "static";
    case kv_cache_kind::sliding_window: return "sliding";
    case kv_cache_kind::quantized: return "quantized";
  }
  return "dynamic";
}

constexpr std::string_view to_string(generate_loop l) noexcept {
  return l == generate_loop::gpt_fast ? "gpt-fast" : "transformers";
}

constexpr std::string_view to_string(kv_quant_backend b) noexcept { return b == kv_quant_backend::hqq ? "hqq" : "quanto"; }

}  // namespace memscale
