// The config.json reader: every file in tests/data/hf_configs/ gives the published total
// parameter count of the class its "architectures" names.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <string>

#include "memscale/json.hpp"

namespace {

std::string config_path(const std::string& name) {
  return std::string(MEMSCALE_SOURCE_DIR) + "/tests/data/hf_configs/" + name + ".json";
}

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
  CHECK(count_of("Qwen--Qwen3-30B-A3B") == 30'532'122'624ULL);
  CHECK(count_of("google--gemma-7b") == 8'537'680'896ULL);
  CHECK(count_of("google--gemma-2-2b") == 2'614'341'888ULL);
  CHECK(count_of("google--gemma-3-1b-pt") == 999'885'952ULL);
  CHECK(count_of("microsoft--phi-2") == 2'779'683'840ULL);
  CHECK(count_of("microsoft--Phi-3-mini-4k-instruct") == 3'821'079'552ULL);
  CHECK(count_of("bigcode--starcoder2-3b") == 3'030'371'328ULL);
  CHECK(count_of("allenai--OLMo-2-1124-7B") == 7'298'617'344ULL);
  CHECK(count_of("google-bert--bert-base-uncased") == 109'514'298ULL);
  CHECK(count_of("FacebookAI--roberta-base") == 124'697'433ULL);
  CHECK(count_of("distilbert--distilbert-base-uncased") == 66'985'530ULL);
  CHECK(count_of("distilbert--distilbert-base-uncased-finetuned-sst-2-english") == 66'955'010ULL);
}
