// Forward liveness without grad (graph/forward_liveness.hpp): each op's output is freed after
// its last reader, which the op writer records from the calls the layers already make.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "memscale/graph/forward_liveness.hpp"
#include "memscale/graph/layers/ops.hpp"
#include "memscale/graph/model_graph.hpp"
#include "memscale/inference.hpp"
#include "memscale/json.hpp"
#include "memscale/presets.hpp"

namespace forward_liveness_test {
namespace {

using namespace memscale;

// x (40 B) -> n = f(x) (80 B) -> a = g(n) (120 B) -> b (160 B, reads a, the op before it) ->
// s = x + b (160 B). Live while each runs: 40; 120; x + n + a = 240, then n is freed;
// x + a + b = 320, then a is freed; x + b + s = 360 (x is read by the add, not only the next op).
constexpr no_grad_moment hand_block_peak() {
  graph g;
  graph_layers::op_writer ops(g, precision_policy_of(training_spec{}), device_kind::cuda);
  ops.record_forward_liveness();
  ops.sections().begin_block();
  const graph_layers::tensor x = ops.emit(op_kind::stream, 10, dtype::fp32);
  const graph_layers::tensor n = ops.elementwise(x, 20, dtype::fp32);
  ops.elementwise(n, 30, dtype::fp32);
  const graph_layers::tensor b = ops.elementwise(40, dtype::fp32);
  ops.add(x, b);
  ops.sections().end_block(1);
  return no_grad_block_peak(g);
}

static_assert(hand_block_peak().live == bytes{360});
static_assert(hand_block_peak().at == 4);

// The index of the op after which the stream entering the block is freed.
std::size_t stream_freed_after(const graph& g) { return freed_after(g, g.block_begin); }

training_spec inference_like(std::uint64_t rows) {
  return training_spec{.micro_batch = 1, .seq_len = rows, .prec = precision::pure_bf16, .dropout = false};
}

}  // namespace

TEST_CASE("a hand-written graph's no_grad peak, at run time as in constant evaluation", "[graph][liveness]") {
  const no_grad_moment m = hand_block_peak();
  CHECK(m.live == bytes{360});
  CHECK(m.at == 4);
}

TEST_CASE("the residual stream lives until the add that consumes it", "[graph][liveness]") {
  for (const model_spec& model : {presets::llama_2_7b, presets::gpt2, presets::mistral_7b}) {
    const model_graph built = build_forward(model, inference_like(16), 0);
    const graph& g = built.stack();
    const std::size_t freed = stream_freed_after(g);
    INFO(model.name);
    // Freed by the attention branch's residual add: an elementwise op of the stream's size,
    // well after the block's first ops (the norm, the projections).
    REQUIRE(freed < g.block_end);
    CHECK(freed > g.block_begin + 4);
    CHECK(g.ops[freed].kind == op_kind::elementwise);
    CHECK(g.ops[freed].out == g.ops[g.block_begin].out);
    // Before the fix that records an add's inputs, the stream was freed after the next op.
    CHECK(freed != g.block_begin + 1);
  }
}

TEST_CASE("a branch's normed input lives until the branch's output is made", "[graph][liveness]") {
  const model_graph built = build_forward(presets::llama_2_7b, inference_like(16), 0);
  const graph& g = built.stack();
  const std::size_t normed = g.block_begin + 1;  // input_layernorm's output
  REQUIRE(g.ops[normed].kind == op_kind::norm);
  const std::size_t freed = freed_after(g, normed);
  // o_proj (the last linear before the residual add) is the branch's output.
  std::size_t o_proj = freed;
  while (o_proj > normed && g.ops[o_proj].kind != op_kind::linear) --o_proj;
  CHECK(freed == o_proj);
  CHECK(g.ops[o_proj].weight.cols == presets::llama_2_7b.hidden);
}

TEST_CASE("rows that are not read again are freed after the next op", "[graph][liveness]") {
  const model_graph built = build_forward(presets::llama_2_7b, inference_like(16), 0);
  const graph& g = built.stack();
  for (std::size_t i = 0; i < g.size; ++i) {
    INFO(i);
    CHECK(freed_after(g, i) > i);
    if (g.ops[i].last_reader == not_kept) CHECK(freed_after(g, i) == i + 1);
  }
}

TEST_CASE("the no_grad block peak holds the stream, the largest op and nothing saved", "[graph][liveness]") {
  for (const model_spec& model : presets::all) {
    if (model.arch != architecture::decoder) continue;
    INFO(model.name);
    const model_graph built = build_forward(model, inference_like(64), 0);
    const graph& g = built.stack();
    const no_grad_moment m = no_grad_block_peak(g);
    bytes largest{};
    bytes saved_by_training{};
    for (std::size_t i = g.block_begin; i < g.block_end; ++i) {
      const op& o = g.ops[i];
      largest = max(largest, (o.kv_cached ? bytes{} : o.out) + o.fwd_temp + o.extra_saved);
      if (o.released_by != not_kept) saved_by_training += o.out;
    }
    CHECK(largest <= m.live);
    CHECK(g.ops[g.block_begin].out + g.ops[m.at].out <= m.live);
    // Without grad nothing accumulates: the peak is below what a training forward keeps.
    CHECK(m.live < saved_by_training + largest + g.ops[g.block_begin].out);
  }
}

namespace {

struct named_model {
  std::string name;
  model_spec spec;
};

// Every preset and every config in tests/data/hf_configs generate() covers.
std::vector<named_model> generate_models() {
  std::vector<named_model> out;
  for (const model_spec& m : presets::all) out.push_back({std::string(m.name), m});
  for (const auto& entry : std::filesystem::directory_iterator(std::string(MEMSCALE_SOURCE_DIR) + "/tests/data/hf_configs")) {
    if (entry.path().extension() != ".json") continue;
    try {
      out.push_back({entry.path().filename().string(), json_io::load_hf_model(entry.path().string())});
    } catch (const error&) {
      // configs memscale refuses are covered by hf_config_test
    }
  }
  std::vector<named_model> covered;
  for (const named_model& m : out) {
    try {
      memscale::detail::require_generate_modelled(m.spec);
      covered.push_back(m);
    } catch (const error&) {
    }
  }
  return covered;
}

}  // namespace

// A mixture of experts' largest moment without grad, beside the stream and the MLP's input,
// counted from MixtralSparseMoeBlock.forward / Qwen2MoeSparseMoeBlock.forward (modeling_mixtral.py
// @v4.44.0, modeling_qwen2_moe.py v4.51) over n = batch x rows tokens, every row routed to the
// expert that runs and, with k >= 2 experts a token, to the one before it. Bound through the
// loop: router logits (n x E), the routing weights (n x k, the hidden dtype), the int64 top-k
// indices, final_hidden_states (n x h) and the int64 one-hot mask (n x k x E).
bytes hand_moe_moment(const model_spec& m, const inference_spec& r, std::uint64_t rows) {
  const auto act = [&](std::uint64_t elements) { return storage(r.compute, elements); };
  const auto int64 = [](std::uint64_t elements) { return storage(dtype::int64, elements); };
  const std::uint64_t n = r.batch * rows;
  const std::uint64_t k = m.experts_per_token;
  const bytes bound = act(n * m.experts) + act(n * k) + int64(n * k) + act(n * m.hidden) + int64(n * k * m.experts);
  const bytes indices = int64(2 * n);  // torch.where: slot and row of each routed row
  const bytes hidden = act(n * m.hidden);
  const bytes previous_out = k > 1 ? hidden : bytes{};  // the previous expert's weighted output
  // The expert's MLP (act(w1 x) * w3 x, then w2) beside its gathered rows; then its output,
  // the rows' routing weights and the weighted output.
  const auto mlp_moment = [&](std::uint64_t ffn) {
    const bytes wide = act(n * ffn);
    return max(wide * (gated_mlp(m) ? 3u : 2u), wide + hidden);
  };
  const bytes expert = max(mlp_moment(m.ffn), hidden * 2u + act(n));
  bytes moment = bound + indices + hidden + previous_out + expert;
  // The previous expert's rows until this one's are made.
  if (k > 1) moment = max(moment, bound + indices + hidden * 3u);
  if (m.shared_expert_ffn > 0) {
    // After the loop the last expert's indices, rows and weighted output stay bound.
    const bytes left = bound + indices + hidden * 2u;
    bytes shared = mlp_moment(m.shared_expert_ffn);
    if (m.shared_expert_gate) shared = max(shared, hidden * 2u + act(n));  // sigmoid(gate(x)) * shared
    shared = max(shared, hidden * 2u);                                     // final + shared
    moment = max(moment, left + shared);
  }
  return moment;
}

// The last layer's moment of a generate() forward counted by hand from transformers' code
// (LlamaDecoderLayer / LlamaAttention / LlamaMLP, v4.44), the stream entering it included and
// the cache apart: the normed input beside the largest of apply_rotary_pos_emb's temporaries,
// the attention (q, repeat_kv's copies, the core) and the MLP (act(gate), up, their product;
// GPT-2's gelu_new as four tensors). This is the closed form generate_peak.hpp used before the
// graph walk replaced it, with the moments it missed or counted twice corrected (each named).
bytes hand_layer_moment(const model_spec& m, const inference_spec& r, std::uint64_t rows, std::uint64_t keys) {
  const auto act = [&](std::uint64_t elements) { return storage(r.compute, elements); };
  const std::uint64_t n = r.batch * rows;
  const bytes q = act(n * m.heads * head_dim_of(m));
  const bytes kv = act(n * kv_heads_of(m) * head_dim_of(m));
  const bytes stream = act(n * m.hidden);
  const bool prefill = rows == keys;
  // In a prefill the rotated keys and the values are the cache's (counted with it), not the layer's.
  bytes rotary{};
  if (m.positions == position_kind::rotary)
    rotary = prefill ? max(q * 4u + kv, q * 2u + kv * 3u) : max(q * 4u + kv * 2u, q * 2u + kv * 5u);
  const bytes repeated = kv_heads_of(m) != m.heads ? act(r.batch * keys * m.heads * head_dim_of(m)) * 2u : bytes{};
  const std::uint64_t scores = r.batch * m.heads * rows * keys;
  const bool fused_kernel = is_fused(attention_kernel_of(m, r));
  bytes core = act(scores) * 2u;  // q.k^T and its scaled copy
  if (fused_kernel) core = q + storage(dtype::fp32, r.batch * m.heads * rows);  // output, log-sum-exp
  else if (m.softmax_fp32) core = max(core, act(scores) + storage(dtype::fp32, scores) + (r.compute == dtype::fp32 ? bytes{} : act(scores)));
  bytes attention = q + repeated + core;
  // The context matmul's output beside the cast probabilities (the closed form missed this moment).
  if (!fused_kernel) attention = max(attention, q * 2u + repeated + act(scores));
  const std::uint64_t mlp_tensors = gated_mlp(m) ? 3 : m.mlp == mlp_kind::gelu_tanh ? 4 : 2;
  const bytes mlp = m.experts > 0 ? hand_moe_moment(m, r, rows) : act(n * m.ffn) * mlp_tensors;
  // The caller binds the layer's input until the layer returns (LlamaModel.forward: hidden_states =
  // decoder_layer(hidden_states, ...)): beside the attention the input and its normed copy, beside
  // a sequential block's MLP the input, the residual sum and its normed copy (the closed form freed
  // the input at the sum). A parallel block's last sum reads the input anyway.
  if (m.layout != block_layout::sequential) return stream * 2u + max(max(rotary, attention), mlp);
  return max(stream * 2u + max(rotary, attention), stream * 3u + mlp);
}

// The models whose layer the hand count above describes: pre-norm blocks, experts one at a time.
// Not: GraniteMoE's experts in one pass (the training graph's routed rows); post-norm blocks (OLMo-2: no normed input, Olmo2DecoderLayer.forward);
// a fused qkv projection, whose q is a view of the output the cache keeps in a prefill and
// whose new row stays with the query in a decoding step (GPT2Attention.forward); in a decoding
// step, Cohere's Python fp32 LayerNorm, whose temporaries are the largest moment at one row;
// Llama 4, whose generate() is refused (layers that differ by position, experts on every token);
// multi-head latent attention (DeepSeek: its projections, cache and fp32 routing are not this count's);
// gpt-oss, walked since its sinks and experts are (the widened scores, the every-expert bmm).
bool hand_counted(const model_spec& m, bool decode) {
  if (m.block_norms != branch_norms::pre || m.fused_qkv || m.experts_in_one_pass) return false;
  if (has_latent_attention(m) || m.attention_sinks || m.expert_weight_copies) return false;
  if (m.experts_on_every_token || m.nope_layer_interval > 0) return false;
  return !decode || m.norm != norm_kind::layernorm_fp32_python;
}

// A prefill and a first decoding step of every covered model, with a fused kernel and eager
// attention (eager's scaled scores and fp32 softmax, the context matmul; RoPE's temporaries).
TEST_CASE("the no_grad graph walk of a generate() layer equals the hand count where it describes the model",
          "[inference][graph][liveness]") {
  int prefills = 0;
  int decodes = 0;
  for (const named_model& m : generate_models()) {
    for (const bool decode : {false, true}) {
      if (!hand_counted(m.spec, decode)) continue;
      for (const attention_impl attention : {attention_impl::flash, attention_impl::eager}) {
        for (const dtype compute : {dtype::bf16, dtype::fp32}) {
          for (const std::uint64_t context : {16ULL, 512ULL}) {
            const inference_spec r{.batch = 2, .context = context, .new_tokens = 8, .compute = compute,
                                   .attention = attention};
            const std::uint64_t rows = decode ? 1 : context;
            const std::uint64_t keys = decode ? context + 1 : context;
            INFO(m.name << " " << to_string(compute) << (attention == attention_impl::eager ? " eager" : " flash")
                        << " context " << context << (decode ? " decode" : " prefill"));
            CHECK(memscale::detail::layer_peak(m.spec, r, rows, keys).value == hand_layer_moment(m.spec, r, rows, keys).value);
            ++(decode ? decodes : prefills);
          }
        }
      }
    }
  }
  CHECK(prefills >= 160);
  CHECK(decodes >= 150);
}

// The forward's own tensors beside the last layer, by hand (modeling_llama.py v4.44.0
// LlamaModel.forward, GenerationMixin._sample): token ids, attention mask and position ids
// (int64), the embeddings' outputs (GPT-2 and OPT keep the position lookup too), the rotary
// cos and sin; no 4-D mask with a fused kernel.
bytes forward_level(const model_spec& m, const inference_spec& r, std::uint64_t rows) {
  const bytes ids = storage(dtype::int64, r.batch * (2 * r.context + rows));
  const bytes embeds = storage(r.compute, r.batch * rows * m.hidden) * (m.positions == position_kind::learned ? 2u : 1u);
  const bytes rope =
      m.positions == position_kind::rotary ? storage(r.compute, r.batch * rows * head_dim_of(m)) * 2u : bytes{};
  return ids + embeds + rope;
}

model_spec hf_config(const char* file) {
  return json_io::load_hf_model(std::string(MEMSCALE_SOURCE_DIR) + "/tests/data/hf_configs/" + file);
}

TEST_CASE("OLMo-2's post-norm layer holds no normed input in generate()", "[inference][graph][liveness]") {
  // Olmo2DecoderLayer.forward: self_attn reads the residual stream itself and the norm is
  // applied to the branch's output; the closed form counted a normed input of the stream's size.
  const model_spec olmo2 = hf_config("allenai--OLMo-2-1124-7B.json");
  const inference_spec r{.batch = 2, .context = 2048, .new_tokens = 1, .compute = dtype::bf16,
                         .attention = attention_impl::flash};
  const inference_result e = estimate_inference(olmo2, r);
  const bytes stream = storage(r.compute, r.batch * r.context * olmo2.hidden);
  REQUIRE(e.prefill.breakdown.logits == bytes{});  // the peak is inside the last layer
  CHECK(e.prefill.breakdown.activations ==
        forward_level(olmo2, r, r.context) + hand_layer_moment(olmo2, r, r.context, r.context) - stream);
}

TEST_CASE("a decoding step counts what the closed form missed at one row", "[inference][graph][liveness]") {
  const inference_spec r{.batch = 2, .context = 512, .new_tokens = 8, .compute = dtype::bf16,
                         .attention = attention_impl::flash};
  // GPTBigCodeAttention.forward: the query is a view of c_attn's output, so the new row's key and
  // value parts stay with it while the layer runs: two kv rows beyond the hand count.
  const model_spec bigcode = hf_config("bigcode--starcoder.json");
  const bytes kv_row = storage(r.compute, r.batch * kv_heads_of(bigcode) * head_dim_of(bigcode));
  CHECK(memscale::detail::layer_peak(bigcode, r, 1, 513) == hand_layer_moment(bigcode, r, 1, 513) + kv_row * 2u);
  // CohereLayerNorm computes in fp32 as Python ops (modular_cohere.py): at one row its
  // temporaries outgrow the layer's other moments, which the closed form did not count.
  const model_spec cohere = hf_config("CohereForAI--c4ai-command-r-v01.json");
  CHECK(memscale::detail::layer_peak(cohere, r, 1, 513) > hand_layer_moment(cohere, r, 1, 513));
}

// GPT-BigCode's multi-query eager attention folds the heads into the query's rows and reads
// the one key and value as they are (GPTBigCodeAttention._attn): no repeat_kv copies, which the
// closed form counted (2 x batch x keys x heads x head_dim).
TEST_CASE("GPT-BigCode's eager attention makes no repeated keys and values", "[inference][graph][liveness]") {
  const model_spec bigcode = hf_config("bigcode--starcoder.json");
  const inference_spec r{.batch = 2, .context = 512, .new_tokens = 8, .compute = dtype::bf16,
                         .attention = attention_impl::eager};
  const bytes repeated = storage(r.compute, r.batch * 513 * bigcode.heads * head_dim_of(bigcode)) * 2u;
  const bytes kv_row = storage(r.compute, r.batch * kv_heads_of(bigcode) * head_dim_of(bigcode));
  CHECK(memscale::detail::layer_peak(bigcode, r, 1, 513) == hand_layer_moment(bigcode, r, 1, 513) - repeated + kv_row * 2u);
}

TEST_CASE("the attention of a forward with a cache reads every key", "[graph][liveness]") {
  training_spec step{.micro_batch = 2, .seq_len = 1, .prec = precision::pure_bf16, .attention = attention_impl::eager};
  const model_spec& model = presets::llama_2_7b;
  const model_graph built = build_forward(model, step, 100);
  const graph& g = built.stack();
  bool scores_found = false;
  bytes cached{};
  for (std::size_t i = g.block_begin; i < g.block_end; ++i) {
    if (g.ops[i].kind == op_kind::attention && !scores_found) {
      CHECK(g.ops[i].out == storage(dtype::bf16, 2 * model.heads * 1 * 101));  // batch x heads x rows x keys
      scores_found = true;
    }
    if (g.ops[i].kv_cached) cached += g.ops[i].out;
  }
  CHECK(scores_found);
  // The cache's keys and values after torch.cat: 101 positions of both.
  CHECK(cached == storage(dtype::bf16, 2 * 101 * model.hidden) * 2u);
  // Without cached keys the forward's block is the training graph's without dropout, op for op.
  training_spec prefill{.micro_batch = 2, .seq_len = 64, .prec = precision::pure_bf16, .dropout = false};
  const model_graph a = build_forward(model, prefill, 0);
  const model_graph b = build(model, prefill);
  const graph& fa = a.stack();
  const graph& fb = b.stack();
  REQUIRE(fa.block_end - fa.block_begin == fb.block_end - fb.block_begin);
  std::size_t read_later = 0;
  for (std::size_t i = 0; i < fa.block_end - fa.block_begin; ++i) {
    CHECK(fa.ops[fa.block_begin + i].out == fb.ops[fb.block_begin + i].out);
    if (fb.ops[fb.block_begin + i].last_reader != not_kept) ++read_later;
  }
  // A training step's graph skips the readers, except apply_rotary_pos_emb's arguments: the
  // unrotated q and k, bound until k is rotated (graph/layers/attention.hpp, ops.bound_until).
  CHECK(read_later == 2);
}

TEST_CASE("generate()'s embeddings, rotary tables, mask and logits are the forward graph's ops", "[graph][liveness]") {
  // LlamaModel.forward (v4.44.0) binds inputs_embeds, the rotary cos and sin and eager's 4-D mask
  // until it returns; LlamaForCausalLM.forward computes every position's logits and, before 4.45,
  // their fp32 copy, which it returns; from 4.45 the last position's only.
  const model_spec& llama = presets::llama_2_7b;
  training_spec step{.micro_batch = 2, .seq_len = 64, .prec = precision::pure_bf16, .attention = attention_impl::eager};
  step.transformers_version = 444;
  const model_graph old_built = build_forward(llama, step, 36);
  const graph& old_g = old_built.stack();
  const bytes embeds = storage(dtype::bf16, 2 * 64 * llama.hidden);
  const bytes rope = storage(dtype::bf16, 2 * 64 * head_dim_of(llama)) * 2u;
  const bytes mask = storage(dtype::bf16, 2 * 64 * 100);  // batch x rows x keys
  CHECK(no_grad_held_through_blocks(old_g) == embeds + rope + mask);
  CHECK(old_g.ops[old_g.size - 1].out == storage(dtype::fp32, 2 * 64 * llama.vocab));
  // At the fp32 copy: the 16-bit logits it reads, and the final norm's output the forward binds.
  const no_grad_moment tail = no_grad_epilogue_peak(old_g);
  CHECK(tail.at == old_g.size - 1);
  const bytes normed = storage(dtype::bf16, 2 * 64 * llama.hidden);
  CHECK(tail.live == storage(dtype::bf16, 2 * 64 * llama.vocab) + storage(dtype::fp32, 2 * 64 * llama.vocab) + normed);
  step.transformers_version = 445;
  step.attention = attention_impl::flash;
  const model_graph new_built = build_forward(llama, step, 36);
  const graph& new_g = new_built.stack();
  CHECK(no_grad_held_through_blocks(new_g) == embeds + rope);
  CHECK(new_g.ops[new_g.size - 1].out == storage(dtype::bf16, 2 * llama.vocab));
  // GPT-2 keeps its token and position lookups (GPT2Model.forward inputs_embeds, position_embeds).
  const model_graph gpt2 = build_forward(presets::gpt2, step, 0);
  CHECK(no_grad_held_through_blocks(gpt2.stack()) == storage(dtype::bf16, 2 * 64 * presets::gpt2.hidden) * 2u);
  CHECK(gpt2.stack().ops[gpt2.stack().size - 1].out == storage(dtype::bf16, 2 * 64 * presets::gpt2.vocab));
}

}  // namespace forward_liveness_test

namespace forward_liveness_test {

// generate() runs Mixtral's experts one at a time (the MLP over at most every row), GraniteMoE's
// ParallelExperts over every routed row at once (tokens x k): the loop's moment is the smaller.
TEST_CASE("a mixture of experts without grad runs one expert at a time unless its experts run in one pass",
          "[inference][graph][liveness]") {
  const inference_spec r{.batch = 2, .context = 512, .new_tokens = 8, .compute = dtype::bf16,
                         .attention = attention_impl::flash};
  model_spec one_pass = presets::mixtral_8x7b;
  one_pass.experts_in_one_pass = true;
  const bytes loop = memscale::detail::layer_peak(presets::mixtral_8x7b, r, 512, 512);
  CHECK(loop == hand_layer_moment(presets::mixtral_8x7b, r, 512, 512));
  CHECK(loop < memscale::detail::layer_peak(one_pass, r, 512, 512));
  // Training graphs are the same either way (autograd keeps every expert's rows).
  const training_spec step{.micro_batch = 2, .seq_len = 64, .prec = precision::pure_bf16};
  CHECK(estimate(presets::mixtral_8x7b, step).steady.device == estimate(one_pass, step).steady.device);
}

}  // namespace forward_liveness_test
