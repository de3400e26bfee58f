// memscale/allocator/alloc_conf.hpp: PYTORCH_CUDA_ALLOC_CONF (PYTORCH_ALLOC_CONF from torch
// 2.9) read into allocator::options, in constant evaluation too.
//
// The grammar and checks are those of c10/core/AllocatorConfig.cpp @ 0ac71663 (parseArgs and
// the ConfigTokenizer it uses): comma-separated `key:value`; roundup_power2_divisions takes a
// number or a list `[256:1,512:2,>:4]` of interval boundaries in MiB. Options that change no
// device memory are accepted and listed in `not_simulated`; an unknown key is an error (PyTorch
// skips it with a warning: here it would be a silently ignored input).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "memscale/allocator/options.hpp"
#include "memscale/error.hpp"

namespace memscale::allocator {

// Accepted options the simulation does not model, one bit each.
enum class unmodelled_option : std::uint8_t {
  // Acts only under set_per_process_memory_fraction (CUDACachingAllocator.cpp malloc: set_fraction).
  garbage_collection_threshold = 1,
  // Host (pinned) memory and locking options: no device memory.
  host_or_locking = 2,
};

struct alloc_conf {
  options settings{};
  std::uint8_t not_simulated = 0;  // unmodelled_option bits

  [[nodiscard]] constexpr bool has(unmodelled_option o) const {
    return (not_simulated & static_cast<std::uint8_t>(o)) != 0;
  }
};

namespace detail {

// Not constexpr (error.hpp): reaching it in constant evaluation is the compile error.
[[noreturn]] inline void bad_alloc_conf(std::string_view token, std::string_view expected) {
  throw error(error_code::invalid_run,
              "alloc_conf: \"" + std::string(token) + "\" " + std::string(expected));
}

class conf_tokens {
 public:
  constexpr explicit conf_tokens(std::string_view text) : text_(text) { advance(); }

  [[nodiscard]] constexpr bool done() const { return current_.empty() && pos_ >= text_.size(); }
  [[nodiscard]] constexpr std::string_view peek() const { return current_; }
  constexpr std::string_view next() {
    const std::string_view t = current_;
    advance();
    return t;
  }
  constexpr void expect(std::string_view punctuation) {
    const std::string_view t = next();
    if (t != punctuation) bad_alloc_conf(t, punctuation == ":" ? "must be followed by ':'" : "expected ',' between options");
  }

