// Hostile input (issue 9 item 3): bounded misspelt-key checks, deep and huge JSON,
// NaN/inf headroom, overflows that name their quantity, a GPU of ~2^64 bytes.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "error_capture.hpp"
#include "memscale/detail/edit_distance.hpp"
#include "memscale/estimate.hpp"
#include "memscale/gpus.hpp"
#include "memscale/json.hpp"
#include "memscale/planner.hpp"
#include "memscale/presets.hpp"

namespace {

// The full-table optimal-string-alignment distance edit_distance must agree with.
std::size_t reference_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0U : 1U)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

TEST_CASE("edit_distance: equals the full-table distance when within the limit, limit + 1 beyond", "[hostile][property]") {
  // Every pair of strings of length <= 4 over {a, b, c}, for limits 0 to 4.
  std::vector<std::string> words{""};
  for (std::size_t len = 1; len <= 4; ++len) {
    const std::size_t before = words.size();
    for (std::size_t w = 0; w < before; ++w)
      if (words[w].size() == len - 1)
        for (char c : {'a', 'b', 'c'}) words.push_back(words[w] + c);
  }
  std::size_t compared = 0;
  for (const auto& a : words)
    for (const auto& b : words)
      for (std::size_t limit = 0; limit <= 4; ++limit) {
        const std::size_t expected = std::min(reference_distance(a, b), limit + 1);
        if (memscale::detail::edit_distance(a, b, limit) != expected) FAIL("\"" << a << "\" vs \"" << b << "\", limit " << limit);
        ++compared;
      }
  CHECK(compared == words.size() * words.size() * 5);
  CHECK(memscale::detail::edit_distance("layers", "layrs", 2) == 1);
  CHECK(memscale::detail::edit_distance("batch", "abtch", 2) == 1);
}

TEST_CASE("edit_distance: a 10 MB string against a key answers at once", "[hostile]") {
  const std::string huge(10'000'000, 'k');
  CHECK(memscale::detail::edit_distance(huge, "layers", 2) == 3);
  CHECK(memscale::detail::edit_distance(huge, huge.substr(1), 2) == 1);  // band only: O(n * limit)
}

TEST_CASE("parse_document: nesting deeper than max_json_depth is an error naming the source", "[hostile]") {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  const std::string message = memscale_test::error_message([&] { (void)memscale::json_io::parse_document(deep, "deep.json"); });
  CHECK(message.find("deep.json nests arrays/objects deeper than 64 levels") != std::string::npos);
  // Brackets inside strings do not count; 64 levels are fine.
  const std::string ok = std::string(64, '[') + "\"[[[[\"" + std::string(64, ']');
  CHECK(memscale::json_io::json_depth(ok) == 64);
  CHECK_NOTHROW(memscale::json_io::parse_document(ok, "ok.json"));
  CHECK(memscale_test::error_code_of([] { (void)memscale::json_io::parse_document("[1,", "cut.json"); }) ==
        memscale::error_code::invalid_json);
}

TEST_CASE("model_from_record: a 10 MB key or string value gives a short error, not a 10 MB one", "[hostile]") {
  nlohmann::json m = {{"family", "gpt2"}, {"layers", 2}, {"hidden", 64}, {"heads", 2}, {"ffn", 256}, {"vocab", 100}, {"max_pos", 64}};
  m[std::string(10'000'000, 'k')] = 1;  // not compared: longer than any known key
  CHECK_NOTHROW(memscale::json_io::model_from_record(m));
  m["norm"] = std::string(10'000'000, 'x');
  const std::string message = memscale_test::error_message([&] { (void)memscale::json_io::model_from_record(m); });
  CHECK(message.find("model.norm must be layernorm or rmsnorm") != std::string::npos);
  CHECK(message.size() < 300);
}

TEST_CASE("a JSON value of the wrong type names its field", "[hostile]") {
  const nlohmann::json m = {{"family", "gpt2"}, {"layers", "twelve"}, {"hidden", 64}, {"heads", 2}};
  CHECK(memscale_test::error_message([&] { (void)memscale::json_io::model_from_record(m); })
            .find("model.layers must be a non-negative integer (got \"twelve\")") != std::string::npos);
}

TEST_CASE("planner: NaN, infinite or negative headroom is an error, never a cast", "[hostile]") {
  const auto gpu = *memscale::find_gpu("rtx3090");
  for (double h : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(), -1.0, 1.0}) {
    for (bool override_range : {false, true}) {
      const memscale::plan_options o{.headroom = h, .headroom_override = override_range};
      const std::string message = memscale_test::error_message([&] { (void)memscale::budget_of(gpu, o); });
      CHECK(message.find("plan.headroom must") != std::string::npos);
    }
  }
}

TEST_CASE("budget_of: a GPU of ~2^64 bytes is an error naming the budget, or a budget <= its memory", "[hostile]") {
  const auto huge = memscale::custom_gpu(memscale::bytes{std::numeric_limits<std::uint64_t>::max()});
  const memscale::plan_options no_headroom{.headroom = 0.0, .headroom_override = true};
  CHECK(memscale_test::error_message([&] { (void)memscale::budget_of(huge, no_headroom); }).find("plan.budget") !=
        std::string::npos);
  CHECK(memscale::budget_of(huge) <= huge.memory);
}

TEST_CASE("an overflow at run time names the quantity that overflowed", "[hostile]") {
  std::uint64_t batch = 1ULL << 40;  // run-time values
  std::uint64_t seq = 1ULL << 30;
  const std::string tokens = memscale_test::error_message([&] {
    (void)memscale::estimate(memscale::presets::llama_2_7b, memscale::training_spec{.micro_batch = batch, .seq_len = seq});
  });
  CHECK(tokens.find("[memscale.overflow] tokens (micro_batch x seq_len) overflows: 1099511627776 x 1073741824") !=
        std::string::npos);
  const std::string scores = memscale_test::error_message([&] {
    (void)memscale::estimate(memscale::presets::llama_2_7b,
                             memscale::training_spec{.micro_batch = 1, .seq_len = seq * 2,
                                                     .attention = memscale::attention_impl::eager});
  });
  CHECK(scores.find("attention scores (micro_batch x heads x seq_len^2) overflows") != std::string::npos);
}
