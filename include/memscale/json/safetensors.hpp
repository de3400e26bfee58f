// memscale/json/safetensors.hpp: the tensor table of a checkpoint, read from safetensors
// headers only (never the weights), as a weights_inventory.
//
//   read_safetensors_header("model.safetensors")   one file's header, validated
//   parse_safetensors_header(bytes, size, name)    the same from bytes in memory
// (json/checkpoint.hpp reads an index or a model directory and sums the tensors up.)
//
// Format (safetensors README.md and src/tensor.rs @ 24b0b285): 8 bytes N, a little-endian
// u64; N bytes of UTF-8 JSON beginning with '{' (trailing spaces allowed) mapping each tensor
// name to {"dtype", "shape", "data_offsets": [begin, end]} and an optional "__metadata__"
// object of strings; then the byte buffer, which the tensors cover entirely, without holes
// or overlaps. Everything the header says is checked as the safetensors loader checks it,
// and every error names the file, the tensor and what was expected.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_set>
#include <utility>
#include <vector>

#include "memscale/error.hpp"
#include "memscale/json/fields.hpp"
#include "memscale/weights_inventory.hpp"

namespace memscale::json_io {

// The largest header read: safetensors' own limit (src/tensor.rs MAX_HEADER_SIZE @ 24b0b285),
// so no file the library loads is refused.
inline constexpr std::uint64_t max_safetensors_header = 100'000'000;
// The largest index read. The largest Hub indexes (DeepSeek-V3, 1,000+ shards of ~90k
// tensors) are about 10 MB; the limit is the header's.
inline constexpr std::uint64_t max_safetensors_index = 100'000'000;

struct safetensors_tensor {
  std::string name;
  stored_dtype type = stored_dtype::f32;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0;  // data_offsets, relative to the byte buffer
  std::uint64_t end = 0;
};

struct safetensors_header {
  std::string file;             // as given, for messages
  std::uint64_t header_bytes = 0;  // N
  std::vector<safetensors_tensor> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__"
};

namespace detail {

[[noreturn]] inline void bad_safetensors(const std::string& file, const std::string& what) {
  throw error(error_code::invalid_model, "safetensors file " + memscale::detail::quoted_path(file) + ": " + what);
}

[[noreturn]] inline void bad_tensor(const std::string& file, const std::string& tensor, const std::string& what) {
  bad_safetensors(file, "tensor " + memscale::detail::quoted(tensor) + ": " + what);
}

inline std::string dtype_names() {
  std::string s;
  for (const auto& d : stored_dtypes) s += (s.empty() ? "" : ", ") + std::string(d.name);
  return s;
}

inline std::optional<stored_dtype> stored_dtype_named(std::string_view name) {
  for (const auto& d : stored_dtypes)
    if (d.name == name) return d.type;
  return std::nullopt;
}

// A non-negative integer below 2^64 (nlohmann reads larger ones as floating point).
inline std::optional<std::uint64_t> whole_number(const json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return static_cast<std::uint64_t>(v.get<std::int64_t>());
  return std::nullopt;
}

// The header's JSON, with repeated tensor names refused: nlohmann would keep one silently,
// and safetensors disallows them (README "Duplicate keys are disallowed").
inline json parse_safetensors_json(std::string_view text, const std::string& file) {
  // A header nests three levels: {name: {"shape": [..]}}.
  constexpr std::size_t header_depth = 3;
  if (json_depth(text, header_depth) > header_depth)
    bad_safetensors(file, "header nests deeper than a tensor table does (3 levels)");
  std::unordered_set<std::string> names;
  const json::parser_callback_t no_repeats = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && !names.insert(parsed.get<std::string>()).second)
      bad_safetensors(file, "header names " + memscale::detail::quoted(parsed.get<std::string>()) + " twice (duplicate keys are not allowed)");
    return true;
  };
  try {
    return json::parse(text, no_repeats);
  } catch (const json::exception& e) {
    bad_safetensors(file, std::string("header is not valid JSON: ") + e.what());
  }
}

