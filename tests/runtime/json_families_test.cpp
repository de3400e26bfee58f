// Run-time checks of the record reader's families and its misspelt-key detection.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <string>

#include "memscale/json.hpp"

namespace json_families_test {
namespace {

using memscale::json_io::json;

json model_record(const std::string& model_fields) { return json::parse("{" + model_fields + "}"); }

std::uint64_t count_of(const std::string& model_fields) {
  return memscale::parameter_count(memscale::json_io::model_from_record(model_record(model_fields)));
}

}  // namespace

TEST_CASE("json_io::model_from_record: family defaults reproduce published parameter totals") {
  // Each total is the model card's / config's published count.
  CHECK(count_of(R"("family":"gemma","layers":28,"hidden":3072,"heads":16,"kv_heads":16,"head_dim":256,"ffn":24576,)"
                 R"("vocab":256000,"activation":"gelu","norm":"rmsnorm","tied_embeddings":true)") == 8'537'680'896ULL);
  CHECK(count_of(R"("family":"gemma2","layers":42,"hidden":3584,"heads":16,"kv_heads":8,"head_dim":256,"ffn":14336,)"
                 R"("vocab":256000,"activation":"gelu","norm":"rmsnorm","tied_embeddings":true)") == 9'241'705'984ULL);
  CHECK(count_of(R"("family":"falcon","layers":32,"hidden":4544,"heads":71,"kv_heads":1,"head_dim":64,"ffn":18176,)"
                 R"("vocab":65024,"tied_embeddings":true,"activation":"gelu","norm":"layernorm")") == 6'921'720'704ULL);
  CHECK(count_of(R"("family":"phi3","layers":32,"hidden":3072,"heads":32,"kv_heads":32,"ffn":8192,"vocab":32064,)"
                 R"("activation":"swiglu","norm":"rmsnorm","tied_embeddings":false)") == 3'821'079'552ULL);
  CHECK(count_of(R"("family":"opt","layers":24,"hidden":2048,"heads":32,"ffn":8192,"vocab":50272,"max_pos":2048,)"
                 R"("activation":"relu","tied_embeddings":true)") == 1'315'758'080ULL);
}

TEST_CASE("json_io::model_from_record: a misspelt key is an error naming it and the field it resembles") {
  const json m = model_record(R"("family":"llama","layrs":3,"layers":2,"hidden":64,"heads":4,"ffn":128,"vocab":100)");
  try {
    (void)memscale::json_io::model_from_record(m);
    FAIL("a misspelt key was accepted");
  } catch (const memscale::error& e) {
    const std::string what = e.what();
    CHECK(what.find("model.layrs") != std::string::npos);
    CHECK(what.find("model.layers") != std::string::npos);
  }
}

TEST_CASE("json_io::run_from_record: train.batch_size is rejected as a misspelling of train.batch") {
  const json record = json::parse(R"({"id":"x","device":"cpu","train":{"batch_size":8,"seq":64}})");
  CHECK_THROWS_AS(memscale::json_io::run_from_record(record), memscale::error);
}

TEST_CASE("json_io::model_from_record: unrelated extra fields are allowed (SCHEMA.md)") {
  const json m = model_record(R"("family":"llama","layers":2,"hidden":64,"heads":4,"ffn":128,"vocab":100,"rope_theta":10000)");
  CHECK(memscale::json_io::model_from_record(m).layers == 2);
}

TEST_CASE("json_io::model_from_record: a record's family is looked up in the one family registry") {
  namespace hf = memscale::json_io::hf;
  // Every family a record may name has a registry row with record rules; the family's own
  // rules decide what the record's fields mean.
  for (const auto& f : hf::families) {
    if (f.records.defaults == nullptr) continue;
    const std::string fields = R"("family":")" + std::string(f.model_type) +
                               R"(","layers":2,"hidden":64,"heads":4,"ffn":128,"vocab":100,"max_pos":64)";
    CHECK(memscale::json_io::model_from_record(model_record(fields)).layers == 2);
  }
  // OPT's learned table has two rows beyond max_pos (its registry row's position offset).
  const auto opt = memscale::json_io::model_from_record(
      model_record(R"("family":"opt","layers":2,"hidden":64,"heads":4,"ffn":128,"vocab":100,"max_pos":64)"));
  CHECK(opt.max_positions == 66);
  // Mixtral routes to 8 experts, 2 per token, when the record names none; llama routes to none.
  const auto mixtral = memscale::json_io::model_from_record(
      model_record(R"("family":"mixtral","layers":2,"hidden":64,"heads":4,"ffn":128,"vocab":100)"));
  CHECK(mixtral.experts == 8);
  CHECK(mixtral.experts_per_token == 2);
  CHECK(memscale::json_io::model_from_record(
            model_record(R"("family":"llama","layers":2,"hidden":64,"heads":4,"ffn":128,"vocab":100)"))
            .experts == 0);
  // A family the registry knows for records only is not a config.json model_type.
  CHECK(hf::reader_for("stablelm") == nullptr);
  CHECK(hf::reader_for("llama") != nullptr);
  CHECK_THROWS_AS(memscale::json_io::model_from_hf_config(json::parse(R"({"model_type":"stablelm"})")),
                  memscale::error);
  // A family no row gives record rules to is refused by name.
  try {
    (void)memscale::json_io::model_from_record(
        model_record(R"("family":"qwen3","layers":2,"hidden":64,"heads":4,"ffn":128,"vocab":100)"));
    FAIL("a family without record rules was read");
  } catch (const memscale::error& e) {
    CHECK(std::string(e.what()).find("model.family") != std::string::npos);
  }
}

TEST_CASE("json_io::model_from_record: an hf_config's quantization_config is refused, not read as 16-bit") {
  const json m = json::parse(R"({"hf_config":{"model_type":"llama","num_hidden_layers":2,"hidden_size":64,)"
                             R"("num_attention_heads":4,"intermediate_size":128,"vocab_size":100,)"
                             R"("quantization_config":{"quant_method":"gptq","bits":4,"group_size":128}}})");
  try {
    (void)memscale::json_io::model_from_record(m);
    FAIL("a quantised config was read as a 16-bit model");
  } catch (const memscale::error& e) {
    CHECK(std::string(e.what()).find("quantization_config.quant_method") != std::string::npos);
  }
}

}  // namespace json_families_test
