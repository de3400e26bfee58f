// A LoRA or QLoRA model's first layer reads the frozen embeddings' output, which needs no gradient:
// autograd records nothing that reads only it through frozen weights, so that layer's input norm
// keeps nothing and its frozen projections take no input gradient (graph/recipes/decoder_stack.hpp
// first_layer_apart, graph/layers/ops.hpp untracked_from).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <memory>

#include "memscale/allocator/replay.hpp"
#include "memscale/memscale.hpp"
#include "memscale/parallel/per_gpu.hpp"

namespace lora_first_layer_test {
namespace {

using namespace memscale;
using namespace memscale::allocator;

training_spec lora_run(attention_impl attention, checkpointing ckpt) {
  training_spec run{.micro_batch = 2, .seq_len = 128, .prec = precision::pure_bf16, .ckpt = ckpt};
  run.attention = attention;
  run.target = training_target::lora;
  run.lora_rank = 8;
  run.lora_targets = lora_target::q | lora_target::v;
  return run;
}

// What the first layer keeps less than a repeated block: prologue (embeddings, which keep nothing
// under LoRA, and the first layer) against one block.
std::uint64_t first_layer_saves_less(const model_spec& model, const training_spec& requested) {
  const auto built = std::make_unique<model_graph>(build(model, requested));
  const graph& g = built->stack();
  REQUIRE(g.first_layer_apart);
  REQUIRE(g.block_repeats == model.layers - 1);
  const bytes block = section_saved_bytes(g, block_of(g), built->run, false);
  const bytes first = section_saved_bytes(g, prologue_of(g), built->run, false);
  REQUIRE(first < block);
  return (block - first).value;
}

}  // namespace

TEST_CASE("a LoRA model's first layer keeps neither its input norm's tensors nor q for k's gradient",
          "[lora][graph]") {
  const model_spec model = presets::llama_2_7b;
  const std::uint64_t rows = 2 * 128;
  // LlamaRMSNorm on a bf16 input keeps its fp32 copy (hidden_states.to(torch.float32)) and the fp32
  // rsqrt per row for the input's gradient only: the one difference under SDPA (which saves q, k, v).
  const std::uint64_t norm = 4 * rows * model.hidden + 4 * rows;
  CHECK(first_layer_saves_less(model, lora_run(attention_impl::sdpa, checkpointing::none)) == norm);
  // Eager: k is not adapted, so bmm(q, k^T) keeps no copy of q (needed for k's gradient only).
  CHECK(first_layer_saves_less(model, lora_run(attention_impl::eager, checkpointing::none)) ==
        norm + 2 * rows * model.hidden);
}

TEST_CASE("the first layer stays in the block where the embeddings' output may need a gradient", "[lora][graph]") {
  const training_spec checkpointed = lora_run(attention_impl::sdpa, checkpointing::full);
  CHECK_FALSE(build(presets::llama_2_7b, checkpointed).stack().first_layer_apart);
  training_spec full = lora_run(attention_impl::sdpa, checkpointing::none);
  full.target = training_target::full;
  full.lora_rank = 0;
  CHECK_FALSE(build(presets::llama_2_7b, full).stack().first_layer_apart);
  // Only the MLP adapted: the whole attention half needs no gradient; not written apart.
  training_spec mlp_only = lora_run(attention_impl::sdpa, checkpointing::none);
  mlp_only.lora_targets = lora_mlp;
  CHECK_FALSE(build(presets::llama_2_7b, mlp_only).stack().first_layer_apart);
}

TEST_CASE("the training stream of a first layer written apart peaks at estimate()'s bytes", "[lora][allocator]") {
  constexpr step_stream_options estimate_like{.blas_handles = 1, .tie_weights_copy = false, .cast_weight_grads = false};
  for (const attention_impl attention : {attention_impl::sdpa, attention_impl::eager})
    for (const framework_kind framework : {framework_kind::hf, framework_kind::torchtune})
      for (const training_target target : {training_target::lora, training_target::qlora}) {
        training_spec run = with_framework(lora_run(attention, checkpointing::none), framework);
        run.target = target;
        const auto built = std::make_unique<model_graph>(build(presets::llama_3_8b, run));
        REQUIRE(built->stack().first_layer_apart);
        const estimate_result est = estimate(*built);
        auto sink = std::make_unique<live_bytes<32768>>();
        emit_training_steps<32768, 8192>(built->stack(), built->run, estimate_like, *sink);
        INFO("attention " << static_cast<int>(attention) << " framework " << static_cast<int>(framework)
                          << " target " << static_cast<int>(target));
        CHECK(sink->peak(1) == est.first_step.tensor.value);
        CHECK(sink->peak(2) == est.steady.tensor.value);
      }
}

TEST_CASE("pipeline stages count a first layer written apart among their layers", "[lora][parallel]") {
  const training_spec run = lora_run(attention_impl::sdpa, checkpointing::none);
  REQUIRE(build(presets::llama_2_7b, run).stack().first_layer_apart);
  // 32 layers over 4 stages: accepted (the first layer is stage 0's, not a 33rd), and stage 0
  // holds no more than without the split would (one repeated block fewer, the lighter first layer).
  const per_gpu_estimate four = estimate_per_gpu(presets::llama_2_7b, run, {.gpus_per_node = 4, .pp = 4});
  const per_gpu_estimate one = estimate_per_gpu(presets::llama_2_7b, run, {.gpus_per_node = 1});
  CHECK(four.peak.tensor < one.peak.tensor);
}

}  // namespace lora_first_layer_test
