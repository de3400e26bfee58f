// The graphs the recipes (graph/recipes/) write are pinned: digests of every op and field of
// the graphs, and of every error, over random (model, run) pairs, taken from the builders the
// recipes replaced after they matched them op for op. Random (model, run) pairs: every
// preset and every config in tests/data/hf_configs, each as it is or with some of its
// features switched, under random runs (precisions, optimizers, checkpointing, attention
// kinds, LoRA / QLoRA / DoRA / rsLoRA on any targets including the head and the router,
// chunked loss, devices, framework versions, dropout) and some invalid or overflowing ones;
// a preset added later changes the models and so the digests.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "memscale/graph/model_graph.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace graph_golden_test {
namespace {

using namespace memscale;

// ---- the digest (constexpr: also used in constant evaluation below) -------------------

// FNV-1a over every field of the graphs a builder makes. The bindings stop compiling when op
// or graph gains or loses a member, so no field can be left out.
struct digest {
  std::uint64_t value = 14695981039346656037ULL;
  constexpr void add(std::uint64_t x) {
    for (int i = 0; i < 8; ++i) {
      value ^= (x >> (8 * i)) & 0xFFU;
      value *= 1099511628211ULL;
    }
  }
  constexpr void add(bytes b) { add(b.value); }
  constexpr void add(bool b) { add(std::uint64_t{b}); }
  constexpr void add(const param_tensor& t) {
    add(t.rows);
    add(t.cols);
    add(t.count);
  }
  constexpr void add(const op& o) {
    // kv_cached, last_reader and temporaries (forward liveness without grad), bwd_temp_pieces (how
    // the replay splits bwd_temp) and frame_locals_blocks (the part of fwd_temp the replay walks as
    // frame locals) came after these digests were pinned and are left out, so they still prove the
    // training fields unchanged; forward_liveness_test, the generate() stream's tests and the
    // allocator replay tests check them. unquantized_base (only torchtune's QLoRA head sets it) too:
    // torchtune_mechanisms_test and torchtune_distributed_test check it against traces.
    const auto& [kind, selective, transient, kv_cached, last_reader, weight, bias, role, frozen, borrows, grad_exists, released, out,
                 extra, fwd, bwd, grad_in, grad_out, temporaries, bwd_pieces, unquantized_base, frame_blocks] = o;
    add(static_cast<std::uint64_t>(kind));
    add(selective);
    add(transient);
    add(weight);
    add(bias);
    add(static_cast<std::uint64_t>(role));
    add(frozen);
    add(borrows);
    add(grad_exists);
    add(std::uint64_t{released.index_plus_one});
    for (const bytes b : {out, extra, fwd, bwd, grad_in, grad_out}) add(b);
  }
  constexpr void add(const graph& g) {
    const auto& [ops, size, begin, end, repeats, inputs, buffers, stream_grad, carried, validation, validation_after_step,
                 held, kept_input_embeddings, waiting, waiting_count, tower_forward, tower_after, stacked_experts,
                 parameter_experts, experts_swapped_for_prequantized, first_layer_apart] = g;
    add(std::uint64_t{size});
    for (std::size_t i = 0; i < size; ++i) add(ops[i]);
    add(std::uint64_t{begin});
    add(std::uint64_t{end});
    add(repeats);
    for (const bytes b : {inputs, buffers, stream_grad, carried, held}) add(b);
    // Added only when set, so the pinned digests of graphs without stacked experts, a vision
    // tower's forward, enable_input_require_grads' kept leaf or litgpt 0.4's validation stay.
    if (kept_input_embeddings.value > 0) add(kept_input_embeddings);
    if (validation.value > 0) {
      add(validation);
      add(validation_after_step);
    }
    if (tower_forward.value > 0) add(tower_forward);
    if (tower_forward.value > 0 && tower_after > 0) add(std::uint64_t{tower_after});
    if (stacked_experts) add(stacked_experts);
    // Stacked experts are parameter experts: the flag adds something for Llama 4's alone.
    if (parameter_experts && !stacked_experts) add(parameter_experts);
    if (experts_swapped_for_prequantized) add(experts_swapped_for_prequantized);
    if (first_layer_apart) add(first_layer_apart);
    for (std::size_t w = 0; w < waiting_count; ++w) {
      add(std::uint64_t{waiting[w].made_by});
      add(std::uint64_t{waiting[w].used_by});
      add(waiting[w].size);
    }
  }
  constexpr void add(const encoder_decoder_graph& g) {
    const auto& [encoder, decoder, output, saved, output_grad, encoder_held, decoder_held, encoder_bias_grad,
                 decoder_bias_grad, cache] = g;
    add(encoder);
    add(decoder);
    add(saved);
    for (const bytes b : {output, output_grad, encoder_held, decoder_held, encoder_bias_grad, decoder_bias_grad, cache})
      add(b);
  }
  void add(const std::string& text) {
    for (const char c : text) add(static_cast<std::uint64_t>(static_cast<unsigned char>(c)));
  }
};

template <class Graph>
constexpr std::uint64_t digest_of(const Graph& g) {
  digest d;
  d.add(g);
  return d.value;
}

// Pinned figures, in constant evaluation: any change to a recipe changes them.
constexpr training_spec amp_bf16_run{.micro_batch = 2, .seq_len = 256, .prec = precision::amp_bf16};
constexpr training_spec qlora_run{.micro_batch = 1,
                                  .seq_len = 512,
                                  .prec = precision::pure_bf16,
                                  .target = training_target::qlora,
                                  .lora_rank = 16,
                                  .lora_targets = lora_all_linear | lora_target::head};
// Changed by the fused SDPA output that Hugging Face merges into heads as a view (no copy op
// before o_proj: one op fewer per block, flash runs with separate q, k, v projections: mixtral).
static_assert(recipes::build_decoder_stack(presets::llama_2_7b, amp_bf16_run).size == 30);
// The three below changed when a product of two activations started holding its second factor's
// gradient in its backward (op_writer::product: gelu_new's, SwiGLU's, T5's gated GELU): before,
// 2666205193266019850, 7790869183907845045 and 9418793138236186000.
static_assert(digest_of(recipes::build_decoder_stack(presets::gpt2, amp_bf16_run)) == 4645700129158109114ULL);
// Changed by the first layer of a LoRA or QLoRA run written apart on an input that needs no
// gradient (recipes/decoder_stack.hpp first_layer_apart): 10090709840523101323 before. And by the
// untied output projection a transformers QLoRA load keeps in 16 bits (graph/layers/adapters.hpp
// untied_head_weight): 14063935976722473961 with it in 4 bits.
static_assert(digest_of(recipes::build_decoder_stack(presets::mixtral_8x7b, qlora_run)) == 5495937215076241304ULL);
static_assert(digest_of(recipes::build_encoder_decoder(presets::flan_t5_base, amp_bf16_run)) == 3275507958549331664ULL);

// ---- the random pairs -----------------------------------------------------------------

struct rng_picker {
  std::mt19937_64 engine;
  std::uint64_t operator()(std::uint64_t n) { return engine() % n; }
  bool chance(std::uint64_t one_in) { return engine() % one_in == 0; }
};

// The config files the digests were taken over: a family that joins tests/data/hf_configs
// later does not change them.
constexpr std::array<std::string_view, 34> pinned_configs{
    "EleutherAI--gpt-j-6b", "EleutherAI--pythia-160m", "FacebookAI--roberta-base", "Qwen--Qwen1.5-MoE-A2.7B",
    "Qwen--Qwen2.5-0.5B", "Qwen--Qwen2.5-7B", "Qwen--Qwen3-0.6B", "Qwen--Qwen3-30B-A3B", "Qwen--Qwen3-8B",
    "allenai--OLMo-2-1124-7B", "bigcode--starcoder2-3b", "bigscience--bloom-560m",
    "distilbert--distilbert-base-uncased-finetuned-sst-2-english", "distilbert--distilbert-base-uncased",
    "facebook--opt-125m", "google--flan-t5-base", "google--gemma-2-2b", "google--gemma-3-1b-pt", "google--gemma-7b",
    "google--mt5-small", "google--t5-v1_1-base", "google-bert--bert-base-uncased", "google-t5--t5-base",
    "google-t5--t5-large", "google-t5--t5-small", "internlm--internlm2-7b", "meta-llama--Llama-2-7b-hf",
    "meta-llama--Llama-3.2-1B", "microsoft--Phi-3-mini-4k-instruct", "microsoft--phi-2", "mistralai--Mistral-7B-v0.1",
    "mistralai--Mixtral-8x7B-v0.1", "openai-community--gpt2", "tiiuae--falcon-7b"};

std::vector<model_spec> base_models() {
  std::vector<model_spec> models(presets::all.begin(), presets::all.end());
  const std::filesystem::path dir = std::filesystem::path(MEMSCALE_SOURCE_DIR) / "tests/data/hf_configs";
  std::vector<std::filesystem::path> files;
  for (const std::string_view name : pinned_configs) files.push_back(dir / (std::string(name) + ".json"));
  std::sort(files.begin(), files.end());  // the order the digests were taken in
  for (const auto& file : files) models.push_back(json_io::load_hf_model(file.string()));
  return models;
}

// Switches one feature of `m`; some switches make an invalid model, which both builders
// must refuse alike.
void mutate(model_spec& m, rng_picker& pick) {
  switch (pick(30)) {
    case 0: m.impl = m.impl == implementation::litgpt ? implementation::hf_transformers : implementation::litgpt; break;
    case 1: m.dropout = !m.dropout; break;
    case 2: m.fused_qkv = !m.fused_qkv; break;
    case 3: m.attention_keeps_locals = !m.attention_keeps_locals; break;
    case 4: m.attention_softcap = !m.attention_softcap; break;
    case 5: m.logit_softcap = !m.logit_softcap; break;
    case 6: m.qk_norm = static_cast<qk_norm_kind>(pick(3)); break;
    case 7: m.block_norms = static_cast<branch_norms>(pick(3)); break;
    case 8:
      m.shift_labels = pick(2) == 0;
      m.upcast_logits = pick(2) == 0;
      m.softmax_fp32 = pick(2) == 0;
      break;
    case 9: m.scale_embeddings = !m.scale_embeddings; break;
    case 10: m.builds_attention_mask = !m.builds_attention_mask; break;
    case 11: m.alibi = !m.alibi; break;
    case 12: m.head = static_cast<head_kind>(pick(4)); break;
    case 13: m.tied_embeddings = !m.tied_embeddings; break;
    case 14:
      m.norm = static_cast<norm_kind>(pick(2));
      m.norm_bias = pick(2) == 0;
      break;
    case 15: m.mlp = static_cast<mlp_kind>(pick(5)); break;
    case 16:
      m.layout = static_cast<block_layout>(pick(3));
      m.shared_attention_norm = pick(2) == 0;
      break;
    case 17: m.extra_norms_per_block = pick(3); break;
    case 18:
      if (m.experts == 0) {
        m.experts = 4 + pick(5);
        m.experts_per_token = 1 + pick(3);
      } else {
        m.shared_expert_ffn = m.ffn / 2 + 1;
        m.shared_expert_gate = pick(2) == 0;
      }
      break;
    case 19: m.kv_heads = m.heads % 2 == 0 ? m.heads / 2 : 1; break;
    case 20: m.positions = static_cast<position_kind>(pick(3)); break;
    case 21:
      m.type_vocab = pick(2) * 2;
      m.embedding_norm = pick(2) == 0;
      m.final_norm = pick(2) == 0;
      m.pooler = pick(2) == 0;
      break;
    case 22: m.arch = static_cast<architecture>(pick(3)); break;
    case 23:
      m.qkv_bias = pick(2) == 0;
      m.attn_out_bias = pick(2) == 0;
      m.mlp_bias = pick(2) == 0;
      m.lm_head_bias = pick(2) == 0;
      break;
    case 24: m.head_dim = m.heads == 0 ? 0 : 2 * (m.hidden / m.heads); break;
    case 25: m.buffer_bytes_per_layer = pick(2) * 1024 * 1024; break;
    case 26: m.num_labels = pick(6); break;
    case 27: m.relative_attention_buckets = pick(2) * 32; break;
    case 28: m.decoder_layers = pick(5); break;
    default: m.max_positions = m.max_positions == 0 ? 2048 : 0; break;
  }
}

training_spec random_run(rng_picker& pick) {
  training_spec r{};
  r.micro_batch = 1 + pick(16);
  r.seq_len = 16 * (1 + pick(pick.chance(4) ? 256 : 32));  // mostly within every model's context
  r.prec = static_cast<precision>(pick(5));
  r.optimizer = static_cast<optimizer_kind>(pick(7));
  r.optimizer_impl = static_cast<optimizer_implementation>(pick(3));
  r.grad_accum = 1 + pick(4);
  r.ckpt = static_cast<checkpointing>(pick(3));
  r.attention = static_cast<attention_impl>(pick(4));
  r.target = static_cast<training_target>(pick(3));
  if (is_lora(r)) {
    r.lora_rank = 1 + pick(128);
    r.lora_targets = static_cast<lora_modules>(1 + pick(511));  // every flag up to head and router
    r.lora_kind = static_cast<lora_variant>(pick(3));
    r.lora_dropout = pick(2) == 0;
    r.quant = static_cast<base_quant>(pick(2));
  }
  r.adapters = static_cast<adapter_dtype>(pick(3));
  r.dropout = pick(2) == 0;
  r.loss = static_cast<loss_impl>(pick(2));
  r.loss_chunk = pick.chance(3) ? 1 + pick(8192) : 128;
  r.device = pick.chance(4) ? device_kind::cpu : device_kind::cuda;
  constexpr std::array<std::uint32_t, 5> torch{113, 200, 205, 211, 212};
  constexpr std::array<std::uint32_t, 6> transformers{0, 440, 448, 451, 500, 517};
  constexpr std::array<std::uint32_t, 4> bitsandbytes{4200, 4301, 4302, 4902};
  r.torch_version = torch[pick(torch.size())];
  r.transformers_version = transformers[pick(transformers.size())];
  r.bitsandbytes_version = bitsandbytes[pick(bitsandbytes.size())];
  r.target_len = pick.chance(3) ? 16 * (1 + pick(64)) : 0;
  r.offload_optimizer = pick.chance(4);
  r.offload_activations = pick.chance(4) && r.ckpt == checkpointing::full;  // needs it (validate)
  r.zero_grad_to_none = pick(2) == 0;
  if (pick.chance(20)) {
    // Invalid or overflowing: both builders must refuse it with the same error.
    switch (pick(9)) {
      case 0: r.micro_batch = 0; break;
      case 1: r.seq_len = 0; break;
      case 2: r.lora_rank = is_lora(r) ? 0 : 8; break;
      case 3: r.lora_targets = 0; r.target = training_target::lora; r.lora_rank = 4; break;
      case 4: r.seq_len = std::uint64_t{1} << (20 + pick(24)); break;           // past a context, or s^2 overflows
      case 5:  // a product of sizes overflows somewhere: tokens, scores, logits, masks
        r.micro_batch = std::uint64_t{1} << (10 + pick(50));
        r.seq_len = std::uint64_t{1} << pick(34);
        break;
      case 6: r.loss = loss_impl::chunked; r.loss_chunk = 0; break;
      case 7: r.grad_accum = 0; break;
      default: r.shard = sharding::full; r.data_parallel = 1; break;
    }
  }
  return r;
}

// A builder's answer: its result, or the error it raised (message and code).
template <class Graph>
struct outcome {
  std::optional<Graph> result;
  std::string error;
  int code = -1;
};

template <class Build>
auto run_builder(Build build) -> outcome<decltype(build())> {
  outcome<decltype(build())> o;
  try {
    o.result.emplace(build());
  } catch (const memscale::error& e) {
    o.error = e.what();
    o.code = static_cast<int>(e.code());
  } catch (const std::exception& e) {
    o.error = std::string("std::exception: ") + e.what();
  }
  return o;
}

// Adds a builder's answer to `d`: its graph, or the error it raised (message and code).
template <class Graph>
void add_outcome(digest& d, const outcome<Graph>& o) {
  if (o.result) {
    d.add(*o.result);
    return;
  }
  d.add(o.error);
  d.add(static_cast<std::uint64_t>(static_cast<std::int64_t>(o.code)));
}

// What the random pairs reached, so a generator that stops reaching a feature fails.
struct coverage {
  int built = 0, refused = 0, overflowed = 0, encoder_decoder_built = 0, encoder_decoder_refused = 0;
  int litgpt = 0, lora = 0, qlora = 0, dora = 0, rslora = 0, head_adapter = 0, router_adapter = 0;
  int chunked = 0, cpu = 0, old_torch = 0, sdpa_gqa = 0, old_bnb = 0, fp32_adapters = 0, dropout = 0;
  int moe = 0, softcap = 0, frame_locals = 0, fused_litgpt_lora = 0, post_norm = 0, parallel = 0;
  int masked_lm = 0, classification = 0, bare = 0;
};

void count(coverage& c, const model_spec& m, const training_spec& r) {
  c.litgpt += m.impl == implementation::litgpt;
  c.lora += r.target == training_target::lora;
  c.qlora += r.target == training_target::qlora;
  c.dora += is_lora(r) && r.lora_kind == lora_variant::dora;
  c.rslora += is_lora(r) && r.lora_kind == lora_variant::rslora;
  c.head_adapter += is_lora(r) && has(r.lora_targets, lora_target::head);
  c.router_adapter += is_lora(r) && m.experts > 0 && has(r.lora_targets, lora_target::router);
  c.chunked += r.loss == loss_impl::chunked;
  c.cpu += r.device == device_kind::cpu;
  c.old_torch += r.torch_version < 200;
  c.sdpa_gqa += kv_heads_of(m) != m.heads && r.transformers_version >= 500 && r.attention == attention_impl::flash;
  c.old_bnb += r.target == training_target::qlora && r.bitsandbytes_version < bnb_drops_matmul_input;
  c.fp32_adapters += is_lora(r) && r.adapters == adapter_dtype::fp32;
  c.dropout += r.dropout && m.dropout;
  c.moe += m.experts > 0;
  c.softcap += m.attention_softcap || m.logit_softcap;
  c.frame_locals += m.attention_keeps_locals;
  c.fused_litgpt_lora += m.fused_qkv && m.impl == implementation::litgpt && is_lora(r);
  c.post_norm += m.layout == block_layout::post_norm;
  c.parallel += m.layout == block_layout::parallel;
  c.masked_lm += m.head == head_kind::masked_lm;
  c.classification += m.head == head_kind::sequence_classification;
  c.bare += m.head == head_kind::none;
}

}  // namespace

