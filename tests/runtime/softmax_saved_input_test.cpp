// Before torch 1.11 eager attention's softmax kept its input for backward as well as its output
// (attention.hpp softmax_saves_input): the exact bytes it adds to the saved activations of BERT.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <fstream>
#include <string>

#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace softmax_saved_input_test {
namespace {

using namespace memscale;
using json = json_io::json;

// bert-large's widths over 2 layers (tools/trace/bert_softmax_input.py traced one: the same bytes per layer).
model_spec bert_large_2_layers() {
  return json_io::model_from_hf_config(json{{"model_type", "bert"},
                                            {"architectures", {"BertForSequenceClassification"}},
                                            {"num_hidden_layers", 2},
                                            {"hidden_size", 1024},
                                            {"num_attention_heads", 16},
                                            {"intermediate_size", 4096},
                                            {"vocab_size", 30522},
                                            {"max_position_embeddings", 512}});
}

std::uint64_t saved(const model_spec& m, training_spec r, std::uint32_t torch) {
  r.torch_version = torch;
  return estimate(m, r).saved_activation_bytes.value;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return json::parse(in);
}

// A published V100 record with the stack its source states merged in (torch 1.10).
json published_with_stack(const std::string& id) {
  const json stacks = read_json(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/gpu_published_stack.json");
  for (const json& r : read_json(std::string(MEMSCALE_GROUND_TRUTH_DIR) + "/gpu_published_dev.json"))
    if (r.at("id") == id) return json_io::with_stack(r, stacks);
  FAIL("no record " << id);
  return {};
}

static_assert(graph_layers::softmax_saves_input(training_spec{.torch_version = 110}));
static_assert(!graph_layers::softmax_saves_input(training_spec{.torch_version = 111}));

// One layer's b x heads x s^2 scores in fp32.
constexpr std::uint64_t fp32_scores(std::uint64_t batch) { return batch * 16 * 512 * 512 * 4; }

}  // namespace

TEST_CASE("torch 1.10 keeps each layer's fp32 softmax input, and 1.11 does not", "[attention][torch]") {
  const model_spec bert = bert_large_2_layers();
  for (const std::uint64_t batch : {1U, 4U}) {
    for (const device_kind device : {device_kind::cuda, device_kind::cpu}) {
      const training_spec run{.micro_batch = batch, .seq_len = 512, .prec = precision::fp32,
                              .attention = attention_impl::eager, .device = device};
      CHECK(saved(bert, run, 110) - saved(bert, run, 111) == 2 * fp32_scores(batch));
      CHECK(saved(bert, run, 111) == saved(bert, run, 205));
    }
  }
}

TEST_CASE("under CUDA autocast fp16 the kept softmax input is fp32", "[attention][torch]") {
  // The fp16 scores plus the fp32 extended mask promote to fp32, and autocast runs softmax in fp32.
  const training_spec run{.micro_batch = 4, .seq_len = 512, .prec = precision::amp_fp16,
                          .attention = attention_impl::eager, .device = device_kind::cuda};
  const model_spec bert = bert_large_2_layers();
  CHECK(saved(bert, run, 110) - saved(bert, run, 111) == 2 * fp32_scores(4));
}

TEST_CASE("a fused kernel keeps no scores in any torch", "[attention][torch]") {
  const training_spec run{.micro_batch = 4, .seq_len = 512, .prec = precision::amp_bf16,
                          .attention = attention_impl::flash, .device = device_kind::cuda};
  const model_spec bert = bert_large_2_layers();
  CHECK(saved(bert, run, 110) == saved(bert, run, 205));
}

TEST_CASE("the published V100 BERT-large runs keep 24 layers of fp32 softmax inputs", "[attention][torch]") {
  for (const char* id : {"hf-bertL-vanilla-b4", "hf-bertL-fp16-b4"}) {
    const json record = published_with_stack(id);
    const model_spec model = json_io::model_for_record(record);
    const training_spec run = json_io::run_from_record(record);
    REQUIRE(run.torch_version == 110);
    CHECK(saved(model, run, 110) - saved(model, run, 111) == 24 * fp32_scores(4));
  }
}

}  // namespace softmax_saved_input_test
