// The torchtune recipe config memscale emits: every key is one the recipe (or the component it
// instantiates) reads at v0.6.1, and the batch keys multiply out to the planned batch.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#endif

#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "memscale/json/emit_torchtune.hpp"
#include "memscale/memscale.hpp"

namespace emit_torchtune_test {
namespace {

using namespace memscale;

// key path ("model._component_", "batch_size") -> value, from the emitted YAML's two levels.
std::map<std::string, std::string> keys_of(const std::string& yaml) {
  std::map<std::string, std::string> out;
  std::istringstream in(yaml);
  std::string line;
  std::string parent;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const bool nested = line.rfind("  ", 0) == 0;
    const std::string body = nested ? line.substr(2) : line;
    const std::size_t colon = body.find(':');
    REQUIRE(colon != std::string::npos);
    const std::string key = body.substr(0, colon);
    std::string value = body.substr(colon + 1);
    if (const std::size_t hash = value.find("  #"); hash != std::string::npos) value = value.substr(0, hash);
    if (!value.empty() && value[0] == ' ') value = value.substr(1);
    if (!nested) parent = value.empty() ? key : "";
    out[nested ? parent + "." + key : key] = value;
  }
  return out;
}

// Every key the config sets is one torchtune reads there.
void check_keys(const std::map<std::string, std::string>& keys, const training_spec& run) {
  namespace k = json_io::torchtune_keys;
  const bool full = run.target == training_target::full;
  for (const auto& [path, value] : keys) {
    INFO(path << ": " << value);
    const std::size_t dot = path.find('.');
    if (dot == std::string::npos) {
      if (runs_fsdp2(run)) CHECK((full ? k::contains(k::full_distributed, path) : k::contains(k::lora_distributed, path)));
      else CHECK((full ? k::contains(k::full_single_device, path) : k::contains(k::lora_single_device, path)));
      continue;
    }
    const std::string parent = path.substr(0, dot);
    const std::string key = path.substr(dot + 1);
    if (parent == "model") CHECK((full ? k::contains(k::full_model, key) : k::contains(k::lora_model, key)));
    else if (parent == "loss") CHECK(k::contains(k::loss, key));
    else if (parent == "optimizer") CHECK(k::contains(k::optimizer, key));
    else FAIL("unexpected section " << parent);
  }
}

training_spec torchtune(training_spec run) { return with_framework(run, framework_kind::torchtune); }

TEST_CASE("A torchtune LoRA config sets the recipe keys of the planned run") {
  training_spec run = torchtune({.micro_batch = 4, .seq_len = 2048, .prec = precision::pure_bf16, .grad_accum = 8,
                                 .ckpt = checkpointing::full, .target = training_target::lora, .lora_rank = 16});
  run.lora_targets = lora_target::q | lora_target::k | lora_target::v | lora_target::o | lora_target::gate |
                     lora_target::up | lora_target::down;
  run.lora_dropout = false;
  run.offload_activations = true;
  const std::string yaml = json_io::emit_torchtune_config(presets::llama_3_8b, run);
  INFO(yaml);
  const auto keys = keys_of(yaml);
  check_keys(keys, run);
  CHECK(keys.at("model._component_") == "torchtune.models.llama3.lora_llama3_8b");
  CHECK(keys.at("model.lora_attn_modules") == "['q_proj', 'k_proj', 'v_proj', 'output_proj']");
  CHECK(keys.at("model.apply_lora_to_mlp") == "True");
  CHECK(keys.at("model.lora_rank") == "16");
  CHECK(keys.at("model.lora_dropout") == "0.0");
  CHECK(keys.at("loss._component_") == "torchtune.modules.loss.CEWithChunkedOutputLoss");
  CHECK(keys.at("loss.num_output_chunks") == "8");
  CHECK(keys.at("dtype") == "bf16");
  CHECK(keys.at("enable_activation_checkpointing") == "True");
  CHECK(keys.at("enable_activation_offloading") == "True");
  CHECK(keys.count("optimizer_in_bwd") == 0);  // the LoRA recipe does not read it
  // One device: the global batch is batch_size x gradient_accumulation_steps.
  CHECK(std::stoull(keys.at("batch_size")) * std::stoull(keys.at("gradient_accumulation_steps")) ==
        run.micro_batch * run.grad_accum);
}

TEST_CASE("A torchtune full or QLoRA config names its builder and the full recipe's optimizer in backward") {
  training_spec full = torchtune({.micro_batch = 2, .seq_len = 1024, .prec = precision::pure_bf16,
                                  .optimizer_impl = optimizer_implementation::fused, .ckpt = checkpointing::full});
  full.optimizer_in_backward = true;
  const auto f = keys_of(json_io::emit_torchtune_config(presets::mistral_7b, full));
  check_keys(f, full);
  CHECK(f.at("model._component_") == "torchtune.models.mistral.mistral_7b");
  CHECK(f.at("optimizer_in_bwd") == "True");
  CHECK(f.at("optimizer.fused") == "True");
  CHECK(std::stoull(f.at("batch_size")) * std::stoull(f.at("gradient_accumulation_steps")) == 2);

  training_spec q = torchtune({.micro_batch = 1, .prec = precision::pure_bf16, .grad_accum = 16,
                               .target = training_target::qlora, .lora_rank = 8});
  const auto qk = keys_of(json_io::emit_torchtune_config(presets::llama_2_7b, q));
  check_keys(qk, q);
  CHECK(qk.at("model._component_") == "torchtune.models.llama2.qlora_llama2_7b");
  CHECK(qk.at("model.lora_attn_modules") == "['q_proj', 'v_proj']");
  CHECK(std::stoull(qk.at("batch_size")) * std::stoull(qk.at("gradient_accumulation_steps")) == 16);
}

TEST_CASE("A torchtune full fine-tune over several GPUs writes full_finetune_distributed's keys") {
  training_spec run = torchtune({.micro_batch = 2, .seq_len = 4096, .prec = precision::pure_bf16, .ckpt = checkpointing::full});
  run.shard = sharding::full;
  run.data_parallel = 4;
  REQUIRE(runs_fsdp2(run));
  const std::string yaml = json_io::emit_torchtune_config(presets::llama_3_8b, run);
  INFO(yaml);
  const auto keys = keys_of(yaml);
  check_keys(keys, run);
  CHECK(yaml.find("tune run --nproc_per_node 4 full_finetune_distributed") != std::string::npos);
  CHECK(yaml.find("llama3/8B_full.yaml") != std::string::npos);
  CHECK(keys.at("model._component_") == "torchtune.models.llama3.llama3_8b");
  CHECK(keys.at("dtype") == "bf16");
  // Without the key planned, the embeddings and the output stay in the root unit (the recipe's default).
  CHECK(keys.at("custom_sharded_layers") == "null");
  CHECK(keys.at("optimizer_in_bwd") == "False");
  // full_finetune_distributed reads optimizer_in_bwd too (one optimizer per sharded parameter).
  training_spec in_bwd = run;
  in_bwd.optimizer_in_backward = true;
  CHECK(keys_of(json_io::emit_torchtune_config(presets::llama_3_8b, in_bwd)).at("optimizer_in_bwd") == "True");
  // Planned as the stock configs have it, the list is written as they spell it.
  training_spec units = run;
  units.custom_sharded = {.tok_embeddings = true, .output = true};
  const auto unit_keys = keys_of(json_io::emit_torchtune_config(presets::llama_3_8b, units));
  check_keys(unit_keys, units);
  CHECK(unit_keys.at("custom_sharded_layers") == "['tok_embeddings', 'output']");
  units.custom_sharded.tok_embeddings = false;
  CHECK(keys_of(json_io::emit_torchtune_config(presets::llama_3_8b, units)).at("custom_sharded_layers") == "['output']");
  CHECK(keys.at("fsdp_reshard_after_forward") == "True");
  CHECK(keys.at("fsdp_cpu_offload") == "False");
  // fsdp_cpu_offload (CPUOffloadPolicy) moves parameters, gradients and optimizer state together.
  training_spec host = run;
  host.offload_optimizer = host.offload_parameters = true;
  host.offload_activations = true;
  const auto host_keys = keys_of(json_io::emit_torchtune_config(presets::llama_3_8b, host));
  check_keys(host_keys, host);
  CHECK(host_keys.at("fsdp_cpu_offload") == "True");
  CHECK(host_keys.at("enable_activation_offloading") == "True");
  host.offload_parameters = false;
  CHECK_THROWS_WITH(json_io::emit_torchtune_config(presets::llama_3_8b, host), Catch::Matchers::Contains("run.offload"));
  CHECK(std::stoull(keys.at("batch_size")) * std::stoull(keys.at("gradient_accumulation_steps")) == 2);
  // QLoRA over several GPUs: lora_finetune_distributed with a qlora_ builder, merged into the stock
  // qlora config (llama2/7B_qlora.yaml names that recipe at v0.6.1); no tensor parallelism key.
  training_spec qlora = run;
  qlora.target = training_target::qlora;
  qlora.lora_rank = 8;
  qlora.custom_sharded = {.tok_embeddings = true, .output = true};
  const std::string q_yaml = json_io::emit_torchtune_config(presets::llama_2_7b, qlora);
  INFO(q_yaml);
  const auto q_keys = keys_of(q_yaml);
  check_keys(q_keys, qlora);
  CHECK(q_yaml.find("tune run --nproc_per_node 4 lora_finetune_distributed") != std::string::npos);
  CHECK(q_yaml.find("llama2/7B_qlora.yaml") != std::string::npos);
  CHECK(q_keys.at("model._component_") == "torchtune.models.llama2.qlora_llama2_7b");
  CHECK(q_keys.at("custom_sharded_layers") == "['tok_embeddings', 'output']");
  CHECK(q_keys.count("tensor_parallel_dim") == 0);
  CHECK_THROWS_WITH(json_io::emit_torchtune_config(presets::llama_3_8b, qlora), Catch::Matchers::Contains("qlora config"));
  // LoRA over several GPUs and a model without a stock distributed config are refused by name.
  training_spec lora = run;
  lora.target = training_target::lora;
  lora.lora_rank = 8;
  CHECK_THROWS(json_io::emit_torchtune_config(presets::llama_3_8b, lora));
  CHECK_THROWS_WITH(json_io::emit_torchtune_config(presets::llama_2_70b, run), Catch::Matchers::Contains("model"));
}

TEST_CASE("A torchtune config is refused where the recipe has no key for the run") {
  const training_spec base = torchtune({.prec = precision::pure_bf16, .target = training_target::lora, .lora_rank = 8});
  const auto refused = [](const model_spec& m, const training_spec& r, const char* named) {
    CHECK_THROWS_WITH(json_io::emit_torchtune_config(m, r), Catch::Matchers::Contains(named));
  };
  refused(presets::gpt2, base, "model");
  training_spec hf = base;
  hf.framework = framework_kind::hf;
  refused(presets::llama_3_8b, hf, "run.framework");
  training_spec amp = base;
  amp.prec = precision::amp_bf16;
  refused(presets::llama_3_8b, amp, "run.precision");
  training_spec offload = base;
  offload.offload_activations = true;  // without checkpointing
  refused(presets::llama_3_8b, offload, "run.offload_activations");
  training_spec in_bwd = base;
  in_bwd.optimizer_in_backward = true;
  refused(presets::llama_3_8b, in_bwd, "run.optimizer_in_backward");
  training_spec some_mlp = base;
  some_mlp.lora_targets = lora_target::q | lora_target::gate;
  refused(presets::llama_3_8b, some_mlp, "run.lora_targets");
  training_spec qwen_q = base;
  qwen_q.target = training_target::qlora;
  refused(presets::qwen2_5_7b, qwen_q, "qwen2_5");
}

}  // namespace
}  // namespace emit_torchtune_test
