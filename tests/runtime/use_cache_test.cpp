// use_cache=True while training (graph/layers/attention.hpp keeps_cache_in_training): the bytes each
// attention kind keeps from its layer until the loss, the runs that build no cache, the allocator
// stream that frees it where the estimate does, and the causal-LM loss dtype before 4.46.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <memory>
#include <string>

#include "memscale/allocator/events.hpp"
#include "memscale/allocator/step_events.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace use_cache_test {
namespace {

using namespace memscale;
using json = json_io::json;

constexpr std::uint64_t batch = 2;
constexpr std::uint64_t seq = 256;
constexpr std::uint64_t layers = 4;

// A LLaMA of 4 layers, 256 wide, 8 heads of 32, with `kv` key/value heads.
model_spec llama(std::uint64_t kv) {
  return json_io::model_from_hf_config(json{{"model_type", "llama"},
                                            {"hidden_size", 256},
                                            {"num_hidden_layers", layers},
                                            {"num_attention_heads", 8},
                                            {"num_key_value_heads", kv},
                                            {"intermediate_size", 688},
                                            {"vocab_size", 8192},
                                            {"max_position_embeddings", 4096}});
}

// Phi-3's fused qkv_proj, GQA with 2 key/value heads.
model_spec phi3() {
  return json_io::model_from_hf_config(json{{"model_type", "phi3"},
                                            {"hidden_size", 256},
                                            {"num_hidden_layers", layers},
                                            {"num_attention_heads", 8},
                                            {"num_key_value_heads", 2},
                                            {"intermediate_size", 688},
                                            {"vocab_size", 8192},
                                            {"max_position_embeddings", 4096}});
}

training_spec run_at(std::uint32_t release, attention_impl attention, precision prec = precision::fp32,
                     device_kind device = device_kind::cpu) {
  training_spec run{.micro_batch = batch, .seq_len = seq, .prec = prec, .attention = attention, .device = device};
  run.transformers_version = release;
  return run;
}

// Bytes every layer keeps until the loss, over the whole stack.
std::uint64_t cache_bytes(const model_spec& m, const training_spec& run) {
  const auto built = std::make_unique<model_graph>(build(m, run));
  const graph& g = built->stack();
  return (section_cache_bytes(g, prologue_of(g)) + section_cache_bytes(g, block_of(g)) * g.block_repeats +
          section_cache_bytes(g, epilogue_of(g)))
      .value;
}

// Split k and v of `kv_width` features per token, fp32 (or `element` bytes), every layer.
constexpr std::uint64_t split_kv(std::uint64_t kv_width, std::uint64_t element = 4) {
  return layers * 2 * batch * seq * kv_width * element;
}

}  // namespace

TEST_CASE("eager attention keeps the split k and v until the loss, MHA and GQA alike", "[use_cache]") {
  // The contiguous copies matmul saves are not the cached tensors (modeling_llama.py@v4.40.2).
  CHECK(cache_bytes(llama(8), run_at(440, attention_impl::eager)) == split_kv(256));
  CHECK(cache_bytes(llama(2), run_at(440, attention_impl::eager)) == split_kv(64));
  CHECK(cache_bytes(llama(8), run_at(432, attention_impl::eager)) == split_kv(256));
}

TEST_CASE("SDPA keeps nothing more for MHA and the un-repeated k and v for GQA", "[use_cache]") {
  const training_spec mha = run_at(440, attention_impl::sdpa, precision::amp_bf16, device_kind::cuda);
  CHECK(cache_bytes(llama(8), mha) == 0);  // the kernel saves the k and v the cache holds
  // repeat_kv's copies go to the kernel; the cache holds the grouped k and v in bf16.
  CHECK(cache_bytes(llama(2), mha) == split_kv(64, 2));
}