 private:
  static constexpr bool is_punctuation(char c) { return c == ',' || c == ':' || c == '[' || c == ']'; }
  static constexpr bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
  constexpr void advance() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
    if (pos_ >= text_.size()) {
      current_ = {};
      return;
    }
    const std::size_t start = pos_;
    if (is_punctuation(text_[pos_])) {
      ++pos_;
    } else {
      while (pos_ < text_.size() && !is_punctuation(text_[pos_]) && !is_space(text_[pos_])) ++pos_;
    }
    current_ = text_.substr(start, pos_ - start);
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  std::string_view current_{};
};

constexpr std::uint64_t to_count(std::string_view t) {
  if (t.empty()) bad_alloc_conf(t, "expected a number");
  std::uint64_t v = 0;
  for (const char c : t) {
    if (c < '0' || c > '9') bad_alloc_conf(t, "expected a non-negative integer");
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (v > (memscale::detail::u64_max - digit) / 10) bad_alloc_conf(t, "is too large");
    v = v * 10 + digit;
  }
  return v;
}

// A size in MiB that must be at least kLargeBuffer (AllocatorConfig.cpp parseMaxSplitSize,
// parseMaxNonSplitRoundingSize: "too small, must be >= 20"); capped at SIZE_MAX / 1 MiB.
constexpr bytes to_mib_at_least_large_buffer(std::string_view t) {
  const std::uint64_t mb = to_count(t);
  if (mb < large_buffer >> 20) bad_alloc_conf(t, "is too small: must be >= 20 (MiB)");
  constexpr std::uint64_t cap = memscale::detail::u64_max >> 20;
  return bytes{(mb < cap ? mb : cap) << 20};
}

constexpr bool to_bool(std::string_view t) {
  if (t == "True") return true;
  if (t == "False") return false;
  bad_alloc_conf(t, "must be True or False");
}

constexpr std::uint16_t to_divisions(std::string_view t, bool zero_allowed) {
  const std::uint64_t v = to_count(t);
  if (!(is_power_of_two(v) || (zero_allowed && v == 0)) || v > 0x8000)
    bad_alloc_conf(t, zero_allowed ? "divisions must be a power of two or 0" : "divisions must be a power of two");
  return static_cast<std::uint16_t>(v);
}

// roundup_power2_divisions: a number for every interval, or [boundary:divisions, ..., >:divisions]
// (AllocatorConfig.cpp parseRoundUpPower2Divisions).
constexpr void read_divisions(conf_tokens& tokens, options& o) {
  auto& d = o.roundup_power2_divisions;
  if (tokens.peek() != "[") {
    const std::uint16_t v = to_divisions(tokens.next(), false);
    for (auto& x : d) x = v;
    return;
  }
  tokens.next();  // [
  bool first = true;
  std::size_t last_index = 0;
  while (!tokens.done() && tokens.peek() != "]") {
    const std::string_view boundary = tokens.next();
    tokens.expect(":");
    const std::uint16_t v = to_divisions(tokens.next(), true);
    if (boundary == ">") {
      for (std::size_t i = last_index + 1; i < d.size(); ++i) d[i] = v;
    } else {
      const std::uint64_t mb = to_count(boundary);
      if (!is_power_of_two(mb)) bad_alloc_conf(boundary, "interval boundaries must be powers of two (MiB)");
      std::size_t index = floor_log2(mb);
      if (index >= d.size()) index = d.size() - 1;
      if (first) {
        for (std::size_t i = 0; i < index; ++i) d[i] = v;
        first = false;
      }
      d[index] = v;
      last_index = index;
    }
    if (tokens.peek() != "]") tokens.expect(",");
  }
  if (tokens.next() != "]") bad_alloc_conf("roundup_power2_divisions", "list is missing its closing ']'");
}

}  // namespace detail

// Reads a PYTORCH_CUDA_ALLOC_CONF value, e.g. "expandable_segments:True,max_split_size_mb:128".
constexpr alloc_conf parse_alloc_conf(std::string_view text) {
  alloc_conf c{};
  detail::conf_tokens tokens(text);
  while (!tokens.done()) {
    const std::string_view key = tokens.next();
    if (key == ",") continue;  // an empty option between two commas
    tokens.expect(":");
    if (key == "max_split_size_mb") {
      c.settings.max_split_size = detail::to_mib_at_least_large_buffer(tokens.next());
    } else if (key == "max_non_split_rounding_mb") {
      c.settings.max_non_split_rounding = detail::to_mib_at_least_large_buffer(tokens.next());
    } else if (key == "roundup_power2_divisions") {
      detail::read_divisions(tokens, c.settings);
    } else if (key == "expandable_segments") {
      c.settings.expandable_segments = detail::to_bool(tokens.next());
    } else if (key == "garbage_collection_threshold") {
      tokens.next();
      c.not_simulated |= static_cast<std::uint8_t>(unmodelled_option::garbage_collection_threshold);
    } else if (key == "pinned_use_cuda_host_register" || key == "pinned_num_register_threads" ||
               key == "pinned_use_background_threads" || key == "release_lock_on_cudamalloc" ||
               key == "pinned_reserve_segment_size_mb") {
      tokens.next();
      c.not_simulated |= static_cast<std::uint8_t>(unmodelled_option::host_or_locking);
    } else if (key == "backend") {
      const std::string_view v = tokens.next();
      if (v != "native") detail::bad_alloc_conf(v, "backend: only the native caching allocator is simulated");
    } else {
      detail::bad_alloc_conf(key, "is not a PYTORCH_CUDA_ALLOC_CONF option memscale knows");
    }
    if (!tokens.done()) tokens.expect(",");
  }
  return c;
}

}  // namespace memscale::allocator
