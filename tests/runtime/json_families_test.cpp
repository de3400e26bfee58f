// Run-time checks of the record reader's families and its misspelt-key detection.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <string>

#include "memscale/json.hpp"

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
