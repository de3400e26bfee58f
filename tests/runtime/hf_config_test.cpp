// The config.json reader: every file in tests/data/hf_configs/ gives the published total
// parameter count of the class its "architectures" names.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "error_capture.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "test_inputs.hpp"

namespace hf_config_test {
namespace {

using memscale_test::config_path;

std::uint64_t count_of(const std::string& name) {
  return memscale::parameter_count(memscale::json_io::load_hf_model(config_path(name)));
}

}  // namespace

TEST_CASE("hf_config: parameter counts") {
  // Each total is the published count of the class in "architectures"; sources in
  // tests/data/hf_configs/README.md.
  CHECK(count_of("openai-community--gpt2") == 124'439'808ULL);
  CHECK(count_of("EleutherAI--pythia-160m") == 162'322'944ULL);
  CHECK(count_of("EleutherAI--gpt-j-6b") == 6'050'882'784ULL);
  CHECK(count_of("facebook--opt-125m") == 125'239'296ULL);
  CHECK(count_of("bigscience--bloom-560m") == 559'214'592ULL);
  CHECK(count_of("tiiuae--falcon-7b") == 6'921'720'704ULL);
  CHECK(count_of("meta-llama--Llama-2-7b-hf") == 6'738'415'616ULL);
  CHECK(count_of("meta-llama--Llama-3.2-1B") == 1'235'814'400ULL);
  CHECK(count_of("mistralai--Mistral-7B-v0.1") == 7'241'732'096ULL);
  CHECK(count_of("mistralai--Mixtral-8x7B-v0.1") == 46'702'792'704ULL);
  CHECK(count_of("Qwen--Qwen2.5-0.5B") == 494'032'768ULL);
  CHECK(count_of("Qwen--Qwen2.5-7B") == 7'615'616'512ULL);
  CHECK(count_of("Qwen--Qwen1.5-MoE-A2.7B") == 14'315'784'192ULL);
  CHECK(count_of("Qwen--Qwen3-0.6B") == 596'049'920ULL);
  CHECK(count_of("Qwen--Qwen3-8B") == 8'190'735'360ULL);
  CHECK(count_of("Qwen--Qwen3-30B-A3B") == 30'532'122'624ULL);
  CHECK(count_of("google--gemma-7b") == 8'537'680'896ULL);
  CHECK(count_of("google--gemma-2-2b") == 2'614'341'888ULL);
  CHECK(count_of("google--gemma-3-1b-pt") == 999'885'952ULL);
  CHECK(count_of("microsoft--phi-2") == 2'779'683'840ULL);
  CHECK(count_of("microsoft--Phi-3-mini-4k-instruct") == 3'821'079'552ULL);
  CHECK(count_of("bigcode--starcoder2-3b") == 3'030'371'328ULL);
  CHECK(count_of("allenai--OLMo-2-1124-7B") == 7'298'617'344ULL);
  CHECK(count_of("internlm--internlm2-7b") == 7'737'708'544ULL);
  CHECK(count_of("allenai--OLMoE-1B-7B-0924") == 6'919'161'856ULL);
  CHECK(count_of("ibm-granite--granite-3.1-8b-instruct") == 8'170'848'256ULL);
  CHECK(count_of("ibm-granite--granite-3.1-3b-a800m-instruct") == 3'298'793'472ULL);
  CHECK(count_of("microsoft--Phi-3.5-MoE-instruct") == 41'873'153'344ULL);
  CHECK(count_of("CohereForAI--c4ai-command-r-v01") == 34'980'831'232ULL);
  CHECK(count_of("CohereForAI--c4ai-command-r7b-12-2024") == 8'028'033'024ULL);
  CHECK(count_of("bigcode--starcoder") == 15'517'456'384ULL);
  CHECK(count_of("bigcode--gpt_bigcode-santacoder") == 1'124'886'528ULL);
  CHECK(count_of("THUDM--GLM-4-9B-0414") == 9'400'279'040ULL);
  CHECK(count_of("openai--gpt-oss-20b") == 20'914'757'184ULL);
  CHECK(count_of("openai--gpt-oss-120b") == 116'829'156'672ULL);
  CHECK(count_of("meta-llama--Llama-4-Scout-17B-16E") == 108'641'793'536ULL);
  CHECK(count_of("deepseek-ai--DeepSeek-V2-Lite") == 15'706'484'224ULL);
  CHECK(count_of("deepseek-ai--DeepSeek-V3") == 671'026'404'352ULL);
  CHECK(count_of("google-bert--bert-base-uncased") == 109'514'298ULL);
  CHECK(count_of("FacebookAI--roberta-base") == 124'697'433ULL);
  CHECK(count_of("distilbert--distilbert-base-uncased") == 66'985'530ULL);
  CHECK(count_of("distilbert--distilbert-base-uncased-finetuned-sst-2-english") == 66'955'010ULL);
}

TEST_CASE("hf_config: a Hub id is found in the local Hub cache, a missing one is an error naming it") {
  namespace fs = std::filesystem;
  const fs::path home = fs::temp_directory_path() / "memscale_hf_home_test";
  const fs::path repo = home / "hub" / "models--Qwen--Qwen3-0.6B";
  fs::create_directories(repo / "snapshots" / "abc" );
  fs::create_directories(repo / "refs");
  fs::copy_file(config_path("Qwen--Qwen3-0.6B"), repo / "snapshots" / "abc" / "config.json",
                fs::copy_options::overwrite_existing);
  std::ofstream(repo / "refs" / "main") << "abc\n";
  ::setenv("HF_HOME", home.c_str(), 1);
  ::unsetenv("HF_HUB_CACHE");
  CHECK(memscale::parameter_count(memscale::json_io::load_hf_model("Qwen/Qwen3-0.6B")) == 596'049'920ULL);
  try {
    (void)memscale::json_io::load_hf_model("Qwen/Qwen3-8B");
    FAIL("a Hub id missing from the cache was accepted");
  } catch (const memscale::error& e) {
    CHECK(std::string(e.what()).find("Qwen/Qwen3-8B") != std::string::npos);
  }
  ::unsetenv("HF_HOME");
  fs::remove_all(home);
}

TEST_CASE("hf_config: model directory, hf_config records and one validation for all paths") {
  using memscale::json_io::json;
  std::ifstream in(config_path("openai-community--gpt2"));
  const json cfg = json::parse(in);
  const json record = {{"id", "x"},
                       {"device", "cpu"},
                       {"measure", "cpu-tensor-peak"},
                       {"model", {{"hf_config", cfg}}},
                       {"train", {{"batch", 1}, {"seq", 2048}}}};
  const json answer = memscale::json_io::estimate_record(record);
  REQUIRE(answer.contains("error"));
  CHECK(answer.at("error").get<std::string>().find("train.seq must be <= 1024 (the max_position_embeddings of gpt2) (got 2048)") !=
        std::string::npos);
  const memscale::model_spec m = memscale::json_io::model_from_record(record.at("model"));
  CHECK(memscale::parameter_count(m) == 124'439'808ULL);
  CHECK_THROWS_AS(memscale::validate(m, memscale::training_spec{.micro_batch = 1, .seq_len = 1025}), memscale::error);
  CHECK_NOTHROW(memscale::validate(m, memscale::training_spec{.micro_batch = 1, .seq_len = 1024}));
}

TEST_CASE("hf_config: unknown model_type and wrong-typed keys name the field") {
  using memscale::json_io::json;
  const auto message = [](const json& cfg) {
    try {
      (void)memscale::json_io::model_from_hf_config(cfg);
    } catch (const memscale::error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(message(json{{"model_type", "rwkv"}}).find("config.model_type") != std::string::npos);
  CHECK(message(json{{"model_type", "llama"}, {"num_hidden_layers", 2}, {"hidden_size", "4096"}}).find("config.hidden_size") != std::string::npos);
  CHECK(message(json{{"model_type", "llama"}, {"hidden_size", 64}, {"num_attention_heads", 4}, {"intermediate_size", 128},
                     {"vocab_size", 100}})
            .find("config.num_hidden_layers") != std::string::npos);
  CHECK(message(json::array()).find("config") != std::string::npos);
}

TEST_CASE("hf_config: each activation name maps to the kernel that runs it") {
  using memscale::json_io::json;
  const auto mlp_of = [](const std::string& act) {
    json cfg = json::parse(std::ifstream(config_path("openai-community--gpt2")));
    cfg["activation_function"] = act;
    return memscale::json_io::model_from_hf_config(cfg).mlp;
  };
  // FastGELUActivation and NewGELUActivation are written out in Python and save their
  // intermediates; gelu and gelu_pytorch_tanh are one fused kernel (transformers activations.py).
  CHECK(mlp_of("gelu_fast") == memscale::mlp_kind::gelu_fast);
  CHECK(mlp_of("gelu_new") == memscale::mlp_kind::gelu_tanh);
  CHECK(mlp_of("gelu_pytorch_tanh") == memscale::mlp_kind::gelu);
  CHECK(mlp_of("gelu") == memscale::mlp_kind::gelu);
}

TEST_CASE("hf_config: a family's Config defaults fill the keys a config.json leaves out") {
  using memscale::json_io::json;
  // OlmoeConfig() (16 layers of 64 experts of 2048, hidden 2048, vocab 50304, untied):
  // tools/families/param_counts.py gives 13,361,612,800 for {"model_type": "olmoe"}.
  const memscale::model_spec olmoe = memscale::json_io::model_from_hf_config(json{{"model_type", "olmoe"}});
  CHECK(memscale::parameter_count(olmoe) == 13'361'612'800ULL);
  CHECK(olmoe.context_length == 4096);
  CHECK(olmoe.experts_per_token == 8);
  // OlmoeConfig.attribute_map: num_local_experts is num_experts.
  CHECK(memscale::json_io::model_from_hf_config(json{{"model_type", "olmoe"}, {"num_local_experts", 8}}).experts == 8);
  // GraniteConfig() and GraniteMoeConfig() (LLaMA-7B sizes; the MoE with 8 experts of 11008).
  const auto defaults_count = [](const char* type) {
    return memscale::parameter_count(memscale::json_io::model_from_hf_config(json{{"model_type", type}}));
  };
  CHECK(defaults_count("granite") == 6'738'415'616ULL);
  CHECK(defaults_count("granitemoe") == 37'039'116'288ULL);
  CHECK(defaults_count("granitemoeshared") == 37'039'116'288ULL);  // shared_intermediate_size 0: no shared MLP
  // PhimoeConfig(): 32 layers of 16 experts of 6400, 8 kv heads, no attention or lm_head bias;
  // tools/families/param_counts.py gives 41,872,793,600 for {"model_type": "phimoe"}.
  CHECK(defaults_count("phimoe") == 41'872'793'600ULL);
  const memscale::model_spec phimoe = memscale::json_io::model_from_hf_config(json{{"model_type", "phimoe"}});
  CHECK(phimoe.kv_heads == 8);
  CHECK(phimoe.context_length == 131072);
  CHECK(phimoe.norm == memscale::norm_kind::layernorm);
  // num_key_value_heads None: PhimoeConfig falls back to num_attention_heads.
  CHECK(memscale::json_io::model_from_hf_config(json{{"model_type", "phimoe"}, {"num_key_value_heads", nullptr}}).kv_heads == 32);
  // input_jitter_noise > 0: each MoE layer's in-place mul saves a (tokens, hidden) noise tensor.
  CHECK_FALSE(phimoe.moe_input_jitter);
  memscale::model_spec small = memscale::json_io::model_from_hf_config(
      json{{"model_type", "phimoe"}, {"num_hidden_layers", 2}, {"hidden_size", 64}, {"intermediate_size", 128},
           {"num_attention_heads", 4}, {"num_key_value_heads", 4}, {"vocab_size", 100}, {"input_jitter_noise", 0.01}});
  CHECK(small.moe_input_jitter);
  const memscale::training_spec jitter_run{.micro_batch = 2, .seq_len = 16};
  const auto with_noise = memscale::estimate(small, jitter_run).saved_activation_bytes;
  small.moe_input_jitter = false;
  // 2 layers x 32 tokens x 64 fp32 values.
  CHECK(with_noise.value - memscale::estimate(small, jitter_run).saved_activation_bytes.value == 2u * 32u * 64u * 4u);
  // CohereConfig() and Cohere2Config() share Command R's sizes (tied, 64 heads of 128).
  CHECK(defaults_count("cohere") == 34'980'831'232ULL);
  CHECK(defaults_count("cohere2") == 34'980'831'232ULL);
  // Gemma3TextConfig() (configuration_gemma3.py): 26 layers, hidden 2304, 8 heads, 4 kv heads of
  // 256, intermediate 9216, vocab 262208, tied; tools/families/ssm_vision_params.py gemma3_text({}).
  CHECK(defaults_count("gemma3_text") == 2'628'658'432ULL);
  const memscale::model_spec gemma3 = memscale::json_io::model_from_hf_config(json{{"model_type", "gemma3_text"}});
  CHECK(gemma3.kv_heads == 4);
  CHECK(gemma3.context_length == 131072);
  CHECK(gemma3.tied_embeddings);
  CHECK_FALSE(gemma3.logit_softcap);
  // Gemma3MLP reads hidden_activation only and has no bias.
  CHECK(memscale::json_io::model_from_hf_config(json{{"model_type", "gemma3_text"}, {"hidden_act", "silu"}, {"mlp_bias", true}})
            .mlp == memscale::mlp_kind::geglu);
  CHECK(defaults_count("gemma3_text") ==
        memscale::parameter_count(memscale::json_io::model_from_hf_config(json{{"model_type", "gemma3_text"}, {"mlp_bias", true}})));
  CHECK(defaults_count("gpt_bigcode") == 111'446'784ULL);  // GPTBigCodeConfig(): GPT-2 small sizes, multi-query
  // Glm4Config() is GLM-4-9B-0414's shape (2 kv heads, head_dim 128, q/k/v biases).
  CHECK(defaults_count("glm4") == 9'400'279'040ULL);
  const memscale::model_spec glm4 = memscale::json_io::model_from_hf_config(
      json{{"model_type", "glm4"}, {"attention_bias", false}, {"num_key_value_heads", 32}});
  CHECK(memscale::parameter_count(glm4) == 10'658'385'920ULL);  // param_counts.py on the same config
  CHECK(glm4.rotary_fraction == 0.5);                           // partial_rotary_factor 0.5
  CHECK(glm4.block_norms == memscale::branch_norms::sandwich);
}

TEST_CASE("hf_config: granitemoeshared adds an ungated shared MLP of shared_intermediate_size") {
  using memscale::json_io::json;
  json cfg = json::parse(std::ifstream(config_path("ibm-granite--granite-3.1-3b-a800m-instruct")));
  cfg["model_type"] = "granitemoeshared";
  cfg["shared_intermediate_size"] = 1024;
  const memscale::model_spec m = memscale::json_io::model_from_hf_config(cfg);
  // tools/families/param_counts.py on the same config: + 32 layers x (1536 x 2048 + 1024 x 1536).
  CHECK(memscale::parameter_count(m) == 3'449'788'416ULL);
  CHECK_FALSE(m.shared_expert_gate);
  CHECK(m.experts_in_one_pass);  // GraniteMoeMoE: ParallelExperts over every routed row
}

TEST_CASE("hf_config: granite's logits / logits_scaling is a second logits tensor that nothing saves") {
  using namespace memscale;
  const model_spec granite = json_io::load_hf_model(config_path("ibm-granite--granite-3.1-8b-instruct"));
  REQUIRE(granite.logits_scale);
  model_spec small = presets::llama_base("scaled-logits", 1, 64, 4, 4, 128, 5000);
  const training_spec run{.micro_batch = 2, .seq_len = 64, .prec = precision::fp32, .dropout = false};
  const auto plain = std::make_unique<graph>(build(small, run).stack());
  small.logits_scale = true;
  const auto scaled = std::make_unique<graph>(build(small, run).stack());
  REQUIRE(scaled->size == plain->size + 1);
  // The quotient: tokens x vocab fp32, made after the head's output, which is freed once used.
  std::size_t head = 0;
  for (std::size_t i = 0; i < scaled->size; ++i)
    if (scaled->ops[i].transient) head = i;
  REQUIRE(head + 1 < scaled->size);
  CHECK(scaled->ops[head].out.value == 2ULL * 64 * 5000 * 4);
  CHECK(scaled->ops[head + 1].out.value == 2ULL * 64 * 5000 * 4);
  CHECK(op_saved_bytes(scaled->ops[head + 1]).value == 0);
  // The loss's fp32 log-probabilities are as large, so the step's peak does not move.
  small.logits_scale = false;
  const estimate_result before = estimate(small, run);
  small.logits_scale = true;
  CHECK(estimate(small, run).steady.tensor == before.steady.tensor);
}

TEST_CASE("hf_config: a key the reader cannot model is refused by name") {
  using memscale::json_io::json;
  try {
    (void)memscale::json_io::model_from_hf_config(json{{"model_type", "olmoe"}, {"clip_qkv", 8.0}});
    FAIL("clip_qkv was ignored");
  } catch (const memscale::error& e) {
    CHECK(std::string(e.what()).find("config.clip_qkv") != std::string::npos);
  }
  CHECK_NOTHROW(memscale::json_io::model_from_hf_config(json{{"model_type", "olmoe"}, {"clip_qkv", nullptr}}));
}

TEST_CASE("hf_config: gpt_bigcode is multi-query attention out of one fused c_attn, with one model-wide mask") {
  using namespace memscale;
  using json_io::json;
  const model_spec starcoder = json_io::load_hf_model(config_path("bigcode--starcoder"));
  CHECK(kv_heads_of(starcoder) == 1);
  CHECK(starcoder.model_buffer_bytes == 8192ULL * 8192ULL);  // GPTBigCodeModel.bias: n_positions^2 bool, once
  CHECK(starcoder.buffer_bytes_per_layer == 0);
  // multi_query false: num_key_value_heads = n_head (tools/families/param_counts.py on the same config).
  json santacoder = json::parse(std::ifstream(config_path("bigcode--gpt_bigcode-santacoder")));
  santacoder["multi_query"] = false;
  CHECK(parameter_count(json_io::model_from_hf_config(santacoder)) == 1'313'722'368ULL);

  // One block of the traced small model (docs/data/cpu_traced_families_2025.json) at b1 s64, fp32 on CPU,
  // torch 1.13: docs/research/families-2025-saved-tensors.txt lists 18 storages, 1,524,736 bytes
  // (c_attn's whole output, the query copy, probabilities, dropout noise, no repeated k or v).
  json record;
  for (const json& r : json::parse(std::ifstream(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_families_2025.json")))
    if (r.at("id") == "cpu-gpt_bigcode-small-b2-s256-adamw") record = r;
  REQUIRE(record.is_object());
  record["train"]["batch"] = 1;
  record["train"]["seq"] = 64;
  const model_spec m = json_io::model_for_record(record);
  const auto g = std::make_unique<graph>(build(m, json_io::run_from_record(record)).stack());
  std::uint64_t block = 0;
  for (std::size_t i = g->block_begin; i < g->block_end; ++i) block += op_saved_bytes(g->ops[i]).value;
  CHECK(block == 1'524'736ULL);
  CHECK(g->buffers.value == 2048ULL * 2048ULL);  // the small model's n_positions 2048, for 4 layers
}

namespace {

// One block's saved bytes (the op_saved_bytes of the repeated block) of a traced small model
// of docs/data/cpu_traced_families_2025.json, rerun at b1 s64 with `precision`.
std::uint64_t traced_block_bytes(const std::string& id, const std::string& precision) {
  using namespace memscale;
  using json_io::json;
  json record;
  for (const json& r : json::parse(std::ifstream(std::string(MEMSCALE_SOURCE_DIR) + "/docs/data/cpu_traced_families_2025.json")))
    if (r.at("id") == id) record = r;
  REQUIRE(record.is_object());
  record["train"]["batch"] = 1;
  record["train"]["seq"] = 64;
  record["train"]["precision"] = precision;
  const model_spec m = json_io::model_for_record(record);
  const auto g = std::make_unique<graph>(build(m, json_io::run_from_record(record)).stack());
  std::uint64_t block = 0;
  for (std::size_t i = g->block_begin; i < g->block_end; ++i) block += op_saved_bytes(g->ops[i]).value;
  return block;
}

}  // namespace

TEST_CASE("hf_config: cohere's Python fp32 LayerNorm keeps each intermediate, per head on q and k") {
  using namespace memscale;
  using json_io::json;
  const model_spec r = json_io::load_hf_model(config_path("CohereForAI--c4ai-command-r-v01"));
  CHECK(r.norm == norm_kind::layernorm_fp32_python);
  CHECK(r.layout == block_layout::parallel);
  CHECK(r.shared_attention_norm);
  CHECK(r.logits_scale);
  CHECK(r.tied_embeddings);
  CHECK(r.qk_norm == qk_norm_kind::none);
  // Command R+ (use_qk_norm): CohereLayerNorm((heads, head_dim)) and ((kv_heads, head_dim)) per layer;
  // tools/families/param_counts.py on the same config gives 34,981,486,592.
  json plus = json::parse(std::ifstream(config_path("CohereForAI--c4ai-command-r-v01")));
  plus["use_qk_norm"] = true;
  CHECK(parameter_count(json_io::model_from_hf_config(plus)) == 34'981'486'592ULL);
  // Cohere2Config forces head_dim = hidden // heads and refuses no layer kind it knows.
  json r7b = json::parse(std::ifstream(config_path("CohereForAI--c4ai-command-r7b-12-2024")));
  r7b["head_dim"] = 64;
  CHECK(parameter_count(json_io::model_from_hf_config(r7b)) == 8'028'033'024ULL);
  r7b["layer_types"] = json::array({"sliding_attention", "chunked_attention"});
  CHECK_THROWS_AS(json_io::model_from_hf_config(r7b), error);
  // A model_spec that asks for a bias the Python norm does not have is refused.
  model_spec biased = r;
  biased.norm_bias = true;
  CHECK_THROWS_AS(validate(biased), error);

  // One block of the traced small models at b1 s64 on CPU, torch 1.13
  // (docs/research/families-2025-saved-tensors.txt): cohere layers.0 (qk-norm) lists 2,167,048
  // bytes in fp32 and 1,711,368 in bf16, cohere2 layers.3 1,491,208 and 1,041,672. Each norm
  // keeps x (fp32 input) or its fp32 copy, x - mean twice, (x - mean)^2, the normalized x and
  // rsqrt, plus the weight's fp32 copy in bf16. The listing of cohere's block also holds the
  // rotary cos and sin (16,384 bytes in fp32, 8,192 in bf16), one storage the model makes once
  // and every layer's mul saves, which the graph does not count per block. Each listing also
  // holds the 0-dim float64 `scaling` that torch 1.13's `scores * scaling` keeps (8 bytes).
  CHECK(traced_block_bytes("cpu-cohere-small-b2-s256-adamw", "fp32") == 2'167'048ULL - 16'384ULL - 8ULL);
  CHECK(traced_block_bytes("cpu-cohere-small-b2-s256-adamw", "pure_bf16") == 1'711'368ULL - 8'192ULL - 8ULL);
  CHECK(traced_block_bytes("cpu-cohere2-small-b2-s256-adamw", "fp32") == 1'491'208ULL - 8ULL);
  CHECK(traced_block_bytes("cpu-cohere2-small-b2-s256-adamw", "pure_bf16") == 1'041'672ULL - 8ULL);
}

TEST_CASE("hf_config: InternLM2's per-layer rotary caches are buffers, and their gathered rows are saved") {
  using memscale::json_io::json;
  // The small model of docs/data/cpu_traced_families_2025.json (its trace: buffers 2,097,152 bytes).
  const json cfg{{"model_type", "internlm2"}, {"hidden_size", 256}, {"num_hidden_layers", 4},
                 {"num_attention_heads", 8}, {"num_key_value_heads", 2}, {"intermediate_size", 688},
                 {"vocab_size", 4096}, {"max_position_embeddings", 2048}, {"bias", false}};
  memscale::model_spec m = memscale::json_io::model_from_hf_config(cfg);
  CHECK(m.rotary_cache_per_layer);
  const memscale::training_spec fp32{.micro_batch = 2, .seq_len = 256, .prec = memscale::precision::fp32,
                                     .dropout = false};
  // cos_cached and sin_cached: 4 layers x 2 x 2048 x 32 fp32; inv_freq: 4 layers x 16 fp32.
  CHECK(memscale::build(m, fp32).stack().buffers == memscale::bytes{4u * 2u * 2048u * 32u * 4u + 4u * 16u * 4u});
  // Under pure bf16 the caches are bf16 (constructed under the default dtype).
  memscale::training_spec bf16 = fp32;
  bf16.prec = memscale::precision::pure_bf16;
  CHECK(memscale::build(m, bf16).stack().buffers == memscale::bytes{4u * 2u * 2048u * 32u * 2u + 4u * 16u * 4u});
  // cos[position_ids] and sin[position_ids], (1, 256, 32) each per layer, saved by the rotation.
  const auto with_caches = memscale::estimate(m, fp32).saved_activation_bytes;
  m.rotary_cache_per_layer = false;
  CHECK(with_caches.value - memscale::estimate(m, fp32).saved_activation_bytes.value == 4u * 2u * 256u * 32u * 4u);
  // The flag needs the caches' rows.
  m.rotary_cache_per_layer = true;
  m.context_length = 0;
  CHECK_THROWS_AS(memscale::validate(m), memscale::error);
}

namespace {

using memscale_test::contains;
using memscale_test::error_message;

// The gpt_oss config of the CPU-traced records (docs/data/cpu_traced_families_2025.json).
memscale::json_io::json small_gpt_oss() {
  return memscale::json_io::json{
      {"model_type", "gpt_oss"},   {"hidden_size", 256},         {"num_hidden_layers", 4},
      {"num_attention_heads", 8},  {"num_key_value_heads", 2},   {"intermediate_size", 256},
      {"vocab_size", 4096},        {"max_position_embeddings", 2048}, {"head_dim", 32},
      {"num_local_experts", 8},    {"num_experts_per_tok", 2},   {"sliding_window", 128},
      {"layer_types", {"sliding_attention", "full_attention", "sliding_attention", "full_attention"}}};
}

}  // namespace

TEST_CASE("hf_config: gpt_oss reads GptOssConfig's defaults and the traced model's parameters") {
  using namespace memscale;
  // GptOssConfig() is gpt-oss-120b's shape (36 layers, 128 experts).
  CHECK(parameter_count(json_io::model_from_hf_config(json_io::json{{"model_type", "gpt_oss"}})) ==
        116'829'156'672ULL);
  const model_spec m = json_io::model_from_hf_config(small_gpt_oss());
  CHECK(parameter_count(m) == 9'081'664ULL);  // the record's "params" (sum(p.numel()) of the traced model)
  CHECK(m.attention_sinks);
  CHECK(m.expert_weight_copies);
  CHECK(m.router_bias);
  CHECK(m.mlp == mlp_kind::clamped_swiglu);
  CHECK_FALSE(m.softmax_fp32);
  json_io::json bad = small_gpt_oss();
  bad["layer_types"] = {"sliding_attention", "full_attention"};
  CHECK(contains(error_message([&] { (void)json_io::model_from_hf_config(bad); }), "config.layer_types"));
  bad = small_gpt_oss();
  bad["layer_types"][3] = "chunked_attention";
  CHECK(contains(error_message([&] { (void)json_io::model_from_hf_config(bad); }), "chunked_attention"));
  bad = small_gpt_oss();
  bad["output_router_logits"] = true;
  CHECK(contains(error_message([&] { (void)json_io::model_from_hf_config(bad); }), "config.output_router_logits"));
  // The window changes masks only: layer_types absent or all full give the same estimate.
  json_io::json full = small_gpt_oss();
  full["layer_types"] = {"full_attention", "full_attention", "full_attention", "full_attention"};
  const training_spec run{.micro_batch = 2, .seq_len = 256, .attention = attention_impl::eager, .dropout = false};
  CHECK(estimate(json_io::model_from_hf_config(full), run).steady.tensor == estimate(m, run).steady.tensor);
}

TEST_CASE("gpt_oss features: each changes exactly what its mechanism saves") {
  using namespace memscale;
  const model_spec m = json_io::model_from_hf_config(small_gpt_oss());
  const std::uint64_t layers = 4, batch = 2, seq = 256, heads = 8, hidden = 256, ffn = 256, experts = 8;
  const std::uint64_t rows = batch * seq * 2;  // tokens x top-k
  const training_spec run{.micro_batch = batch, .seq_len = seq, .attention = attention_impl::eager, .dropout = false};
  const auto saved = [&](const model_spec& x) { return estimate(x, run).saved_activation_bytes.value; };
  const auto with_all = saved(m);

  SECTION("sinks: a column more of fp32 probabilities, max's int64 indices, one logit per head") {
    model_spec off = m;
    off.attention_sinks = false;
    CHECK(with_all - saved(off) == layers * batch * heads * seq * (4 + 8));
    CHECK(parameter_count(m) - parameter_count(off) == layers * heads);
    // _supports_sdpa = False: an sdpa request runs eager; without sinks it would run a fused kernel.
    const training_spec sdpa_run{.micro_batch = batch, .seq_len = seq, .prec = precision::pure_bf16,
                                 .attention = attention_impl::sdpa, .dropout = false};
    CHECK(attention_kernel_of(m, sdpa_run) == attention_kernel::math);
    CHECK(attention_kernel_of(off, sdpa_run) != attention_kernel::math);
  }
  SECTION("clamped SwiGLU experts: 2h + 7f saved per routed row against SwiGLU's 2h + 4f") {
    model_spec swiglu = m;
    swiglu.mlp = mlp_kind::swiglu;
    swiglu.mlp_bias = true;  // the same parameters: gate and up biases are gate_up's
    CHECK(parameter_count(swiglu) == parameter_count(m));
    CHECK(with_all - saved(swiglu) == layers * rows * 3 * ffn * 4);
  }
  SECTION("expert weight copies: every hit expert's weights, at most min(experts, tokens x top-k)") {
    model_spec views = m;
    views.expert_weight_copies = false;
    // docs/research/families-2025.md sec. 10: 25,165,824 bytes at b2 s256 (4 x 8 x (256 x 512 + 256 x 256) x 4 B).
    CHECK(with_all - saved(views) == layers * experts * 3 * hidden * ffn * 4);
    CHECK(with_all - saved(views) == 25'165'824ULL);
    // One token of one sequence: 2 experts hit of 8.
    const training_spec one{.micro_batch = 1, .seq_len = 1, .attention = attention_impl::eager, .dropout = false};
    CHECK(estimate(m, one).saved_activation_bytes.value - estimate(views, one).saved_activation_bytes.value ==
          layers * 2 * 3 * hidden * ffn * 4);
  }
  SECTION("router bias: one parameter per expert and layer") {
    model_spec plain = m;
    plain.router_bias = false;
    CHECK(parameter_count(m) - parameter_count(plain) == layers * experts);
  }
  SECTION("each flag needs experts") {
    model_spec dense = presets::llama_base("dense", 2, 64, 4, 4, 128, 100);
    dense.expert_weight_copies = true;
    CHECK(contains(error_message([&] { (void)validate(dense); }), "model.expert_weight_copies"));
    dense.expert_weight_copies = false;
    dense.router_bias = true;
    CHECK(contains(error_message([&] { (void)validate(dense); }), "model.router_bias"));
    dense.router_bias = false;
    dense.mlp = mlp_kind::clamped_swiglu;
    CHECK(contains(error_message([&] { (void)validate(dense); }), "clamped_swiglu"));
  }
}

}  // namespace hf_config_test