TEST_CASE("a fused qkv projection keeps its whole output and the rotated keys", "[use_cache]") {
  // Phi-3: v is a view of qkv_proj's output (8 + 2 x 2 heads of 32); the rotated k is a new tensor.
  const std::uint64_t qkv = layers * batch * seq * (8 + 2 * 2) * 32 * 4;
  const std::uint64_t rotated_k = layers * batch * seq * 2 * 32 * 4;
  CHECK(cache_bytes(phi3(), run_at(440, attention_impl::eager)) == qkv + rotated_k);
}

TEST_CASE("the legacy OPT and GPT-NeoX attention cache what their matmuls save", "[use_cache]") {
  // OPT 4.32 caches the contiguous k and v bmm saves: nothing more.
  const model_spec opt = json_io::model_from_hf_config(json{{"model_type", "opt"},
                                                            {"num_hidden_layers", layers},
                                                            {"hidden_size", 256},
                                                            {"num_attention_heads", 8},
                                                            {"ffn_dim", 1024},
                                                            {"vocab_size", 8192},
                                                            {"max_position_embeddings", 2048}});
  CHECK(cache_bytes(opt, run_at(432, attention_impl::eager)) == 0);
  // GPT-NeoX 4.32: baddbmm saves the concatenated key; v keeps query_key_value's whole output.
  const model_spec neox = json_io::model_from_hf_config(json{{"model_type", "gpt_neox"},
                                                             {"num_hidden_layers", layers},
                                                             {"hidden_size", 256},
                                                             {"num_attention_heads", 8},
                                                             {"intermediate_size", 1024},
                                                             {"vocab_size", 8192},
                                                             {"rotary_pct", 0.25},
                                                             {"max_position_embeddings", 2048}});
  CHECK(cache_bytes(neox, run_at(432, attention_impl::eager)) == layers * batch * seq * 3 * 256 * 4);
}

TEST_CASE("no cache under checkpointing, off, from 5.0, or by default before a release is stated", "[use_cache]") {
  training_spec run = run_at(440, attention_impl::eager);
  run.ckpt = checkpointing::full;
  CHECK(cache_bytes(llama(8), run) == 0);
  run.ckpt = checkpointing::selective;
  CHECK(cache_bytes(llama(8), run) == 0);
  run = run_at(440, attention_impl::eager);
  run.use_cache = cache_setting::off;
  CHECK(cache_bytes(llama(8), run) == 0);
  CHECK(cache_bytes(llama(8), run_at(0, attention_impl::eager)) == 0);
  CHECK(cache_bytes(llama(8), run_at(500, attention_impl::eager)) == 0);
  // No release stated: only a stated use_cache on keeps it (the report says so).
  run = run_at(0, attention_impl::eager);
  run.use_cache = cache_setting::on;
  CHECK(cache_bytes(llama(8), run) == split_kv(256));
  run = run_at(500, attention_impl::eager);
  run.use_cache = cache_setting::on;
  CHECK(cache_bytes(llama(8), run) == 0);
  // The config's use_cache is the default; the run's setting overrides it.
  model_spec no_cache = llama(8);
  no_cache.use_cache = false;
  CHECK(cache_bytes(no_cache, run_at(440, attention_impl::eager)) == 0);
  run = run_at(440, attention_impl::eager);
  run.use_cache = cache_setting::on;
  CHECK(cache_bytes(no_cache, run) == split_kv(256));
  CHECK_FALSE(json_io::model_from_hf_config(json{{"model_type", "llama"},
                                                 {"hidden_size", 256},
                                                 {"num_hidden_layers", layers},
                                                 {"num_attention_heads", 8},
                                                 {"intermediate_size", 688},
                                                 {"vocab_size", 8192},
                                                 {"use_cache", false}})
                  .use_cache);
  CHECK(llama(8).use_cache);
}

