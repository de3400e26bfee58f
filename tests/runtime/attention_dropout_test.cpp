// Which attention kernel a run gets, and which dropout sites its model has: each checked as
// the exact bytes the probabilities (and their dropout) add to the saved activations.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <string>

#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace attention_dropout_test {
namespace {

using namespace memscale;
using json = json_io::json;

std::uint64_t saved(const model_spec& m, const training_spec& r) { return estimate(m, r).saved_activation_bytes.value; }

// An OPT of 4 layers, 512 wide, 8 heads, with the two dropout keys given.
model_spec opt(double dropout, double attention_dropout) {
  return json_io::model_from_hf_config(json{{"model_type", "opt"},
                                            {"num_hidden_layers", 4},
                                            {"hidden_size", 512},
                                            {"num_attention_heads", 8},
                                            {"ffn_dim", 2048},
                                            {"vocab_size", 1000},
                                            {"max_position_embeddings", 1024},
                                            {"dropout", dropout},
                                            {"attention_dropout", attention_dropout}});
}

// Eager attention at b2 s512 on the CPU, where a dropout keeps an fp32 noise tensor.
constexpr training_spec eager_cpu{.micro_batch = 2, .seq_len = 512, .prec = precision::fp32,
                                  .attention = attention_impl::eager, .device = device_kind::cpu};

// Per layer, dropout on the b x heads x s^2 fp32 probabilities keeps its noise tensor and
// its output (which the probabilities x v matmul saves instead of the probabilities).
constexpr std::uint64_t probability_dropout = 2 * (2 * 8 * 512 * 512) * 4;

json gpt2_record(const std::string& attention, const std::string& torch, bool dropout) {
  return json{{"id", "sdpa-test"},
              {"measure", "cpu-tensor-peak"},
              {"device", "cpu"},
              {"model", {{"hf_config", {{"model_type", "gpt2"}, {"n_layer", 2}, {"n_embd", 128}, {"n_head", 4},
                                        {"vocab_size", 1000}, {"n_positions", 256}}}}},
              {"train", {{"batch", 2}, {"seq", 128}, {"precision", "fp32"}, {"attention", attention}, {"dropout", dropout}}},
              {"software", {{"torch", torch}}}};
}

std::uint64_t record_estimate(const json& record) {
  const json answer = json_io::estimate_record(record);
  REQUIRE(answer.contains("estimated_bytes"));
  return answer.at("estimated_bytes").get<std::uint64_t>();
}

}  // namespace

TEST_CASE("OPT's attention_dropout alone decides the dropout on the attention probabilities", "[dropout]") {
  // dropout 0.1 with attention_dropout 0.0 (OPT's defaults): no dropout on the probabilities.
  CHECK(saved(opt(0.1, 0.1), eager_cpu) - saved(opt(0.1, 0.0), eager_cpu) == 4 * probability_dropout);
  // attention_dropout alone: only the probabilities are dropped out, no branch or embedding.
  CHECK(saved(opt(0.0, 0.1), eager_cpu) - saved(opt(0.0, 0.0), eager_cpu) == 4 * probability_dropout);
  const model_spec defaults = opt(0.1, 0.0);
  CHECK(defaults.dropout);
  CHECK_FALSE(defaults.attention_dropout);
  CHECK(defaults.hidden_dropout);
  CHECK_FALSE(defaults.embedding_dropout);  // OPTDecoder adds none after the embeddings
}

TEST_CASE("each family's dropout keys map to their own sites", "[dropout]") {
  const auto read = [](json config) { return json_io::model_from_hf_config(config); };
  const model_spec gpt2 = read({{"model_type", "gpt2"}, {"attn_pdrop", 0.0}, {"resid_pdrop", 0.1}, {"embd_pdrop", 0.0}});
  CHECK((gpt2.dropout && !gpt2.attention_dropout && gpt2.hidden_dropout && !gpt2.embedding_dropout));
  const model_spec bert = read({{"model_type", "bert"}, {"attention_probs_dropout_prob", 0.0}});
  CHECK((bert.dropout && !bert.attention_dropout && bert.hidden_dropout && bert.embedding_dropout));
  const model_spec neox = read({{"model_type", "gpt_neox"}, {"num_hidden_layers", 2}, {"hidden_size", 64},
                                {"num_attention_heads", 4}, {"intermediate_size", 256}, {"vocab_size", 100},
                                {"attention_dropout", 0.1}, {"hidden_dropout", 0.0}});
  CHECK((neox.dropout && neox.attention_dropout && !neox.hidden_dropout && !neox.embedding_dropout));
  const model_spec t5 = read({{"model_type", "t5"}, {"dropout_rate", 0.0}});
  CHECK_FALSE(t5.dropout);
}

