// memscale/json/read_file.hpp: the one way a file a user names is read (a config.json, a
// --run document, a --cases array, a Hub cache ref): whole, from a regular file, at most
// 64 MiB, and every failure is an error naming the file and the reason.
// IWYU pragma: private, include <memscale/json.hpp>
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "memscale/error.hpp"

namespace memscale::json_io {

// The largest input file read. The largest document memscale is given in practice (a --cases
// file of ground-truth records, tests/data/ground-truth/cpu_traced_dev.json) is 120 KB;
// the cap keeps an endless or huge input from filling the RAM.
inline constexpr std::uint64_t max_input_file_bytes = 64ULL << 20;

namespace detail {

inline const char* file_kind(std::filesystem::file_type type) {
  switch (type) {
    case std::filesystem::file_type::directory: return "a directory";
    case std::filesystem::file_type::fifo: return "a FIFO";
    case std::filesystem::file_type::character: return "a character device";
    case std::filesystem::file_type::block: return "a block device";
    case std::filesystem::file_type::socket: return "a socket";
    default: return "not a regular file";
  }
}

}  // namespace detail

// The whole text of the regular file at `path`. `source` names it in errors, e.g.
// "--run \"run.json\"" or "config \"/models/x/config.json\"" (the caller quotes the path).
// Throws memscale::error(input_file) when the path cannot be opened, is not a regular file
// (checked before opening, so a FIFO or a device such as /dev/zero is refused, not read
// forever), is larger than max_input_file_bytes, or a read fails (/proc/self/mem: EIO).
inline std::string read_input_file(const std::filesystem::path& path, const std::string& source) {
  const auto fail = [&](const std::string& why) { throw error(error_code::input_file, source + " " + why); };
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (!ec && status.type() == std::filesystem::file_type::not_found)  // status() reports it as a type, not an error
    ec = std::make_error_code(std::errc::no_such_file_or_directory);
  if (ec) fail("cannot be read: " + ec.message());
  if (status.type() != std::filesystem::file_type::regular)
    fail(std::string("is ") + detail::file_kind(status.type()) + "; only regular files are read");
  const auto too_large = [&] {
    fail("is larger than 64 MiB (" + std::to_string(max_input_file_bytes) + " bytes), the limit for an input file");
  };
  // The size a regular file states is checked first (no 64 MiB read to refuse it); the read
  // below is capped too, for files whose stated size is not what they hold (/proc).
  if (const auto size = std::filesystem::file_size(path, ec); !ec && size > max_input_file_bytes) too_large();
  errno = 0;
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.string().c_str(), "rb"), &std::fclose);
  if (!file) fail(std::string("cannot be read: ") + std::strerror(errno != 0 ? errno : EIO));
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const std::size_t n = std::fread(buffer, 1, sizeof buffer, file.get());
    text.append(buffer, n);
    if (text.size() > max_input_file_bytes) too_large();
    if (n < sizeof buffer) break;
  }
  if (std::ferror(file.get()) != 0) fail(std::string("cannot be read: ") + std::strerror(errno != 0 ? errno : EIO));
  return text;
}

}  // namespace memscale::json_io
