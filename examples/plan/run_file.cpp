// memscale-plan --run FILE (see run_file.hpp and docs/run-json.md). The reader and writer
// are the library's (memscale/json/run_document.hpp), shared with the web calculator.
#include "run_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "memscale/json.hpp"
#include "option_groups.hpp"

namespace memscale_plan {

using nlohmann::json;

memscale::json_io::run_input run_input_of(const options& o) {
  return {.model = o.model,
          .run = o.run,
          .model_description = o.model_description,
          .gpu = o.gpu,
          .custom_gpu = o.custom_gpu,
          .headroom = o.headroom,
          .lora_alpha = o.lora_alpha};
}

std::string read_text_file(const std::string& option, const std::string& path) {
  const auto cannot_read = [&](int err) {
    return usage_error(option + " cannot read " + in_quotes(path) + ": " + std::strerror(err));
  };
  errno = 0;
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) throw cannot_read(errno);
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const std::size_t n = std::fread(buffer, 1, sizeof buffer, file.get());
    text.append(buffer, n);
    if (n < sizeof buffer) break;
  }
  if (std::ferror(file.get()) != 0) throw cannot_read(errno != 0 ? errno : EIO);  // e.g. a directory: EISDIR
  return text;
}

void read_run_document(const json& doc, const std::string& source, options& out) {
  memscale::json_io::run_input in = run_input_of(out);
  try {
    memscale::json_io::read_run_document(doc, in);  // `in` changes only when the whole document is valid
  } catch (const memscale::error& e) {
    throw usage_error(source + ": " + e.what());
  } catch (const usage_error& e) {
    throw usage_error(source + ": " + e.what());
  } catch (const json::exception& e) {
    throw usage_error(source + ": " + e.what());
  }
  out.model = in.model;
  out.run = in.run;
  out.model_description = std::move(in.model_description);
  out.gpu = std::move(in.gpu);
  out.custom_gpu = in.custom_gpu;
  out.headroom = in.headroom;
  out.lora_alpha = in.lora_alpha;
  out.run_source = source;
}

void read_run_file(const std::string& path, options& o) {
  const std::string source = "--run " + in_quotes(path);
  const std::string text = read_text_file("--run", path);
  json doc;
  try {
    doc = memscale::json_io::parse_document(text, source);
  } catch (const memscale::error& e) {
    throw usage_error(e.what());
  }
  read_run_document(doc, source, o);
}

json run_document(const options& o) { return memscale::json_io::run_document_json(run_input_of(o)); }

}  // namespace memscale_plan
