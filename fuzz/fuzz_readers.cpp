// libFuzzer target for memscale's JSON readers: the --cases record reader
// (json_io::estimate_record), the config.json reader (json_io::model_from_hf_config), the --run document reader (memscale-plan's run_file.cpp)
// and the document parser in front of both (json_io::parse_document); the safetensors header
// reader on the raw bytes (json_io::parse_safetensors_header, then the checkpoint summary and
// its training state), and on the parsed document the quantization_config reader, the generic
// decoder of an unknown model_type and the index's shard-name check. Build and run:
// docs/fuzzing.md. A finding is a crash, a sanitizer report, a hang, or an exception
// other than the three kinds invalid input may raise.
#include <array>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "../examples/plan/args.hpp"
#include "../examples/plan/run_file.hpp"
#include "memscale/generic_model.hpp"
#include "memscale/json.hpp"
#include "memscale/quant_format.hpp"

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

// The input as a whole safetensors file: header, summary, the state of a full fine-tune.
void read_as_safetensors(std::string_view bytes) {
  const auto header = memscale::json_io::parse_safetensors_header(bytes, bytes.size(), "fuzz.safetensors");
  const auto summary = memscale::json_io::detail::summarize({header});
  (void)memscale::checkpoint_state_of(summary.inventory, memscale::training_spec{.optimizer = memscale::optimizer_kind::adafactor});
  (void)memscale::checkpoint_state_of(summary.inventory, memscale::training_spec{.optimizer = memscale::optimizer_kind::adamw_8bit});
  (void)memscale::json_io::checkpoint_summary_json(summary).dump();
}

// A config.json's quantization_config, and the generic decoder of its sizes over a small
// fixed checkpoint, estimated.
void read_as_quantized_or_generic(const nlohmann::json& doc) {
  if (const auto q = memscale::json_io::hf::quantization_of(doc)) {
    (void)memscale::quantized_linear_bytes(q->format, 4096, 11008);
    (void)memscale::dequantization_temporary(q->format, 4096ULL * 11008, 2048, q->compute);
  }
  memscale::json_io::checkpoint_summary checkpoint{};
  checkpoint.files.push_back("fuzz.safetensors");
  for (const auto& [rows, cols] : {std::pair<std::uint64_t, std::uint64_t>{64, 64}, {128, 64}, {64, 128}})
    memscale::add_tensor(checkpoint.inventory, memscale::tensor_role::parameter, memscale::stored_dtype::bf16,
                         std::array<std::uint64_t, 2>{rows, cols});
  memscale::compact(checkpoint.inventory);
  const auto g = memscale::json_io::generic_model_of(doc, checkpoint);
  (void)memscale::estimate(g.model, memscale::training_spec{.micro_batch = 1, .seq_len = 8});
}

// An index's weight_map: every shard name through the traversal check.
void read_as_index(const nlohmann::json& doc) {
  if (!doc.is_object() || !doc.contains("weight_map") || !doc.at("weight_map").is_object()) return;
  for (const auto& item : doc.at("weight_map").items())
    if (item.value().is_string())
      memscale::json_io::detail::check_shard_name("fuzz.index.json", item.key(), item.value().get<std::string>());
}

void read_as_cases(const nlohmann::json& doc) {
  if (!doc.is_array()) return;
  for (const auto& record : doc)
    if (record.is_object()) (void)memscale::json_io::estimate_record(record);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    read_as_safetensors(text);
  } catch (const memscale::error&) {
  }
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
  try {
    read_as_quantized_or_generic(doc);
  } catch (const memscale::error&) {
  }
  try {
    read_as_index(doc);
  } catch (const memscale::error&) {
  }
  return 0;
}