inline safetensors_tensor read_tensor_entry(const std::string& file, const std::string& name, const json& entry,
                                            std::uint64_t data_bytes) {
  if (!entry.is_object())
    bad_tensor(file, name, "must be an object {\"dtype\", \"shape\", \"data_offsets\"} (got " + shown(entry) + ")");
  for (const auto& item : entry.items())
    if (item.key() != "dtype" && item.key() != "shape" && item.key() != "data_offsets")
      bad_tensor(file, name, "has the field " + memscale::detail::quoted(item.key()) + "; a tensor has only dtype, shape and data_offsets");
  safetensors_tensor t{};
  t.name = name;
  if (!entry.contains("dtype") || !entry.at("dtype").is_string())
    bad_tensor(file, name, "dtype must be a string (got " + shown(entry.value("dtype", json())) + ")");
  const auto type = stored_dtype_named(entry.at("dtype").get<std::string>());
  if (!type) bad_tensor(file, name, "dtype " + shown(entry.at("dtype")) + " is not one of " + dtype_names());
  t.type = *type;
  if (!entry.contains("shape") || !entry.at("shape").is_array())
    bad_tensor(file, name, "shape must be an array of non-negative integers (got " + shown(entry.value("shape", json())) + ")");
  for (const json& d : entry.at("shape")) {
    const auto n = whole_number(d);
    if (!n) bad_tensor(file, name, "shape must hold non-negative integers below 2^64 (got " + shown(entry.at("shape")) + ")");
    t.shape.push_back(*n);
  }
  const json offsets = entry.value("data_offsets", json());
  bool offsets_ok = offsets.is_array() && offsets.size() == 2;
  if (offsets_ok) {
    const auto begin = whole_number(offsets.at(0));
    const auto end = whole_number(offsets.at(1));
    offsets_ok = begin.has_value() && end.has_value() && *begin <= *end;
    t.begin = begin.value_or(0);
    t.end = end.value_or(0);
  }
  if (!offsets_ok)
    bad_tensor(file, name, "data_offsets must be [begin, end] with 0 <= begin <= end (got " + shown(offsets) + ")");
  tensor_size size{};
  try {
    size = size_of_tensor(t.type, t.shape);
  } catch (const error& e) {
    const std::string what = e.what();  // "[memscale.<id>] <message>": the id is kept by the code
    const auto id_end = what.find("] ");
    throw error(e.code(), "safetensors file " + memscale::detail::quoted_path(file) + ": tensor " + memscale::detail::quoted(name) + ": shape " +
                              shown(entry.at("shape")) + " of " + std::string(to_string(t.type)) + ": " +
                              (id_end == std::string::npos ? what : what.substr(id_end + 2)));
  }
  if (t.end - t.begin != size.stored.value)
    bad_tensor(file, name, "data_offsets " + shown(offsets) + " hold " + std::to_string(t.end - t.begin) + " bytes; " +
                               std::string(to_string(t.type)) + " x shape " + shown(entry.at("shape")) + " needs " +
                               std::to_string(size.stored.value));
  if (t.end > data_bytes)
    bad_tensor(file, name, "data_offsets " + shown(offsets) + " run beyond the file (" + std::to_string(data_bytes) +
                               " bytes of data after the header)");
  return t;
}

