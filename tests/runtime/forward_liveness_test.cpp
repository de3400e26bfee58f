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

// The graph of generate()'s prefill forward: the prompt's rows, no dropout, the run's dtype.
training_spec prefill_run(const inference_spec& r) {
  training_spec t{.micro_batch = r.batch, .seq_len = r.context, .dropout = false};
  t.prec = r.compute == dtype::fp32 ? precision::fp32 : precision::pure_bf16;
  t.attention = r.attention;
  t.transformers_version = r.transformers_version;
  t.device = r.device;
  return t;
}

}  // namespace

// The graph walk against generate_peak.hpp's closed form for the last layer of a prefill: the
// stream, the layer's largest moment (the cache apart). Covered: a fused attention kernel, a
// dense MLP, pre-norm blocks, where apply_rotary_pos_emb's temporaries (which the graph does
// not yet describe) are not the layer's largest moment. The kinds left out and why:
// docs/inference.md "From the graph".
// The closed form's last-layer moment of a forward of `rows` positions per sequence over `keys`
// keys, or nothing where the graph does not describe that moment yet: RoPE's temporaries the
// largest moment.
bytes closed_form_layer(const model_spec& model, const inference_spec& r, std::uint64_t rows, std::uint64_t keys) {
  const auto n = r.batch * rows;
  const bytes q = storage(r.compute, n * model.heads * head_dim_of(model));
  const bytes kv = storage(r.compute, n * kv_heads_of(model) * head_dim_of(model));
  const bytes rotary = model.positions == position_kind::rotary ? max(q * 4u + kv * 2u, q * 2u + kv * 5u) : bytes{};
  const bytes layer = memscale::detail::layer_transient(model, r, rows, keys, bytes{});
  const bytes stream = storage(r.compute, n * model.hidden);
  if (rotary + stream == layer) return {};
  return stream + max(layer, stream);
}

// Covered: a fused kernel, a dense MLP, pre-norm blocks. In a decoding step, not GPT-BigCode's
// query that keeps the fused projection's new row alive, nor a Python fp32 LayerNorm whose
// temporaries outgrow a one-row layer (the closed form counts neither).
bool covered(const model_spec& model, bool decode) {
  if (model.experts > 0 || model.block_norms != branch_norms::pre) return false;
  return !decode || (!model.attention_keeps_fused_kv && model.norm != norm_kind::layernorm_fp32_python);
}

TEST_CASE("the no_grad graph walk equals the closed-form prefill layer where it covers the model",
          "[inference][graph][liveness]") {
  int compared = 0;
  for (const named_model& m : generate_models()) {
    if (!covered(m.spec, false)) continue;
    for (const dtype compute : {dtype::bf16, dtype::fp32}) {
      for (const std::uint64_t context : {16ULL, 512ULL}) {
        const inference_spec r{.batch = 2, .context = context, .new_tokens = 8, .compute = compute,
                               .attention = attention_impl::flash};
        const bytes closed = closed_form_layer(m.spec, r, context, context);
        if (closed == bytes{}) continue;
        const model_graph built = build_forward(m.spec, prefill_run(r), 0);
        INFO(m.name << " " << to_string(compute) << " context " << context);
        CHECK(no_grad_block_peak(built.stack()).live == closed);
        ++compared;
      }
    }
  }
  CHECK(compared >= 100);
}

TEST_CASE("a decoding step is the same graph at one row over the cached keys", "[inference][graph][liveness]") {
  int compared = 0;
  for (const named_model& m : generate_models()) {
    if (!covered(m.spec, true)) continue;
    for (const dtype compute : {dtype::bf16, dtype::fp32}) {
      for (const std::uint64_t context : {16ULL, 512ULL}) {
        const inference_spec r{.batch = 2, .context = context, .new_tokens = 8, .compute = compute,
                               .attention = attention_impl::flash};
        // The first decoding step: one row per sequence over the prompt's keys and its own.
        const bytes closed = closed_form_layer(m.spec, r, 1, context + 1);
        if (closed == bytes{}) continue;
        training_spec step = prefill_run(r);
        step.seq_len = 1;
        const model_graph built = build_forward(m.spec, step, context);
        INFO(m.name << " " << to_string(compute) << " context " << context);
        CHECK(no_grad_block_peak(built.stack()).live == closed);
        ++compared;
      }
    }
  }
  CHECK(compared >= 100);
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
  // Without cached keys the forward is the training graph without dropout, op for op.
  training_spec prefill{.micro_batch = 2, .seq_len = 64, .prec = precision::pure_bf16, .dropout = false};
  const model_graph a = build_forward(model, prefill, 0);
  const model_graph b = build(model, prefill);
  REQUIRE(a.stack().size == b.stack().size);
  for (std::size_t i = 0; i < a.stack().size; ++i) {
    CHECK(a.stack().ops[i].out == b.stack().ops[i].out);
    CHECK(b.stack().ops[i].last_reader == not_kept);  // a training step's graph skips the readers
  }
}

}  // namespace forward_liveness_test