TEST_CASE("graph recipes: the graphs and errors of 40,000 random runs are the pinned ones", "[graph][golden]") {
  const std::vector<model_spec> models = base_models();
  REQUIRE(models.size() == presets::all.size() + pinned_configs.size());
  rng_picker pick{std::mt19937_64{20261125}};
  coverage c;
  constexpr int pairs = 40'000;
  digest stacks;
  digest pairs_digest;
  for (int i = 0; i < pairs; ++i) {
    model_spec model = models[pick(models.size())];
    if (pick.chance(6)) model.impl = implementation::litgpt;
    if (pick(2) == 0) {
      const auto switches = 1 + pick(4);
      for (std::uint64_t s = 0; s < switches; ++s) mutate(model, pick);
    }
    training_spec run = random_run(pick);
    if (model.arch == architecture::encoder_decoder && pick(2) == 0 && run.lora_rank != 0) {
      // T5 refuses adapters: half its pairs train every weight, so that it builds.
      run.target = training_target::full;
      run.lora_rank = 0;
    }
    if (pick(2) == 0) run = detail::with_resolved_adapters(model, run);
    count(c, model, run);

    const auto stack = run_builder([&] { return recipes::build_decoder_stack(model, run); });
    add_outcome(stacks, stack);
    if (stack.result) ++c.built;
    else ++c.refused;
    if (stack.code == static_cast<int>(error_code::overflow)) ++c.overflowed;

    const auto pair = run_builder([&] { return recipes::build_encoder_decoder(model, run); });
    add_outcome(pairs_digest, pair);
    if (pair.result) ++c.encoder_decoder_built;
    else ++c.encoder_decoder_refused;
  }
  // The digests of the old builders (transformer_builder, t5_builder) on these runs, which
  // the recipes matched op for op and field for field before the builders were deleted. A
  // change of any op, field or error message changes them: if the change is intended, say
  // which runs it changes and why, and update them. Changed once since: the two recipes'
  // refusals of the other architecture name build() instead of the deleted builders (the
  // digests with the old wording were checked equal first; only those error texts differ).
  // Changed again by lit-gpt's Fabric output cast (lit-gpt models, pure 16-bit, chunked loss,
  // unsharded: fp32 logits and log-probabilities) and the x^2 an RMSNorm's mean keeps before
  // torch 2.2 (Hugging Face RMSNorm runs at torch 2.0; lit-gpt RMSNorm runs at 1.13 and 2.0).
  // And by T5LayerNorm following the same mean rule (its x^2 gone at torch >= 2.2) and
  // InternLM2's per-layer rotary caches (buffers, and the gathered rows its rotation saves):
  // memscale-golden then differed only in T5 and internlm2 runs.
  // And by lit-gpt's full fine-tuning loop (lit-gpt models with the standard loss: the logits
  // kept by the loop in Fabric's dtype, the shifted copy only for more than one sequence, the
  // carried logits in that dtype); with that rule off the digest is the previous one.
  // And by the LLaMA and Mistral families' per-layer rotary tables (buffers) in runs that state
  // a transformers release before 4.40 / 4.42 (model_spec::rotary_tables_per_layer_before).
  // And by GPT-NeoX's per-layer masks and rotary tables and OPT's saved clamped scores in runs that
  // state a release before 4.48 (model_spec::mask_buffers_per_layer_before, attention_clamp_before);
  // with both at 0 the digest is the previous one.
  // And by three mechanisms of the H100 listing of the 2025-26 families: Gemma's RMSNorm scaling in
  // fp32 (gemma configs), grouped_mm experts from transformers 5.0 (MoE runs stating 5.x: no expert
  // weight copies, no weighted rows kept by index_add_), and Hugging Face's fused SDPA output merged
  // into heads as a view (flash and memory-efficient runs of Hugging Face models with separate q, k, v
  // projections); the new
  // model.rms_norm_fp32_scale check refuses a Gemma model whose norm is switched to a LayerNorm
  // (the only change the encoder-decoder pairs can see).
  // And by graph_capacity 512 (Llama 4's blocks of four layers): runs whose graph had more than 160
  // ops, refused before, now build; with graph_capacity 160 the digest is the previous one.
  // And by grouped_mm's gather back into token order (MoE runs stating transformers 5.x: one more
  // [rows, hidden] transient per MoE layer, graph/layers/mlp.hpp); nothing else in this change
  // touches a graph these models build.
  // And by the softmax's backward temporary on CUDA (grad * output, the scores' size: CUDA runs
  // with eager or math-path attention, graph/layers/attention.hpp softmax_temporaries), with
  // DeepSeek's LoRA targets and packed batches built alongside.
  // And by Gemma 3's sliding layers (the gemma-3-1b-pt config: model_spec::rotary_per_layer_type): its
  // runs whose mutation turns rotary positions off are refused by model.rotary_per_layer_type; with
  // that check off the digests are the previous ones.
  // And by Phi-3's one gate_up_proj (model.fused_gate_up: the Phi-3-mini config's runs; one
  // [rows, 2F] projection, and model.fused_gate_up refuses a mutation to an ungated MLP); with the
  // flag off in json/hf/phi3.hpp the digests are the previous ones.
  // And by the experts interface's training step (MoE runs stating transformers 5.x without
  // autocast: one [rows, 2F] gate_up output, each grouped_mm output's copy, a gated shared expert
  // before the router; graph/layers/mlp.hpp mixture_of_experts); with its `experts_interface` false the
  // digest is the previous one.
  // And by the Mamba-2 torch path's ops (graph/layers/mamba2.hpp: the G and M intermediates freed
  // after their sums, the scan's frame closed before the gated norm, broadcast products' gradients
  // in two blocks; op::bwd_temp_pieces): with those changes alone the digest moved
  // 17032030316512333984 -> 7455831265277922311, and with the experts change above to
  // 14777732172217102680 (stacks) and 17236783989896902359 (pairs).
  // And by refusals that echo an enumerated value by its name (detail::require's enum overload:
  // "(got learned)" where "(got 0)" was); with the number echoed the digests are the previous ones.
  // And by the first layer of a LoRA or QLoRA run without checkpointing written apart from the
  // block, its ops on the frozen embeddings' output untracked (recipes/decoder_stack.hpp
  // first_layer_apart, graph::first_layer_apart): 17995273603829723202 before; the pairs unchanged.
  // And by a product of two activations holding its second factor's gradient in its backward
  // (op_writer::product: gated MLPs, Python GELUs, Mamba's gates); with that temporary off the
  // digests are the previous ones, 6084390000446407112 and 3316677933223102212. And by v's gradient
  // waiting through the scores' backward in eager attention (then as those ops' bwd_temp):
  // 17503240477005949834 without it; the pairs unchanged. And by torchtitan's context parallelism:
  // the refusals of run.shard and of torchtitan's run.data_parallel name run.context_parallel
  // (17459529354366862793 and 15236024023830017037 before); the graphs of runs without CP are
  // built as before (the overflow test's digest of built graphs below did not move).
  // And by enable_input_require_grads' leaf in LoRA and QLoRA runs under the reentrant checkpoint:
  // with its .grad after the blocks' backward (graph::kept_input_embeddings), and through the step
  // where the stream is not the lookup itself (graph::held; graph/layers/input_require_grads.hpp);
  // without both the digest is the previous one, 10174477512328699861.
  // And by gradients waiting in autograd's input buffers as tensors of their own (graph::waiting,
  // digested when a graph has any; op_writer::gradient_waits): v's gradient leaves the scores ops'
  // bwd_temp, and the Mamba, Mamba-2 and Falcon-H1 ops whose second input gradient now waits hand
  // on only the first: 14622291769838774578 with the table left out of the digest (and without the
  // kept leaf), 17330721101535821034 with the table and without the kept leaf, 10321480422222632436
  // with the kept leaf and without the table, 10174477512328699861 before both; the pairs unchanged.
  // And by the untied output projection a transformers QLoRA load keeps in 16 bits
  // (get_keys_to_not_convert): 6001169875859163899 with it in 4 bits; the pairs unchanged.
  // And by frame locals beyond 2 TiB left in the op's temporaries (graph/layers/ops.hpp) instead of
  // refused by op.frame_locals_blocks: two runs refused before now build; 14285019683391687388
  // before (11719592515900156688 with the head in 4 bits), the pairs unchanged.
  // And by the weights a bitsandbytes load leaves in 16 bits because they are bare nn.Parameters,
  // not nn.Linear modules (graph/layers/mlp.hpp router_is_parameter, with_unquantized_experts):
  // QLoRA's 3-D experts and such routers; 7432247676889345779 before, the pairs unchanged.
  // And by lit-gpt's qkv adapter with q, k and v all adapted: zero_pad returns its input as it is,
  // no reshaped copy and no pad (graph/layers/adapters.hpp litgpt_qkv_lora); with the copy and the
  // pad written for every adapter the digest is 7325345884893030800 (4319757747562665322 with the
  // bitsandbytes rule left out too); the pairs unchanged.
  // And by one key/value head repeated as a view under a fused kernel for transformers and
  // torchtune too (graph/layers/attention.hpp repeat_is_view): 5093018911200382146 with only that
  // change since 7432247676889345779; the pairs unchanged.
  CHECK(stacks.value == 15688226655272002232ULL);
  CHECK(pairs_digest.value == 11764074077828971066ULL);
  // Each feature was reached often enough to mean something.
  CHECK(c.built > 20'000);
  CHECK(c.refused > 1'000);
  CHECK(c.overflowed > 25);  // the next test case walks every product past 2^64 in turn
  CHECK(c.encoder_decoder_built > 1'000);
  CHECK(c.encoder_decoder_refused > 1'000);
  for (const int reached : {c.litgpt, c.lora, c.qlora, c.dora, c.rslora, c.head_adapter, c.router_adapter, c.chunked,
                            c.cpu, c.old_torch, c.sdpa_gqa, c.old_bnb, c.fp32_adapters, c.dropout, c.moe, c.softcap,
                            c.frame_locals, c.fused_litgpt_lora, c.post_norm, c.parallel, c.masked_lm,
                            c.classification, c.bare})
    CHECK(reached > 100);
}

TEST_CASE("graph recipes: every model overflows at the pinned product, named the pinned way", "[graph][golden]") {
  // Sizes 2^k and 3 x 2^k walk each product of sizes (tokens, scores, logits, masks, the
  // decoder's cache) past 2^64 in turn, so each overflow check is the first to fail somewhere.
  std::vector<std::uint64_t> sizes;
  for (unsigned k = 0; k < 64; ++k) {
    sizes.push_back(std::uint64_t{1} << k);
    if (k < 62) sizes.push_back(std::uint64_t{3} << k);
  }
  int overflows = 0;
  digest answers;
  for (const model_spec& model : base_models()) {
    for (const precision prec : {precision::fp32, precision::amp_bf16, precision::pure_bf16}) {
      for (const std::uint64_t size : sizes) {
        const std::uint64_t root = std::uint64_t{1} << (std::bit_width(size) / 2);
        const training_spec runs[] = {{.micro_batch = size, .seq_len = 1, .prec = prec},
                                      {.micro_batch = 1, .seq_len = size, .prec = prec},
                                      {.micro_batch = size, .seq_len = root, .prec = prec}};
        for (const training_spec& run : runs) {
          const auto stack = run_builder([&] { return recipes::build_decoder_stack(model, run); });
          const auto pair = run_builder([&] { return recipes::build_encoder_decoder(model, run); });
          add_outcome(answers, stack);
          add_outcome(answers, pair);
          overflows += stack.code == static_cast<int>(error_code::overflow);
          overflows += pair.code == static_cast<int>(error_code::overflow);
        }
      }
    }
  }
  // The old builders' answers, refusal wording as above; changed by the graphs that build (the
  // three mechanisms named in the test case above) and by Phi-3's one gate_up_proj (its 2F-wide
  // product overflows where two F-wide ones did not; the previous value with the flag off), and
  // by enumerated values echoed by name (14089764646437117780 with their numbers), and by the
  // second factor's gradient of a product (9595492406356100300 without it), and by one key/value
  // head repeated as a view under a fused kernel (222806896823888673 before).
  CHECK(answers.value == 5190165081223874933ULL);
  CHECK(overflows > 5'000);
}

}  // namespace graph_golden_test
