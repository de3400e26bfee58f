// The stack a run that states none is estimated under: at the doors (run documents, the
// inference document, memscale-plan's default_run) the current releases, torch 2.11 and, for a
// Hugging Face run, transformers 5.17; a ground-truth record keeps its own (or "not stated").
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <fstream>
#include <string>

#include <memscale/current_releases.hpp>
#include <memscale/json.hpp>
#include <memscale/json/inference_report.hpp>

namespace default_stack_test {
namespace io = memscale::json_io;
using memscale::current_torch_release;
using memscale::current_transformers_release;

static_assert(io::default_run().torch_version == current_torch_release);
static_assert(current_torch_release > memscale::training_spec{}.torch_version);

namespace {

io::run_input read(const nlohmann::json& doc) {
  io::run_input in;
  io::read_run_document(doc, in);
  return in;
}

io::inference_input read_inference(const nlohmann::json& doc) {
  io::inference_input in;
  io::read_inference_document(doc, in);
  return in;
}

bool says(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("default stack: a run document without software runs the current releases", "[json][software]") {
  const io::run_input in = read({{"model", "llama-2-7b"}, {"run", {{"seq_len", 512}}}});
  CHECK(in.run.torch_version == 211);
  CHECK(in.run.transformers_version == 517);
  CHECK(says(io::software_text(in.run), "torch 2.11, transformers 5.17"));
  CHECK(says(io::software_text(in.run), "assumed: the current releases"));
  // Written back, the stack is stated and reads to the same run.
  const nlohmann::json back = io::run_document_json(in);
  CHECK(back.at("software").at("transformers") == "5.17");
  CHECK(read(back).run.transformers_version == 517);
  // The report says it was assumed; read back, that result field is ignored.
  const io::run_input bare = read({{"model", "gpt2"}, {"run", {{"seq_len", 128}, {"device", "cpu"}}}});
  const nlohmann::json report = io::run_report_json(bare, io::estimate_run(bare), nullptr);
  CHECK(report.at("software_assumed") == "the current releases");
  CHECK(read(report).run.torch_version == current_torch_release);
}

TEST_CASE("default stack: a stated package keeps its value, the others the current releases", "[json][software]") {
  const io::run_input in =
      read({{"model", "llama-2-7b"}, {"run", {{"seq_len", 512}}}, {"software", {{"transformers", "4.46"}}}});
  CHECK(in.run.transformers_version == 446);
  CHECK(in.run.torch_version == current_torch_release);
  CHECK_FALSE(says(io::software_text(in.run), "assumed"));
  const nlohmann::json report = io::run_report_json(in, io::estimate_run(in), nullptr);
  CHECK_FALSE(report.contains("software_assumed"));
  const io::run_input old_torch =
      read({{"model", "llama-2-7b"}, {"run", {{"seq_len", 512}}}, {"software", {{"torch", "2.5"}}}});
  CHECK(old_torch.run.torch_version == 205);
  CHECK(old_torch.run.transformers_version == current_transformers_release);
}

TEST_CASE("default stack: only a Hugging Face run takes the current transformers", "[json][software]") {
  // lit-gpt's scripts run no transformers code: its release stays unstated.
  const io::run_input litgpt = read({{"model", "llama-2-7b"}, {"run", {{"seq_len", 512}}}, {"framework", "litgpt"}});
  CHECK(litgpt.run.transformers_version == 0);
  CHECK(litgpt.run.torch_version == current_torch_release);
  // A vision model's step runs no transformers code either (a stated release is refused).
  const io::run_input vision = read({{"model", "resnet50"}});
  CHECK(vision.run.transformers_version == 0);
  CHECK(vision.run.torch_version == current_torch_release);
  CHECK(io::vision_report_json(vision).at("software_assumed") == "the current releases");
}

TEST_CASE("default stack: a ground-truth record without software keeps today's behaviour", "[json][software]") {
  std::ifstream file(std::string(MEMSCALE_GROUND_TRUTH_DIR) + "/cpu_traced_dev.json");
  const nlohmann::json records = nlohmann::json::parse(file);
  // cpu-gpt2-b1-s128-adamw states its torch (1.13) and no transformers release.
  nlohmann::json record = records.at(0);
  REQUIRE_FALSE(record.contains("software"));
  CHECK(io::run_from_record(record).torch_version == 113);
  CHECK(io::run_from_record(record).transformers_version == 0);
  CHECK(read(record).run.transformers_version == 0);
  // Without its torch, the record is on the core default, not the current release.
  record.erase("torch");
  CHECK(io::run_from_record(record).torch_version == memscale::training_spec{}.torch_version);
}

TEST_CASE("default stack: generate() without software runs the current releases", "[json][software][inference]") {
  const io::inference_input plain = read_inference({{"model", "llama-2-7b"}, {"infer", nlohmann::json::object()}});
  CHECK(plain.spec.transformers_version == current_transformers_release);
  CHECK(plain.spec.torch_version == current_torch_release);
  CHECK(says(io::inference_software_text(plain.model, plain.spec), "assumed: the current releases"));
  CHECK(io::inference_software_json(plain.model, plain.spec).at("assumed") == "the current releases");
  const io::inference_input stated = read_inference(
      {{"model", "llama-2-7b"}, {"infer", nlohmann::json::object()}, {"software", {{"transformers", "4.32"}}}});
  CHECK(stated.spec.transformers_version == 432);
  CHECK(stated.spec.torch_version == current_torch_release);
  CHECK_FALSE(says(io::inference_software_text(stated.model, stated.spec), "assumed"));
  CHECK_FALSE(io::inference_software_json(stated.model, stated.spec).contains("assumed"));
  // A record's infer keeps the reader's own defaults.
  CHECK(io::inference_from_record({{"infer", {{"context", 512}, {"new_tokens", 128}}}}).transformers_version ==
        memscale::inference_spec{}.transformers_version);
}

TEST_CASE("default stack: a stated CUDA release is echoed, an unstated one is not", "[json][software]") {
  const io::run_input stated =
      read({{"model", "llama-2-7b"}, {"run", {{"seq_len", 512}}}, {"software", {{"cuda", "12.4"}}}});
  CHECK(stated.run.cuda_version == 1204);
  CHECK(io::software_json(stated.run).at("cuda") == "12.4");
  CHECK(says(io::software_text(stated.run), "CUDA 12.4, modules loaded lazily"));
  CHECK(read({{"model", "llama-2-7b"}, {"software", io::software_json(stated.run)}}).run.cuda_version == 1204);
  const io::run_input plain = read({{"model", "llama-2-7b"}, {"run", {{"seq_len", 512}}}});
  CHECK_FALSE(io::software_json(plain.run).contains("cuda"));
  CHECK(says(io::software_text(plain.run), "CUDA modules loaded lazily"));
  // An old release: echoed as stated, and the modules load eagerly.
  const io::run_input old =
      read({{"model", "llama-2-7b"}, {"run", {{"seq_len", 512}}}, {"software", {{"cuda", "11.2"}}}});
  CHECK(io::software_json(old.run).at("cuda") == "11.2");
  CHECK(says(io::software_text(old.run), "CUDA 11.2, modules loaded eagerly"));
  // generate() too.
  const io::inference_input infer = read_inference(
      {{"model", "llama-2-7b"}, {"infer", nlohmann::json::object()}, {"software", {{"cuda", "12.4"}}}});
  CHECK(io::inference_software_json(infer.model, infer.spec).at("cuda") == "12.4");
  CHECK(says(io::inference_software_text(infer.model, infer.spec), "CUDA 12.4, modules loaded lazily"));
  CHECK_FALSE(io::inference_software_json(infer.model, read_inference({{"model", "llama-2-7b"}, {"infer", nlohmann::json::object()}}).spec)
                  .contains("cuda"));
}

TEST_CASE("run documents: a loss_chunk no loss reads is refused, not dropped", "[json]") {
  const auto message = [](const nlohmann::json& doc) {
    try {
      (void)read(doc);
    } catch (const memscale::error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(says(message({{"model", "llama-2-7b"}, {"run", {{"loss_chunk", 64}}}}), "run.loss_chunk"));
  CHECK(says(message({{"model", "llama-2-7b"}, {"framework", "torchtune"}, {"run", {{"loss_chunk", 64}}}}),
             "loss_chunks pieces"));
  CHECK(read({{"model", "llama-2-7b"}, {"run", {{"loss", "chunked"}, {"loss_chunk", 64}}}}).run.loss_chunk == 64);
}

}  // namespace default_stack_test
