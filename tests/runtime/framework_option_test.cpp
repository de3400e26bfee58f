// The framework as an input (--framework, a run document's "framework"): what each name sets,
// how it is written back, and the runs it refuses.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <string>

#include "error_capture.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace framework_option_test {
namespace {

using namespace memscale;
using memscale_test::contains;
using memscale_test::error_message;
using nlohmann::json;

// Each framework's defaults replace another's: nothing of torchtune's survives a switch to hf.
constexpr training_spec torchtune_then_hf = with_framework(with_framework(training_spec{}, framework_kind::torchtune),
                                                           framework_kind::hf);
static_assert(torchtune_then_hf.loss == loss_impl::standard && torchtune_then_hf.loss_chunks == 0);
static_assert(torchtune_then_hf.adapters == adapter_dtype::framework_default);
static_assert(with_framework(training_spec{}, framework_kind::litgpt).loss_chunk == 128);
static_assert(as_litgpt_model(presets::llama_2_7b).fused_qkv && !as_litgpt_model(presets::llama_2_7b).upcast_logits);

json_io::run_input read(const json& doc) {
  json_io::run_input in;
  json_io::read_run_document(doc, in);
  return in;
}

}  // namespace

TEST_CASE("framework names and versions: what each sets", "[framework][json]") {
  training_spec run{};
  json_io::read_framework_option("torchtune@0.6.1", run, "--framework");
  CHECK(run.framework == framework_kind::torchtune);
  CHECK(run.framework_version == 601);
  CHECK(run.loss == loss_impl::chunked);
  CHECK(run.loss_chunks == 8);
  CHECK(json_io::framework_json(run) == json{{"name", "torchtune"}, {"version", "0.6.1"}});

  // hf@VERSION is the transformers release, as --stack transformers=VERSION sets it.
  json_io::read_framework_option("hf@4.46", run, "--framework");
  CHECK(run.framework == framework_kind::hf);
  CHECK(run.transformers_version == 446);
  CHECK(run.loss == loss_impl::standard);
  CHECK(json_io::framework_json(run) == json{{"name", "hf"}});

  json_io::read_framework(json{{"name", "lit-gpt"}}, run);
  CHECK(run.framework == framework_kind::litgpt);
  CHECK(run.no_sync);
  CHECK(json_io::framework_text(run) == "litgpt (scripts @ b96a5708): loss chunked every 128 tokens");
  // main: the commit read, its release and the rule that differs from 0.4.
  json_io::read_framework_option("litgpt@main", run, "--framework");
  CHECK(json_io::framework_text(run) ==
        "litgpt 0.5.13 (main, read at v0.5.13, Lightning-AI/litgpt @ 26857050: RMSNorm in fp32, k and v repeated per "
        "query head after RoPE): loss chunked every 128 tokens");
}

TEST_CASE("framework errors name the input, the value and what is modelled", "[framework][json]") {
  training_spec run{};
  const auto option = [&](const char* text) {
    return error_message([&] { json_io::read_framework_option(text, run, "--framework"); });
  };
  CHECK(contains(option("torchtitan@0.2.0"), "torchtitan is read at 0.1.0"));
  CHECK(contains(option("gpt-fast"), "training is not modelled"));
  // DeepSpeed's own 16-bit engine is modelled, through the options that describe it.
  CHECK(contains(option("deepspeed"), "--strategy zero0|zero1|zero2|zero3"));
  CHECK(contains(option("deepspeed"), "--ds-precision fp16|bf16"));
  CHECK(contains(option("trl"), "give --framework hf"));
  CHECK(contains(option("torchtun"), "did you mean torchtune?"));
  CHECK(contains(option("torchtune@0.5.0"), "read at 0.6.1 (its 0.6 releases) (got \"0.5.0\")"));
  CHECK(contains(option("torchtune@x"), "must be a version"));
  CHECK(contains(option("litgpt@1.0"), "litgpt is read at 0.4.9"));
  CHECK(contains(option("litgpt@0.5.2"), "0.5.5 to 0.5.13"));
  CHECK(contains(option("hf@"), "must be NAME or NAME@VERSION"));
  const auto document = [&](const json& f) { return error_message([&] { json_io::read_framework(f, run); }); };
  CHECK(contains(document(json{{"name", "torchtune"}, {"release", "0.6"}}), "framework.release is not a field"));
  CHECK(contains(document(json{{"version", "0.6.1"}}), "framework.name is missing"));
  CHECK(contains(document(json(3)), "must be a name such as"));
  CHECK(run.framework == framework_kind::hf);  // nothing changed by a refused input
}

