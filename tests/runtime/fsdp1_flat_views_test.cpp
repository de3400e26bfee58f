// FSDP1's flat-parameter views (training_spec::fsdp_flat_views): a wrapped block's weight
// gradients, frozen ones included under use_orig_params, wait for the split's backward, which
// concatenates them into the flat gradient (estimate/activations.hpp section_backward_peak).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>

#include "memscale/json.hpp"

namespace fsdp1_flat_views_test {
namespace {
using namespace memscale;
using json_io::json;

// gpu_published_dev.json "litgpt-rt2023-stablelm-base-alpha-3b-lora-fsdp2-mb1-a100" (source, notes removed).
json stablelm_fsdp_record() {
  return json::parse(R"json({"id": "litgpt-rt2023-stablelm-base-alpha-3b-lora-fsdp2-mb1-a100",
    "measure": "max_memory_allocated", "device": "2xA100-SXM4-40GB", "model": {"family": "stablelm",
    "name": "stabilityai/stablelm-base-alpha-3b", "params": 3637321728, "layers": 16, "hidden": 4096, "heads": 32,
    "kv_heads": 32, "ffn": 16384, "vocab": 50688, "max_pos": 4096, "tied_embeddings": false, "activation": "gelu",
    "norm": "layernorm", "impl": "litgpt"}, "train": {"batch": 1, "seq": 1034, "precision": "pure_bf16",
    "optimizer": "adamw", "checkpointing": "full", "attention": "sdpa", "grad_accum": 128, "lora_rank": 8,
    "frozen": "base", "zero_stage": 3, "dp": 2, "tp": 1, "lora_alpha": 16, "lora_targets": "q,v",
    "trainable_params": 2097152}, "measured_bytes": 12750000000})json");
}

struct record_run {
  model_spec model;
  training_spec run;
  parallel_spec layout;
};

record_run layout_of_record(const json& r) {
  return {json_io::model_for_record(r), json_io::run_from_record(json_io::single_gpu_view(r)),
          json_io::parallel_from_record(r)};
}

// Elements of one block's parameters (frozen and trainable) in the rank's graph.
std::uint64_t block_elements(const graph& g) {
  std::uint64_t n = 0;
  for (std::size_t i = g.block_begin; i < g.block_end; ++i) n += stored_elements(g.ops[i]);
  return n;
}
}  // namespace

static_assert(detail::rank_run(training_spec{}, {.engine = strategy::fsdp_full, .gpus_per_node = 2}).fsdp_flat_views);
static_assert(!detail::rank_run(training_spec{}, {.engine = strategy::zero3, .gpus_per_node = 2}).fsdp_flat_views);
static_assert(!training_spec{}.fsdp_flat_views);  // one GPU: no FSDP unit

TEST_CASE("FSDP1 flat views: set for FSDP1's sharding strategies only", "[fsdp1][parallel]") {
  const training_spec run = layout_of_record(stablelm_fsdp_record()).run;
  parallel_spec p{.engine = strategy::fsdp_full, .gpus_per_node = 2};
  CHECK(detail::rank_run(run, p).fsdp_flat_views);
  p.engine = strategy::fsdp_grad_op;
  CHECK(detail::rank_run(run, p).fsdp_flat_views);
  p.fsdp = fsdp_api::fsdp2;  // per-parameter DTensor shards
  CHECK_FALSE(detail::rank_run(run, p).fsdp_flat_views);
  p = {.engine = strategy::zero3, .gpus_per_node = 2};  // per-parameter hooks
  CHECK_FALSE(detail::rank_run(run, p).fsdp_flat_views);
  p = {.engine = strategy::ddp, .gpus_per_node = 2};
  CHECK_FALSE(detail::rank_run(run, p).fsdp_flat_views);
}

TEST_CASE("FSDP1 flat views: the split's backward holds every weight gradient and their concatenation",
          "[fsdp1][activations]") {
  const record_run r = layout_of_record(stablelm_fsdp_record());
  const training_spec rank = detail::rank_run(r.run, r.layout);
  const model_graph built = build(r.model, rank);
  const graph& g = built.stack();
  const training_spec& run = built.run;
  const bytes block = storage(dtype::bf16, block_elements(g));
  const flat_view_unit unit{.views = true, .split_after = true, .flat = block};
  const auto views = section_backward_peak(g, block_of(g), run, true, g.stream_grad, unit);
  CHECK(views.grads_at_peak == block * std::uint64_t{2});
  const auto plain = section_backward_peak(g, block_of(g), run, true, g.stream_grad);
  CHECK(plain.grads_at_peak < block);
  CHECK(views.peak > plain.peak);

  // Without use_orig_params the frozen tensors keep no view of a flat parameter that trains.
  training_spec flat_only = run;
  flat_only.fsdp_use_orig_params = false;
  const bytes trainable_flat = section_view_gradient_bytes(g, block_of(g), flat_only, view_gradients::stored);
  const auto trainable_only = section_backward_peak(g, block_of(g), flat_only, true, g.stream_grad,
                                                    {.views = true, .split_after = true, .flat = trainable_flat});
  CHECK(trainable_only.grads_at_peak < block);
}

TEST_CASE("FSDP1 flat views: a lit-gpt LoRA rank holds two blocks of gradients beyond the accumulated ones",
          "[fsdp1][parallel][records]") {
  const record_run r = layout_of_record(stablelm_fsdp_record());
  const per_gpu_estimate fsdp1 = estimate_per_gpu(r.model, r.run, r.layout);
  parallel_spec fsdp2_layout = r.layout;
  fsdp2_layout.fsdp = fsdp_api::fsdp2;
  const per_gpu_estimate without_views = estimate_per_gpu(r.model, r.run, fsdp2_layout);

  const model_graph built = build(r.model, detail::rank_run(r.run, r.layout));
  const bytes block = storage(dtype::bf16, block_elements(built.stack()));
  const std::uint64_t layers = built.stack().block_repeats;
  // no_sync keeps every block's whole flat gradient (use_orig_params); the peak is the split's
  // backward of a block: its weight gradients and their concatenation beside them.
  CHECK(without_views.peak.breakdown.gradients == block * layers);
  CHECK(fsdp1.peak.breakdown.gradients == block * (layers + 2));
  CHECK(fsdp1.peak.tensor > without_views.peak.tensor);
  CHECK(fsdp1.peak.at == phase::backward);
}

}  // namespace fsdp1_flat_views_test