TEST_CASE("LLaMA's attention_dropout drops out the probabilities only", "[dropout]") {
  const auto llama = [](double p) {
    return json_io::model_from_hf_config(json{{"model_type", "llama"}, {"num_hidden_layers", 2}, {"hidden_size", 128},
                                              {"num_attention_heads", 4}, {"intermediate_size", 344},
                                              {"vocab_size", 1000}, {"attention_dropout", p}});
  };
  training_spec run = eager_cpu;
  run.seq_len = 128;
  // 2 layers x (noise + output) x b x heads x s^2 x fp32; no embedding or branch dropout.
  CHECK(saved(llama(0.1), run) - saved(llama(0.0), run) == 2 * 2 * (2 * 4 * 128 * 128) * 4);
}

TEST_CASE("attention \"sdpa\" runs the kernel PyTorch picks for the device and release", "[attention]") {
  // CPU before torch 2.2 has only the math kernel: the probabilities are kept as sdpa_math keeps them.
  CHECK(record_estimate(gpt2_record("sdpa", "2.1.0", true)) == record_estimate(gpt2_record("sdpa_math", "2.1.0", true)));
  // From 2.2 the CPU flash kernel runs, but never with dropout (GPT-2 trains with attn_pdrop 0.1).
  CHECK(record_estimate(gpt2_record("sdpa", "2.5.0", true)) == record_estimate(gpt2_record("sdpa_math", "2.5.0", true)));
  // In eval mode (no dropout) the CPU flash kernel keeps no probabilities.
  CHECK(record_estimate(gpt2_record("sdpa", "2.5.0", false)) == record_estimate(gpt2_record("flash", "2.5.0", false)));
  CHECK(record_estimate(gpt2_record("sdpa", "2.5.0", false)) < record_estimate(gpt2_record("sdpa_math", "2.5.0", false)));
}

TEST_CASE("an explicit mask keeps SDPA off flash: memory-efficient from torch 2.1, math before", "[attention]") {
  // Falcon with ALiBi passes the bias as attn_mask (modeling_falcon.py).
  const model_spec falcon = json_io::model_from_hf_config(
      json{{"model_type", "falcon"}, {"num_hidden_layers", 2}, {"hidden_size", 256}, {"num_attention_heads", 4},
           {"vocab_size", 1000}, {"alibi", true}, {"new_decoder_architecture", false}, {"multi_query", false}});
  training_spec run{.micro_batch = 2, .seq_len = 256, .prec = precision::pure_bf16, .attention = attention_impl::sdpa,
                    .dropout = false, .device = device_kind::cuda, .torch_version = 200};
  CHECK(attention_kernel_of(falcon, run) == attention_kernel::math);
  const std::uint64_t on_torch_20 = saved(falcon, run);
  run.torch_version = 205;
  CHECK(attention_kernel_of(falcon, run) == attention_kernel::mem_efficient);
  CHECK(on_torch_20 > saved(falcon, run));
}

TEST_CASE("the report names the kernel it assumed", "[attention]") {
  const json record = gpt2_record("sdpa", "2.1.0", true);
  const model_spec model = json_io::model_for_record(record);
  const training_spec run = json_io::run_from_record(record);
  const json report = json_io::estimate_report_json(model, run, estimate(model, run));
  CHECK(report.at("attention_kernel") == "math");
  CHECK(report.at("run").at("attention") == "sdpa");
}

TEST_CASE("inference resolves sdpa as training does", "[attention]") {
  model_spec gpt2 = presets::gpt2;
  gpt2.vocab = 1000;  // small logits: the prefill peak is inside a block
  inference_spec r{.batch = 2, .context = 1024, .new_tokens = 1, .compute = dtype::fp32, .kv = dtype::fp32,
                   .attention = attention_impl::sdpa, .device = device_kind::cpu, .torch_version = 201};
  CHECK(attention_kernel_of(gpt2, r) == attention_kernel::math);
  const bytes before_cpu_flash = estimate_inference(gpt2, r).prefill.tensor;
  r.torch_version = 205;
  CHECK(attention_kernel_of(gpt2, r) == attention_kernel::flash);
  CHECK(before_cpu_flash > estimate_inference(gpt2, r).prefill.tensor);
}

}  // namespace attention_dropout_test
