// FSDP1's root unit (embeddings, final norm, head) when it trains: the head's view gradients wait
// through every block's backward for the root's split after the embeddings' backward
// (estimate/single_graph.hpp root_flat_view_unit), checked against the CPU trace
// docs/data/cpu_traced_fsdp1_flat_views.json (tools/trace/fsdp1_flat_views.py).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <fstream>
#include <string>

#include "memscale/json.hpp"

namespace fsdp1_trained_root_test {
namespace {
using namespace memscale;
using json_io::json;

json trace_record(const std::string& id) {
  std::ifstream in(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_fsdp1_flat_views.json");
  for (const json& r : json::parse(in))
    if (r.at("id") == id) return r;
  FAIL("no record " << id);
  return {};
}

// The traced model as memscale builds it: embeddings, blocks, an RMS-style final norm (weight
// only) and the head, fp32, one rank of two under FSDP1 FULL_SHARD, full fine-tuning.
struct rank_graph {
  model_graph built;
  const graph& g() const { return built.stack(); }
};

rank_graph traced_rank(const json& unit) {
  model_spec m = presets::llama_base("fsdp1-root-trace", unit.at("blocks").get<std::uint64_t>(),
                                     unit.at("hidden").get<std::uint64_t>(), 4, 4, unit.at("ffn").get<std::uint64_t>(),
                                     unit.at("vocab").get<std::uint64_t>());
  m.tied_embeddings = unit.at("tied").get<bool>();
  const training_spec run{.micro_batch = 1, .seq_len = unit.at("tokens").get<std::uint64_t>()};
  const parallel_spec p{.engine = strategy::fsdp_full, .gpus_per_node = unit.at("ranks").get<std::uint64_t>()};
  return {build(m, detail::rank_run(run, p))};
}

// Within 1% of the traced figure.
bool near(bytes modelled, double traced) {
  const double d = static_cast<double>(modelled.value) - traced;
  return d < traced * 0.01 && -d < traced * 0.01;
}
}  // namespace

TEST_CASE("FSDP1 trained root: the unit as traced (untied and tied heads)", "[fsdp1][activations][trace]") {
  for (const char* id : {"cpu-fsdp1-trained-root-untied", "cpu-fsdp1-trained-root-tied"}) {
    CAPTURE(id);
    const json r = trace_record(id);
    const rank_graph rg = traced_rank(r.at("unit"));
    const graph& g = rg.g();
    const training_spec& run = rg.built.run;
    const flat_view_unit unit = detail::root_flat_view_unit(g, run, true);
    REQUIRE(unit.views);
    CHECK(unit.flat.value == r.at("root_flat_gradient_bytes").get<std::uint64_t>());
    // The head's (a tied head's whole) and the final norm's gradients, live in every block's backward.
    CHECK(near(unit.waiting, r.at("waiting_in_blocks_bytes").get<double>()));
    // After the blocks: the split (the gradients beside their concatenation), or before it a tied
    // weight's two gradients and their sum.
    const auto prologue = section_backward_peak(g, prologue_of(g), run, false, bytes{}, unit);
    CHECK(near(prologue.grads_at_peak, r.at("root_gradients_at_peak_bytes").get<double>()));
    CHECK(near(prologue.peak, r.at("root_gradients_at_peak_bytes").get<double>()));
  }
}

TEST_CASE("FSDP1 trained root: a full fine-tune's rank holds the root's gradients through backward",
          "[fsdp1][parallel]") {
  // Llama-2-7B's shape with a short sequence and SGD, so that the backward is the peak.
  const model_spec m = presets::llama_2_7b;
  const training_spec run{.micro_batch = 1, .seq_len = 128, .prec = precision::pure_bf16,
                          .optimizer = optimizer_kind::sgd, .ckpt = checkpointing::full};
  parallel_spec p{.engine = strategy::fsdp_full, .gpus_per_node = 8};
  const per_gpu_estimate fsdp1 = estimate_per_gpu(m, run, p);
  p.fsdp = fsdp_api::fsdp2;  // per-parameter shards: the head's gradient is reduced as it is made
  const per_gpu_estimate fsdp2 = estimate_per_gpu(m, run, p);

  const model_graph built = build(m, detail::rank_run(run, {.engine = strategy::fsdp_full, .gpus_per_node = 8}));
  const flat_view_unit root = detail::root_flat_view_unit(built.stack(), built.run, true);
  // Untied: the embeddings' and the head's gradients plus the final norm's, bf16.
  const std::uint64_t table = m.vocab * m.hidden;
  CHECK(root.flat == storage(dtype::bf16, 2 * table + m.hidden));
  CHECK(root.waiting == storage(dtype::bf16, table + m.hidden));
  CHECK(root.borrowed.value == 0);
  CHECK(fsdp1.peak.at == phase::backward);
  // After the blocks: the root's gradients beside their concatenation, and the rank's 1/8 of the
  // blocks' gradients (reduce-scattered as each block's backward ended).
  const detail::graph_totals t = detail::totals_of(built.stack(), built.run);
  const bytes block_shards = ceil_div(t.grads_b * built.stack().block_repeats, std::uint64_t{8});
  CHECK(fsdp1.peak.breakdown.gradients == root.flat * std::uint64_t{2} + block_shards);
  CHECK(fsdp1.peak.tensor > fsdp2.peak.tensor);
}

TEST_CASE("FSDP1 trained root: frozen embeddings and head keep no views with gradients", "[fsdp1][parallel]") {
  training_spec run{.micro_batch = 1, .seq_len = 128, .prec = precision::pure_bf16, .lora_rank = 8};
  run.target = training_target::lora;
  const parallel_spec p{.engine = strategy::fsdp_full, .gpus_per_node = 2};
  const model_graph lora = build(presets::llama_2_7b, detail::rank_run(run, p));
  const detail::graph_totals t = detail::totals_of(lora.stack(), lora.run);
  CHECK_FALSE(detail::root_flat_view_unit(lora.stack(), lora.run, detail::root_trains(lora.stack(), t.grads_p, t.grads_b, t.grads_e)).views);

  // LoRA on the head puts trainable adapters in the root: under use_orig_params the frozen
  // embeddings and head get view gradients too.
  run.lora_targets = lora_target::q | lora_target::v | lora_target::head;
  const model_graph head = build(presets::llama_2_7b, detail::rank_run(run, p));
  const detail::graph_totals th = detail::totals_of(head.stack(), head.run);
  const flat_view_unit root = detail::root_flat_view_unit(head.stack(), head.run,
                                                               detail::root_trains(head.stack(), th.grads_p, th.grads_b, th.grads_e));
  REQUIRE(root.views);
  const std::uint64_t table = presets::llama_2_7b.vocab * presets::llama_2_7b.hidden;
  CHECK(root.flat > storage(dtype::bf16, 2 * table));
  CHECK(root.flat > th.grads_p + th.grads_e);
}

TEST_CASE("FSDP1 trained root: refused beside a first layer written apart", "[fsdp1][parallel][refusal]") {
  // SHARD_GRAD_OP without checkpointing writes an attention-adapted first layer apart
  // (graph/recipes/decoder_stack.hpp first_layer_apart); the head's adapters make the root train.
  training_spec run{.micro_batch = 1, .seq_len = 128, .prec = precision::pure_bf16, .lora_rank = 8};
  run.target = training_target::lora;
  run.lora_targets = lora_target::q | lora_target::v | lora_target::head;
  const parallel_spec p{.engine = strategy::fsdp_grad_op, .gpus_per_node = 2};
  try {
    (void)estimate_per_gpu(presets::llama_2_7b, run, p);
    FAIL("expected a refusal");
  } catch (const error& e) {
    CHECK(std::string(e.what()).find("run.target") != std::string::npos);
  }
  run.lora_targets = lora_target::q | lora_target::v;  // the root frozen: estimated
  CHECK(estimate_per_gpu(presets::llama_2_7b, run, p).peak.tensor.value > 0);
}

}  // namespace fsdp1_trained_root_test
