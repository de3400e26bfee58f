// libFuzzer target for memscale's JSON readers: the --cases record reader
// (json_io::estimate_record), the config.json reader (json_io::model_from_hf_config), the --run document reader (memscale-plan's run_file.cpp)
// and the document parser in front of both (json_io::parse_document). Build and run:
// docs/fuzzing.md. A finding is a crash, a sanitizer report, a hang, or an exception
// other than the three kinds invalid input may raise.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "../examples/plan/args.hpp"
#include "../examples/plan/run_file.hpp"
#include "memscale/json.hpp"

namespace {

void read_as_run(const nlohmann::json& doc) {
  memscale_plan::options o{};
  memscale_plan::read_run_document(doc, "fuzz", o);
  (void)memscale::estimate(o.model, o.run);
  (void)memscale_plan::run_document(o);
}

// A Hugging Face config.json (--config), estimated at a small run like the CLI's default.
void read_as_config(const nlohmann::json& doc) {
  const memscale::model_spec model = memscale::json_io::model_from_hf_config(doc);
  (void)memscale::estimate(model, memscale::training_spec{.micro_batch = 1, .seq_len = 8});
}

void read_as_cases(const nlohmann::json& doc) {
  if (!doc.is_array()) return;
  for (const auto& record : doc)
    if (record.is_object()) (void)memscale::json_io::estimate_record(record);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  nlohmann::json doc;
  try {
    doc = memscale::json_io::parse_document(text, "fuzz");
  } catch (const memscale::error&) {
    return 0;  // malformed or too deep: refused with a message, as intended
  }
  // Each reader either answers or throws one of the errors invalid input may raise.
  try {
    read_as_run(doc);
  } catch (const memscale::error&) {
  } catch (const memscale_plan::usage_error&) {
  }
  try {
    read_as_cases(doc);
  } catch (const memscale::error&) {
  }
  try {
    read_as_config(doc);
  } catch (const memscale::error&) {
  }
  return 0;
}
