// memscale-plan --cases (see cases.hpp).
#include "cases.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "args.hpp"
#include "memscale/json.hpp"

namespace memscale_plan {
namespace {

std::string in_quotes(const std::string& text) { return "\"" + text + "\""; }

[[noreturn]] void cannot_read(const std::string& path, int err) {
  throw usage_error("--cases cannot read " + in_quotes(path) + ": " + std::strerror(err));
}

std::string read_file(const std::string& path) {
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) cannot_read(path, errno);
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const std::size_t n = std::fread(buffer, 1, sizeof buffer, file.get());
    text.append(buffer, n);
    if (n < sizeof buffer) break;
  }
  if (std::ferror(file.get()) != 0) cannot_read(path, errno != 0 ? errno : EIO);  // e.g. a directory: EISDIR
  return text;
}

// estimate_record answers memscale and JSON errors itself; anything else a record can
// provoke (an id that is not a string, a torch version that is not a number) becomes
// that record's answer too.
nlohmann::json answer(const nlohmann::json& record) {
  try {
    return memscale::json_io::is_multi_gpu_record(record) ? memscale::json_io::estimate_parallel_record(record)
                                                          : memscale::json_io::estimate_record(record);
  } catch (const std::exception& e) {
    const auto id = record.find("id");
    nlohmann::json out;
    out["id"] = id == record.end() ? nlohmann::json("") : (id->is_string() ? *id : nlohmann::json(id->dump()));
    out["error"] = std::string("[memscale.invalid_record] unreadable record: ") + e.what();
    return out;
  }
}

}  // namespace

nlohmann::json run_cases(const std::string& path) {
  errno = 0;
  const std::string text = read_file(path);
  const nlohmann::json records = memscale::json_io::parse_document(text, "--cases " + in_quotes(path));
  if (!records.is_array())
    throw usage_error("--cases " + in_quotes(path) + " must hold a JSON array of records (got " +
                      std::string(records.type_name()) + ")");
  nlohmann::json answers = nlohmann::json::array();
  for (std::size_t i = 0; i < records.size(); ++i) {
    const nlohmann::json& record = records[i];
    if (!record.is_object())
      throw usage_error("--cases " + in_quotes(path) + ": element " + std::to_string(i) +
                        " must be a JSON object (got " + std::string(record.type_name()) + ")");
    answers.push_back(answer(record));
  }
  return answers;
}

}  // namespace memscale_plan