// The tensors must cover the byte buffer exactly, in offset order (src/tensor.rs
// Metadata::validate and read_metadata's MetadataIncompleteBuffer @ 24b0b285).
inline void check_coverage(const std::string& file, std::vector<safetensors_tensor>& tensors, std::uint64_t data_bytes) {
  std::sort(tensors.begin(), tensors.end(), [](const safetensors_tensor& a, const safetensors_tensor& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t covered = 0;
  for (const auto& t : tensors) {
    if (t.begin != covered)
      bad_tensor(file, t.name, "data_offsets begin at " + std::to_string(t.begin) + " where the previous tensor ends at " +
                                   std::to_string(covered) + " (the tensors must cover the data without holes or overlaps)");
    covered = t.end;
  }
  if (covered != data_bytes)
    bad_safetensors(file, "the tensors cover " + std::to_string(covered) + " bytes but the file holds " +
                              std::to_string(data_bytes) + " bytes of data after the header");
}

}  // namespace detail

// A safetensors file's header from its first bytes: `prefix` holds the file's beginning (at
// least 8 + N bytes of it), `file_bytes` is the whole file's size, `file` names it in
// messages. The fuzz target calls this on whole inputs.
inline safetensors_header parse_safetensors_header(std::string_view prefix, std::uint64_t file_bytes, const std::string& file) {
  constexpr std::uint64_t length_bytes = 8;
  if (file_bytes < length_bytes || prefix.size() < length_bytes)
    detail::bad_safetensors(file, "is " + std::to_string(file_bytes) + " bytes, shorter than the 8-byte header length");
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < length_bytes; ++i) n |= static_cast<std::uint64_t>(static_cast<unsigned char>(prefix[i])) << (8 * i);
  if (n > max_safetensors_header)
    detail::bad_safetensors(file, "header length " + std::to_string(n) + " exceeds the " + std::to_string(max_safetensors_header) +
                                      "-byte limit (safetensors MAX_HEADER_SIZE)");
  if (n > file_bytes - length_bytes)
    detail::bad_safetensors(file, "header length " + std::to_string(n) + " runs beyond the file (" + std::to_string(file_bytes) + " bytes)");
  if (prefix.size() < length_bytes + n)
    detail::bad_safetensors(file, "is truncated: " + std::to_string(prefix.size()) + " bytes read of a " +
                                      std::to_string(length_bytes + n) + "-byte header");
  const std::string_view text = prefix.substr(length_bytes, n);
  if (text.empty() || text.front() != '{') detail::bad_safetensors(file, "header must begin with '{' (a JSON object)");
  const json doc = detail::parse_safetensors_json(text, file);
  if (!doc.is_object()) detail::bad_safetensors(file, "header must be a JSON object (got " + shown(doc) + ")");
  safetensors_header h{};
  h.file = file;
  h.header_bytes = n;
  const std::uint64_t data_bytes = file_bytes - length_bytes - n;
  for (const auto& item : doc.items()) {
    if (item.key() == "__metadata__") {
      if (!item.value().is_object()) detail::bad_safetensors(file, "__metadata__ must be an object of strings (got " + shown(item.value()) + ")");
      for (const auto& m : item.value().items()) {
        if (!m.value().is_string())
          detail::bad_safetensors(file, "__metadata__." + memscale::detail::quoted(m.key()) + " must be a string (got " + shown(m.value()) + ")");
        h.metadata.emplace(m.key(), m.value().get<std::string>());
      }
      continue;
    }
    h.tensors.push_back(detail::read_tensor_entry(file, item.key(), item.value(), data_bytes));
  }
  detail::check_coverage(file, h.tensors, data_bytes);
  return h;
}

namespace detail {

// The file's size when it is a regular file (a symlink to one, as in the Hub cache, counts).
inline std::uint64_t regular_file_size(const std::filesystem::path& path, const std::string& what) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) bad_path(error_code::invalid_model, what, path.string(), "does not exist");
  if (!std::filesystem::is_regular_file(st)) bad_path(error_code::invalid_model, what, path.string(), "is not a regular file");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) bad_path(error_code::invalid_model, what, path.string(), "cannot be read (" + ec.message() + ")");
  return size;
}

// At most `limit` bytes from the start of `path`.
inline std::string read_start(const std::filesystem::path& path, std::uint64_t limit, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad_path(error_code::invalid_model, what, path.string(), "cannot be opened");
  std::string data(static_cast<std::size_t>(limit), '\0');
  in.read(data.data(), static_cast<std::streamsize>(limit));
  data.resize(static_cast<std::size_t>(in.gcount()));
  return data;
}

}  // namespace detail

// One file's header: reads the 8-byte length and then only the header (at most
// max_safetensors_header bytes), never the tensor data.
inline safetensors_header read_safetensors_header(const std::filesystem::path& path) {
  const std::string name = path.string();
  const std::uint64_t size = detail::regular_file_size(path, "safetensors file");
  const std::string length = detail::read_start(path, 8, "safetensors file");
  if (length.size() < 8) return parse_safetensors_header(length, size, name);  // reports the truncation
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(static_cast<unsigned char>(length[i])) << (8 * i);
  if (n > max_safetensors_header || n > size - 8) return parse_safetensors_header(length, size, name);  // reports it
  return parse_safetensors_header(detail::read_start(path, 8 + n, "safetensors file"), size, name);
}

}  // namespace memscale::json_io
