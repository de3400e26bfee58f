// memscale/validate.hpp: the one check that a model and a run agree with each other.
//
// Every path that pairs a model with a run (build(), hence estimate and the planner;
// --cases records; --config; --run files; the run options) reaches check_sequence, so a
// contradiction such as a sequence longer than the model takes is refused by the same
// rule, with the same words, naming the field as the user typed it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "memscale/attention_kernel.hpp"
#include "memscale/error.hpp"
#include "memscale/model.hpp"
#include "memscale/parallel/litgpt_fsdp2.hpp"
#include "memscale/training.hpp"

namespace memscale {

// The longest sequence a model takes: its max_position_embeddings (model_spec::
// context_length) and, with learned positions, its table (nn.Embedding has no row for a
// later position); 0 when neither limits it (ALiBi, T5's relative buckets).
struct sequence_limit {
  std::uint64_t tokens = 0;
  bool learned_table = false;  // the table, not max_position_embeddings, is the limit
};

constexpr sequence_limit sequence_limit_of(const model_spec& m) {
  sequence_limit l{.tokens = m.context_length};
  if (m.positions == position_kind::learned && m.max_positions > 0 && (l.tokens == 0 || m.max_positions < l.tokens))
    l = {.tokens = m.max_positions, .learned_table = true};
  return l;
}

namespace detail {

// Not constexpr on purpose (see error.hpp).
[[noreturn]] inline void fail_sequence(std::string_view field, const model_spec& m, sequence_limit l, std::uint64_t got) {
  throw error(error_code::invalid_run, std::string(field) + " must be <= " + std::to_string(l.tokens) + " (the " +
                                           (l.learned_table ? "learned position table" : "max_position_embeddings") +
                                           " of " + std::string(m.name) + ") (got " + std::to_string(got) + ")");
}

}  // namespace detail

// Refuses `seq_len` tokens for `m`, naming `field` (--seq, train.seq, run.seq_len).
constexpr void check_sequence(const model_spec& m, std::uint64_t seq_len, std::string_view field) {
  const sequence_limit l = sequence_limit_of(m);
  if (l.tokens != 0 && seq_len > l.tokens) detail::fail_sequence(field, m, l, seq_len);
}

// Refuses a prompt and the tokens generated after it when together they exceed what `m`
// takes (or 2^64), naming `field` (--context + --new-tokens).
constexpr void check_sequence(const model_spec& m, std::uint64_t prompt, std::uint64_t generated,
                              const char* field) {
  check_sequence(m, detail::checked_add(prompt, generated, detail::quantity{field}), field);
}

// A framework runs its own model code: lit-gpt's scripts build lit-gpt's GPT (as_litgpt_model),
// torchtune's recipes its builders, which have the Hugging Face layout (separate q, k, v).
constexpr void check_framework(const model_spec& m, const training_spec& t) {
  if (t.framework != framework_kind::hf && (m.arch != architecture::decoder || !has_attention(m)))
    detail::fail(error_code::unsupported, "run.framework",
                 "litgpt and torchtune are modelled for decoder-only transformers (their recipes' GPT and "
                 "TransformerDecoder)");
  if (t.framework == framework_kind::litgpt && m.impl != implementation::litgpt)
    detail::fail(error_code::invalid_run, "run.framework",
                 "litgpt needs the model as lit-gpt builds it (model.impl litgpt; --framework litgpt converts a preset)");
  if (t.framework == framework_kind::torchtitan && m.impl != implementation::hf_transformers)
    detail::fail(error_code::invalid_run, "run.framework",
                 "torchtitan builds its own Llama (separate wq, wk, wv projections), not lit-gpt's: model.impl must not be "
                 "litgpt");
  if (t.framework == framework_kind::torchtune && m.impl != implementation::hf_transformers)
    detail::fail(error_code::invalid_run, "run.framework",
                 "torchtune builds its own models (separate q, k, v projections), not lit-gpt's: model.impl must not be litgpt");
  // A tied head is TiedLinear, no module (modules/tied_linear.py @ v0.6.1): 'output' names nothing
  // and its matmul reads the embedding unit's weight outside that unit's forward.
  if (t.custom_sharded.any() && m.tied_embeddings)
    detail::fail(error_code::unsupported, "run.custom_sharded_layers",
                 "with tied embeddings is not modelled (the tied head reads tok_embeddings' weight outside its unit's "
                 "forward); state none for this model");
}

// Liger's kernels replace particular modules: its RMSNorm an RMSNorm, its SwiGLU a SiLU-gated MLP,
// its fused linear cross-entropy a causal-LM head that neither LoRA nor 4-bit storage wraps
// (liger_kernel/transformers/monkey_patch.py, v0.5.10 @ 44a8f2fb).
constexpr void check_liger(const model_spec& m, const training_spec& t) {
  if (t.liger_rms_norm && m.norm != norm_kind::rmsnorm)
    detail::fail(error_code::unsupported, "run.fused_rmsnorm", "replaces an RMSNorm; this model's norm is not one");
  // Without a function of its family nothing names the modules an instance patch would replace.
  if (t.liger_rms_norm && t.liger_norm_patching == liger_patching::instance && m.liger == liger_patch::none)
    detail::fail(error_code::unsupported, "run.liger_patching",
                 "instance patches the modules this family's apply_liger_kernel_to_<model_type> names, and it has "
                 "none (Liger-Kernel 0.5.10); say classes where LigerRMSNorm replaced the model's RMSNorm class");
  if (t.liger_swiglu && m.mlp != mlp_kind::swiglu)
    detail::fail(error_code::unsupported, "run.fused_swiglu", "replaces a SiLU-gated MLP; this model's MLP is not one");
  // LigerGEGLUMLP computes GELU's tanh form only (transformers/geglu.py @ 44a8f2fb: Gemma's
  // gelu_pytorch_tanh).
  if (t.liger_geglu && m.mlp != mlp_kind::geglu)
    detail::fail(error_code::unsupported, "run.fused_geglu", "replaces a GELU-gated MLP (Gemma's); this model's MLP is not one");
  if (t.liger_layer_norm && m.norm != norm_kind::layernorm)
    detail::fail(error_code::unsupported, "run.fused_layernorm",
                 "replaces an nn.LayerNorm; this model's norm is not one (an RMSNorm, or a LayerNorm written in Python)");
  // liger_rotary_pos_emb rotates the whole head_dim of q and k as LLaMA's apply_rotary_pos_emb does;
  // multimodal rotary positions take another kernel (liger_multimodal_rotary_pos_emb), Llama 4's
  // complex rotation none.
  if (t.liger_rope && (m.positions != position_kind::rotary || m.rotary_fraction != 1.0 || m.rotary_complex ||
                       m.rotary_rows_per_layer))
    detail::fail(error_code::unsupported, "run.fused_rope",
                 "replaces LLaMA's apply_rotary_pos_emb over the whole head_dim; this model's positions are not that "
                 "(learned, partial, complex or multimodal rotary positions)");
  if ((t.liger_rope || t.liger_geglu || t.liger_layer_norm) && m.impl != implementation::hf_transformers)
    detail::fail(error_code::unsupported, "model.impl", "Liger's kernels patch transformers' modeling files: hf-transformers");
  if (t.loss != loss_impl::fused_linear) return;
  if (m.arch != architecture::decoder || m.head != head_kind::causal_lm)
    detail::fail(error_code::unsupported, "run.loss", "fused_linear_ce replaces a decoder's causal-LM head and loss");
  if (is_lora(t) && has(t.lora_targets, lora_target::head))
    detail::fail(error_code::unsupported, "run.loss",
                 "fused_linear_ce multiplies by the head's base weight: a LoRA-adapted head is not modelled with it");
  if (t.target == training_target::qlora && !m.tied_embeddings)
    detail::fail(error_code::unsupported, "run.loss",
                 "fused_linear_ce over a 4-bit head is not modelled (Liger multiplies by the stored weight)");
}

// A transformers release whose memory mechanism for this model is known and not modelled.
constexpr void check_transformers_release(const model_spec& m, std::uint32_t transformers_version) {
  if (m.batch_causal_mask_release != 0 && transformers_version == m.batch_causal_mask_release)
    detail::fail(error_code::unsupported, "software.transformers",
                 "4.38 is not modelled for LLaMA and Gemma: its _update_causal_mask copies a (max_position_embeddings)^2 "
                 "mask per batch item in the compute dtype (modeling_llama.py@v4.38, removed by PR #29753 in 4.39); "
                 "state 4.39 or later, or an earlier release");
}

// The LoRA targets a model has. A list that names a module the model lacks is refused: PEFT
// adapts nothing for that name. "all-linear" adapts the linears the model has. Multi-head latent
// attention has q_proj (no q_lora_rank) or q_a_proj and q_b_proj, kv_a_proj_with_mqa, kv_b_proj and
// o_proj, no k_proj or v_proj (modeling_deepseek_v2.py@0233e509 DeepseekV2Attention.__init__).
constexpr void check_latent_attention_targets(const model_spec& m, const training_spec& t) {
  if (!is_lora(t) || is_all_linear(t.lora_targets)) return;
  const lora_modules set = t.lora_targets;
  const auto value = static_cast<std::uint64_t>(set);
  if (!has_latent_attention(m)) {
    detail::require((set & lora_latent_attention) == 0, error_code::unsupported, "run.lora_targets",
                    "names q_a_proj, q_b_proj, kv_a_proj_with_mqa or kv_b_proj, which only multi-head latent "
                    "attention (DeepSeek) has",
                    value);
    return;
  }
  detail::require(!has(set, lora_target::k) && !has(set, lora_target::v), error_code::unsupported,
                  "run.lora_targets",
                  "names a key or value projection (k_proj, v_proj, a fused qkv): multi-head latent attention has "
                  "kv_a_proj_with_mqa and kv_b_proj instead",
                  value);
  if (m.q_lora_rank == 0)
    detail::require(!has(set, lora_target::q_a) && !has(set, lora_target::q_b), error_code::unsupported,
                    "run.lora_targets", "names q_a_proj or q_b_proj: without q_lora_rank the query is one q_proj",
                    value);
  else
    detail::require(!has(set, lora_target::q), error_code::unsupported, "run.lora_targets",
                    "names q_proj: with q_lora_rank the query is q_a_proj -> q_a_layernorm -> q_b_proj", value);
}

// DeepSeek's router under LoRA. Its forward multiplies by the gate's weight itself,
// F.linear(hidden_states.type(torch.float32), self.gate.weight.type(torch.float32))
// (modeling_deepseek_v2.py@0233e509 DeepseekV2Moe.forward): V2's gate is an nn.Linear that PEFT
// wraps (its adapter is never called, so it takes no gradient) and bitsandbytes quantises (the
// 4-bit packed weight cannot be cast and multiplied); V3's DeepseekV3TopkRouter holds a plain
// nn.Parameter (modeling_deepseek_v3.py@00b676f8), which target_modules never wrap. The routed
// experts are per-expert nn.Linear modules before transformers 5.0 (PEFT wraps each); from 5.0
// they are 3-D parameters (DeepseekV2Experts.gate_up_proj) that target_modules do not wrap.
constexpr void check_deepseek_lora(const model_spec& m, const training_spec& t) {
  if (!is_lora(t) || !m.router_fp32) return;
  const bool router_is_linear = !m.router_score_correction;  // V2's nn.Linear gate; V3's router keeps the bias
  const auto value = static_cast<std::uint64_t>(t.lora_targets);
  detail::require(!has(t.lora_targets, lora_target::router) || (is_all_linear(t.lora_targets) && !router_is_linear),
                  error_code::unsupported, "run.lora_targets",
                  "adapts DeepSeek's router (gate; all-linear wraps DeepSeek-V2's): its forward multiplies by "
                  "gate.weight in fp32 and never calls the adapter, which is not modelled; name the other targets",
                  value);
  detail::require(t.target != training_target::qlora || !router_is_linear, error_code::unsupported, "run.target",
                  "qlora of DeepSeek-V2 is not modelled: bitsandbytes quantises the gate nn.Linear, whose weight "
                  "the router casts to fp32 and multiplies by itself",
                  t.target);
  detail::require((t.lora_targets & lora_mlp) == 0 || t.transformers_version < 500, error_code::unsupported,
                  "run.lora_targets",
                  "adapts MLP projections of DeepSeek under transformers 5.0 or later: its routed experts are 3-D "
                  "parameters that target_modules do not wrap, which is not modelled",
                  value);
}

// What the DeepSeek pieces are modelled under. Multi-head latent attention: as Hugging Face
// transformers runs it. Leading dense layers are written before the repeated block, which gradient and parameter
// sharding and parameter streaming would treat as the model's root, not as layers. Checkpointing
// keeps them whole (every tensor they save, not one input each): the upper side, stated in the report.
constexpr void check_deepseek_layers(const model_spec& m, const training_spec& t) {
  if (has_latent_attention(m))
    detail::require(t.framework == framework_kind::hf, error_code::unsupported, "run.framework",
                    "multi-head latent attention is modelled as Hugging Face transformers runs it",
                    t.framework);
  check_latent_attention_targets(m, t);
  check_deepseek_lora(m, t);
  if (m.leading_dense_layers == 0) return;
  detail::require((t.shard == sharding::none || t.shard == sharding::optimizer_state) && !t.offload_parameters,
                  error_code::unsupported, "run.shard",
                  "must be none or optimizer_state, without parameter offload, with leading dense layers (DeepSeek's "
                  "first_k_dense_replace): they are written before the repeated block, which gradient and parameter "
                  "sharding would treat as the root unit",
                  t.shard);
}

// A hybrid stack (Jamba, Falcon-H1) repeats a period of layers: gradient and parameter sharding
// and parameter streaming would take the period as their unit where FSDP wraps each layer.
// Checkpointing takes the period as its unit too: one kept input per period, the period
// recomputed at once (the upper side, as Llama 4's).
constexpr void check_hybrid_layers(const model_spec& m, const training_spec& t) {
  if (m.hybrid_mixer == mixer_kind::attention) return;
  detail::require((t.shard == sharding::none || t.shard == sharding::optimizer_state) && !t.offload_parameters,
                  error_code::unsupported, "run.shard",
                  "must be none or optimizer_state, without parameter offload, for a hybrid state-space stack (Jamba, "
                  "Falcon-H1): its repeated block is a period of layers, which sharding would wrap as one unit",
                  t.shard);
}

// Gemma 3n's AltUp stack (graph/recipes/altup_stack.hpp) is written as transformers runs it on one
// device: the sparse-gate layers' saved tensors are one op before the repeated block, which gradient
// and parameter sharding and parameter streaming would treat as the root unit; a padding-free row
// is not modelled for it.
constexpr void check_altup(const model_spec& m, const training_spec& t) {
  if (m.altup_inputs == 0) return;
  detail::require(t.framework == framework_kind::hf, error_code::unsupported, "run.framework",
                  "must be hf for Gemma 3n's AltUp (modelled as transformers runs it)", t.framework);
  detail::require((t.shard == sharding::none || t.shard == sharding::optimizer_state) && !t.offload_parameters,
                  error_code::unsupported, "run.shard",
                  "must be none or optimizer_state, without parameter offload, for Gemma 3n: its sparse-gate layers' "
                  "saved tensors are one op before the repeated block, which sharding would treat as the root unit",
                  t.shard);
  detail::require(t.packing != batch_packing::padding_free, error_code::unsupported, "run.packing",
                  "must not be padding_free for Gemma 3n (its flattened row is not modelled)", t.packing);
}

// A padding-free row reaches each example through the position_ids the attention passes to
// _flash_attention_forward (modeling_flash_attention_utils.py@7713be1e): modelled for decoders whose
// every layer is rotary self-attention in transformers' code. A state-space mixer's scan (and
// its conv) runs over the whole row, latent attention and attention sinks take other kernels, and
// multimodal rotary positions come as (3, batch, tokens) rows that the boundary test does not read.
constexpr void check_packing(const model_spec& m, const training_spec& t) {
  if (t.packing != batch_packing::padding_free) return;
  const auto refuse = [](const char* field, const char* why) {
    detail::fail(error_code::unsupported, field, why, static_cast<std::uint64_t>(batch_packing::padding_free));
  };
  if (m.arch != architecture::decoder)
    refuse("model.arch", "must be decoder for run.packing padding_free (a causal LM's flattened row)");
  if (m.impl != implementation::hf_transformers)
    refuse("model.impl", "must be hf-transformers for run.packing padding_free (flash_attention_2 reads the position_ids)");
  if (!has_attention(m) || is_hybrid(m))
    refuse("model.mixer", "run.packing padding_free is modelled for attention layers only: a state-space mixer scans "
                          "across the examples of the row");
  if (has_latent_attention(m))
    refuse("model.kv_lora_rank", "must be 0 for run.packing padding_free (latent attention is not modelled flattened)");
  if (m.attention_sinks)
    refuse("model.attention_sinks", "must be off for run.packing padding_free (the sink kernel is not modelled flattened)");
  if (m.positions != position_kind::rotary || m.rotary_rows_per_layer)
    refuse("model.positions", "run.packing padding_free is modelled for rotary positions from (1, tokens) position_ids");
  // SDPA with the row's mask: CUDA's memory-efficient kernel and the math path are modelled
  // (attention.hpp); the CPU flash kernel's handling of a mask (torch 2.3 and later) is not.
  if (padded_row_mask(t) && t.attention == attention_impl::sdpa && t.device == device_kind::cpu &&
      attention_kernel_of(m, t) == attention_kernel::flash)
    refuse("run.attention", "sdpa on CPU with torch 2.3 or later runs its flash kernel with padding_free's block-diagonal "
                            "mask, which is not modelled (run.attention eager or sdpa_math is)");
}

// Images through a vision tower (training_spec::images): modelled for the Qwen2-VL, Qwen2.5-VL,
// Qwen3-VL, Gemma 3, Llama 4 and Gemma 3n towers, frozen, on one GPU, with the sequence counting the
// image tokens (graph/layers/vision_tower.hpp, vision_tower_qwen3.hpp, vision_tower_siglip.hpp,
// vision_tower_llama4.hpp, vision_tower_mobilenetv5.hpp).
constexpr void check_images(const model_spec& m, const training_spec& t) {
  const image_inputs& in = t.images;
  if (in.per_sample == 0) return;
  const char* field = "run.images.per_sample (train.images_per_sample, --images)";
  detail::require(m.idle_tower_parameters > 0, error_code::unsupported, field,
                  "needs a multimodal model: this one has no vision tower", in.per_sample);
  const bool gemma3 = m.vision.kind == vision_tower_kind::siglip_gemma3;
  const bool llama4 = m.vision.kind == vision_tower_kind::llama4;
  const bool gemma3n = m.vision.kind == vision_tower_kind::mobilenetv5;
  detail::require(m.vision.kind != vision_tower_kind::none, error_code::unsupported, field,
                  "images through this model's vision tower are not modelled (the qwen2_vl, qwen2_5_vl, qwen3_vl, "
                  "gemma3, llama4 and gemma3n towers are)",
                  in.per_sample);
  detail::require(in.height > 0 && in.width > 0, error_code::invalid_run,
                  "run.images.height x width (train.image, --image-size)",
                  "must be given (pixels) with images", in.height * in.width);
  // Gemma3ImageProcessor resizes every image to image_size^2, Llama4ImageProcessorFast tiles it and
  // Gemma 3n's tower takes pixel_values as given: smart_resize's bounds do not apply.
  detail::require(!(gemma3 || llama4 || gemma3n) || (in.min_pixels == 0 && in.max_pixels == 0), error_code::invalid_run,
                  "run.images.min_pixels (train.min_pixels, train.max_pixels)",
                  "applies to Qwen-VL image processors only: Gemma 3 resizes every image to vision_config.image_size, "
                  "Llama 4 cuts it into image_size tiles and Gemma 3n's pixel_values are run.images.height x width",
                  in.min_pixels);
  // MobileNetV5's neck average-pools its higher-resolution level (the image's / neck_reduction) to
  // msfa_output_resolution^2 when that side divides it, else resizes it bilinearly, which is not
  // modelled (mobilenetv5.py@aa4b5850 MobileNetV5MultiScaleFusionAdapter.forward). Gemma3nProcessor
  // makes 768 x 768 pixel_values.
  const std::uint64_t neck_side = m.vision.mobilenet.neck_reduction * m.vision.mobilenet.neck_resolution;
  detail::require(!gemma3n || (in.height % neck_side == 0 && in.width % neck_side == 0), error_code::unsupported,
                  "run.images.height x width (train.image, --image-size)",
                  "must be multiples of 16 x msfa_output_resolution (256 pixels for mobilenetv5_300m_enc) for Gemma 3n's "
                  "MobileNetV5 tower: its neck pools the 1/16 level to 16 x 16, other sizes take a bilinear resize, "
                  "which is not modelled (Gemma3nProcessor makes 768x768)",
                  in.height * in.width);
  const std::uint64_t min_pixels = in.min_pixels != 0 ? in.min_pixels : m.vision.min_pixels;
  const std::uint64_t max_pixels = in.max_pixels != 0 ? in.max_pixels : m.vision.max_pixels;
  detail::require(gemma3 || llama4 || gemma3n || (min_pixels > 0 && min_pixels <= max_pixels), error_code::invalid_run,
                  "run.images.min_pixels (train.min_pixels)", "must be > 0 and at most max_pixels", min_pixels);
  // A trained tower saves its blocks' activations for backward: not modelled.
  detail::require(in.tower_frozen || is_lora(t), error_code::unsupported,
                  "run.images.tower_frozen (train.frozen, --frozen-tower)",
                  "is false: full fine-tuning trains the vision tower too, whose saved activations are not modelled; "
                  "freeze it (requires_grad False, freeze_vision_tower; train.frozen \"vision_tower\")",
                  0);
  // PEFT matches target_modules by name, and the tower's MLP is gate_proj, up_proj and down_proj
  // too (Qwen2_5_VLMLP, modeling_qwen2_5_vl.py @ 00b676f8): adapters there train the tower.
  // Qwen2-VL's and Qwen3-VL's tower MLPs are fc1/fc2 and linear_fc1/linear_fc2: no such match.
  // SiglipAttention's projections are q_proj, k_proj and v_proj too (modeling_siglip.py @ 1c51a62f);
  // its MLP is fc1 and fc2 and its output out_proj, which no target names.
  constexpr lora_modules siglip_names = lora_target::q | lora_target::k | lora_target::v;
  detail::require(!gemma3 || !is_lora(t) || (t.lora_targets & siglip_names) == 0, error_code::unsupported,
                  "run.lora_targets",
                  "name q, k or v, which PEFT's name matching also adapts in Gemma 3's SigLIP tower (SiglipAttention): "
                  "a trained tower's activations are not modelled (target o and the MLP projections)",
                  t.lora_targets);
  // Llama4VisionAttention's projections are q_proj, k_proj, v_proj and o_proj too; its MLPs are fc1
  // and fc2, the patch embedding's linear and the projector's linear_1 (modeling_llama4.py@000c33fd).
  detail::require(!llama4 || !is_lora(t) || (t.lora_targets & lora_attention) == 0, error_code::unsupported,
                  "run.lora_targets",
                  "name an attention projection, which PEFT's name matching also adapts in Llama 4's vision model "
                  "(Llama4VisionAttention): a trained tower's activations are not modelled (target the MLP projections)",
                  t.lora_targets);
  detail::require(m.vision.kind != vision_tower_kind::qwen2_5_vl || !is_lora(t) || (t.lora_targets & lora_mlp) == 0,
                  error_code::unsupported, "run.lora_targets",
                  "name an MLP projection, which PEFT's name matching also adapts in the vision tower "
                  "(Qwen2_5_VLMLP): a trained tower's activations are not modelled (target attention projections)",
                  t.lora_targets);
  detail::require(t.prec != precision::amp_bf16 && t.prec != precision::amp_fp16, error_code::unsupported,
                  "run.prec", "autocast over fp32 weights in the vision tower is not modelled with images "
                  "(fp32 or pure 16-bit weights are)",
                  t.prec);
  detail::require(t.data_parallel == 1 && t.shard == sharding::none, error_code::unsupported, "run.data_parallel",
                  "images through a vision tower are modelled on one GPU", t.data_parallel);
}

// A padded batch's mask (training_spec::padded) as modelled: attention layers in transformers' code
// that take the mask create_causal_mask makes; a model that builds its own (OPT, BLOOM, ALiBi)
// holds one whatever the padding, and a state-space mixer reads no mask.
constexpr void check_padding(const model_spec& m, const training_spec& t) {
  if (!t.padded) return;
  const auto refuse = [](const char* field, const char* why) { detail::fail(error_code::unsupported, field, why, 1); };
  if (m.impl != implementation::hf_transformers)
    refuse("model.impl", "must be hf-transformers for run.padded (masking_utils' padded mask)");
  if (!has_attention(m) || is_hybrid(m))
    refuse("model.mixer", "run.padded is modelled for attention layers only (a state-space mixer reads no mask)");
  if (m.builds_attention_mask || m.alibi)
    refuse("model.arch", "run.padded is not modelled for a model that builds its own attention mask (OPT, BLOOM, "
                         "ALiBi): its mask is made whatever the padding");
  if (t.attention == attention_impl::sdpa && t.device == device_kind::cpu && attention_kernel_of(m, t) == attention_kernel::flash)
    refuse("run.attention", "sdpa on CPU with torch 2.3 or later runs its flash kernel with the padded mask, which is "
                            "not modelled (run.attention eager or sdpa_math is)");
}

namespace detail {

// validate(m, t) of a model validate(m) already passed: what the run adds. A generate() estimate
// builds three forward graphs per call of a model it validated once (validate(m) alone is about
// 10,000 constant-evaluation steps, against clang's limit of 1,048,576 for a whole plan).
constexpr void validate_run_of_valid_model(const model_spec& m, const training_spec& t) {
  validate(t);
  check_litgpt_model_parallel(t);
  check_transformers_release(m, t.transformers_version);
  check_sequence(m, t.seq_len, "run.seq_len");
  check_framework(m, t);
  check_liger(m, t);
  // A 4-bit load quantises the tower's nn.Linear layers as well, unless the checkpoint's
  // modules_to_not_convert keeps them: its stored bytes are not described yet.
  detail::require(m.idle_tower_parameters == 0 || t.target != training_target::qlora, error_code::unsupported, "run.target",
          "qlora of a model with a vision tower is not modelled yet (which of the tower's layers a 4-bit load "
          "quantises depends on the checkpoint)",
          t.target);
  check_deepseek_layers(m, t);
  check_hybrid_layers(m, t);
  check_altup(m, t);
  check_packing(m, t);
  check_padding(m, t);
  check_images(m, t);
  // LoRA targets name attention and MLP projections; a Mamba mixer's (in_proj, x_proj, dt_proj,
  // out_proj) are not among them, so an adapter run would train nothing: refused by name.
  if (is_lora(t))
    require_attention_mixer(m, "LoRA on its mixer projections is not modelled yet");
}

}  // namespace detail

constexpr const model_spec& validate(const model_spec& m, const training_spec& t) {
  validate(m);
  detail::validate_run_of_valid_model(m, t);
  return m;
}

}  // namespace memscale
