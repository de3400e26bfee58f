// memscale-plan --cases (see cases.hpp).
#include "cases.hpp"

#include <exception>
#include <string>

#include "args.hpp"
#include "memscale/json.hpp"
#include "option_groups.hpp"
#include "run_file.hpp"

namespace memscale_plan {
namespace {

// estimate_record answers memscale and JSON errors itself; anything else a record can
// provoke (an id that is not a string, a torch version that is not a number) becomes
// that record's answer too, as does a record its stack entry cannot be merged into.
nlohmann::json answer(const nlohmann::json& record, const nlohmann::json& stacks) {
  try {
    const nlohmann::json merged = memscale::json_io::with_stack(record, stacks);
    return memscale::json_io::is_multi_gpu_record(merged) ? memscale::json_io::estimate_parallel_record(merged)
                                                          : memscale::json_io::estimate_record(merged);
  } catch (const std::exception& e) {
    const auto id = record.find("id");
    nlohmann::json out;
    out["id"] = id == record.end() ? nlohmann::json("") : (id->is_string() ? *id : nlohmann::json(id->dump()));
    out["error"] = std::string("[memscale.invalid_record] unreadable record: ") + e.what();
    return out;
  }
}

}  // namespace

nlohmann::json run_cases(const std::string& path, const std::string& stack_path) {
  nlohmann::json stacks = nlohmann::json::array();
  if (!stack_path.empty()) {
    stacks = memscale::json_io::parse_document(read_text_file("--cases-stack", stack_path),
                                               "--cases-stack " + path_in_quotes(stack_path));
    if (!stacks.is_array())
      throw usage_error("--cases-stack " + path_in_quotes(stack_path) + " must hold a JSON array of stack entries (got " +
                        std::string(stacks.type_name()) + ")");
  }
  const std::string text = read_text_file("--cases", path);
  const nlohmann::json records = memscale::json_io::parse_document(text, "--cases " + path_in_quotes(path));
  if (!records.is_array())
    throw usage_error("--cases " + path_in_quotes(path) + " must hold a JSON array of records (got " +
                      std::string(records.type_name()) + ")");
  nlohmann::json answers = nlohmann::json::array();
  for (std::size_t i = 0; i < records.size(); ++i) {
    const nlohmann::json& record = records[i];
    if (!record.is_object())
      throw usage_error("--cases " + path_in_quotes(path) + ": element " + std::to_string(i) +
                        " must be a JSON object (got " + std::string(record.type_name()) + ")");
    answers.push_back(answer(record, stacks));
  }
  return answers;
}

}  // namespace memscale_plan
