// libFuzzer target for what memscale reads from a user: the --cases record reader
// (json_io::estimate_record), the config.json reader (json_io::model_from_hf_config), the
// --run document reader (memscale-plan's run_file.cpp; an "infer" document's report too), the document parser in front of them
// (json_io::parse_document), memscale-plan's command line (parse_args: every option's value
// check; an input that starts with "--" is split into arguments at line breaks), the
// safetensors header reader on the raw bytes (json_io::parse_safetensors_header, then the
// checkpoint summary and its training state), and on the parsed document the
// quantization_config reader, the generic decoder of an unknown model_type and the index's
// shard-name check. Build and run: docs/fuzzing.md. A finding is a crash, a sanitizer report,
// a hang, an exception other than the kinds invalid input may raise, or an error message a
// terminal would act on (a control character or a byte that is not UTF-8) or longer than
// max_message.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../examples/plan/args.hpp"
#include "../examples/plan/run_file.hpp"
#include "memscale/detail/printable.hpp"
#include "memscale/generic_model.hpp"
#include "memscale/json.hpp"
#include "memscale/json/inference_report.hpp"
#include "memscale/quant_format.hpp"
#include "memscale/vision/estimate.hpp"

namespace {

// Every echoed value is cut to 80 characters; the longest fixed texts (the lists of
// supported names) are a few hundred.
constexpr std::size_t max_message = 4096;

// An error must be safe to print as it is: printable() leaves it unchanged.
void check_message(const std::exception& e) {
  const std::string_view what = e.what();
  if (what.size() > max_message || memscale::detail::printable(what) != what) std::abort();
}

void read_as_run(const nlohmann::json& doc) {
  memscale_plan::options o{};
  memscale_plan::read_run_document(doc, "fuzz", o);
  if (o.inference.enabled) {  // an "infer" document: generate()'s report, as --run prints it
    memscale::json_io::inference_input in;
    memscale::json_io::read_inference_document(doc, in);
    (void)memscale::json_io::inference_report_json(in.model, memscale::json_io::report_inference(in), in.alloc_conf);
    return;
  }
  if (o.vision.model) {  // a vision model: its estimate (json/vision_document.hpp)
    (void)memscale::vision::estimate(*o.vision.model, o.run);
  } else {
    (void)memscale::estimate(o.model, o.run);
  }
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
  for (const auto& record : doc) {
    if (!record.is_object()) continue;
    const nlohmann::json answer = memscale::json_io::estimate_record(record);
    if (const auto error = answer.find("error"); error != answer.end() && error->is_string()) {
      const std::string& text = error->get_ref<const std::string&>();
      if (text.size() > max_message || memscale::detail::printable(text) != text) std::abort();
    }
  }
}

// Options that read a file: left to tests/malformed/run_corpus.sh, which makes the hostile
// files (a FIFO, /dev/zero, a file over the size limit), so the fuzzer never opens paths.
bool reads_a_file(std::string_view arg) {
  for (std::string_view option : {"--run", "--config", "--cases"})
    if (arg.substr(0, option.size()) == option) return true;
  return false;
}

// The input as a command line, one argument per line, when it starts like one ("--"):
// building the parser costs milliseconds under the sanitizers, so JSON inputs skip it.
void read_as_arguments(std::string_view text) {
  if (text.substr(0, 2) != "--") return;
  std::vector<std::string_view> args;
  while (!text.empty()) {
    const auto end = text.find('\n');
    args.push_back(text.substr(0, end));
    if (reads_a_file(args.back())) return;
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  try {
    (void)memscale_plan::parse_args(args);
  } catch (const memscale::error& e) {
    check_message(e);
  } catch (const memscale_plan::usage_error& e) {
    check_message(e);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  read_as_arguments(text);
  try {
    read_as_safetensors(text);
  } catch (const memscale::error& e) {
    check_message(e);
  }
  nlohmann::json doc;
  try {
    doc = memscale::json_io::parse_document(text, "fuzz");
  } catch (const memscale::error& e) {
    check_message(e);
    return 0;  // malformed or too deep: refused with a message, as intended
  }
  // Each reader either answers or throws one of the errors invalid input may raise.
  try {
    read_as_run(doc);
  } catch (const memscale::error& e) {
    check_message(e);
  } catch (const memscale_plan::usage_error& e) {
    check_message(e);
  }
  try {
    read_as_cases(doc);
  } catch (const memscale::error& e) {
    check_message(e);
  }
  try {
    read_as_config(doc);
  } catch (const memscale::error& e) {
    check_message(e);
  }
  try {
    read_as_quantized_or_generic(doc);
  } catch (const memscale::error& e) {
    check_message(e);
  }
  try {
    read_as_index(doc);
  } catch (const memscale::error& e) {
    check_message(e);
  }
  return 0;
}
