// Test helpers: safetensors files and model directories written by the tests themselves
// (a header with consecutive data_offsets, the data left as a sparse hole), in a temporary
// folder removed afterwards.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>
#include <vector>

#include <unistd.h>

#include "memscale/weights_inventory.hpp"

namespace memscale_test {

struct fake_tensor {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
};

// A folder under the system's temporary directory, removed with everything in it.
class temp_folder {
 public:
  explicit temp_folder(const std::string& tag) {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("memscale-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~temp_folder() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_folder(const temp_folder&) = delete;
  temp_folder& operator=(const temp_folder&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline std::uint64_t bytes_of(const fake_tensor& t) {
  std::uint64_t bits = 0;
  for (const auto& d : memscale::stored_dtypes)
    if (d.name == t.dtype) bits = d.bits;
  std::uint64_t n = 1;
  for (auto d : t.shape) n *= d;
  return n * bits / 8;
}

// The header JSON of `tensors`, laid out one after the other.
inline std::string header_of(const std::vector<fake_tensor>& tensors, std::uint64_t* data_bytes = nullptr) {
  nlohmann::json h = nlohmann::json::object();
  std::uint64_t at = 0;
  for (const auto& t : tensors) {
    const std::uint64_t size = bytes_of(t);
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {at, at + size}}};
    at += size;
  }
  h["__metadata__"] = {{"format", "pt"}};
  if (data_bytes != nullptr) *data_bytes = at;
  return h.dump();
}

inline std::string length_prefix(std::uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// Writes `header` (its length first) and extends the file by `data_bytes` (a sparse hole).
inline void write_raw(const std::filesystem::path& file, const std::string& header, std::uint64_t data_bytes) {
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    const std::string prefix = length_prefix(header.size());
    out.write(prefix.data(), 8);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
  }
  std::filesystem::resize_file(file, 8 + header.size() + data_bytes);
}

inline void write_safetensors(const std::filesystem::path& file, const std::vector<fake_tensor>& tensors) {
  std::uint64_t data = 0;
  const std::string header = header_of(tensors, &data);
  write_raw(file, header, data);
}

inline void write_text(const std::filesystem::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << text;
}

}  // namespace memscale_test
