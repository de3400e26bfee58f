// memscale/training.hpp: how a model is trained, as the training script sets it up.
// Field order is part of the API: designated initialisers must follow it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "memscale/bytes.hpp"
#include "memscale/detail/math.hpp"
#include "memscale/estimate/workspace.hpp"
#include "memscale/detail/enum_names.hpp"
#include "memscale/error.hpp"
#include "memscale/lora.hpp"
#include "memscale/vision_tower.hpp"

namespace memscale {

// fp32: everything fp32. amp_*: autocast with fp32 parameters and optimizer state.
// pure_*: the model itself is cast (model.to(bf16)), so state is 16-bit too.
enum class precision : std::uint8_t { fp32, amp_fp16, amp_bf16, pure_bf16, pure_fp16 };
enum class optimizer_kind : std::uint8_t { sgd, sgd_momentum, adam, adamw, adamw_8bit, adafactor, lion };
// for_loop: one parameter at a time (torch "single_tensor"); foreach: multi-tensor
// kernels over a whole group (PyTorch 2.x default on CUDA); fused: one kernel, no temporaries.
enum class optimizer_implementation : std::uint8_t { for_loop, foreach, fused };
enum class checkpointing : std::uint8_t { none, full, selective };
// Which torch.utils.checkpoint wraps each block (torch/utils/checkpoint.py @ 0008d771): the
// reentrant CheckpointFunction reruns the whole block in its backward and holds the rerun's output
// while autograd.backward runs through it; the non-reentrant one recomputes saved tensors only.
// framework_default: what the framework passes (reentrant_checkpoint_by_default).
enum class checkpoint_variant : std::uint8_t { framework_default, reentrant, non_reentrant };
// eager: softmax(QK^T)V written out; sdpa_math: F.scaled_dot_product_attention's math
// backend (same tensors); flash: a fused kernel as asked for (flash or memory-efficient: no
// s x s matrix kept); sdpa: F.scaled_dot_product_attention with the kernel PyTorch picks
// for the device, dtype, mask and release (memscale/attention_kernel.hpp sdpa_kernel).
enum class attention_impl : std::uint8_t { eager, sdpa_math, flash, sdpa };
enum class training_target : std::uint8_t { full, lora, qlora };
enum class base_quant : std::uint8_t { nf4, nf4_double_quant };
// standard: logits materialised for the whole sequence; chunked: cross-entropy over
// slices of the sequence (lit-gpt chunked_cross_entropy, torchtune's chunked loss);
// fused_linear: Liger's fused linear cross-entropy, which runs the head, the loss and both
// gradients chunk by chunk inside forward, so the logits never exist whole
// (linkedin/Liger-Kernel v0.5.10 @ 44a8f2fb, ops/fused_linear_cross_entropy.py).
enum class loss_impl : std::uint8_t { standard, chunked, fused_linear };
// Data-parallel sharding (Rajbhandari et al. 2020, ZeRO, arXiv 1910.02054): stage 1
// shards optimizer state, stage 2 also gradients, stage 3 (FSDP FULL_SHARD) parameters.
enum class sharding : std::uint8_t { none, optimizer_state, gradients, full };
// Which allocator and autocast op lists apply: a CUDA run, or a CPU trace (measure.py).
enum class device_kind : std::uint8_t { cuda, cpu };

// PEFT's LoRA variants (peft v0.13.0 @ 8f074d75, src/peft/tuners/lora/layer.py): rslora only
// changes the scaling (alpha / sqrt(r) instead of alpha / r), so its memory is LoRA's; dora adds a
// trainable magnitude vector per adapted layer and extra forward tensors (tuners/lora/dora.py).
enum class lora_variant : std::uint8_t { lora, rslora, dora };

// The dtype LoRA adapters are kept in: weights, gradients and optimizer state. The framework's
// default: PEFT upcasts adapters over a 16-bit base to fp32 (get_peft_model(..., autocast_adapter_dtype=True);
// measured with peft 0.21.0, docs/gpu-measurements.md); lit-gpt keeps them in the base dtype.
// autocast_dtype (amp_* LoRA only): the model is loaded in the autocast dtype and its adapters stay
// there (get_peft_model(..., autocast_adapter_dtype=False) skips tuners_utils.py _cast_adapter_dtype
// @ v0.15.0), then the loop runs under autocast (TRL SFTTrainer with bf16=True): base, adapters,
// gradients and AdamW state are 16-bit, no weight is cast per matmul, and autocast's fp32-list ops
// still run in fp32.
enum class adapter_dtype : std::uint8_t { framework_default, as_base, fp32, autocast_dtype };

// What the loop's wrapper does to the model's floating outputs (the logits) before the loss.
// Lightning Fabric's 16-bit "-true" precisions convert them to torch.get_default_dtype(), fp32
// (HalfPrecision.convert_output, src/lightning/fabric/plugins/precision/half.py @ 71aed751;
// BitsandbytesPrecision and FSDPPrecision alike). framework_default: what the model's
// implementation runs under (graph/layers/heads.hpp logits_output_dtype).
enum class output_cast_kind : std::uint8_t { framework_default, none, fp32 };

// The training framework whose loop, loss and module code run the model. Each sets defaults
// (with_framework) that stay individually settable, and the mechanisms its own code has:
// torchtune v0.6.1 (pytorch/torchtune @ a6290a5b) builds the model in the run's dtype with no
// autocast (training.set_default_dtype around the builder, recipes/lora_finetune_single_device.py),
// normalises with F.rms_norm over x.float() (modules/rms_norm.py), copies k and v to every query
// head for grouped-query attention (modules/attention.py lines 290-291) and upcasts the logits
// in its loss (modules/transformer.py unembed line 659; modules/loss/ce_chunked_output_loss.py).
// torchtitan v0.1.0 (pytorch/torchtitan @ f7084fc7) shards every TransformerBlock and the root with
// FSDP2 (fp32 shards, bf16 compute: infra/parallelize.py apply_fsdp), builds its own Llama with
// repeat_kv copies (models/llama3/model/model.py) and upcasts the whole logits in its loss
// (components/loss.py cross_entropy_loss: pred.flatten(0, 1).float()).
enum class framework_kind : std::uint8_t { hf, litgpt, torchtune, torchtitan };

// torchtitan's activation checkpointing other than whole blocks (apply_ac, infra/parallelize.py
// @ f7084fc7): every_kth_block, selective_ac_option "<k>": checkpoint_wrapper on every k-th
// TransformerBlock; op_save_list, selective_ac_option "op": inside every block only the outputs
// of the ops on _save_list are kept (every other aten.mm, the SDPA kernels), the rest recomputed.
enum class selective_ac : std::uint8_t { none, every_kth_block, op_save_list };

// torchtune's custom_sharded_layers: modules its distributed recipes make FSDP2 units of their own
// besides the layers (get_shard_conditions matches the names, shard_model applies fully_shard to
// them before the root: training/_distributed.py @ v0.6.1). Neither: the recipe's default (null),
// the embedding and the output projection in the root; the stock configs name both
// (recipes/configs/llama3/8B_full.yaml @ v0.6.1).
struct custom_sharded_layers {
  bool tok_embeddings = false;
  bool output = false;

