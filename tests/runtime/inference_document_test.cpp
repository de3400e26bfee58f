// generate() as a run document (memscale/json/inference_report.hpp): an "infer" document reads to
// the call memscale-plan's --inference flags describe and reports the same JSON; its errors name the field.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <optional>
#include <string>

#include <memscale/current_releases.hpp>
#include <memscale/gpus.hpp>
#include <memscale/json.hpp>
#include <memscale/json/inference_report.hpp>
#include <memscale/presets.hpp>

namespace inference_document_test {
namespace io = memscale::json_io;

namespace {

std::string error_of(const nlohmann::json& doc) {
  io::inference_input in;
  try {
    io::read_inference_document(doc, in);
  } catch (const memscale::error& e) {
    return e.what();
  }
  return "<no error>";
}

// The report of the document, as memscale-plan --run FILE --json prints it.
nlohmann::json document_report(const nlohmann::json& doc) {
  io::inference_input in;
  io::read_inference_document(doc, in);
  return io::inference_report_json(in.model, io::report_inference(in), in.alloc_conf);
}

// The call memscale-plan's --inference flags start from (args.hpp): its sizes, on the current releases.
memscale::inference_spec flags_spec(std::uint64_t batch, std::uint64_t context, std::uint64_t new_tokens) {
  return {.batch = batch,
          .context = context,
          .new_tokens = new_tokens,
          .transformers_version = memscale::current_transformers_release,
          .torch_version = memscale::current_torch_release};
}

// The report of the call built as memscale-plan's --inference flags build it (inference.cpp).
nlohmann::json flags_report(const memscale::model_spec& model, const memscale::inference_spec& spec,
                            const std::optional<memscale::gpu_spec>& gpu, const std::string& alloc_conf = "") {
  return io::inference_report_json(model, io::report_inference(model, spec, gpu, std::nullopt, alloc_conf, {}),
                                   alloc_conf);
}

}  // namespace

TEST_CASE("inference document: the same report as the --inference flags", "[json][inference_document]") {
  const memscale::model_spec llama = memscale::presets::llama_2_7b;
  SECTION("batch, context and new tokens on a catalog GPU") {
    const nlohmann::json doc = {
        {"model", "llama-2-7b"}, {"infer", {{"batch", 8}, {"context", 2048}, {"new_tokens", 128}}}, {"gpu", "h100-80gb"}};
    const memscale::inference_spec spec = flags_spec(8, 2048, 128);
    const nlohmann::json report = document_report(doc);
    CHECK(report == flags_report(llama, spec, memscale::find_gpu("h100-80gb")));
    CHECK(report.at("inference").at("attention") == "flash");  // --attention's default
    CHECK(report.contains("plan"));
    CHECK(report.at("allocator").contains("verdict"));
  }
  SECTION("defaults: --batch's 4, context 512, 128 new tokens, no GPU") {
    const nlohmann::json report = document_report({{"model", "llama-2-7b"}, {"infer", nlohmann::json::object()}});
    CHECK(report == flags_report(llama, flags_spec(4, 512, 128), std::nullopt));
    CHECK(report.at("inference").at("batch") == 4);
    CHECK(report.at("inference").at("context") == 512);
    CHECK(report.at("inference").at("new_tokens") == 128);
  }
  SECTION("nf4 weights, an int2 quantized cache, PYTORCH_CUDA_ALLOC_CONF") {
    const nlohmann::json doc = {{"model", "mistral-7b"},
                                {"infer",
                                 {{"batch", 2}, {"context", 4096}, {"new_tokens", 256}, {"weights", "bnb-nf4"},
                                  {"kv_cache", "quantized"}, {"kv_dtype", "int2"}}},
                                {"gpu", "a100-40gb"},
                                {"alloc_conf", "expandable_segments:True"}};
    memscale::inference_spec spec = flags_spec(2, 4096, 256);
    spec.weights = memscale::weight_format::bnb_nf4;
    spec.cache = memscale::kv_cache_kind::quantized;
    spec.kv_bits = 2;
    CHECK(document_report(doc) ==
          flags_report(memscale::presets::mistral_7b, spec, memscale::find_gpu("a100-40gb"), "expandable_segments:True"));
  }
  SECTION("flash_attention_2: its own kernel, named back in the report") {
    const nlohmann::json doc = {{"model", "llama-3-8b"},
                                {"infer", {{"attention", "flash_attention_2"}, {"dtype", "bf16"}, {"context", 1024}}},
                                {"software", {{"transformers", "4.45"}}}};
    memscale::inference_spec spec = flags_spec(4, 1024, 128);
    spec.compute = memscale::dtype::bf16;
    spec.kv = memscale::dtype::bf16;
    spec.flash_attention_2 = true;
    io::read_inference_stack("transformers=4.45", spec, "--stack");
    const nlohmann::json report = document_report(doc);
    CHECK(report == flags_report(memscale::presets::llama_3_8b, spec, std::nullopt));
    CHECK(report.at("inference").at("attention") == "flash_attention_2");
    spec.flash_attention_2 = false;  // SDPA's flash: repeat_kv's copies before 5.0
    CHECK(report != flags_report(memscale::presets::llama_3_8b, spec, std::nullopt));
  }
  SECTION("gpt-fast's generate(), an int8 cache, torch 2.4") {
    const nlohmann::json doc = {{"model", "llama-3-8b"},
                                {"framework", "gpt-fast"},
                                {"infer", {{"weights", "bf16"}, {"kv_dtype", "int8"}, {"context", 256}, {"new_tokens", 64}}},
                                {"software", {{"torch", "2.4"}}}};
    memscale::inference_spec spec = flags_spec(4, 256, 64);
    spec.compute = memscale::dtype::bf16;
    spec.kv = memscale::dtype::int8;
    spec.cache = memscale::kv_cache_kind::static_preallocated;
    spec.loop = memscale::generate_loop::gpt_fast;
    io::read_inference_stack("torch=2.4", spec, "--stack");
    const nlohmann::json report = document_report(doc);
    CHECK(report == flags_report(memscale::presets::llama_3_8b, spec, std::nullopt));
    CHECK(report.at("inference").at("loop") == "gpt-fast");
    CHECK(report.at("inference").at("software").at("torch") == "2.4");
  }
}

TEST_CASE("inference document: errors name the field", "[json][inference_document]") {
  const nlohmann::json infer = {{"context", 128}};
  CHECK(error_of({{"model", "gpt2"}, {"infer", infer}, {"run", {{"seq_len", 128}}}}).find("\"run\" and \"infer\"") !=
        std::string::npos);
  CHECK(error_of({{"model", "gpt2"}, {"infer", {{"context", 128}, {"temperature", 0.7}}}}).find("infer.temperature") !=
        std::string::npos);
  CHECK(error_of({{"model", "gpt2"}, {"infer", infer}, {"seq_len", 4}}).find("seq_len") != std::string::npos);
  CHECK(error_of({{"model", "gpt2"}, {"infer", {{"weights", "int3"}}}}).find("infer.weights") != std::string::npos);
  CHECK(error_of({{"model", "gpt2"}, {"infer", {{"context", 1000}, {"new_tokens", 100}}}}).find("infer.context") !=
        std::string::npos);  // gpt2's 1024 positions
  CHECK(error_of({{"model", "llama-2-7b"}, {"infer", {{"kv_cache", "quantized"}}}, {"framework", "gpt-fast"}})
            .find("infer.kv_cache") != std::string::npos);
  CHECK(error_of({{"model", "llama-2-7b"}, {"infer", infer}, {"framework", "torchtune"}}).find("framework") !=
        std::string::npos);
  CHECK(error_of({{"model", "llama-2-7b"}, {"infer", infer}, {"software", {{"bitsandbytes", "0.43"}}}})
            .find("software.bitsandbytes") != std::string::npos);
  // A training reader handed an inference document says so instead of estimating something else.
  io::run_input run;
  CHECK_THROWS_WITH(io::read_run_document({{"model", "gpt2"}, {"infer", infer}}, run),
                    Catch::Matchers::Contains("read_inference_document"));
}

}  // namespace inference_document_test
