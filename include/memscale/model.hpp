// memscale/model.hpp: the architecture of a network, as its config file describes it.
//
// A model_spec holds the numbers a Hugging Face config.json (or a lit-gpt Config) gives;
// build() (graph/model_graph.hpp) turns it into the sequence of ops the estimators walk.
// Field order is part of the API: designated initialisers must follow it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "memscale/detail/enum_names.hpp"
#include "memscale/error.hpp"
#include "memscale/vision_tower.hpp"

namespace memscale {

// encoder_decoder: two stacks (T5), both written by build().
enum class architecture : std::uint8_t { decoder, encoder, encoder_decoder };
enum class position_kind : std::uint8_t { learned, rotary, none };
// layernorm_fp32_python: a LayerNorm without bias written out as Python ops in fp32, each
// intermediate saved (Cohere's CohereLayerNorm); needs norm_bias false.
enum class norm_kind : std::uint8_t { layernorm, rmsnorm, layernorm_fp32_python };
// gelu/relu: two matrices (up, down); swiglu/geglu: three (gate, up, down). gelu_tanh is
// Hugging Face's gelu_new written out as Python ops (each intermediate saved); a fused
// tanh-approximate F.gelu keeps only its input, like gelu. clamped_swiglu is gpt-oss's expert
// MLP (experts only): one gate_up matrix with bias, (clamp(up) + 1) * clamp(gate) *
// sigmoid(1.702 * clamp(gate)) as Python ops, a down matrix with bias. gelu_fast is Hugging
// Face's FastGELUActivation, the tanh approximation written with products instead of pow.
// relu_squared: square(relu(x)), two matrices (activations.py ReLUSquaredActivation).
enum class mlp_kind : std::uint8_t { gelu, gelu_tanh, relu, swiglu, geglu, clamped_swiglu, gelu_fast, relu_squared };
// sequential: x + attn(norm(x)), then + mlp(norm(.)) (GPT-2, LLaMA);
// parallel: x + attn(norm1(x)) + mlp(norm2(x)) (GPT-NeoX, Phi);
// post_norm: norm(x + attn(x)), then norm(. + mlp(.)) (BERT).
enum class block_layout : std::uint8_t { sequential, parallel, post_norm };
enum class head_kind : std::uint8_t { causal_lm, masked_lm, sequence_classification, none };
// Norms around a sequential block's branches: pre (LLaMA: x + f(norm(x))), post (OLMo 2:
// x + norm(f(x))), sandwich (Gemma 2/3: x + norm(f(norm(x)))).
enum class branch_norms : std::uint8_t { pre, post, sandwich };
// RMSNorm on queries and keys before RoPE: per_head over head_dim (Qwen3, Gemma 3),
// full_width over all heads at once (OLMo 2: one norm of heads*head_dim, one of kv*head_dim);
// l2: a weightless fp32 RMS norm over head_dim after RoPE (Llama 4's Llama4TextL2Norm).
enum class qk_norm_kind : std::uint8_t { none, per_head, full_width, l2 };
// The code that runs the model: what autograd keeps differs between implementations.
enum class implementation : std::uint8_t { hf_transformers, litgpt };
// What mixes tokens in a block: self-attention, or a state-space mixer (Mamba-1's selective
// scan, graph/layers/mamba.hpp; Mamba-2's chunked SSD, graph/layers/mamba2.hpp). A Mamba block
// is norm -> mixer -> residual add, no MLP.
enum class mixer_kind : std::uint8_t { attention, mamba1, mamba2 };
// What one layer of a stack of single-mixer blocks (Nemotron-H: norm -> one mixer -> residual
// add) runs: the Mamba-2 mixer, self-attention, the dense MLP (of dense_ffn when the model has
// experts), or the mixture of experts.
enum class layer_block_kind : std::uint8_t { mamba2, attention, mlp, moe };
inline constexpr std::size_t layer_block_kinds = 4;
// The most layers a per-layer block list holds (Nemotron-H-56B has 118).
inline constexpr std::size_t max_block_pattern_layers = 128;
// Which apply_liger_kernel_to_<model_type> transformers' use_liger_kernel=True calls for the model,
// with its defaults (Liger-Kernel v0.5.10 @ 44a8f2fb, transformers/monkey_patch.py
// MODEL_TYPE_TO_APPLY_LIGER_FN; liger.hpp): none (no entry: nothing is patched); llama (rope,
// rms_norm, swiglu, fused linear cross-entropy); gemma (rope, rms_norm, geglu, fused linear
// cross-entropy); glm4 (rope False); granite (Liger's cross_entropy, fused linear cross-entropy
// raises NotImplementedError).
// Which apply_liger_kernel_to_<model_type> a family has (liger.hpp): the kernels it turns on and
// which RMSNorm modules it replaces, with which in_place.
enum class liger_patch : std::uint8_t { none, llama, olmo2, gemma, gemma2, glm4, granite };
// Norms on a Mamba-1 mixer's dt, B and C: none (Mamba), weightless RMS (FalconMamba's
// b_c_rms / dt_rms buffers), weighted RMSNorms (Jamba).
enum class ssm_dt_norm_kind : std::uint8_t { none, weightless, weighted };

// A Gemma3nMultimodalEmbedder's sizes: a vocab x width table, RMSNorms over width and a width ->
// hidden projection (vocab 0: the model has none).
struct token_embedder {
  std::uint64_t vocab = 0;  // vocab_size of the tower's config (its token ids follow vocab_offset)
  std::uint64_t width = 0;  // the tower config's hidden_size
};

struct model_spec {
  std::string_view name = "custom";
  architecture arch = architecture::decoder;
  std::uint64_t layers = 0;
  std::uint64_t hidden = 0;
  std::uint64_t heads = 0;
  std::uint64_t kv_heads = 0;       // 0: same as heads (multi-head attention)
  std::uint64_t head_dim = 0;       // 0: hidden / heads
  std::uint64_t ffn = 0;            // MLP inner size (per expert for mixture-of-experts)
  std::uint64_t vocab = 0;
  std::uint64_t max_positions = 0;  // learned position table rows
  std::uint64_t context_length = 0; // longest sequence the model takes (config max_position_embeddings; 0: unknown)
  std::uint64_t type_vocab = 0;     // BERT token-type embeddings
  position_kind positions = position_kind::learned;
  double rotary_fraction = 1.0;     // share of head_dim that is rotated (Phi: 0.5, StableLM-alpha: 0.25)
  norm_kind norm = norm_kind::layernorm;
  std::uint64_t extra_norms_per_block = 0;  // norms beyond the usual two (Gemma 2: 2 more)
  mlp_kind mlp = mlp_kind::gelu;
  block_layout layout = block_layout::sequential;
  bool shared_attention_norm = false;  // parallel layout with one norm feeding both branches
  bool fused_qkv = false;              // one projection makes q, k and v (GPT-2 c_attn, lit-gpt attn)
  bool fused_gate_up = false;          // a gated MLP's gate and up are one nn.Linear (Phi3MLP.gate_up_proj)
  bool qkv_bias = false;
  bool attn_out_bias = false;
  bool mlp_bias = false;
  bool norm_bias = true;               // LayerNorm with a bias (RMSNorm never has one)
  bool embedding_norm = false;         // a norm right after the embeddings (BERT)
  bool final_norm = true;              // a norm after the last block (pre-norm decoders)
  bool tied_embeddings = false;
  head_kind head = head_kind::causal_lm;
  bool lm_head_bias = false;
  bool upcast_logits = false;          // logits.float() before the loss (HF LLaMA-family heads)
  bool shift_labels = false;           // the loss shifts the labels, not a copy of the logits (transformers >= 4.48)
  bool softmax_fp32 = false;           // eager attention: softmax(dtype=float32), then cast back (HF LLaMA family)
  bool logit_softcap = false;          // cap * tanh(logits / cap) before the loss (Gemma 2)
  bool logits_scale = false;           // logits / logits_scaling before the loss: a second logits tensor (Granite)
  bool pooler = false;                 // BERT pooler (dense + tanh on the first token)
  std::uint64_t num_labels = 2;        // sequence-classification outputs
  std::uint64_t experts = 0;           // 0: dense MLP
  std::uint64_t experts_per_token = 0;
  bool dropout = false;                // the model's own dropout layers have p > 0 (GPT-2, BERT: 0.1)
  // Which dropout sites those are, each following its own config key; all true by default,
  // so `dropout` alone switches every site. The graph drops out a site when dropout and its flag hold.
  bool attention_dropout = true;       // the attention probabilities (attn_pdrop, attention_probs_dropout_prob)
  bool hidden_dropout = true;          // each branch's output before the residual add (resid_pdrop, hidden_dropout_prob)
  bool embedding_dropout = true;       // the embeddings' sum (embd_pdrop; BERT: hidden_dropout_prob)
  implementation impl = implementation::hf_transformers;
  liger_patch liger = liger_patch::none;  // what use_liger_kernel=True patches (liger.hpp)
  std::uint64_t buffer_bytes_per_layer = 0;  // registered non-parameter buffers (old HF GPT-2: 1 MiB causal mask)
  std::uint64_t model_buffer_bytes = 0;      // registered buffers the model holds once (GPTBigCode: n_positions^2 bool mask)
  // The first transformers release (major * 100 + minor) whose generate() hands this family a
  // Cache object: before it the model returns tuples and generate() holds the previous step's
  // while the next forward builds new ones. 4.42 for the families with Cache support
  // (generation/utils.py _prepare_cache_for_generation, PR #30536); GPT-2 4.52 (PR #35761).
  std::uint32_t generate_tuple_cache_before = 442;
  // The first transformers release whose attention layers share one rotary table: before it
  // every layer's rotary embedding registers cos_cached and sin_cached (max_position_embeddings
  // x head_dim, the load dtype) and inv_freq (modeling_llama.py@v4.32 LlamaRotaryEmbedding).
  // LLaMA 4.40 (4.38.0/1 aside: read as 4.38.2), the Mistral family 4.42 (PR #30642); 0: none.
  std::uint32_t rotary_tables_per_layer_before = 0;
  // The first transformers release whose attention layers no longer register their own
  // (max_pos)^2 bool causal mask and rotary cos/sin tables: GPT-NeoX (modeling_gpt_neox.py
  // GPTNeoXAttention._init_bias, still there at 4.45; gone in the 4.48 modular file; the release
  // between is not pinned, so 4.48: the safe side). 0: none.
  std::uint32_t mask_buffers_per_layer_before = 0;
  // The first transformers release whose eager attention no longer clamps the masked scores with
  // torch.max(attn_weights, finfo.min), which saves them for backward (OPT: modeling_opt.py@v4.32;
  // dropped by the refactor after PR #33298, 4.45-4.48 not pinned: 4.48). 0: none.
  std::uint32_t attention_clamp_before = 0;
  // The transformers release whose LlamaModel/GemmaModel repeat a registered (max_pos)^2 causal
  // mask per batch item in the compute dtype (4.38: _update_causal_mask; PR #29753 removed it in
  // 4.39). Not modelled: a run stating it is refused. 0: none.
  std::uint32_t batch_causal_mask_release = 0;
  // ---- family features read from a Hugging Face config.json (json/hf_config.hpp) ----
  branch_norms block_norms = branch_norms::pre;  // sequential layout only
  qk_norm_kind qk_norm = qk_norm_kind::none;
  std::uint64_t shared_expert_ffn = 0;  // Qwen2-MoE: an always-on MLP beside the routed experts (0: none)
  bool shared_expert_gate = false;      // sigmoid(Linear(hidden, 1)) scaling the shared expert's output
  bool moe_input_jitter = false;        // training scales the experts' input by saved uniform noise (PhiMoE)
  // PhiMoE's sparsemixer picks two experts in two rounds of masked_fill and softmax, each saved for
  // its backward, in place of softmax and topk (modular_phimoe.py@0233e509 sparsemixer).
  bool sparsemixer_router = false;
  // From transformers 5.0 the router module subclasses nn.Linear (modular_phimoe.py@0233e509
  // PhimoeTopKRouter), so quantized loads replace it; the other families' XTopKRouter holds a bare
  // nn.Parameter, which they leave in the load dtype.
  bool router_subclasses_linear = false;
  bool experts_in_one_pass = false;     // every routed row through the experts at once, not one expert at a time (GraniteMoE)
  bool scale_embeddings = false;        // embeddings * sqrt(hidden) (Gemma)
  // RMSNorm scales the fp32 normalized x by (1 + weight.float()) and casts the product back
  // (GemmaRMSNorm, transformers PR #29402: (x * w).to(dtype), not LLaMA's x.to(dtype) * w): the
  // normalized x it saves stays fp32, beside an fp32 copy of 1 + weight.
  bool rms_norm_fp32_scale = false;
  bool attention_softcap = false;       // eager scores: cap * tanh(scores / cap) (Gemma 2)
  // One learned logit per head joins each row of the eager scores (gpt-oss): the scores gain a
  // column, max keeps its indices, softmax runs in the scores' dtype; SDPA cannot run it.
  bool attention_sinks = false;
  // Experts indexed by a 1-element index tensor (gpt-oss's 3-D expert parameters): each hit
  // expert's weights are copied and the matmul saves the copy.
  bool expert_weight_copies = false;
  bool router_bias = false;             // the router Linear has a bias (gpt-oss)
  // Layers whose attention looks back over a window (layer_types sliding_attention): eager
  // training only masks their scores, but generate()'s DynamicCache keeps at most the window's
  // positions for them (cache_utils.py@004999d9 DynamicSlidingWindowLayer). sliding_layers of the
  // model's layers are such layers; the last layer is a full-attention one unless all are.
  std::uint64_t sliding_window = 0;
  std::uint64_t sliding_layers = 0;
  // Which layers slide, when it is a period (Gemma 3's sliding_window_pattern): layer i is full
  // attention when (i + 1) % sliding_period == 0, sliding otherwise (gpt-oss's alternation: 2). 0: not
  // stated (gpt-oss layer_types that do not alternate).
  std::uint64_t sliding_period = 0;
  // The base model makes a cos/sin pair per layer type, the sliding layers' from their own base
  // (Gemma 3's rope_local_base_freq: Gemma3TextModel.forward's position_embeddings per layer_type).
  bool rotary_per_layer_type = false;
  // Every expert runs every token, the router's sigmoid scores (zero off the top-k) weighting the
  // experts' inputs (Llama 4): experts x tokens rows through each expert matrix.
  bool experts_on_every_token = false;
  // RoPE as the complex product of an fp32 copy of q and k (Llama 4): fp32 temporaries under 16 bits.
  bool rotary_complex = false;
  // RoPE as gpt-fast writes it (model.py apply_rotary_emb): an fp32 copy of q and k, the real and
  // imaginary parts' products and sums, stacked, then cast back.
  bool rotary_stacked_pairs = false;
  // RoPE over the two halves of head_dim as GPT-OSS writes it (modeling_gpt_oss.py _apply_rotary_emb:
  // chunk, four half-size products, their difference and sum, cat), not rotate_half.
  bool rotary_chunked_halves = false;
  // Layers that differ by position (graph/layers/layer_pattern.hpp). Layer i (from 0) has the
  // model's experts when (i + 1) % moe_layer_step == 0, else a dense MLP of dense_ffn (0: every
  // layer has the model's MLP); it has no RoPE and no qk-norm when (i + 1) % nope_layer_interval
  // == 0 (0: none).
  std::uint64_t moe_layer_step = 0;
  std::uint64_t dense_ffn = 0;
  std::uint64_t nope_layer_interval = 0;
  // The NoPE layers keep the model's qk-norm (EXAONE 4: q_norm and k_norm on every layer, only the
  // rotation skipped, modeling_exaone4.py@0205eec1 Exaone4Attention.forward); false: Llama 4's drop it.
  bool nope_keeps_qk_norm = false;
  // The MoE layers sit this many layers before the end of each moe_layer_step period: layer i is
  // sparse when (i + 1 + moe_layer_offset) % moe_layer_step == 0 (Jamba's expert_layer_offset o
  // of period p is p - 1 - o; Llama 4's last layer of the period is 0).
  std::uint64_t moe_layer_offset = 0;
  // Hybrid stacks (graph/layers/hybrid.hpp): the state-space mixer (mamba1, mamba2; attention:
  // none) that runs, with the ssm_* fields' shape, in place of attention on every layer i with
  // i % attention_layer_period != attention_layer_offset (Jamba), or beside attention on the same
  // normed input in every layer (ssm_beside_attention: Falcon-H1).
  mixer_kind hybrid_mixer = mixer_kind::attention;
  std::uint64_t attention_layer_period = 0;
  std::uint64_t attention_layer_offset = 0;
  bool ssm_beside_attention = false;
  // Single-mixer blocks (Nemotron-H): every layer is norm -> one mixer -> residual add, layer i
  // running layer_blocks[i] (of the first `layers`), grouped by kind into a repeated unit
  // (graph/layers/layer_pattern.hpp group_single_mixer_layers). With experts, an MLP layer's is
  // dense of dense_ffn and an MoE layer's the model's experts of ffn.
  bool single_mixer_blocks = false;
  std::array<layer_block_kind, max_block_pattern_layers> layer_blocks{};
  // Falcon-H1's muP multipliers: each branch's input and output, the SSM's in_proj output (by a
  // per-layer vector buffer), the MLP's gate and output, the embeddings and the logits are
  // multiplied by floats in the step, each product a new tensor (1.0 included).
  bool mup_multipliers = false;
  // NoPE layers scale the query by a per-position fp32 tensor (Llama 4 attn_temperature_tuning).
  bool nope_attention_temperature = false;
  // The base model makes a 2-D all-ones attention_mask when none is given (OPT, BLOOM), so its
  // 4-D causal mask is a (b, 1, s, s) copy, held with it through the blocks (graph::held).
  bool builds_attention_mask = false;
  // Each attention layer owns cos/sin caches of context_length x head_dim (buffers in the
  // parameter dtype) and gathers the forward's rows of each (cos[position_ids]), which its
  // q and k multiplications save (InternLM2's remote code InternLM2RotaryEmbedding).
  bool rotary_cache_per_layer = false;
  // Multimodal RoPE sections (Qwen2-VL, Qwen2.5-VL apply_multimodal_rotary_pos_emb): each layer
  // concatenates its own cos and sin of (b, 1, s, head_dim) from the 3-D tables, in the hidden
  // states' dtype, and its q and k multiplications save them.
  bool rotary_rows_per_layer = false;
  bool alibi = false;                   // ALiBi bias (b * heads, 1, s), held through the blocks (BLOOM)
  // The attention's forward keeps its fused projection and its raw and masked scores in local
  // variables until it returns, residual add included (BLOOM: fused_qkv, matmul_result, attn_weights).
  bool attention_keeps_locals = false;
  // Eager attention reads k and v as views of the fused projection, so its matmuls keep that
  // output whole, and reshapes the query out of it into a contiguous copy (GPTBigCode's c_attn).
  bool attention_keeps_fused_kv = false;
  // Encoder-decoder (T5): `layers` counts encoder blocks.
  std::uint64_t decoder_layers = 0;              // 0: as many as the encoder
  std::uint64_t relative_attention_buckets = 0;  // T5 relative position bias rows (first block of each stack)
  // ---- state-space mixers (mixer_kind::mamba1, mamba2; heads, kv_heads, head_dim and ffn stay 0) ----
  mixer_kind mixer = mixer_kind::attention;
  std::uint64_t ssm_inner = 0;      // D: the mixer's inner width (intermediate_size, expand x hidden)
  std::uint64_t ssm_state = 0;      // N: state size per channel
  std::uint64_t ssm_conv = 0;       // K: the causal depthwise conv1d's kernel
  std::uint64_t ssm_dt_rank = 0;    // R: the rank of the dt projection
  bool ssm_proj_bias = false;       // in_proj and out_proj have a bias (MambaConfig use_bias)
  bool ssm_conv_bias = true;        // conv1d has a bias (use_conv_bias)
  ssm_dt_norm_kind ssm_dt_norms = ssm_dt_norm_kind::none;
  // Mamba-2's y goes through the gated RMSNorm (MambaRMSNormGated); false: y * silu(gate)
  // (Falcon-H1's mamba_rms_norm False).
  bool ssm_gated_norm = true;
  // Mamba-2 (mixer_kind::mamba2; ssm_dt_rank stays 0): ssm_inner = ssm_heads x head width.
  std::uint64_t ssm_heads = 0;      // h: SSD heads, one dt and one A per head (num_heads)
  std::uint64_t ssm_groups = 0;     // G: B and C groups, shared by h / G heads (n_groups)
  std::uint64_t ssm_chunk = 0;      // Q: the SSD chunk length (chunk_size)
  // The residual stream is fp32 in a 16-bit model (MambaBlock residual_in_fp32): each block's
  // output is fp32 and the next norm reads a 16-bit copy of it.
  bool residual_fp32 = false;
  // A multimodal model's vision tower and projector (Gemma 3's SigLIP) in a text-only run: loaded
  // with the model and never run, so it holds its weights and nothing else: no activation, and no
  // gradient or optimizer state (torch.optim skips a parameter whose .grad is None).
  std::uint64_t idle_tower_parameters = 0;
  // The tower whose forward image inputs run (graph/layers/vision_tower.hpp); its parameters are
  // the idle_tower_parameters above.
  vision_tower_spec vision{};
  // ---- multi-head latent attention (DeepSeek-V2/V3; graph/layers/latent_attention.hpp) ----
  // kv_lora_rank > 0: k and v come from a kv_lora_rank latent (plus one rotary key row of
  // qk_rope_head_dim per token); q from q_proj (q_lora_rank 0) or a q_lora_rank latent. q and k
  // have qk_nope_head_dim + qk_rope_head_dim features per head, v has v_head_dim.
  std::uint64_t q_lora_rank = 0;
  std::uint64_t kv_lora_rank = 0;
  std::uint64_t qk_nope_head_dim = 0;
  std::uint64_t qk_rope_head_dim = 0;
  std::uint64_t v_head_dim = 0;
  // The first leading_dense_layers layers have a dense MLP of leading_dense_ffn where the others
  // have the experts (DeepSeek's first_k_dense_replace): written once each before the repeated block.
  std::uint64_t leading_dense_layers = 0;
  std::uint64_t leading_dense_ffn = 0;
  // Multi-token-prediction layers the checkpoint stores beside the model (num_nextn_predict_layers):
  // transformers neither builds nor loads them, so nothing counts them; the report says so.
  std::uint64_t unbuilt_mtp_layers = 0;
  // The router computes its logits in fp32 from fp32 copies of its input and weight, and its
  // routing weights stay fp32, so the weighted expert rows and their sum are fp32 (DeepSeek).
  bool router_fp32 = false;
  // Each sparse layer's router holds an experts-long bias buffer (DeepSeek-V3 e_score_correction_bias).
  bool router_score_correction = false;
  // config.json's use_cache: forward returns each layer's keys and values (PretrainedConfig
  // use_cache=True, configuration_utils.py); training_spec::use_cache follows it by default.
  bool use_cache = true;
  // ---- Gemma 3n (graph/layers/altup.hpp, laurel.hpp, per_layer_inputs.hpp, activation_sparsity.hpp) ----
  // altup_inputs > 0: the stream is that many copies of the hidden state (Gemma3nTextAltUp), each
  // layer predicting and correcting all of them around one active copy; the base model makes them
  // from the embeddings and folds them back before the final norm.
  std::uint64_t altup_inputs = 0;
  bool altup_correct_scale = false;       // the corrected active copy is scaled by correct_output_scale
  std::uint64_t per_layer_input_width = 0;  // hidden_size_per_layer_input: each layer's gated input (0: none)
  std::uint64_t per_layer_vocab = 0;        // vocab_size_per_layer_input: rows of embed_tokens_per_layer
  std::uint64_t laurel_rank = 0;            // Gemma3nTextLaurelBlock's rank (0: no Laurel branch)
  // The first sparse_leading_layers layers cut their MLP gate at a gaussian top-k (activation
  // sparsity > 0): what they save beyond a dense layer is one op before the repeated block.
  std::uint64_t sparse_leading_layers = 0;
  bool value_norm = false;                  // v_norm: an RMSNorm without a scale on the values
  // Gemma3nModel's embed_vision and embed_audio (Gemma3nMultimodalEmbedder, modeling_gemma3n.py@00aa0f5d):
  // run over every token of a multimodal Gemma 3n, text-only or not (graph/layers/multimodal_embedders.hpp).
  token_embedder vision_embedder{};
  token_embedder audio_embedder{};
};

constexpr bool has_latent_attention(const model_spec& m) { return m.kv_lora_rank > 0; }

constexpr std::uint64_t kv_heads_of(const model_spec& m) { return m.kv_heads == 0 ? m.heads : m.kv_heads; }
constexpr bool has_attention(const model_spec& m) { return m.mixer == mixer_kind::attention; }
// A hybrid state-space stack (Jamba, Falcon-H1): attention layers beside or between Mamba mixers.
constexpr bool is_hybrid(const model_spec& m) { return has_attention(m) && m.hybrid_mixer != mixer_kind::attention; }
// Whether any layer runs a state-space mixer, whose code path run.ssm_kernels chooses.
constexpr bool has_state_space_mixer(const model_spec& m) { return !has_attention(m) || is_hybrid(m); }
// Whether gradient and parameter sharding, parameter streaming and pipeline stages can take the
// model's layers as their unit: DeepSeek's leading dense layers stand before the repeated block
// and a hybrid's repeated block is a period of layers (validate.hpp, parallel/per_gpu.hpp); Gemma 3n's
// sparse-gate layers and AltUp projections stand before and after its repeated layer.
constexpr bool layers_are_units(const model_spec& m) {
  return m.leading_dense_layers == 0 && !is_hybrid(m) && m.altup_inputs == 0;
}
// Whether the tensor-parallel layout (Megatron's split of attention heads) is modelled for it.
constexpr bool tensor_parallel_modelled(const model_spec& m) {
  return has_attention(m) && !is_hybrid(m) && !has_latent_attention(m) && m.leading_dense_layers == 0 &&
         m.altup_inputs == 0;
}
constexpr std::uint64_t head_dim_of(const model_spec& m) {
  return m.head_dim != 0 ? m.head_dim : (m.heads == 0 ? 0 : m.hidden / m.heads);
}
// The model with a dense MLP of `ffn` in place of its experts: every expert and router field
// cleared, for a layer that has no experts or a class that is read without them.
constexpr model_spec with_dense_mlp(const model_spec& m, std::uint64_t ffn) {
  model_spec dense = m;
  dense.ffn = ffn;
  dense.experts = 0;
  dense.experts_per_token = 0;
  dense.shared_expert_ffn = 0;
  dense.shared_expert_gate = false;
  dense.experts_on_every_token = false;
  dense.router_fp32 = false;
  dense.router_score_correction = false;
  return dense;
}

constexpr bool gated_mlp(const model_spec& m) {
  return m.mlp == mlp_kind::swiglu || m.mlp == mlp_kind::geglu || m.mlp == mlp_kind::clamped_swiglu;
}

// A state-space stack (mixer_kind::mamba1, mamba2): its mixer's shape, and none of the attention,
// MLP and expert features its block does not have.
constexpr const model_spec& validate_ssm(const model_spec& m) {
  using detail::require;
  constexpr auto bad = error_code::invalid_model;
  require(m.ssm_inner > 0, bad, "model.ssm_inner", "must be > 0 for a Mamba mixer", m.ssm_inner);
  require(m.ssm_state > 0, bad, "model.ssm_state", "must be > 0 for a Mamba mixer", m.ssm_state);
  require(m.ssm_conv > 0, bad, "model.ssm_conv", "must be > 0 for a Mamba mixer", m.ssm_conv);
  if (m.mixer == mixer_kind::mamba2) {
    require(m.ssm_heads > 0 && m.ssm_inner % m.ssm_heads == 0, bad, "model.ssm_heads",
            "must be > 0 and divide model.ssm_inner for a Mamba-2 mixer", m.ssm_heads);
    require(m.ssm_groups > 0 && m.ssm_heads % m.ssm_groups == 0, bad, "model.ssm_groups",
            "must be > 0 and divide model.ssm_heads for a Mamba-2 mixer", m.ssm_groups);
    require(m.ssm_chunk > 0, bad, "model.ssm_chunk", "must be > 0 for a Mamba-2 mixer", m.ssm_chunk);
    require(m.ssm_dt_norms == ssm_dt_norm_kind::none, error_code::unsupported, "model.ssm_dt_norms",
            "must be none for a Mamba-2 mixer (its dt, B and C have no norms)", m.ssm_dt_norms);
  } else {
    require(m.ssm_dt_rank > 0, bad, "model.ssm_dt_rank", "must be > 0 for a Mamba mixer", m.ssm_dt_rank);
  }
  require(m.vocab > 0, bad, "model.vocab", "must be > 0", m.vocab);
  require(m.arch == architecture::decoder, bad, "model.arch", "a Mamba stack is a decoder",
          m.arch);
  require(m.heads == 0 && m.kv_heads == 0 && m.head_dim == 0 && m.ffn == 0, bad, "model.heads",
          "must be 0 with a Mamba mixer (its block has no attention and no MLP)", m.heads);
  require(m.experts == 0, bad, "model.experts", "must be 0 with a Mamba mixer (its block has no MLP)", m.experts);
  require(m.layout == block_layout::sequential && m.block_norms == branch_norms::pre && m.extra_norms_per_block == 0,
          bad, "model.layout", "a Mamba block is norm -> mixer -> residual add (sequential, pre-norm)",
          m.layout);
  require(m.positions == position_kind::none, bad, "model.positions", "must be none with a Mamba mixer",
          m.positions);
  require(m.norm == norm_kind::rmsnorm, bad, "model.norm", "a Mamba block's norm is an RMSNorm",
          m.norm);
  require(m.ssm_dt_norms != ssm_dt_norm_kind::weighted, error_code::unsupported, "model.ssm_dt_norms",
          "weighted dt/B/C norms (Jamba) are not modelled yet", 2);
  require(!m.dropout, error_code::unsupported, "model.dropout", "a Mamba stack has no dropout modules", 1);
  return m;
}

// A hybrid stack's state-space mixer as a state-space model of its own: the fields validate_ssm
// checks, without the attention and MLP the hybrid layers also have. Jamba's weighted dt/B/C
// norms are modelled there, so they are checked as none.
constexpr model_spec hybrid_ssm_part(const model_spec& m) {
  model_spec s{};
  s.layers = m.layers;
  s.hidden = m.hidden;
  s.vocab = m.vocab;
  s.norm = norm_kind::rmsnorm;
  s.positions = position_kind::none;
  s.mixer = m.hybrid_mixer;
  s.ssm_inner = m.ssm_inner;
  s.ssm_state = m.ssm_state;
  s.ssm_conv = m.ssm_conv;
  s.ssm_dt_rank = m.ssm_dt_rank;
  s.ssm_heads = m.ssm_heads;
  s.ssm_groups = m.ssm_groups;
  s.ssm_chunk = m.ssm_chunk;
  s.ssm_dt_norms = m.ssm_dt_norms == ssm_dt_norm_kind::weighted ? ssm_dt_norm_kind::none : m.ssm_dt_norms;
  return s;
}

// Fails (compile error in constant evaluation, memscale::error at run time) on the
// first field that cannot describe a real network.
constexpr const model_spec& validate(const model_spec& m) {
  using detail::require;
  constexpr auto bad = error_code::invalid_model;
  require(m.layers > 0, bad, "model.layers", "must be > 0", m.layers);
  require(m.hidden > 0, bad, "model.hidden", "must be > 0", m.hidden);
  if (!has_attention(m)) return validate_ssm(m);
  require(m.heads > 0, bad, "model.heads", "must be > 0", m.heads);
  require(m.head_dim != 0 || m.hidden % m.heads == 0, bad, "model.heads",
          "must divide model.hidden when model.head_dim is not given", m.heads);
  require(kv_heads_of(m) <= m.heads, bad, "model.kv_heads", "must be <= model.heads", kv_heads_of(m));
  require(m.heads % kv_heads_of(m) == 0, bad, "model.kv_heads", "must divide model.heads", kv_heads_of(m));
  require(m.ffn > 0, bad, "model.ffn", "must be > 0", m.ffn);
  require(m.vocab > 0, bad, "model.vocab", "must be > 0", m.vocab);
  require(m.positions != position_kind::learned || m.max_positions > 0, bad, "model.max_positions",
          "must be > 0 with learned positions", m.max_positions);
  require(!m.rotary_cache_per_layer || (m.positions == position_kind::rotary && m.context_length > 0), bad,
          "model.rotary_cache_per_layer", "needs rotary positions and model.context_length > 0 (the caches' rows)",
          m.context_length);
  require(!m.rotary_rows_per_layer || m.positions == position_kind::rotary, bad, "model.rotary_rows_per_layer",
          "needs rotary positions", 1);
  require(m.rotary_fraction > 0.0 && m.rotary_fraction <= 1.0, bad, "model.rotary_fraction", "must be in (0, 1]",
          0);
  require((m.experts == 0) == (m.experts_per_token == 0), bad, "model.experts_per_token",
          "must be > 0 exactly when model.experts > 0", m.experts_per_token);
  require(m.experts_per_token <= m.experts, bad, "model.experts_per_token", "must be <= model.experts",
          m.experts_per_token);
  if (m.altup_inputs > 0) {
    // Gemma 3n's pieces (graph/recipes/altup_stack.hpp): one decoder stack of dense attention layers.
    require(m.arch == architecture::decoder && m.experts == 0 && !has_latent_attention(m) && !is_hybrid(m),
            error_code::unsupported, "model.altup_inputs",
            "is Gemma 3n's AltUp, written for a decoder of dense attention layers", m.altup_inputs);
    require(m.per_layer_input_width > 0 && m.per_layer_vocab > 0, bad, "model.per_layer_input_width",
            "must be > 0 with model.per_layer_vocab > 0 under AltUp (Gemma 3n's per-layer inputs)",
            m.per_layer_input_width);
    require(m.laurel_rank > 0, bad, "model.laurel_rank", "must be > 0 under AltUp (Gemma 3n's Laurel branch)",
            m.laurel_rank);
    require(m.sparse_leading_layers < m.layers, bad, "model.sparse_leading_layers",
            "must be below model.layers (Gemma 3n's sparse-gate layers come first, dense ones after)", m.sparse_leading_layers);
  } else {
    require(m.per_layer_input_width == 0 && m.laurel_rank == 0 && m.sparse_leading_layers == 0, bad,
            "model.altup_inputs", "must be > 0 for Gemma 3n's per-layer inputs, Laurel and sparse gates", 0);
  }
  require(m.head != head_kind::sequence_classification || m.num_labels > 0, bad, "model.num_labels",
          "must be > 0 for a classification head", m.num_labels);
  require(m.arch != architecture::encoder_decoder ||
              (m.head == head_kind::causal_lm || m.head == head_kind::none),
          bad, "model.head", "an encoder-decoder has an LM head (causal_lm) or none", 0);
  require(m.arch != architecture::encoder || m.head != head_kind::causal_lm, bad, "model.head",
          "an encoder has no causal-LM head", 0);
  require(!(m.tied_embeddings && m.head == head_kind::sequence_classification), bad, "model.tied_embeddings",
          "a classification head has no output embedding to tie", 1);
  require(m.shared_expert_ffn == 0 || m.experts > 0, bad, "model.shared_expert_ffn",
          "needs routed experts (model.experts > 0)", m.shared_expert_ffn);
  require(!m.experts_in_one_pass || m.experts > 0, bad, "model.experts_in_one_pass", "needs experts > 0", m.experts);
  require(!m.sparsemixer_router || m.experts_per_token == 2, bad, "model.experts_per_token",
          "must be 2 with model.sparsemixer_router (sparsemixer picks exactly two experts)", m.experts_per_token);
  require(!m.moe_input_jitter || m.experts > 0, bad, "model.moe_input_jitter", "needs experts > 0 (it scales the experts' input)",
          m.experts);
  require(m.mlp != mlp_kind::clamped_swiglu || m.experts > 0, bad, "model.mlp",
          "clamped_swiglu is an expert MLP: needs experts > 0", m.experts);
  require(!m.expert_weight_copies || m.experts > 0, bad, "model.expert_weight_copies",
          "needs experts > 0 (it copies expert weights)", m.experts);
  require(!m.router_bias || m.experts > 0, bad, "model.router_bias", "needs experts > 0 (a router)", m.experts);
  require(m.sliding_layers <= m.layers, bad, "model.sliding_layers", "must be at most model.layers", m.sliding_layers);
  require((m.sliding_layers == 0) == (m.sliding_window == 0), bad, "model.sliding_window",
          "must be > 0 exactly when model.sliding_layers > 0", m.sliding_window);
  require(m.sliding_period == 0 ||
              (m.sliding_period > 1 && m.sliding_layers == m.layers - m.layers / m.sliding_period),
          bad, "model.sliding_period",
          "must be 0 or > 1 with model.sliding_layers = layers - layers / sliding_period (every period-th layer full)",
          m.sliding_period);
  require(!m.rotary_per_layer_type || m.positions == position_kind::rotary, bad, "model.rotary_per_layer_type",
          "needs rotary positions", 1);
  require(!m.experts_on_every_token || m.experts > 0, bad, "model.experts_on_every_token", "needs experts > 0",
          m.experts);
  require(m.moe_layer_step <= 1 || (m.experts > 0 && m.dense_ffn > 0), bad, "model.moe_layer_step",
          "needs experts > 0 and model.dense_ffn > 0 (the layers between MoE layers)", m.moe_layer_step);
  require(!m.nope_attention_temperature || m.nope_layer_interval > 0, bad, "model.nope_attention_temperature",
          "needs NoPE layers (model.nope_layer_interval > 0)", 1);
  require(!m.nope_keeps_qk_norm || m.nope_layer_interval > 0, bad, "model.nope_keeps_qk_norm",
          "needs NoPE layers (model.nope_layer_interval > 0)", 1);
  require(!m.shared_expert_gate || m.shared_expert_ffn > 0, bad, "model.shared_expert_gate",
          "needs a shared expert (model.shared_expert_ffn > 0)", 1);
  require(!m.attention_keeps_fused_kv || m.fused_qkv, bad, "model.attention_keeps_fused_kv",
          "needs a fused q, k, v projection (model.fused_qkv)", 1);
  require(!m.fused_gate_up || gated_mlp(m), bad, "model.fused_gate_up", "needs a gated mlp (swiglu, geglu)",
          m.mlp);
  require(!m.rms_norm_fp32_scale || m.norm == norm_kind::rmsnorm, bad, "model.rms_norm_fp32_scale",
          "needs norm rmsnorm (it is an RMSNorm's code)", m.norm);
  require(m.norm != norm_kind::layernorm_fp32_python || !m.norm_bias, bad, "model.norm_bias",
          "must be false with norm layernorm_fp32_python (CohereLayerNorm has no bias)", 1);
  require(m.block_norms == branch_norms::pre || m.layout == block_layout::sequential, bad, "model.block_norms",
          "post and sandwich norms need the sequential layout", m.block_norms);
  require(!has_latent_attention(m) || (m.qk_nope_head_dim > 0 && m.qk_rope_head_dim > 0 && m.v_head_dim > 0), bad,
          "model.kv_lora_rank", "needs qk_nope_head_dim, qk_rope_head_dim and v_head_dim > 0 (multi-head latent attention)",
          m.kv_lora_rank);
  require(has_latent_attention(m) || (m.q_lora_rank == 0 && m.qk_nope_head_dim == 0 && m.qk_rope_head_dim == 0 && m.v_head_dim == 0),
          bad, "model.q_lora_rank", "q_lora_rank and the qk/v head dims need model.kv_lora_rank > 0", m.q_lora_rank);
  require(!has_latent_attention(m) || (m.positions == position_kind::rotary && kv_heads_of(m) == m.heads &&
                                    m.arch == architecture::decoder && m.layout == block_layout::sequential &&
                                    m.block_norms == branch_norms::pre && m.qk_norm == qk_norm_kind::none && !m.fused_qkv),
          error_code::unsupported, "model.kv_lora_rank",
          "multi-head latent attention is modelled in a pre-norm sequential rotary decoder with kv_heads = heads, "
          "no qk-norm and no fused qkv",
          m.kv_lora_rank);
  require(m.leading_dense_layers < m.layers, bad, "model.leading_dense_layers",
          "must be below model.layers (the repeated block is one layer at least)", m.leading_dense_layers);
  require(m.leading_dense_layers == 0 || (m.leading_dense_ffn > 0 && m.experts > 0 && m.arch == architecture::decoder), bad,
          "model.leading_dense_layers", "needs model.leading_dense_ffn > 0 and experts in the other layers of a decoder",
          m.leading_dense_layers);
  require(!m.router_fp32 || m.experts > 0, bad, "model.router_fp32", "needs experts > 0 (a router)", m.experts);
  require(!m.router_score_correction || m.experts > 0, bad, "model.router_score_correction", "needs experts > 0 (a router)",
          m.experts);
  require(m.moe_layer_offset == 0 || m.moe_layer_offset < m.moe_layer_step, bad, "model.moe_layer_offset",
          "must be below model.moe_layer_step", m.moe_layer_offset);
  if (m.hybrid_mixer != mixer_kind::attention) {
    const model_spec ssm = hybrid_ssm_part(m);
    validate_ssm(ssm);
    require(static_cast<int>(m.ssm_beside_attention) + static_cast<int>(m.attention_layer_period > 0) +
                    static_cast<int>(m.single_mixer_blocks) == 1,
            bad, "model.attention_layer_period",
            "a hybrid stack runs its SSM mixer in place of attention (attention_layer_period > 0), beside it "
            "(ssm_beside_attention) or as layers of their own (single_mixer_blocks), one of the three",
            m.attention_layer_period);
    require(!m.single_mixer_blocks || (m.layers <= max_block_pattern_layers && m.hybrid_mixer == mixer_kind::mamba2), bad,
            "model.layers", "must be at most 128 with single_mixer_blocks (layer_blocks holds 128), whose SSM is Mamba-2",
            m.layers);
    if (m.single_mixer_blocks) {
      bool moe = false;
      bool dense = false;
      for (std::size_t i = 0; i < static_cast<std::size_t>(m.layers) && i < max_block_pattern_layers; ++i) {
        moe = moe || m.layer_blocks[i] == layer_block_kind::moe;
        dense = dense || m.layer_blocks[i] == layer_block_kind::mlp;
      }
      require(moe == (m.experts > 0), bad, "model.experts",
              "must be > 0 exactly when a single-mixer stack has MoE layers (layer_blocks)", m.experts);
      require(!moe || !dense || m.dense_ffn > 0, bad, "model.dense_ffn",
              "must be > 0 when a single-mixer stack has both MLP and MoE layers (the MLP layers' width)", m.dense_ffn);
    }
    require(m.attention_layer_offset < m.attention_layer_period || m.attention_layer_period == 0, bad,
            "model.attention_layer_offset", "must be below model.attention_layer_period", m.attention_layer_offset);
    require(m.layout == block_layout::sequential && m.block_norms == branch_norms::pre && m.arch == architecture::decoder,
            error_code::unsupported, "model.hybrid_mixer", "a hybrid stack is modelled as a pre-norm sequential decoder",
            m.hybrid_mixer);
    require((m.ssm_beside_attention || m.single_mixer_blocks) == (m.hybrid_mixer == mixer_kind::mamba2),
            error_code::unsupported, "model.hybrid_mixer",
            "hybrid stacks are modelled as Jamba's (Mamba-1 in place of attention), Falcon-H1's (Mamba-2 beside "
            "attention) and Nemotron-H's (Mamba-2, attention and MLP layers)",
            m.hybrid_mixer);
  } else {
    require(m.attention_layer_period == 0 && !m.ssm_beside_attention && !m.single_mixer_blocks, bad, "model.hybrid_mixer",
            "must name the SSM mixer (mamba1, mamba2) with attention_layer_period, ssm_beside_attention or "
            "single_mixer_blocks", 0);
  }
  require(!m.mup_multipliers || m.ssm_beside_attention, error_code::unsupported, "model.mup_multipliers",
          "Falcon-H1's multipliers are modelled in its hybrid layers only", 1);
  require(m.idle_tower_parameters == 0 || m.arch == architecture::decoder, error_code::unsupported,
          "model.idle_tower_parameters", "an idle vision tower is modelled beside a decoder only",
          m.idle_tower_parameters);
  return m;
}

// The model as lit-gpt's code builds it: one fused qkv projection (CausalSelfAttention.attn)
// and logits kept in the compute dtype (lit-gpt model.py @ b96a5708, GPT.forward). It attends
// through F.scaled_dot_product_attention or flash_attn (lit_gpt/model.py lines 234-253 @ 8641822),
// whose math path runs softmax in the inputs' dtype: no fp32 softmax as Hugging Face's LLaMA has.
constexpr model_spec as_litgpt_model(model_spec m) {
  m.impl = implementation::litgpt;
  m.fused_qkv = true;
  m.upcast_logits = false;
  m.softmax_fp32 = false;
  return m;
}

constexpr std::string_view to_string(mixer_kind k) noexcept {
  switch (k) {
    case mixer_kind::attention: return "attention";
    case mixer_kind::mamba1: return "mamba1";
    case mixer_kind::mamba2: return "mamba2";
  }
  return "unknown";
}

// Refuses a state-space stack on a path that describes attention only. `what` is the reason;
// the message names the mixer ("model.mixer is mamba2 (a state-space stack): <what>").
// A hybrid stack's SSM layers are refused the same way ("model.hybrid_mixer is mamba1 (a hybrid
// state-space stack): <what>").
constexpr void require_attention_mixer(const model_spec& m, std::string_view what) {
  if (has_attention(m) && m.hybrid_mixer != mixer_kind::attention)
    detail::fail(error_code::unsupported, "model.hybrid_mixer",
                 std::string("is ") + std::string(to_string(m.hybrid_mixer)) + " (a hybrid state-space stack): " +
                     std::string(what),
                 m.hybrid_mixer);
  if (has_attention(m)) return;
  detail::fail(error_code::unsupported, "model.mixer",
               std::string("is ") + std::string(to_string(m.mixer)) + " (a state-space stack): " + std::string(what),
               m.mixer);
}

// The enumerators' own names, for messages.
constexpr std::string_view to_string(architecture a) noexcept {
  return detail::enum_name(a, {"decoder", "encoder", "encoder_decoder"});
}
constexpr std::string_view to_string(position_kind p) noexcept {
  return detail::enum_name(p, {"learned", "rotary", "none"});
}
constexpr std::string_view to_string(norm_kind n) noexcept {
  return detail::enum_name(n, {"layernorm", "rmsnorm", "layernorm_fp32_python"});
}
constexpr std::string_view to_string(mlp_kind m) noexcept {
  return detail::enum_name(
      m, {"gelu", "gelu_tanh", "relu", "swiglu", "geglu", "clamped_swiglu", "gelu_fast", "relu_squared"});
}
constexpr std::string_view to_string(block_layout b) noexcept {
  return detail::enum_name(b, {"sequential", "parallel", "post_norm"});
}
constexpr std::string_view to_string(branch_norms b) noexcept {
  return detail::enum_name(b, {"pre", "post", "sandwich"});
}
constexpr std::string_view to_string(ssm_dt_norm_kind k) noexcept {
  return detail::enum_name(k, {"none", "weightless", "weighted"});
}

constexpr std::string_view to_string(implementation i) noexcept {
  return i == implementation::litgpt ? "litgpt" : "hf-transformers";
}

}  // namespace memscale