TEST_CASE("run documents: the framework before the run's own settings, lit-gpt's model code", "[framework][json]") {
  // A preset under lit-gpt is lit-gpt's model; the document's run settings override the framework's.
  const auto in = read(json{{"model", "llama-2-7b"}, {"framework", "litgpt"}, {"run", {{"loss_chunk", 256}}}});
  CHECK(in.model.impl == implementation::litgpt);
  CHECK(in.model.fused_qkv);
  CHECK(in.run.loss == loss_impl::chunked);
  CHECK(in.run.loss_chunk == 256);

  // A lit-gpt model object without a framework runs under lit-gpt's scripts, as a record does.
  const json litgpt_model = {{"family", "llama"}, {"layers", 2},  {"hidden", 256}, {"heads", 4},
                             {"ffn", 688},        {"vocab", 16000}, {"impl", "litgpt"}};
  CHECK(read(json{{"model", litgpt_model}}).run.framework == framework_kind::litgpt);

  const auto tt = read(json{{"model", "llama-2-7b"},
                            {"framework", {{"name", "torchtune"}, {"version", "0.6.1"}}},
                            {"run", {{"loss", "standard"}, {"optimizer_in_backward", true}}}});
  CHECK(tt.run.loss == loss_impl::standard);
  CHECK(tt.run.loss_chunks == 0);
  CHECK(tt.run.optimizer_in_backward);
  // Written back, it reads back to the same run.
  const json written = json_io::run_document_json(tt);
  CHECK(written.at("framework") == json{{"name", "torchtune"}, {"version", "0.6.1"}});
  CHECK(written.at("run").at("loss") == "standard");
  CHECK(json_io::run_document_json(read(written)) == written);

  CHECK(contains(error_message([&] { read(json{{"model", litgpt_model}, {"framework", "torchtune"}}); }),
                 "torchtune builds its own models"));
  CHECK(contains(error_message([&] { read(json{{"model", "t5-small"}, {"framework", "torchtune"}}); }),
                 "decoder-only transformers"));
  const json mamba = {{"hf_config", {{"model_type", "mamba"}, {"hidden_size", 64}, {"num_hidden_layers", 2},
                                     {"vocab_size", 1000}}}};
  CHECK(contains(error_message([&] { read(json{{"model", mamba}, {"framework", "litgpt"}}); }),
                 "decoder-only transformers"));
  CHECK(contains(error_message([&] { read(json{{"model", "gpt2"}, {"run", {{"loss", "chunky"}}}}); }),
                 "run.loss must be standard, chunked or fused_linear_ce"));
}

TEST_CASE("run documents keep the LoRA variant and an adapter dropout turned off", "[framework][json]") {
  const json doc = {{"model", "llama-2-7b"},
                    {"run", {{"target", "lora"}, {"lora_rank", 8}, {"lora_variant", "dora"}, {"lora_dropout", 0}}}};
  const auto in = read(doc);
  CHECK(in.run.lora_kind == lora_variant::dora);
  CHECK_FALSE(in.run.lora_dropout);
  const json written = json_io::run_document_json(in);
  CHECK(written.at("run").at("lora_variant") == "dora");
  CHECK(written.at("run").at("lora_dropout") == 0);
  CHECK(read(written).run.lora_kind == lora_variant::dora);
  CHECK(contains(error_message([&] { read(json{{"model", "gpt2"}, {"run", {{"lora_variant", "dora"}}}}); }),
                 "run.lora_variant needs run.target lora or qlora"));
  CHECK(contains(error_message([&] {
                   read(json{{"model", "gpt2"}, {"run", {{"target", "lora"}, {"lora_rank", 8}, {"lora_dropout", 1.5}}}});
                 }),
                 "run.lora_dropout must be a probability in [0, 1)"));
}

TEST_CASE("a framework the model does not match is refused by build(), not estimated", "[framework]") {
  training_spec litgpt_run = with_framework(training_spec{}, framework_kind::litgpt);
  CHECK(contains(error_message([&] { (void)estimate(presets::llama_2_7b, litgpt_run); }), "model.impl litgpt"));
  CHECK_NOTHROW(estimate(as_litgpt_model(presets::llama_2_7b), litgpt_run));
  training_spec chunks = training_spec{};
  chunks.loss_chunks = 4;
  chunks.framework = framework_kind::torchtune;
  CHECK(contains(error_message([&] { validate(chunks); }), "run.loss_chunks needs run.loss chunked"));
}

TEST_CASE("offloading activations needs full checkpointing: without it the option is refused, not ignored",
          "[framework]") {
  for (const checkpointing ckpt : {checkpointing::none, checkpointing::selective}) {
    training_spec run{};
    run.offload_activations = true;
    run.ckpt = ckpt;
    CHECK(contains(error_message([&] { (void)estimate(presets::llama_2_7b, run); }),
                   "run.offload_activations needs run.ckpt full"));
  }
  training_spec full{.micro_batch = 16, .seq_len = 1024};  // the block inputs are part of the peak
  full.offload_activations = true;
  full.ckpt = checkpointing::full;
  training_spec kept = full;
  kept.offload_activations = false;
  CHECK(estimate(presets::gpt2, full).steady.tensor < estimate(presets::gpt2, kept).steady.tensor);
}

TEST_CASE("BALANCED keeps an in-backward optimizer's state on the GPU", "[framework][planner]") {
  training_spec run = with_framework(training_spec{}, framework_kind::torchtune);
  const gpu_spec gpu = *find_gpu("rtx4090");
  CHECK(apply_mode(run, mode::balanced, gpu).offload_optimizer);
  run.optimizer_in_backward = true;
  const training_spec balanced = apply_mode(run, mode::balanced, gpu);
  CHECK_FALSE(balanced.offload_optimizer);
  CHECK(balanced.offload_activations);
  CHECK_NOTHROW(validate(balanced));
}

}  // namespace framework_option_test
