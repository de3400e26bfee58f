// litgpt's RoPE cache (graph/layers/litgpt_rope_cache.hpp): GPT's `cos` and `sin` buffers, rebuilt
// in fp32 by fit()'s max_seq_length setter (litgpt/model.py @ 26857050), in every training graph
// of litgpt 0.4 and main and on every rank (neither FSDP shards buffers).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>

#include "memscale/memscale.hpp"

namespace litgpt_rope_cache_test {
namespace {

using namespace memscale;

// 4 heads of 64: rope_n_elem 64 (rotary_percentage 1).
constexpr model_spec litgpt_llama() {
  return as_litgpt_model(presets::llama_base("litgpt-test", 4, 256, 4, 4, 688, 16000));
}

constexpr training_spec lora_run(std::uint32_t version) {
  training_spec run = with_framework(training_spec{.micro_batch = 2,
                                                   .seq_len = 256,
                                                   .prec = precision::pure_bf16,
                                                   .target = training_target::lora,
                                                   .lora_rank = 8},
                                     framework_kind::litgpt);
  run.framework_version = version;
  return run;
}

constexpr std::uint64_t buffers_of(const model_spec& m, const training_spec& run) {
  return build(m, run).stacks.decoder.buffers.value;
}

}  // namespace

// cos and sin: seq_len x rope_n_elem fp32 each.
static_assert(buffers_of(litgpt_llama(), lora_run(litgpt_main)) == 2 * 256 * 64 * 4);

TEST_CASE("litgpt's rope cache: fp32 rows of the longest sequence, the init's where that is the block size") {
  CHECK(buffers_of(litgpt_llama(), lora_run(litgpt_v0_4)) == 2 * 256 * 64 * 4);
  // Half the head rotated (Phi's rotary_percentage 0.5): rope_n_elem 32.
  model_spec partial = litgpt_llama();
  partial.rotary_fraction = 0.5;
  CHECK(buffers_of(partial, lora_run(litgpt_main)) == 2 * 256 * 32 * 4);
  // max_seq_length equal to the block size: the setter keeps the init's cache, cast with the module (bf16).
  model_spec at_block_size = litgpt_llama();
  at_block_size.context_length = 256;
  CHECK(buffers_of(at_block_size, lora_run(litgpt_main)) == 2 * 256 * 64 * 2);
  // The 2023 scripts' cache is not this buffer; another framework's model has none of it.
  CHECK(buffers_of(litgpt_llama(), lora_run(0)) == 0);
  CHECK(buffers_of(presets::llama_base("hf-test", 4, 256, 4, 4, 688, 16000),
                   with_framework(training_spec{.micro_batch = 2, .seq_len = 256}, framework_kind::hf)) == 0);
  // The rank's peak carries it whole under ModelParallelStrategy: the fp32 cache against the bf16
  // one moves it by the full difference, not by 1/4 of it.
  training_spec rank = lora_run(litgpt_main);
  rank.ckpt = checkpointing::full;
  rank.shard = sharding::full;
  rank.data_parallel = 4;
  rank.litgpt_model_parallel = true;
  CHECK(estimate(litgpt_llama(), rank).steady.tensor.value - estimate(at_block_size, rank).steady.tensor.value ==
        2 * 256 * 64 * 2);
}

}  // namespace litgpt_rope_cache_test