  [[nodiscard]] constexpr bool any() const { return tok_embeddings || output; }
};

// Which code runs a state-space mixer (a Mamba stack's or a hybrid stack's): `fused`, the
// mamba-ssm and causal-conv1d kernels the modeling file's cuda_kernels_forward calls, which
// transformers picks silently whenever they import and the weights are on CUDA; `torch`, the
// modeling file's torch code (slow_forward, torch_forward). framework_default: fused on CUDA,
// torch on CPU.
enum class ssm_kernel_choice : std::uint8_t { framework_default, fused, torch };

// Whether the training forward builds a KV cache (the model's `use_cache` argument): `config`
// follows the model's config.json (model_spec::use_cache), `on` / `off` are what the script
// passes. graph/layers/attention.hpp keeps_cache_in_training says when the cache exists.
enum class cache_setting : std::uint8_t { config, on, off };

// How Liger's apply_liger_kernel_to_<model_type> met the model (Liger-Kernel v0.5.10 @ 44a8f2fb,
// transformers/monkey_patch.py). classes: called before the model was built, it replaced the
// family's RMSNorm class, so every RMSNorm module is Liger's with the class's in_place. instance:
// called on the built model (transformers' use_liger_kernel, _apply_liger_kernel_to_instance), it
// patched the modules it names one by one (_patch_rms_norm_module), each with its own in_place.
enum class liger_patching : std::uint8_t { classes, instance };

// How a micro-batch's examples become rows. none: micro_batch rows of seq_len tokens each (a padded
// batch counted at its full length). packed: examples concatenated into micro_batch full rows of
// seq_len tokens (TRL SFTConfig packing, strategy "wrapped"): the same tensors as `none`, and the
// attention crosses example boundaries as the position_ids run on. padding_free: the micro_batch
// examples flattened into one row with position_ids restarting per example (TRL padding_free,
// DataCollatorWithFlattening; trl/trainer/sft_config.py @ 016013e8: "only supported with the
// FlashAttention 2 or 3"), which flash_attention_2 turns into one varlen call
// (modeling_flash_attention_utils.py@7713be1e _flash_attention_forward, prepare_fa2_from_position_ids).
enum class batch_packing : std::uint8_t { none, packed, padding_free };

// bitsandbytes 0.43.2 (@ ce53caf3): MatMul4Bit no longer keeps its input for backward.
inline constexpr std::uint32_t bnb_drops_matmul_input = 4302;

// DeepSpeed's optimizer wrappers without ZeRO (zero_optimization.stage 0): BF16_Optimizer
// (deepspeed/runtime/bf16_optimizer.py v0.16.5) and FP16_Optimizer (runtime/fp16/fused_optimizer.py).
enum class stage0_optimizer : std::uint8_t { none, bf16_optimizer, fp16_optimizer };

struct training_spec {
  std::uint64_t micro_batch = 1;
  std::uint64_t seq_len = 512;  // every token of a sample, a multimodal sample's image tokens included
  precision prec = precision::fp32;
  optimizer_kind optimizer = optimizer_kind::adamw;
  optimizer_implementation optimizer_impl = optimizer_implementation::foreach;
  std::uint64_t grad_accum = 1;
  checkpointing ckpt = checkpointing::none;
  checkpoint_variant ckpt_variant = checkpoint_variant::framework_default;  // with ckpt full
  attention_impl attention = attention_impl::flash;
  // attention flash asked for as transformers' attn_implementation "flash_attention_2": flash-attn's
  // own kernels, which take k and v with fewer heads, rather than SDPA's fused kernels.
  bool flash_attention_2 = false;
  training_target target = training_target::full;
  std::uint64_t lora_rank = 0;
  lora_modules lora_targets = lora_target::q | lora_target::v;  // memscale/lora.hpp: parse_lora_targets
  base_quant quant = base_quant::nf4;     // only with training_target::qlora
  bool dropout = true;
  loss_impl loss = loss_impl::standard;
  std::uint64_t loss_chunk = 128;         // tokens per cross-entropy chunk (lit-gpt default 128)
  bool zero_grad_to_none = true;          // PyTorch >= 2.0 default; older Trainers zeroed in place
  // Memory-saving techniques the planner switches on (each modelled by the estimators).
  bool offload_optimizer = false;         // optimizer state and step on the CPU (ZeRO-Offload style)
  bool offload_parameters = false;        // parameters streamed from the CPU one block at a time
  bool offload_activations = false;       // checkpointed block inputs kept on the CPU
  device_kind device = device_kind::cuda;
  std::uint64_t data_parallel = 1;        // ranks that shard (or replicate) the model
  // torchtitan's tensor_parallel_degree: the TP group beside FSDP2's data_parallel ranks, with
  // sequence parallelism and loss_parallel as apply_tp composes them (graph/layers/sequence_parallel.hpp).
  std::uint64_t tensor_parallel = 1;
  // torchtitan's context_parallel_degree: the CP group whose ranks each hold 2 of the sequence's
  // 2 x cp round-robin chunks and run ring attention over the others' keys and values; FSDP2
  // shards over data_parallel x context_parallel ranks (graph/layers/context_parallel.hpp).
  std::uint64_t context_parallel = 1;
  sharding shard = sharding::none;
  // FSDP use_orig_params=True (Lightning's default from torch 2.0): a flat parameter with
  // any trainable tensor gets a gradient for all of it, frozen tensors included.
  bool fsdp_use_orig_params = true;
  // FSDP1 (FullyShardedDataParallel): the forward uses each wrapped unit's parameters as autograd
  // views of its flat parameter (_flat_param.py _use_unsharded_views(as_params=False), torch 2.1),
  // so their gradients meet in the flat parameter's split backward. rank_run sets it for FSDP1.
  bool fsdp_flat_views = false;
  std::uint32_t torch_version = 205;      // major * 100 + minor: optimizer internals changed across releases
  // major * 100 + minor of Hugging Face transformers; 0: not stated (the 4.x attention path).
  // From 5.0 SDPA gets grouped-query k/v as they are (enable_gqa) instead of repeat_kv copies.
  std::uint32_t transformers_version = 0;
  bytes blas_workspace = pytorch_cublas_workspace_default;  // the GPU's BLAS workspace (gpu_spec::cublas_workspace)
  bool cuda_lazy_loading = true;          // CUDA >= 11.7 loads kernels lazily: smaller context
  std::uint32_t cuda_version = 0;         // major * 100 + minor as stated (software.cuda); 0: not stated
  lora_variant lora_kind = lora_variant::lora;
  image_inputs images{};  // a multimodal run's images (graph/layers/vision_tower.hpp)
  adapter_dtype adapters = adapter_dtype::framework_default;  // resolved by build() (graph/model_graph.hpp)
  // PEFT and lit-gpt use no dropout module at all when lora_dropout == 0 (nn.Identity /
  // `lambda x: x`), so nothing is kept: peft layer.py update_layer, lit-gpt lora.py LoRALayer.
  bool lora_dropout = true;
  // major * 10000 + minor * 100 + patch of bitsandbytes (QLoRA): 0.43.2 stopped keeping the
  // 4-bit matmul's input for backward. Default: the current release, 0.49.2.
  std::uint32_t bitsandbytes_version = 4902;
  std::uint64_t target_len = 0;           // encoder-decoder: decoder (label) tokens per sequence; 0: seq_len
  // The loop wraps every micro-step but the last in the engine's no_sync() (DDP, FSDP): no
  // gradient reduction until the accumulation boundary, so FSDP keeps unsharded gradients
  // between micro-steps (torch/distributed/fsdp/fully_sharded_data_parallel.py no_sync docs).
  // Without it FSDP reduce-scatters every micro-step into the rank's sharded gradient.
  bool no_sync = false;
  output_cast_kind output_cast = output_cast_kind::framework_default;
  framework_kind framework = framework_kind::hf;
  // torchtune's chunked loss splits the sequence into this many chunks (TransformerDecoder
  // num_output_chunks, CEWithChunkedOutputLoss(num_output_chunks=8)); 0: loss_chunk tokens each.
  std::uint64_t loss_chunks = 0;
  // Each parameter's optimizer steps in its post-accumulate-grad hook and frees its gradient
  // (torchtune training/memory.py register_optim_in_bwd_hooks @ v0.6.1): no step after
  // backward, no gradients kept beyond the ones in flight.
  bool optimizer_in_backward = false;
  // bitsandbytes' paged optimizer of `optimizer` (PagedAdam, PagedAdamW, PagedAdamW8bit,
  // PagedLion; transformers' optim="paged_adamw_32bit" and siblings): its large state lives in
  // CUDA unified memory (estimate/optimizer.hpp state_is_paged).
  bool paged_optimizer = false;
  // The optimizer steps a flat fp32 copy of the 16-bit trainable parameters (DeepSpeed's
  // fp16/bf16 engine: parallel_spec::deepspeed.precision sets it for the rank's run).
  bool fp32_master = false;
  // Which of DeepSpeed's stage-0 wrappers holds that master (no ZeRO): parallel_spec sets it.
  stage0_optimizer stage0 = stage0_optimizer::none;
  // The framework's release as major * 10000 + minor * 100 + patch; 0: the release memscale
  // reads it at (framework_read_at). torchtune's and litgpt's are inputs (litgpt 0: the 2023
  // scripts of the dev rows; 0.4.x: the config-hub release; 0.5.5 to 0.5.13: main as read at
  // v0.5.13); Hugging Face's is transformers_version.
  std::uint32_t framework_version = 0;
  ssm_kernel_choice ssm_kernels = ssm_kernel_choice::framework_default;  // state-space mixers only
  // Liger's Triton RMSNorm and SwiGLU in place of the modeling file's (Liger-Kernel v0.5.10
  // ops/rms_norm.py, ops/swiglu.py): each saves fewer tensors (graph/layers/norms.hpp, mlp.hpp).
  bool liger_rms_norm = false;
  bool liger_swiglu = false;
  // How the RMSNorms were patched: which modules became Liger's and with which in_place differs
  // (liger.hpp liger_rms_norm_use).
  liger_patching liger_norm_patching = liger_patching::classes;
  // Liger's RoPE (ops/rope.py: q and k rotated in place), GEGLU (ops/geglu.py: the tanh-GELU gated
  // product) and LayerNorm (ops/layer_norm.py), v0.5.10 @ 44a8f2fb (graph/layers/liger_kernels.hpp).
  bool liger_rope = false;
  bool liger_geglu = false;
  bool liger_layer_norm = false;
  // torchtitan's selective activation checkpointing; sac_every: k of every_kth_block.
  selective_ac sac = selective_ac::none;
  std::uint64_t sac_every = 0;
  custom_sharded_layers custom_sharded{};  // torchtune's distributed recipes only
  // litgpt's finetune/lora.py over > 1 devices from 0.5.11: Lightning Fabric's ModelParallelStrategy
  // with the script's parallelize_fn, one rank's FSDP2 step (parallel/litgpt_fsdp2.hpp), instead of
  // the FSDPStrategy (FSDP1) of its 0.4 releases and of its other scripts.
  bool litgpt_model_parallel = false;
  cache_setting use_cache = cache_setting::config;
  batch_packing packing = batch_packing::none;
  // padding_free: the mean tokens of an example (0: seq_len, every example as long as the longest);
  // the micro-batch's one row holds micro_batch x example_tokens tokens, seq_len stays the longest
  // example (max_length), which truncates them: a mean above it counts seq_len (the upper side).
  std::uint64_t example_tokens = 0;
  // The attention_mask has zeros: examples padded to the longest (DataCollatorWithPadding), or
  // left-padded prompts in generate(). Under SDPA from transformers 5.0 the mask is then made as a
  // (batch, 1, rows, keys) bool tensor (masking_utils.py@00c4411c _ignore_causal_mask_sdpa: the
  // causal skip needs padding_mask.all()), which turns flash and enable_gqa off.
  bool padded = false;
  // A generate() forward of gpt-oss whose experts stay MXFP4 and run through triton_kernels'
  // matmul_ogs (graph/layers/gpt_oss_mxfp4.hpp); only inference/generate_peak.hpp forward_run sets it.
  bool mxfp4_experts = false;
  // The linear layers a pre-quantised checkpoint keeps in 16 bits (its quantization_config's
  // modules_to_not_convert, by role: memscale/unquantized_modules.hpp); a QLoRA base holds them
  // as frozen 16-bit weights.
  lora_modules unquantized = 0;
};

// Tokens of one micro-batch: micro_batch x seq_len, or the flattened row of a padding-free batch
// (examples truncated to max_length: SFTConfig max_length, trl/trainer/sft_config.py @ 016013e8).
constexpr std::uint64_t tokens_per_micro_batch(const training_spec& t) {
  const bool mean_given = t.packing == batch_packing::padding_free && t.example_tokens != 0;
  const std::uint64_t per_example = mean_given && t.example_tokens < t.seq_len ? t.example_tokens : t.seq_len;
  return detail::checked_mul(t.micro_batch, per_example, detail::quantity{"tokens (micro_batch x seq_len)"});
}

// The run as its layers see the rows: a padding-free micro-batch is one sequence of all its tokens
// (input_ids and position_ids of shape (1, tokens), DataCollatorWithFlattening); other runs as they are.
constexpr training_spec as_rows(training_spec t) {
  if (t.packing != batch_packing::padding_free) return t;
  t.seq_len = tokens_per_micro_batch(t);
  t.micro_batch = 1;
  t.example_tokens = 0;
  return t;
}

// The release each framework's rules were read from: torchtune v0.6.1 (pytorch/torchtune
// @ a6290a5b); 0 where the version is another field (hf: transformers_version) or a commit
// (lit-gpt: Lightning-AI/lit-gpt @ b96a5708, finetune/lora.py).
constexpr std::uint32_t framework_read_at(framework_kind f) { return f == framework_kind::torchtune ? 601 : 0; }

// litgpt 0.4 (Lightning-AI/litgpt @ b0ea1772, v0.4.9) as framework_version: its 0.4 releases.
inline constexpr std::uint32_t litgpt_v0_4 = 400;
// litgpt main, read at v0.5.13 (Lightning-AI/litgpt @ 26857050): its attention is the one
// "Drop interleave placement in QKV matrix" (fabf765b) brought in 0.5.5, so 0.5.5 to 0.5.13 share it.
inline constexpr std::uint32_t litgpt_v0_5_5 = 505;
inline constexpr std::uint32_t litgpt_main = 513;

// Whether `version` (major * 10000 + minor * 100 + patch) is a release whose memory rules are
// the ones read: torchtune's 0.6 patch releases, litgpt's 0.4 releases and 0.5.5 to 0.5.13.
constexpr bool framework_version_modelled(framework_kind f, std::uint32_t version) {
  if (version == 0) return true;
  if (f == framework_kind::litgpt)
    return (version >= litgpt_v0_4 && version < 500) || (version >= litgpt_v0_5_5 && version <= litgpt_main);
  return f == framework_kind::torchtune && version >= 600 && version < 700;
}

// litgpt 0.4's RMSNorm computes in fp32 (litgpt/model.py lines 483-490 @ b0ea1772); the 2023
// scripts' in the input dtype (lit_gpt/rmsnorm.py @ 8641822; the upcast came in 6178c7cc).
constexpr bool litgpt_rms_norm_in_fp32(const training_spec& t) {
  return t.framework == framework_kind::litgpt && t.framework_version >= litgpt_v0_4;
}

// litgpt main's CausalSelfAttention.forward splits q, k and v as views of the non-interleaved
// qkv, rotates the query groups' keys, then copies k and v to every query head with
// repeat_interleave (litgpt/model.py lines 472-539 @ 26857050); 0.4 expanded them before RoPE.
constexpr bool litgpt_repeats_kv_after_rope(const training_spec& t) {
  return t.framework == framework_kind::litgpt && t.framework_version >= litgpt_v0_5_5;
}

// The state-space kernels a run uses: framework_default resolved by the device.
constexpr ssm_kernel_choice ssm_kernels_of(const training_spec& run) {
  if (run.ssm_kernels != ssm_kernel_choice::framework_default) return run.ssm_kernels;
  return run.device == device_kind::cuda ? ssm_kernel_choice::fused : ssm_kernel_choice::torch;
}

constexpr std::string_view to_string(batch_packing p) noexcept {
  switch (p) {
    case batch_packing::none: return "none";
    case batch_packing::packed: return "packed";
    case batch_packing::padding_free: return "padding_free";
  }
  return "none";
}

constexpr std::string_view to_string(cache_setting c) noexcept {
  switch (c) {
    case cache_setting::config: return "config";
    case cache_setting::on: return "on";
    case cache_setting::off: return "off";
  }
  return "config";
}

constexpr std::string_view to_string(ssm_kernel_choice k) noexcept {
  switch (k) {
    case ssm_kernel_choice::framework_default: return "default";
    case ssm_kernel_choice::fused: return "fused";
    case ssm_kernel_choice::torch: return "torch";
  }
  return "default";
}

// The run with a framework's defaults, each settable afterwards. torchtune: adapters in the
// base dtype (the model is built under set_default_dtype, LoRA included) and its recipes'
// CEWithChunkedOutputLoss over 8 chunks (modules/loss/ce_chunked_output_loss.py @ v0.6.1,
// num_output_chunks: int = 8). lit-gpt: its LoRA scripts' chunked loss and no_sync (below).
// Hugging Face: the library's defaults.
constexpr training_spec with_framework(training_spec run, framework_kind f) {
  // What another framework's defaults set goes back to the library's before f's apply.
  constexpr training_spec plain{};
  run.framework = f;
  run.adapters = plain.adapters;
  run.loss = plain.loss;
  run.loss_chunk = plain.loss_chunk;
  run.loss_chunks = plain.loss_chunks;
  if (f == framework_kind::torchtune) {
    run.adapters = adapter_dtype::as_base;
    run.quant = base_quant::nf4_double_quant;  // torchao's to_nf4, the only 4-bit base it builds
    run.loss = loss_impl::chunked;
    run.loss_chunks = 8;
  }
  if (f == framework_kind::litgpt) {
    // finetune/lora.py (Lightning-AI/lit-gpt @ b96a5708): cross-entropy over 128-token chunks,
    // and accumulation under fabric.no_backward_sync (DDP's and FSDP's no_sync).
    run.loss = loss_impl::chunked;
    run.loss_chunk = 128;
    run.no_sync = true;
  }
  return run;
}

// The loss a framework's script computes when the run states none. with_framework gives litgpt
// the LoRA scripts' chunked head; finetune/full.py calls the model without lm_head_chunk_size and
// takes the cross-entropy of the one logits tensor (finetune/full.py lines 169-171 @ 8641822,
// litgpt/finetune/full.py line 256 @ b0ea1772, line 284 @ 26857050): run.loss standard, whose
// 128-row chunks from 0.4 on are the graph's (loop_loss_chunk_rows).
constexpr training_spec with_script_loss(training_spec run) {
  if (run.framework == framework_kind::litgpt && run.target == training_target::full) {
    run.loss = loss_impl::standard;
    run.loss_chunks = 0;
  }
  return run;
}

// Decoder tokens per sequence of an encoder-decoder run.
constexpr std::uint64_t target_len_of(const training_spec& t) { return t.target_len == 0 ? t.seq_len : t.target_len; }

// Liger's kernels as apply_liger_kernel_to_llama applies them by default (Liger-Kernel v0.5.10
// @ 44a8f2fb, transformers/monkey_patch.py: rope, rms_norm, swiglu and fused_linear_cross_entropy
// True): the C++ API's shorthand for a LLaMA-shaped model. `--liger` and a run document's
// "liger" resolve the model's own family (apply_liger(run, model), liger.hpp).
constexpr training_spec& apply_liger(training_spec& run) {
  run.loss = loss_impl::fused_linear;
  run.loss_chunks = 0;
  run.liger_rms_norm = true;
  run.liger_norm_patching = liger_patching::instance;
  run.liger_swiglu = true;
  run.liger_rope = true;
  return run;
}

// Whether any Liger kernel is on.
constexpr bool uses_liger(const training_spec& t) {
  return t.loss == loss_impl::fused_linear || t.liger_rms_norm || t.liger_swiglu || t.liger_rope || t.liger_geglu ||
         t.liger_layer_norm;
}

constexpr bool uses_autocast(precision p) { return p == precision::amp_fp16 || p == precision::amp_bf16; }
constexpr bool is_lora(const training_spec& t) { return t.target != training_target::full; }

// Transformers' first release whose gradient_checkpointing_enable() without kwargs passes
// use_reentrant=False (huggingface/transformers PR #43203, merged 2026-01-09; 5.0 is taken as
// reentrant, the upper side); from 4.37 to it the default was use_reentrant=True (PR #28538), and
// before, torch's own default, also reentrant.
inline constexpr std::uint32_t transformers_non_reentrant_default = 501;

// Whether each checkpointed block runs under the reentrant checkpoint. Hugging Face's default
// follows the release (unstated: the current one, as for use_cache); lit-gpt, torchtune and
// torchtitan wrap blocks with checkpoint_wrapper, whose default is NO_REENTRANT
// (torch/distributed/algorithms/_checkpoint/checkpoint_wrapper.py).
constexpr bool reentrant_checkpoint(const training_spec& t) {
  if (t.ckpt != checkpointing::full) return false;
  if (t.ckpt_variant != checkpoint_variant::framework_default) return t.ckpt_variant == checkpoint_variant::reentrant;
  return t.framework == framework_kind::hf && t.transformers_version != 0 &&
         t.transformers_version < transformers_non_reentrant_default;
}

// The runs memscale models as one rank's FSDP2 step (estimate/fsdp2.hpp): torchtitan's,
// torchtune's distributed recipes (full_ and lora_finetune_distributed: fully_shard over > 1 ranks)
// and litgpt's LoRA script under ModelParallelStrategy.
constexpr bool runs_fsdp2(const training_spec& t) {
  const bool sharded = t.shard == sharding::full && t.data_parallel > 1;
  return t.framework == framework_kind::torchtitan || (t.framework == framework_kind::torchtune && sharded) ||
         (t.framework == framework_kind::litgpt && t.litgpt_model_parallel && sharded);
}

constexpr const training_spec& validate(const training_spec& t) {
  using detail::require;
  constexpr auto bad = error_code::invalid_run;
  require(t.micro_batch > 0, bad, "run.micro_batch", "must be > 0", t.micro_batch);
  require(t.seq_len > 0, bad, "run.seq_len", "must be > 0", t.seq_len);
  require(t.grad_accum > 0, bad, "run.grad_accum", "must be > 0", t.grad_accum);
  require(!is_lora(t) || t.lora_rank > 0, bad, "run.lora_rank", "must be > 0 when training LoRA adapters",
          t.lora_rank);
  require(is_lora(t) || t.lora_rank == 0, bad, "run.lora_rank", "must be 0 when training every weight",
          t.lora_rank);
  require(!is_lora(t) || t.lora_targets != 0, bad, "run.lora_targets", "must name at least one projection", 0);
  // 16-bit adapters under autocast are modelled over a model loaded in the autocast dtype; a 4-bit
  // base leaves its other weights' dtype open (embeddings, norms, the head), which is not modelled.
  require(t.adapters != adapter_dtype::autocast_dtype || (t.target == training_target::lora && uses_autocast(t.prec)),
          error_code::unsupported, "run.adapter_dtype",
          "is modelled as autocast only for LoRA (not QLoRA) under amp_bf16 or amp_fp16 (a model loaded in the "
          "autocast dtype with its adapters there)",
          t.adapters);
  require(t.data_parallel > 0, bad, "run.data_parallel", "must be > 0", t.data_parallel);
  // torchtitan's CP ranks shard too (apply_fsdp's dp_shard_cp mesh, parallelize.py @ f7084fc7).
  require(t.shard == sharding::none || t.data_parallel * t.context_parallel > 1, bad, "run.shard",
          "needs run.data_parallel > 1 (or run.context_parallel > 1)", 1);
  require(t.loss != loss_impl::chunked || t.loss_chunk > 0, bad, "run.loss_chunk", "must be > 0", t.loss_chunk);
  // The cast output is modelled where lit-gpt's loop computes the loss from it: the LoRA scripts'
  // chunked loss, or full.py's whole-logits loss. A loss computed inside forward() never sees the
  // cast logits.
  if (t.output_cast == output_cast_kind::fp32 && t.loss != loss_impl::chunked && t.framework != framework_kind::litgpt)
    detail::fail(error_code::unsupported, "run.output_cast",
                 "fp32 is modelled where lit-gpt's loop computes the loss: run.loss chunked, or run.framework litgpt "
                 "(finetune/full.py's whole-logits loss)");
  // torchtune chunks its loss by count; only its loss upcasts each chunk and frees the logits
  // before backward, so a count without torchtune has no code that runs it.
  if (t.loss_chunks > 0 && t.framework != framework_kind::torchtune)
    detail::fail(error_code::unsupported, "run.loss_chunks", "is torchtune's chunk count: needs run.framework torchtune",
                 t.loss_chunks);
  if (t.loss_chunks > 0 && t.loss != loss_impl::chunked)
    detail::fail(error_code::invalid_run, "run.loss_chunks", "needs run.loss chunked (the whole-logits loss has no chunks)",
                 t.loss_chunks);
  // Liger patches Hugging Face's modeling files (liger_kernel/transformers/monkey_patch.py);
  // lit-gpt and torchtune run their own model code and losses.
  if (t.framework != framework_kind::hf && uses_liger(t))
    detail::fail(error_code::unsupported, "run.loss",
                 "Liger's kernels (fused linear cross-entropy, RMSNorm, SwiGLU, GEGLU, RoPE, LayerNorm) are modelled "
                 "over Hugging Face models (run.framework hf)");
  if (t.framework == framework_kind::torchtune && t.loss == loss_impl::chunked && t.loss_chunks == 0)
    detail::fail(error_code::invalid_run, "run.loss_chunks", "must be > 0 for torchtune's chunked loss (its default: 8)", 0);
  // torchtune's 4-bit bases are torchao NF4Tensors, whose to_nf4 always quantizes the block
  // scalers again (double_quantize_scalers, torchao/dtypes/nf4tensor.py @ 05980129).
  if (t.framework == framework_kind::torchtune && t.target == training_target::qlora &&
      t.quant != base_quant::nf4_double_quant)
    detail::fail(error_code::unsupported, "run.quant",
                 "torchtune's qlora_ builders hold torchao NF4Tensors, whose scalers are always quantized again "
                 "(double_quantize_scalers): nf4_double_quant is the only layout");
  if (t.framework == framework_kind::torchtune && t.output_cast == output_cast_kind::fp32)
    detail::fail(error_code::unsupported, "run.output_cast",
                 "fp32 is Lightning Fabric's cast; torchtune's loop has none (its loss upcasts the logits itself)");
  // The recipes refuse accumulation and clipping with it (recipes/full_finetune_single_device.py
  // __init__, lines 146-157, full_finetune_distributed.py lines 185-196 @ v0.6.1): a gradient is gone
  // once its parameter stepped.
  require(!t.optimizer_in_backward || t.grad_accum == 1, error_code::unsupported, "run.grad_accum",
          "must be 1 with run.optimizer_in_backward (each gradient is freed once its parameter stepped)", t.grad_accum);
  if (!framework_version_modelled(t.framework, t.framework_version))
    detail::fail(error_code::unsupported, "run.framework_version",
                 t.framework == framework_kind::torchtune ? "is not modelled: torchtune's rules are read at 0.6.1 (its 0.6 releases)"
                 : t.framework == framework_kind::litgpt
                     ? "is not modelled: litgpt is read at 0.4.9 (0.4.x is 400 + x), at main (v0.5.13: 0.5.5 to 0.5.13 "
                       "are 505 to 513) and as the 2023 scripts (0)"
                     : "is read for torchtune and litgpt only (hf: the transformers version)");
  // litgpt 0.4's and main's finetune/full.py call the model without lm_head_chunk_size and chunk
  // the loss over the whole logits themselves (litgpt/finetune/full.py lines 254-256 @ b0ea1772,
  // lines 282-284 @ 26857050): run.loss chunked is the LoRA scripts' chunked head, which full.py
  // does not run.
  if (litgpt_rms_norm_in_fp32(t) && t.target == training_target::full && t.loss != loss_impl::standard)
    detail::fail(error_code::unsupported, "run.loss",
                 "must be standard (its default) for litgpt 0.4's and main's full fine-tune: finetune/full.py calls "
                 "the model without lm_head_chunk_size and splits the whole logits' cross-entropy into 128-row "
                 "chunks itself");
  // Main's LoRA script shards with FSDP2 under ModelParallelStrategy (litgpt/finetune/lora.py lines
  // 152-162 @ 26857050; run.litgpt_model_parallel, parallel/litgpt_fsdp2.hpp); finetune/full.py keeps
  // 0.4's FSDPStrategy (auto_wrap_policy and activation_checkpointing_policy {Block}, limit_all_gathers,
  // no cpu_offload: lines 107-114 @ 26857050, lines 98-105 @ b0ea1772), FSDP1's walk.
  const bool litgpt_main_sharded = litgpt_repeats_kv_after_rope(t) && !t.litgpt_model_parallel &&
                                   (t.data_parallel > 1 || t.shard != sharding::none);
  if (litgpt_main_sharded && t.target != training_target::full)
    detail::fail(error_code::unsupported, "run.data_parallel",
                 "must be 1 for litgpt main's LoRA without ModelParallelStrategy: finetune/lora.py shards with FSDP2 "
                 "(run.litgpt_model_parallel) and refuses --quantize over several devices; full.py's FSDPStrategy "
                 "(run.target full) is modelled");
  if (litgpt_main_sharded && (t.shard != sharding::full || t.data_parallel < 2 || t.ckpt != checkpointing::full ||
                              t.offload_optimizer || t.offload_parameters || t.offload_activations))
    detail::fail(error_code::unsupported, "run.shard",
                 "litgpt main's full.py over several devices is FSDPStrategy's FULL_SHARD (run.shard full, "
                 "run.data_parallel > 1) with every Block checkpointed (run.ckpt full) and cpu_offload=False: no other "
                 "layout is modelled");
  // Fabric 2.6's FSDPPrecision gives bf16-mixed MixedPrecision(param_dtype=bfloat16)
  // (lightning/fabric/plugins/precision/fsdp.py mixed_precision_config @ 2.6.1; 2.4 kept fp32
  // parameters): bf16 gathered copies of fp32 shards under autocast, not modelled.
  if (litgpt_main_sharded && uses_autocast(t.prec))
    detail::fail(error_code::unsupported, "run.prec",
                 "must be pure_bf16 (bf16-true) or fp32 (32-true) for litgpt main's full.py over several devices: "
                 "Fabric 2.6's FSDPStrategy under bf16-mixed or 16-mixed gathers 16-bit copies of fp32 shards, which "
                 "is not modelled",
                 t.prec);
  if (t.sac != selective_ac::none && t.framework != framework_kind::torchtitan)
    detail::fail(error_code::unsupported, "run.sac", "is torchtitan's selective checkpointing: needs run.framework torchtitan");
  if (t.sac != selective_ac::none && t.ckpt != checkpointing::none)
    detail::fail(error_code::invalid_run, "run.ckpt", "must be none with run.sac (the policy decides what each block keeps)");
  require(t.sac != selective_ac::every_kth_block || t.sac_every > 0, bad, "run.sac_every",
          "must be > 0 for every_kth_block", t.sac_every);
  require(t.tensor_parallel > 0, bad, "run.tensor_parallel", "must be > 0", t.tensor_parallel);
  require(t.ckpt_variant == checkpoint_variant::framework_default || t.ckpt == checkpointing::full, bad,
          "run.use_reentrant", "needs run.ckpt full (it says which checkpoint wraps each block)", t.ckpt_variant);
  require(t.ckpt_variant != checkpoint_variant::reentrant || t.framework == framework_kind::hf,
          error_code::unsupported, "run.use_reentrant",
          "must be false for lit-gpt, torchtune and torchtitan: they wrap blocks with checkpoint_wrapper, which is "
          "non-reentrant",
          t.ckpt_variant);
  require(t.tensor_parallel == 1 || t.framework == framework_kind::torchtitan, error_code::unsupported,
          "run.tensor_parallel", "is torchtitan's tensor_parallel_degree: needs run.framework torchtitan",
          t.tensor_parallel);
  require(t.context_parallel > 0, bad, "run.context_parallel", "must be > 0", t.context_parallel);
  // Sequence parallelism splits the residual stream's sequence over the TP group (apply_tp's
  // SequenceParallel norms and Shard(1) layouts, models/llama3/infra/parallelize.py @ f7084fc7);
  // under CP the sequence it splits is the CP rank's seq_len / cp (tp is the mesh's innermost
  // dimension, below cp: ParallelDims.build_mesh, distributed/parallel_dims.py @ f7084fc7).
  require(t.seq_len % detail::checked_mul(t.tensor_parallel, t.context_parallel) == 0, error_code::invalid_run,
          "run.seq_len",
          "must be a multiple of run.tensor_parallel x run.context_parallel (sequence parallelism shards each CP "
          "rank's sequence)",
          t.seq_len);
  if (t.context_parallel > 1) {
    require(t.framework == framework_kind::torchtitan, error_code::unsupported, "run.context_parallel",
            "is torchtitan's context_parallel_degree: needs run.framework torchtitan", t.context_parallel);
    // context_parallel's load balancing (enable_load_balance, on by default) splits the sequence
    // into 2 x cp round-robin chunks, two per rank (_generate_round_robin_indices,
    // _templated_ring_attention's ROUND_ROBIN_CYCLE = 2: torch/distributed/tensor/experimental/
    // _attention.py read at pytorch @ 0123248a).
    require(t.seq_len % detail::checked_mul(2, t.context_parallel) == 0, error_code::invalid_run, "run.seq_len",
            "must be a multiple of 2 x run.context_parallel (the round-robin load balancer's chunks)", t.seq_len);
    // Ring attention replaces only the fused SDPA kernels (_sdpa_handler's call_maps: flash,
    // memory-efficient, cuDNN); the math path has no ring version.
    require(t.attention == attention_impl::flash || t.attention == attention_impl::sdpa, error_code::unsupported,
            "run.attention", "must be flash or sdpa with run.context_parallel (ring attention takes the fused kernels)",
            t.attention);
  }
  if (t.framework == framework_kind::torchtitan) {
    // torchtitan applies bf16 compute through FSDP2's MixedPrecisionPolicy only (apply_fsdp,
    // infra/parallelize.py @ f7084fc7): the modelled run is fully_shard over > 1 ranks of the
    // dp_shard_cp mesh (data_parallel_shard_degree x context_parallel_degree, parallel_dims.py).
    require(t.shard == sharding::full && t.data_parallel * t.context_parallel > 1, error_code::unsupported,
            "run.data_parallel",
            "torchtitan is modelled with FSDP2 (run.shard full) over data_parallel_shard_degree x "
            "context_parallel_degree > 1 ranks: its bf16 compute comes from FSDP2's MixedPrecisionPolicy",
            t.data_parallel);
    if (t.prec != precision::pure_bf16)
      detail::fail(error_code::unsupported, "run.prec",
                   "torchtitan is modelled with mixed_precision_param bfloat16 (pure_bf16: the unsharded compute "
                   "parameters; the fp32 shards follow from FSDP2)");
    if (is_lora(t) || t.offload_optimizer || t.offload_parameters || t.offload_activations || t.optimizer_in_backward)
      detail::fail(error_code::unsupported, "run.framework",
                   "torchtitan is modelled for full training without offload or optimizer-in-backward");
    require(t.grad_accum == 1, error_code::unsupported, "run.grad_accum",
            "must be 1 for torchtitan (gradient accumulation under FSDP2 is not modelled yet)", t.grad_accum);
    if (t.loss != loss_impl::standard)
      detail::fail(error_code::unsupported, "run.loss", "torchtitan's loss is the whole-logits cross-entropy (components/loss.py)");
    if (t.ckpt == checkpointing::selective)
      detail::fail(error_code::unsupported, "run.ckpt",
                   "selective for torchtitan is run.sac (every k-th block, or the per-op save list)");
  }
  if (t.custom_sharded.any() && !(t.framework == framework_kind::torchtune && runs_fsdp2(t)))
    detail::fail(error_code::invalid_run, "run.custom_sharded_layers",
                 "is a key of torchtune's distributed recipes: needs run.framework torchtune, run.shard full and "
                 "run.data_parallel > 1");
  if (t.framework == framework_kind::torchtune && (t.shard != sharding::none || t.data_parallel > 1)) {
    // full_finetune_distributed (torchtune v0.6.1, training/_distributed.py shard_model): fully_shard
    // on every layer and the root, no MixedPrecisionPolicy, the model built in bf16.
    require(t.shard == sharding::full && t.data_parallel > 1, error_code::unsupported, "run.data_parallel",
            "torchtune's distributed recipes are modelled as FSDP2 (run.shard full) over > 1 ranks", t.data_parallel);
    if (t.prec != precision::pure_bf16)
      detail::fail(error_code::unsupported, "run.prec",
                   "torchtune's distributed recipes are modelled with dtype bf16 (pure_bf16: bf16 shards, gradients "
                   "and AdamW state)");
    // lora_finetune_distributed shards the bf16 adapters with their layer (the same shard_model);
    // the qlora configs (llama2/7B_qlora.yaml @ v0.6.1) run it too, with NF4Tensor bases whose
    // packed data, block scalers and quantization factors are sharded and all-gathered with the
    // unit (_INNER_TENSOR_NAMES_FOR_SHARDING, torchao/dtypes/nf4tensor.py @ 05980129): the unit's
    // bytes (graph/layers/torchao_nf4.hpp). DoRA's magnitude is not read.
    if (is_lora(t) && t.lora_kind == lora_variant::dora)
      detail::fail(error_code::unsupported, "run.lora_kind",
                   "dora under lora_finetune_distributed is not modelled (its magnitude vectors' sharding is not "
                   "read); lora is");
    // lora_finetune_distributed never reads optimizer_in_bwd (recipes/lora_finetune_distributed.py @ v0.6.1).
    if (is_lora(t) && t.optimizer_in_backward)
      detail::fail(error_code::unsupported, "run.optimizer_in_backward",
                   "lora_finetune_distributed has no optimizer_in_bwd key; only full_finetune_distributed reads it");
    // enable_activation_offloading is read by both distributed recipes (OffloadActivations around
    // the model, as on one device: recipes/*_finetune_distributed.py @ v0.6.1); its stash on the
    // offload stream is a CUDA one (offload_stashed_blocks).
    // fsdp_cpu_offload passes CPUOffloadPolicy() to every fully_shard (shard_model,
    // training/_distributed.py @ v0.6.1): shards, gradients and optimizer state all on the host.
    if (t.offload_optimizer != t.offload_parameters)
      detail::fail(error_code::unsupported, "run.offload",
                   "under torchtune's distributed recipes must be optimizer+parameters (fsdp_cpu_offload: "
                   "CPUOffloadPolicy keeps the shards, their gradients and the optimizer state on the host) or none");
    if (t.ckpt == checkpointing::selective)
      detail::fail(error_code::unsupported, "run.ckpt",
                   "must be none or full for torchtune's distributed recipes (enable_activation_checkpointing)");
  }
  // What goes to the host is each checkpointed block's input: MemScale's BALANCED mode, DeepSpeed's
  // cpu_checkpointing (activation_checkpointing/checkpointing.py moves checkpointed inputs only) and
  // torchtune's OffloadActivations, which its recipes refuse without activation checkpointing.
  if (t.offload_activations && t.ckpt != checkpointing::full)
    detail::fail(error_code::invalid_run, "run.offload_activations",
                 "needs run.ckpt full (the host keeps each checkpointed block's input; without full checkpointing "
                 "nothing would move)");
  // Flattening under eager and SDPA: from masking_utils a (1, 1, tokens, tokens) block-diagonal
  // mask from the restarting position_ids (masking_utils.py@00c4411c find_packed_sequence_indices,
  // sdpa_mask, eager_mask) and every tokens^2 score (attention.hpp, decoder_stack.hpp). The first
  // release that builds that mask is not pinned here: a stated release before 5.0 is refused.
  if (t.packing == batch_packing::padding_free && t.attention != attention_impl::flash && t.transformers_version != 0 &&
      t.transformers_version < 500)
    detail::fail(error_code::unsupported, "run.packing",
                 "padding_free under eager or SDPA is modelled from transformers 5.0 (masking_utils' block-diagonal "
                 "mask); before it the release that builds the mask is not pinned: use run.attention flash "
                 "(flash_attention_2's varlen kernel) or state software.transformers 5.0 or later",
                 t.transformers_version);
  if (t.flash_attention_2 && t.attention != attention_impl::flash)
    detail::fail(error_code::invalid_run, "run.attention",
                 "must be flash when flash_attention_2 is asked for (flash-attn's kernels are fused ones)", t.attention);
  if (t.padded && t.packing != batch_packing::none)
    detail::fail(error_code::invalid_run, "run.padded",
                 "applies to rows padded to the longest example (run.packing none): packed and padding-free rows "
                 "carry no padding", t.packing);
  if (t.padded && t.attention == attention_impl::flash)
    detail::fail(error_code::unsupported, "run.padded",
                 "is modelled under sdpa and eager attention, not under flash (a fused kernel asked for by name) "
                 "nor flash_attention_2 (its unpadding copies, _upad_input)", 1);
  if (t.padded && t.framework != framework_kind::hf)
    detail::fail(error_code::unsupported, "run.padded",
                 "is modelled for Hugging Face models (run.framework hf): other frameworks build their masks "
                 "their own way", t.framework);
  if (t.packing == batch_packing::padding_free && t.framework != framework_kind::hf)
    detail::fail(error_code::unsupported, "run.packing",
                 "padding_free is modelled for Hugging Face models under TRL's or transformers' flattening "
                 "collator (run.framework hf)", t.framework);
  if (t.example_tokens != 0 && t.packing != batch_packing::padding_free)
    detail::fail(error_code::invalid_run, "run.example_tokens",
                 "needs run.packing padding_free (other batches hold micro_batch x seq_len tokens)", t.example_tokens);
  if (t.paged_optimizer) {
    detail::require(t.optimizer == optimizer_kind::adam || t.optimizer == optimizer_kind::adamw ||
                        t.optimizer == optimizer_kind::adamw_8bit || t.optimizer == optimizer_kind::lion,
                    error_code::unsupported, "run.paged_optimizer",
                    "needs optimizer adam, adamw, adamw_8bit or lion (bitsandbytes' paged optimizers)", t.optimizer);
    detail::require(t.device == device_kind::cuda && t.shard == sharding::none && t.data_parallel == 1 &&
                        !t.offload_optimizer && !t.optimizer_in_backward && !t.fp32_master,
                    error_code::unsupported, "run.paged_optimizer",
                    "is modelled on one CUDA device without data parallelism, sharding, offload, optimizer-in-backward "
                    "or an engine's fp32 master",
                    t.shard);
  }
  // full_finetune_distributed's optimizer_in_bwd steps each shard in FSDP2's reduce (estimate/fsdp2.hpp), on
  // the host under fsdp_cpu_offload: foreach_reduce copies the gradient there before it runs the hook
  // (_fsdp_collectives.py @ v2.6.0), and the recipe refuses neither pairing (full_finetune_distributed.py @ v0.6.1).
  const bool torchtune_fsdp2 = t.framework == framework_kind::torchtune && runs_fsdp2(t);
  if (t.optimizer_in_backward && !torchtune_fsdp2 && (t.shard != sharding::none || t.offload_optimizer))
    detail::fail(error_code::unsupported, "run.optimizer_in_backward",
                 "is modelled on one device without optimizer offload and under torchtune's "
                 "full_finetune_distributed (with or without fsdp_cpu_offload); no other sharding or offload");
  return t;
}

constexpr std::string_view to_string(framework_kind f) noexcept {
  switch (f) {
    case framework_kind::hf: return "hf";
    case framework_kind::litgpt: return "litgpt";
    case framework_kind::torchtune: return "torchtune";
    case framework_kind::torchtitan: return "torchtitan";
  }
  return "hf";
}

constexpr std::string_view to_string(precision p) noexcept {
  switch (p) {
    case precision::fp32: return "fp32";
    case precision::amp_fp16: return "amp_fp16";
    case precision::amp_bf16: return "amp_bf16";
    case precision::pure_bf16: return "pure_bf16";
    case precision::pure_fp16: return "pure_fp16";
  }
  return "fp32";
}

constexpr std::string_view to_string(adapter_dtype a) noexcept {
  switch (a) {
    case adapter_dtype::framework_default: return "default";
    case adapter_dtype::as_base: return "base";
    case adapter_dtype::fp32: return "fp32";
    case adapter_dtype::autocast_dtype: return "autocast";
  }
  return "default";
}

constexpr std::string_view to_string(optimizer_kind o) noexcept {
  switch (o) {
    case optimizer_kind::sgd: return "sgd";
    case optimizer_kind::sgd_momentum: return "sgd_momentum";
    case optimizer_kind::adam: return "adam";
    case optimizer_kind::adamw: return "adamw";
    case optimizer_kind::adamw_8bit: return "adamw_8bit";
    case optimizer_kind::adafactor: return "adafactor";
    case optimizer_kind::lion: return "lion";
  }
  return "adamw";
}

constexpr std::string_view to_string(checkpointing c) noexcept {
  return c == checkpointing::full ? "full" : c == checkpointing::selective ? "selective" : "none";
}
constexpr std::string_view to_string(checkpoint_variant v) noexcept {
  return v == checkpoint_variant::reentrant       ? "true (reentrant)"
         : v == checkpoint_variant::non_reentrant ? "false (non-reentrant)"
                                                  : "the framework's default";
}

constexpr std::string_view to_string(optimizer_implementation o) noexcept {
  return detail::enum_name(o, {"for_loop", "foreach", "fused"});
}
constexpr std::string_view to_string(training_target t) noexcept {
  return detail::enum_name(t, {"full", "lora", "qlora"});
}
constexpr std::string_view to_string(sharding s) noexcept {
  return detail::enum_name(s, {"none", "optimizer_state", "gradients", "full"});
}
constexpr std::string_view to_string(selective_ac a) noexcept {
  return detail::enum_name(a, {"none", "every_kth_block", "op_save_list"});
}

constexpr std::string_view to_string(attention_impl a) noexcept {
  switch (a) {
    case attention_impl::eager: return "eager";
    case attention_impl::sdpa_math: return "sdpa_math";
    case attention_impl::flash: return "flash";
    case attention_impl::sdpa: return "sdpa";
  }
  return "flash";
}

}  // namespace memscale