TEST_CASE("the cache raises the forward peak at the loss by its bytes and leaves backward", "[use_cache]") {
  // The 4.40 eager step at this size peaks at the loss (the fp32 logits and their shifted copy).
  training_spec off = run_at(440, attention_impl::eager);
  off.use_cache = cache_setting::off;
  const estimate_result with = estimate(llama(8), run_at(440, attention_impl::eager));
  const estimate_result without = estimate(llama(8), off);
  REQUIRE(with.steady.at == phase::forward);
  CHECK(with.steady.tensor.value - without.steady.tensor.value == split_kv(256));
  CHECK(with.saved_activation_bytes == without.saved_activation_bytes);
}

TEST_CASE("the training stream frees the cache after the loss, as the estimate does", "[use_cache][allocator]") {
  const training_spec run = run_at(440, attention_impl::eager);
  const auto built = std::make_unique<model_graph>(build(llama(2), run));
  const estimate_result est = estimate(*built);
  auto sink = std::make_unique<allocator::live_bytes<32768>>();
  allocator::emit_training_steps<32768, 8192>(built->stack(), built->run,
                                              {.blas_handles = 1, .tie_weights_copy = false, .cast_weight_grads = false}, *sink);
  CHECK(sink->peak(1) == est.first_step.tensor.value);
  CHECK(sink->peak(2) == est.steady.tensor.value);
}

TEST_CASE("records and run documents read train.use_cache", "[use_cache]") {
  json record{{"id", "use-cache"},
              {"measure", "cpu-tensor-peak"},
              {"device", "cpu"},
              {"model", {{"hf_config", {{"model_type", "llama"}, {"hidden_size", 256}, {"num_hidden_layers", 4},
                                        {"num_attention_heads", 8}, {"intermediate_size", 688}, {"vocab_size", 8192},
                                        {"max_position_embeddings", 4096}}}}},
              {"train", {{"batch", 2}, {"seq", 256}, {"precision", "fp32"}, {"attention", "eager"}}},
              {"software", {{"torch", "2.5"}, {"transformers", "4.40.2"}}}};
  CHECK(json_io::run_from_record(record).use_cache == cache_setting::config);
  record["train"]["use_cache"] = false;
  const std::uint64_t without = json_io::estimate_record(record).at("estimated_bytes").get<std::uint64_t>();
  CHECK(json_io::run_from_record(record).use_cache == cache_setting::off);
  record["train"]["use_cache"] = true;
  const std::uint64_t with = json_io::estimate_record(record).at("estimated_bytes").get<std::uint64_t>();
  CHECK(with - without == split_kv(256));
  record["train"]["use_cache"] = "yes";
  CHECK(json_io::estimate_record(record).contains("error"));
  training_spec run{};
  run.use_cache = cache_setting::off;
  CHECK(json_io::run_to_json(run).at("use_cache") == false);
  CHECK_FALSE(json_io::run_to_json(training_spec{}).contains("use_cache"));
}

TEST_CASE("GPT-2, GPT-NeoX and OPT take the loss in the compute dtype before 4.46", "[use_cache][loss]") {
  const auto record = [](const std::string& release) {
    return json{{"model", {{"hf_config", {{"model_type", "gpt2"}, {"n_layer", 2}, {"n_embd", 128}, {"n_head", 4},
                                          {"vocab_size", 1000}, {"n_positions", 256}}}}},
                {"software", {{"transformers", release}}}};
  };
  CHECK_FALSE(json_io::model_for_record(record("4.45.2")).upcast_logits);
  CHECK(json_io::model_for_record(record("4.46.0")).upcast_logits);
  CHECK_FALSE(json_io::model_for_record(record("4.47.1")).shift_labels);
  CHECK(json_io::model_for_record(record("4.48.0")).shift_labels);
  // The LLaMA family's head upcasts whatever the release (modeling_llama.py logits.float()).
  json llama_record = record("4.40.2");
  llama_record["model"]["hf_config"] = {{"model_type", "llama"}, {"hidden_size", 256}, {"num_hidden_layers", 2},
                                        {"num_attention_heads", 8}, {"intermediate_size", 688}, {"vocab_size", 1000}};
  CHECK(json_io::model_for_record(llama_record).upcast_logits);
}

}  // namespace use_cache_test
