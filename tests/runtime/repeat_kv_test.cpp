// Grouped-query attention's repeat of k and v (graph/layers/attention.hpp attention_path_of): what
// each path hands the attention kernel and so what it saves for backward.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>

#include "memscale/json.hpp"

namespace repeat_kv_test {
namespace {
using namespace memscale;

constexpr std::uint64_t batch = 1;
constexpr std::uint64_t seq = 2048;

training_spec bf16_run(attention_impl attention, std::uint32_t transformers, framework_kind framework) {
  training_spec r{.micro_batch = batch, .seq_len = seq, .prec = precision::pure_bf16};
  r.attention = attention;
  r.transformers_version = transformers;
  r.framework = framework;
  return r;
}

bytes saved(const model_spec& m, const training_spec& r) { return estimate(m, r).saved_activation_bytes; }

// k and v of `heads` heads over every layer, bf16.
bytes kv_bytes(const model_spec& m, std::uint64_t heads) {
  return storage(dtype::bf16, 2 * m.layers * batch * seq * heads * head_dim_of(m));
}

// Gemma-2B's attention shape (8 heads, one key/value head of 256) on a LLaMA block.
constexpr model_spec one_kv_head = presets::llama_base("mqa", 18, 2048, 8, 1, 16384, 256000);
}  // namespace

TEST_CASE("repeat_kv: transformers' SDPA saves the copies before 5.0, the grouped k and v from 5.0",
          "[attention][gqa]") {
  const model_spec m = presets::llama_3_8b;  // 32 heads, 8 key/value heads
  // 4.x: repeat_kv, then the fused kernel saves the copies (LlamaSdpaAttention); 5.0 without a
  // mask: enable_gqa, the kernel saves k and v with their kv heads.
  const bytes repeated = saved(m, bf16_run(attention_impl::sdpa, 440, framework_kind::hf));
  const bytes grouped = saved(m, bf16_run(attention_impl::sdpa, 500, framework_kind::hf));
  CHECK(repeated - grouped == kv_bytes(m, m.heads) - kv_bytes(m, m.kv_heads));
  // Eager attention writes the copies and matmul saves them, in every release.
  CHECK(saved(m, bf16_run(attention_impl::eager, 440, framework_kind::hf)) ==
        saved(m, bf16_run(attention_impl::eager, 500, framework_kind::hf)));
}

TEST_CASE("repeat_kv: flash_attention_2 keeps k and v with their kv heads", "[attention][gqa]") {
  const model_spec m = presets::llama_3_8b;
  // flash alone stands for SDPA's fused kernels too, which before 5.0 get the copies.
  const training_spec fused = bf16_run(attention_impl::flash, 440, framework_kind::hf);
  training_spec fa2 = fused;
  fa2.flash_attention_2 = true;
  CHECK(saved(m, fused) == saved(m, bf16_run(attention_impl::sdpa, 440, framework_kind::hf)));
  CHECK(saved(m, fused) - saved(m, fa2) == kv_bytes(m, m.heads) - kv_bytes(m, m.kv_heads));
  CHECK(saved(m, fa2) == saved(m, bf16_run(attention_impl::sdpa, 500, framework_kind::hf)));
  // The name reads as the flag, and the settings write it back under that name.
  CHECK(json_io::names_flash_attention_2("flash_attention_2"));
  CHECK_FALSE(json_io::names_flash_attention_2("flash"));
  CHECK(json_io::run_to_json(fa2).at("attention") == "flash_attention_2");
  CHECK(json_io::run_to_json(fused).at("attention") == "flash");
  // flash-attn's kernels are fused ones.
  training_spec eager = fa2;
  eager.attention = attention_impl::eager;
  CHECK_THROWS_AS(estimate(m, eager), error);
}

TEST_CASE("repeat_kv: one key/value head repeats as a view a fused kernel saves as it is", "[attention][gqa]") {
  // Hugging Face 4.x SDPA: repeat_kv's reshape merges the size-1 kv dim with the expand's stride-0
  // one (tools/trace/repeat_kv_saved.py: head stride 0), so the kernel keeps one head, as 5.0's
  // enable_gqa call does.
  const model_spec& m = one_kv_head;
  CHECK(saved(m, bf16_run(attention_impl::sdpa, 440, framework_kind::hf)) ==
        saved(m, bf16_run(attention_impl::sdpa, 500, framework_kind::hf)));
  // A padded batch's mask makes 4.x SDPA copy k and v first (.contiguous()): the copies are saved,
  // beside whatever the mask adds.
  const training_spec unpadded = bf16_run(attention_impl::sdpa, 440, framework_kind::hf);
  training_spec padded = unpadded;
  padded.padded = true;
  CHECK(saved(m, padded) - saved(m, unpadded) >= kv_bytes(m, m.heads) - kv_bytes(m, 1));
}

TEST_CASE("repeat_kv: torchtune's expand and flatten, copies with several kv heads, a view with one",
          "[attention][gqa][torchtune]") {
  model_spec two = one_kv_head;
  two.kv_heads = 2;
  const training_spec tt = bf16_run(attention_impl::flash, 0, framework_kind::torchtune);
  // Two kv heads: flatten(1, 2) copies them to every head, which the kernel saves; one: a view of
  // the one head. The rest of the layer saves the same (k_proj's and v_proj's inputs are shared).
  CHECK(saved(two, tt) - saved(one_kv_head, tt) == kv_bytes(two, two.heads) - kv_bytes(one_kv_head, 1));
  // Eager attention copies inside matmul either way: as many bytes.
  const training_spec eager = bf16_run(attention_impl::eager, 0, framework_kind::torchtune);
  CHECK(saved(two, eager) == saved(one_kv_head, eager));
}

}  // namespace repeat_kv_test
