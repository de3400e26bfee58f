// Hostile input: bounded misspelt-key checks, deep and huge JSON, NaN/inf headroom,
// overflows that name their quantity, a GPU of ~2^64 bytes; echoed text that a terminal
// would act on; files that are not regular or too large; inputs that used to be ignored.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "error_capture.hpp"
#include "memscale/detail/edit_distance.hpp"
#include "memscale/detail/printable.hpp"
#include "memscale/estimate.hpp"
#include "memscale/gpus.hpp"
#include "memscale/json.hpp"
#include "memscale/planner.hpp"
#include "memscale/presets.hpp"
#include "memscale/validate.hpp"

namespace hostile_input_test {
namespace {

using memscale_test::contains;

// True when `text` holds nothing a terminal acts on: no control character, no C1 control,
// no bidirectional override, and only UTF-8.
bool terminal_safe(std::string_view text) { return memscale::detail::printable(text) == text; }

// The what() of the json_io::input_error `f` throws, or "<no error>".
template <class F>
std::string input_error_message(F&& f) {
  try {
    f();
  } catch (const memscale::json_io::input_error& e) {
    return e.what();
  }
  return "<no error>";
}

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
  memscale::model_spec unlimited = memscale::presets::llama_2_7b;  // without its 4096-token context
  unlimited.context_length = 0;
  const std::string tokens = memscale_test::error_message([&] {
    (void)memscale::estimate(unlimited, memscale::training_spec{.micro_batch = batch, .seq_len = seq});
  });
  CHECK(tokens.find("[memscale.overflow] tokens (micro_batch x seq_len) overflows: 1099511627776 x 1073741824") !=
        std::string::npos);
  const std::string scores = memscale_test::error_message([&] {
    (void)memscale::estimate(unlimited, memscale::training_spec{.micro_batch = 1, .seq_len = seq * 2,
                                                                .attention = memscale::attention_impl::eager});
  });
  CHECK(scores.find("attention scores (micro_batch x heads x seq_len^2) overflows") != std::string::npos);
}

TEST_CASE("printable: control characters, C1 controls, bidi overrides and non-UTF-8 bytes are escaped", "[hostile]") {
  using memscale::detail::printable;
  CHECK(printable("\x1b]0;PWNED\a\x1b[2J") == "\\x1b]0;PWNED\\x07\\x1b[2J");
  CHECK(printable("a\nb\tc\rd") == "a\\nb\\tc\\rd");
  CHECK(printable("\x7f") == "\\x7f");
  CHECK(printable("\xc2\x9b" "31m") == "\\u009b31m");              // U+009B, the 8-bit CSI
  CHECK(printable("\xe2\x80\xae" "txt") == "\\u202etxt");           // U+202E right-to-left override
  CHECK(printable("\xff\xfe") == "\\xff\\xfe");                     // not UTF-8
  CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");                     // overlong '/'
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");           // a surrogate
  CHECK(printable("caf\xc3\xa9 \xe2\x9c\x93 \\ \"") == "caf\xc3\xa9 \xe2\x9c\x93 \\ \"");  // kept as is
  const std::string once = printable("\x1b[2J\xff\n");
  CHECK(printable(once) == once);  // idempotent: messages built from messages stay the same
}

TEST_CASE("quoted: a value in quotes, escaped, cut to 80 characters with its length in bytes", "[hostile]") {
  // Called qualified: std::quoted (found by argument-dependent lookup) is another function.
  const auto quoted = [](std::string_view text) { return memscale::detail::quoted(text); };
  CHECK(quoted("gpt2") == "\"gpt2\"");
  CHECK(quoted("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(quoted("\x1b[2J") == "\"\\x1b[2J\"");
  const std::string huge(131'072, 'x');
  CHECK(quoted(huge) == "\"" + std::string(80, 'x') + "\"...(131072 bytes)");
  // A cut never splits a UTF-8 character or an escape.
  std::string accents;
  for (int i = 0; i < 100; ++i) accents += "\xc3\xa9";
  const std::string cut = quoted(accents);
  CHECK(terminal_safe(cut));
  CHECK(contains(cut, "...(200 bytes)"));
  const std::string escapes = quoted(std::string(100, '\x1b'));
  CHECK(contains(escapes, "\"...(100 bytes)"));
  CHECK(escapes.size() < 120);
}

TEST_CASE("quoted_path: a long path keeps its end, the file name, after ...", "[hostile]") {
  using memscale::detail::quoted_path;
  CHECK(quoted_path("configs/llama.json") == "\"configs/llama.json\"");
  const std::string deep = "/check/work/main/tests/malformed/configs/gpt_oss_odd_layers_without_layer_types.json";
  const std::string shown = quoted_path(deep);
  CHECK(shown == "\"..." + deep.substr(deep.size() - 77) + "\"(" + std::to_string(deep.size()) + " bytes)");
  CHECK(contains(shown, "gpt_oss_odd_layers_without_layer_types.json\"("));
  // Escapes and UTF-8 characters are kept whole at the cut, and a huge value stays one short line.
  std::string accents;
  for (int i = 0; i < 100; ++i) accents += "\xc3\xa9";
  const std::string path = accents + "/\x1b[2J.json";
  const std::string cut = quoted_path(path);
  CHECK(terminal_safe(cut));
  CHECK(contains(cut, "\"...\xc3\xa9"));
  CHECK(contains(cut, "/\\x1b[2J.json\"(" + std::to_string(path.size()) + " bytes)"));
  const std::string huge = quoted_path(std::string(131'072, 'x') + "/name.json");
  CHECK(contains(huge, "/name.json\"(131082 bytes)"));
  CHECK(huge.size() < 110);
  CHECK(memscale::json_io::path_in_quotes(deep) == shown);
}

TEST_CASE("memscale::error and input_error store a message safe to print", "[hostile]") {
  const memscale::error e(memscale::error_code::invalid_run, "run.\x1b[2J\xc2\x9b is not a field");
  CHECK(std::string(e.what()) == "[memscale.invalid_run] run.\\x1b[2J\\u009b is not a field");
  const memscale::json_io::input_error i("--gpu \x1b]0;PWNED\x07");
  CHECK(terminal_safe(i.what()));
  CHECK(contains(i.what(), "\\x1b]0;PWNED\\x07"));
}

TEST_CASE("JSON keys and values in errors are escaped and cut", "[hostile]") {
  namespace io = memscale::json_io;
  io::run_input in;
  const auto doc = nlohmann::json::parse(R"({"model":"gpt2","run":{"\u001b[2J":1}})");
  const std::string key = memscale_test::error_message([&] { io::read_run_document(doc, in); });
  CHECK(contains(key, "run.\"\\x1b[2J\" is not a field of a run document"));
  CHECK(terminal_safe(key));
  nlohmann::json targets = {{"model", "gpt2"}, {"run", {{"target", "lora"}, {"lora_rank", 8},
                                                        {"lora_targets", "q,\x1b[2J" + std::string(100'000, 'z')}}}};
  std::string message = input_error_message([&] { io::read_run_document(targets, in); });
  CHECK(terminal_safe(message));
  CHECK(message.size() < 600);
  // nlohmann's "last read" bytes of a 1 MB invalid token are cut too.
  const std::string bad = "{\"model\": \"" + std::string(1'000'000, 'q') + "\x01\"}";
  message = memscale_test::error_message([&] { (void)io::parse_document(bad, "bad.json"); });
  CHECK(contains(message, "bad.json is not valid JSON"));
  CHECK(terminal_safe(message));
  CHECK(message.size() < 600);
  // A token that holds nlohmann's own "'; expected " is still quoted and cut as a whole (the
  // fuzzer found the tail after it echoed raw: ill-formed UTF-8 and 2,000 bytes).
  const std::string tricky = "[{\"id\": \"a" + std::string(2'000, ']') + "'; expected " + std::string(2'000, ']') + "\xff\"}]";
  message = memscale_test::error_message([&] { (void)io::parse_document(tricky, "tricky.json"); });
  CHECK(contains(message, "tricky.json is not valid JSON"));
  CHECK(terminal_safe(message));
  CHECK(message.size() < 600);
  // The core's unknown-LoRA-module message quotes and cuts the name.
  message = memscale_test::error_message([] { (void)memscale::parse_lora_targets("\x1b[2J" + std::string(10'000, 'm')); });
  CHECK(terminal_safe(message));
  CHECK(message.size() < 800);
}

TEST_CASE("parse_document: a NUL byte is refused with its offset, not read as the end of the input", "[hostile]") {
  const std::string text = std::string("{\"model\": \"gpt2\"}") + '\0' + "{\"run\": 1}";
  const std::string message = memscale_test::error_message([&] { (void)memscale::json_io::parse_document(text, "nul.json"); });
  CHECK(contains(message, "[memscale.invalid_json] nul.json is not valid JSON: a NUL byte at offset 17"));
}

TEST_CASE("read_input_file: only a regular file of at most 64 MiB is read, failures name the file", "[hostile]") {
  namespace fs = std::filesystem;
  namespace io = memscale::json_io;
  const fs::path dir = fs::temp_directory_path() / "memscale_read_input_file_test";
  fs::create_directories(dir);
  std::ofstream(dir / "ok.json") << "{\"model\": \"gpt2\"}";
  CHECK(io::read_input_file(dir / "ok.json", "--run \"ok.json\"") == "{\"model\": \"gpt2\"}");
  const auto code = [](const fs::path& p) { return memscale_test::error_code_of([&] { (void)io::read_input_file(p, "f"); }); };
  const auto message = [](const fs::path& p) {
    return memscale_test::error_message([&] { (void)io::read_input_file(p, "--run \"" + p.string() + "\""); });
  };
  CHECK(code(dir) == memscale::error_code::input_file);
  CHECK(contains(message(dir), "is a directory; only regular files are read"));
  CHECK(contains(message(dir / "missing.json"), "cannot be read: No such file or directory"));
  // One byte over the limit (a sparse file: nothing is written).
  const fs::path big = dir / "big.json";
  std::ofstream(big).put(' ');
  fs::resize_file(big, io::max_input_file_bytes + 1);
  CHECK(contains(message(big), "is larger than 64 MiB (67108864 bytes)"));
  fs::resize_file(big, io::max_input_file_bytes);
  CHECK(io::read_input_file(big, "big").size() == io::max_input_file_bytes);
  std::error_code ec;
  fs::remove_all(dir, ec);
  // Devices are refused before they are opened (read, /dev/zero never ends).
  if (fs::exists("/dev/zero")) CHECK(contains(message("/dev/zero"), "/dev/zero\" is a character device"));
  if (fs::exists("/proc/self/mem")) CHECK(contains(message("/proc/self/mem"), "cannot be read: "));
}

TEST_CASE("model records: experts are read for every gated-MLP decoder family and refused by name elsewhere", "[hostile]") {
  namespace io = memscale::json_io;
  nlohmann::json llama = {{"family", "llama"}, {"layers", 2}, {"hidden", 64}, {"heads", 4}, {"ffn", 128},
                          {"vocab", 100}, {"experts", 64}, {"experts_per_token", 2}};
  const memscale::model_spec moe = io::model_from_record(llama);
  CHECK(moe.experts == 64);
  CHECK(moe.experts_per_token == 2);
  llama.erase("experts");
  llama.erase("experts_per_token");
  CHECK(io::model_from_record(llama).experts == 0);  // dense unless the record says otherwise
  CHECK(io::model_from_record(nlohmann::json{{"family", "mixtral"}, {"layers", 2}, {"hidden", 64}, {"heads", 4},
                                             {"ffn", 128}, {"vocab", 100}})
            .experts == 8);  // Mixtral's default
  llama["experts"] = 8;
  llama["experts_per_token"] = 16;
  CHECK(contains(memscale_test::error_message([&] { (void)io::model_from_record(llama); }),
                 "model.experts_per_token must be <= model.experts (got 16)"));
  const nlohmann::json gpt2 = {{"family", "gpt2"}, {"layers", 2}, {"hidden", 64}, {"heads", 4}, {"ffn", 256},
                               {"vocab", 100}, {"max_pos", 64}, {"experts", 8}, {"experts_per_token", 2}};
  CHECK(contains(memscale_test::error_message([&] { (void)io::model_from_record(gpt2); }),
                 "model.experts needs a decoder with a gated MLP"));
}

TEST_CASE("JSON strings: an empty enum string is refused, not read as the default", "[hostile]") {
  namespace io = memscale::json_io;
  for (const char* key : {"precision", "optimizer", "optimizer_impl", "checkpointing", "attention", "target", "quant",
                          "device", "lora_targets"}) {
    io::run_input in;
    const nlohmann::json doc = {{"model", "gpt2"}, {"run", {{key, ""}}}};
    CHECK(contains(memscale_test::error_message([&] { io::read_run_document(doc, in); }),
                   "run." + std::string(key) + " must be a non-empty string (got \"\")"));
  }
  const nlohmann::json record = {{"family", "gpt2"}, {"layers", 2}, {"hidden", 64}, {"heads", 4}, {"ffn", 256},
                                 {"vocab", 100}, {"max_pos", 64}, {"norm", ""}};
  CHECK(contains(memscale_test::error_message([&] { (void)io::model_from_record(record); }),
                 "model.norm must be a non-empty string"));
}

TEST_CASE("run documents: a GPU smaller than its CUDA context is refused by name", "[hostile]") {
  namespace io = memscale::json_io;
  for (const nlohmann::json& memory : {nlohmann::json(24), nlohmann::json("1KiB"), nlohmann::json("24B")}) {
    io::run_input in;
    const nlohmann::json doc = {{"model", "gpt2"}, {"gpu", {{"memory", memory}}}};
    CHECK(contains(input_error_message([&] { io::read_run_document(doc, in); }), "gpu.memory must be at least 400 MiB"));
  }
  io::run_input in;
  io::read_run_document(nlohmann::json{{"model", "gpt2"}, {"gpu", {{"memory", "400MiB"}}}}, in);
  CHECK(in.custom_gpu->memory.value == 400ULL << 20);
}

TEST_CASE("presets: the sequence check knows each preset's max_position_embeddings", "[hostile]") {
  using namespace memscale::presets;
  STATIC_REQUIRE(memscale::sequence_limit_of(llama_2_7b).tokens == 4096);
  STATIC_REQUIRE(memscale::sequence_limit_of(llama_3_8b).tokens == 8192);
  STATIC_REQUIRE(memscale::sequence_limit_of(mistral_7b).tokens == 32768);
  STATIC_REQUIRE(memscale::sequence_limit_of(qwen2_5_7b).tokens == 131072);
  STATIC_REQUIRE(memscale::sequence_limit_of(gpt2).tokens == 1024);
  STATIC_REQUIRE(memscale::sequence_limit_of(t5_small).tokens == 0);  // relative buckets: no limit
  const std::string message = memscale_test::error_message([] { memscale::check_sequence(llama_2_7b, 8192, "--seq"); });
  CHECK(contains(message, "--seq must be <= 4096 (the max_position_embeddings of llama-2-7b) (got 8192)"));
}

}  // namespace hostile_input_test
