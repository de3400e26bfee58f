// Packed and padding-free batches (training.hpp batch_packing): a padding-free micro-batch is one
// row of all its tokens for every token-wise tensor, its flash varlen attention keeps nothing per
// example pair of positions and no repeat_kv copies; under eager and SDPA the row attends through
// one (1, 1, tokens, tokens) block-diagonal mask; packed rows are padded rows, and the runs the
// rule does not cover are refused by field.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#endif

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace packing_test {
namespace {

using namespace memscale;
using json = json_io::json;
using Catch::Matchers::Contains;

constexpr std::uint64_t layers = 4;

// A LLaMA of 4 layers, 256 wide, 8 heads of 32, with `kv` key/value heads.
json llama_config(std::uint64_t kv) {
  return json{{"model_type", "llama"},         {"hidden_size", 256},      {"num_hidden_layers", layers},
              {"num_attention_heads", 8},      {"num_key_value_heads", kv}, {"intermediate_size", 688},
              {"vocab_size", 8192},            {"max_position_embeddings", 4096}};
}
model_spec llama(std::uint64_t kv) { return json_io::model_from_hf_config(llama_config(kv)); }

training_spec flash_run(std::uint64_t batch, std::uint64_t seq) {
  return training_spec{.micro_batch = batch, .seq_len = seq, .attention = attention_impl::flash,
                       .device = device_kind::cpu};
}

training_spec padding_free(std::uint64_t examples, std::uint64_t longest, std::uint64_t mean) {
  training_spec run = flash_run(examples, longest);
  run.packing = batch_packing::padding_free;
  run.example_tokens = mean;
  return run;
}

std::uint64_t saved(const model_spec& m, const training_spec& run) {
  return estimate(m, run).saved_activation_bytes.value;
}

}  // namespace

TEST_CASE("a padding-free micro-batch is one row of all its tokens", "[packing]") {
  const model_spec m = llama(8);
  // 4 examples of 96 tokens on average, the longest 256: a row of 384 tokens.
  const training_spec pf = padding_free(4, 256, 96);
  CHECK(tokens_per_micro_batch(pf) == 384);
  CHECK(as_rows(pf).micro_batch == 1);
  CHECK(as_rows(pf).seq_len == 384);
  // Every token-wise tensor is the one row's: the saved tensors are batch 1 x 384's under flash, and
  // the peak adds the position_ids the flattening collator brings to the inputs (int64 per token).
  const training_spec one_row = flash_run(1, 384);
  CHECK(saved(m, pf) == saved(m, one_row));
  const estimate_result a = estimate(m, pf);
  const estimate_result b = estimate(m, one_row);
  CHECK(a.parameter_bytes == b.parameter_bytes);
  CHECK(a.steady.tensor.value == b.steady.tensor.value + 384 * 8);
  // max_length truncates the examples: a mean above it counts max_length tokens each (the
  // planner's shorter sequences cut them too).
  CHECK(tokens_per_micro_batch(padding_free(4, 256, 300)) == 1024);
  CHECK(tokens_per_micro_batch(padding_free(4, 64, 96)) == 256);
  // The longest example is not a term of its own: no seq_len^2 piece under flash varlen.
  CHECK(saved(m, padding_free(4, 128, 96)) == saved(m, pf));
  // Every example at the longest: the padded batch's tensors, but for the loss, which shifts one
  // row instead of four (one fp32 logits row of the vocabulary fewer per sequence).
  CHECK(saved(m, padding_free(4, 256, 0)) == saved(m, flash_run(4, 256)) + 3 * 8192 * 4);
}

TEST_CASE("the varlen attention takes grouped keys and values as they are", "[packing]") {
  // flash_attn_varlen_func gets k and v with kv_heads heads: padding-free GQA keeps no repeat_kv
  // copies, where the batch-1 row over SDPA's flash kernel keeps k and v repeated to every head.
  const model_spec m = llama(2);
  const std::uint64_t tokens = 512;
  const std::uint64_t q_width = 256;
  const std::uint64_t kv_width = 2 * 32;
  const std::uint64_t repeated_minus_grouped = layers * 2 * tokens * (q_width - kv_width) * 4;  // fp32
  CHECK(saved(m, flash_run(1, tokens)) - saved(m, padding_free(4, 256, 128)) == repeated_minus_grouped);
}

TEST_CASE("packed rows are counted as the padded rows they replace", "[packing]") {
  const model_spec m = llama(2);
  training_spec packed = flash_run(4, 256);
  packed.packing = batch_packing::packed;
  CHECK(estimate(m, packed).steady.tensor == estimate(m, flash_run(4, 256)).steady.tensor);
  packed.attention = attention_impl::eager;
  training_spec padded = flash_run(4, 256);
  padded.attention = attention_impl::eager;
  CHECK(estimate(m, packed).steady.tensor == estimate(m, padded).steady.tensor);
}

TEST_CASE("the planner varies the examples of a padding-free micro-batch", "[packing]") {
  const model_spec m = llama(8);
  training_spec pf = padding_free(2, 256, 128);
  pf.prec = precision::pure_bf16;
  pf.device = device_kind::cuda;
  const plan_result plan = make_plan(m, pf, *find_gpu("rtx4090"));
  CHECK(plan.max_micro_batch > 2);
}

TEST_CASE("padding-free under eager attention keeps the whole row's scores and holds its float mask in forward", "[packing]") {
  const model_spec m = llama(8);
  training_spec pf = padding_free(4, 256, 96);  // a row of 384 tokens
  pf.attention = attention_impl::eager;
  training_spec row = flash_run(1, 384);
  row.attention = attention_impl::eager;
  // The layers see one row of 384 tokens: every tokens^2 score of it, as a batch-1 row of 384
  // would keep (eager_attention_forward adds the mask; the sum is not saved).
  CHECK(saved(m, pf) == saved(m, row));
  // eager_mask's (1, 1, 384, 384) fp32 copy is live through the blocks' forward; SDPA's is sdpa_mask's bool.
  CHECK(recipes::build_decoder_stack(m, pf).held.value == 384 * 384 * 4);
  CHECK(recipes::build_decoder_stack(m, row).held.value == 0);
  training_spec math = pf;
  math.attention = attention_impl::sdpa_math;
  CHECK(recipes::build_decoder_stack(m, math).held.value == 384 * 384);
}

TEST_CASE("padding-free under SDPA on CUDA runs the memory-efficient kernel, which saves the additive mask per layer",
          "[packing]") {
  const model_spec m = llama(8);
  training_spec pf = padding_free(4, 256, 96);
  pf.attention = attention_impl::sdpa;
  pf.device = device_kind::cuda;
  pf.prec = precision::pure_bf16;
  CHECK(attention_kernel_of(m, as_rows(pf)) == attention_kernel::mem_efficient);
  training_spec row = flash_run(1, 384);
  row.device = device_kind::cuda;
  row.prec = precision::pure_bf16;
  // 384 keys are a multiple of 16: convert_boolean_attn_mask's bf16 (1, 1, 384, 384) copy is what
  // preprocess_mask expands (a view) and the kernel saves, in each of the 4 layers.
  CHECK(saved(m, pf) == saved(m, row) + layers * 384 * 384 * 2);
  // 4 x 90 = 360 tokens is not: pad_bias pads the (1, heads, 360, 360) expansion to 368 keys.
  training_spec odd = padding_free(4, 90, 0);
  odd.attention = attention_impl::sdpa;
  odd.device = device_kind::cuda;
  odd.prec = precision::pure_bf16;
  training_spec odd_row = flash_run(1, 360);
  odd_row.device = device_kind::cuda;
  odd_row.prec = precision::pure_bf16;
  CHECK(saved(m, odd) == saved(m, odd_row) + layers * 8 * 360 * 368 * 2);
}

TEST_CASE("padding-free runs the rule does not cover are refused by field", "[packing]") {
  const model_spec m = llama(8);
  training_spec eager = padding_free(4, 256, 96);
  eager.attention = attention_impl::eager;
  eager.transformers_version = 451;  // before 5.0: which release first builds the mask is not pinned
  CHECK_THROWS_WITH(estimate(m, eager), Contains("run.packing") && Contains("flash_attention_2"));
  training_spec sdpa = padding_free(4, 256, 96);
  sdpa.attention = attention_impl::sdpa;
  sdpa.torch_version = 205;  // CPU: SDPA's flash kernel takes the mask from torch 2.3
  CHECK_THROWS_WITH(estimate(m, sdpa), Contains("run.attention") && Contains("CPU"));
  training_spec litgpt = with_framework(padding_free(4, 256, 96), framework_kind::litgpt);
  CHECK_THROWS_WITH(estimate(m, litgpt), Contains("run.packing") && Contains("framework hf"));
  training_spec stray = flash_run(4, 256);
  stray.example_tokens = 96;
  CHECK_THROWS_WITH(estimate(m, stray), Contains("run.example_tokens") && Contains("padding_free"));
  const model_spec mamba = json_io::model_from_hf_config(json{{"model_type", "mamba"}});
  CHECK_THROWS_WITH(estimate(mamba, padding_free(2, 128, 64)), Contains("model.mixer"));
  const model_spec gpt2 = json_io::model_from_hf_config(
      json{{"model_type", "gpt2"}, {"n_layer", 2}, {"n_embd", 128}, {"n_head", 4}, {"vocab_size", 1000}, {"n_positions", 256}});
  CHECK_THROWS_WITH(estimate(gpt2, padding_free(2, 128, 64)), Contains("model.positions"));
  CHECK_THROWS_WITH(estimate_per_gpu(m, padding_free(4, 256, 96), parallel_spec{.gpus_per_node = 2, .tp = 2}),
                    Contains("run.packing"));
}

TEST_CASE("records, run documents and the run echo carry packing and example_tokens", "[packing]") {
  json record{{"id", "padding-free"},
              {"measure", "cpu-tensor-peak"},
              {"device", "cpu"},
              {"model", {{"hf_config", llama_config(8)}}},
              {"train", {{"batch", 4}, {"seq", 256}, {"precision", "fp32"}, {"attention", "flash"},
                         {"packing", "padding_free"}, {"example_tokens", 96}}}};
  const training_spec run = json_io::run_from_record(record);
  CHECK(run.packing == batch_packing::padding_free);
  CHECK(run.example_tokens == 96);
  CHECK(json_io::estimate_record(record).at("estimated_bytes").get<std::uint64_t>() > 0);
  record["train"]["packing"] = "flattened";
  CHECK(json_io::estimate_record(record).contains("error"));
  record["train"]["packing"] = "padding_free";
  record["train"]["attention"] = "eager";
  CHECK(json_io::estimate_record(record).contains("estimated_bytes"));
  record["software"] = {{"transformers", "4.51"}};
  CHECK(json_io::estimate_record(record).contains("error"));
  record.erase("software");

  const json echoed = json_io::run_to_json(run);
  CHECK(echoed.at("packing") == "padding_free");
  CHECK(echoed.at("example_tokens") == 96);
  CHECK_FALSE(json_io::run_to_json(training_spec{}).contains("packing"));
  CHECK_FALSE(json_io::run_to_json(training_spec{}).contains("example_tokens"));
  const json document{{"model", "llama-2-7b"}, {"run", echoed}};
  json_io::run_input in{};
  json_io::read_run_document(document, in);
  CHECK(in.run.packing == batch_packing::padding_free);
  CHECK(in.run.example_tokens == 96);
}

TEST_CASE("the traced packed and padding-free steps are estimated within 0.5%", "[packing]") {
  const json all = json::parse(std::ifstream(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_frameworks.json"));
  int checked = 0;
  for (const json& r : all) {
    if (!r.at("train").contains("packing")) continue;
    const json answer = json_io::estimate_record(r);
    INFO(r.at("id").get<std::string>() << ": " << answer.dump());
    REQUIRE(answer.contains("estimated_bytes"));
    const double error = answer.at("estimated_bytes").get<double>() / r.at("measured_bytes").get<double>() - 1.0;
    CHECK(error > -0.005);
    CHECK(error < 0.005);
    ++checked;
  }
  CHECK(checked == 4);
}

}  // namespace packing_test
