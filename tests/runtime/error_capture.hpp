// Helpers for run-time tests that inspect memscale::error: the message or code a call throws.
#pragma once

#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <string>
#include <string_view>

#include "memscale/error.hpp"

namespace memscale_test {

// The what() of the memscale::error `f` throws, or "<no error>".
template <class F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const memscale::error& e) {
    return e.what();
  }
  return "<no error>";
}

template <class F>
memscale::error_code error_code_of(F&& f) {
  try {
    f();
  } catch (const memscale::error& e) {
    return e.code();
  }
  FAIL("no memscale::error was thrown");
  return memscale::error_code::unsupported;
}

inline bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace memscale_test
