// memscale/error.hpp: the one error mechanism for invalid input.
//
// detail::fail is deliberately not constexpr (the fmt report_error idiom): reaching it
// during constant evaluation makes the expression non-constant, so the compiler names
// the failing line; at run time it throws memscale::error with a stable id.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "memscale/detail/printable.hpp"

namespace memscale {

enum class error_code : std::uint8_t {
  overflow,            // a byte or element count does not fit in 64 bits
  underflow,           // a byte subtraction would go below zero
  invalid_model,       // a model field is out of range or inconsistent
  invalid_run,         // a training-run field is out of range or inconsistent
  invalid_gpu,         // a GPU description is out of range
  invalid_plan_option, // a planner option is out of range
  unsupported,         // a valid description this version cannot model yet
  invalid_json,        // a JSON document is malformed or nested too deeply (JSON adapter)
  input_file,          // a file named as input is not a regular file, too large, or unreadable (JSON adapter)
};

constexpr std::string_view to_string(error_code code) noexcept {
  switch (code) {
    case error_code::overflow: return "overflow";
    case error_code::underflow: return "underflow";
    case error_code::invalid_model: return "invalid_model";
    case error_code::invalid_run: return "invalid_run";
    case error_code::invalid_gpu: return "invalid_gpu";
    case error_code::invalid_plan_option: return "invalid_plan_option";
    case error_code::unsupported: return "unsupported";
    case error_code::invalid_json: return "invalid_json";
    case error_code::input_file: return "input_file";
  }
  return "unknown";
}

// Thrown at run time for invalid input; what() reads
// "[memscale.invalid_model] model.layers must be > 0 (got 0)". The message is stored with
// control characters and bytes that are not UTF-8 escaped (detail::printable): it often
// echoes user input, and what() is safe to print on a terminal whoever built the message.
class error : public std::runtime_error {
 public:
  error(error_code code, std::string_view message)
      : std::runtime_error("[memscale." + std::string(to_string(code)) + "] " + detail::printable(message)),
        code_(code) {}
  [[nodiscard]] error_code code() const noexcept { return code_; }

 private:
  error_code code_;
};

namespace detail {

// Not constexpr on purpose: see the header comment.
[[noreturn]] inline void fail(error_code code, std::string_view field, std::string_view requirement) {
  throw error(code, std::string(field) + " " + std::string(requirement));
}

// Same, with the offending value in the message.
[[noreturn]] inline void fail(error_code code, std::string_view field, std::string_view requirement,
                              std::uint64_t got) {
  throw error(code, std::string(field) + " " + std::string(requirement) + " (got " + std::to_string(got) + ")");
}

// Same, with the offending value by its name (an enumerator's, as to_string spells it).
[[noreturn]] inline void fail(error_code code, std::string_view field, std::string_view requirement,
                              std::string_view got) {
  throw error(code, std::string(field) + " " + std::string(requirement) + " (got " + std::string(got) + ")");
}

template <class Enum>
  requires std::is_enum_v<Enum>
[[noreturn]] void fail(error_code code, std::string_view field, std::string_view requirement, Enum got) {
  fail(code, field, requirement, std::string_view(to_string(got)));
}

// Checks a condition; on failure reports field, requirement and value.
constexpr void require(bool ok, error_code code, std::string_view field, std::string_view requirement,
                       std::uint64_t got) {
  if (!ok) fail(code, field, requirement, got);
}

// Same for a value that is an enumerator: the message names it (to_string, found beside the
// enumeration), never its number.
template <class Enum>
  requires std::is_enum_v<Enum>
constexpr void require(bool ok, error_code code, std::string_view field, std::string_view requirement, Enum got) {
  if (!ok) fail(code, field, requirement, got);
}

}  // namespace detail
}  // namespace memscale
