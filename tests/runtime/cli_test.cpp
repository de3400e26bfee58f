// Run-time checks for what memscale-plan prints: the fmt adapter (memscale/fmt.hpp) and
// the --cases answers of the JSON adapter (json_io::estimate_record). Sizes are built
// from run-time values so no formatting below is folded by the compiler.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "memscale/fmt.hpp"
#include "memscale/json.hpp"
#include "memscale/presets.hpp"

namespace cli_test {
namespace {

using memscale::bytes;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::size_t hashes_in(const std::string& line) {
  return static_cast<std::size_t>(std::count(line.begin(), line.end(), '#'));
}

// A ground-truth record as in shared/ground-truth/SCHEMA.md (the fields memscale reads).
nlohmann::json gpt2_cpu_record() {
  return nlohmann::json::parse(R"({
    "id": "inline-gpt2-b1-s128",
    "measure": "cpu-tensor-peak",
    "device": "cpu",
    "model": {"family": "gpt2", "name": "gpt2", "layers": 12, "hidden": 768, "heads": 12, "kv_heads": 12,
              "ffn": 3072, "vocab": 50257, "max_pos": 1024, "tied_embeddings": true, "impl": "hf-transformers"},
    "train": {"batch": 1, "seq": 128, "precision": "fp32", "optimizer": "adamw", "checkpointing": "none",
              "attention": "eager", "grad_accum": 1, "lora_rank": 0, "zero_stage": 0, "dp": 1, "tp": 1}
  })");
}

}  // namespace

TEST_CASE("format_size: bytes below 1 KiB print as whole bytes") {
  CHECK(memscale::format_size(bytes{0}) == "0 B");
  CHECK(memscale::format_size(bytes{12}) == "12 B");
  CHECK(memscale::format_size(bytes{1023}) == "1023 B");
}

TEST_CASE("format_size: KiB and MiB have one decimal, GiB and up two") {
  CHECK(memscale::format_size(bytes{1024}) == "1.0 KiB");
  CHECK(memscale::format_size(bytes{1536}) == "1.5 KiB");
  CHECK(memscale::format_size(bytes{512ULL << 20}) == "512.0 MiB");
  CHECK(memscale::format_size(bytes{3ULL << 29}) == "1.50 GiB");
  CHECK(memscale::format_size(bytes{80ULL << 30}) == "80.00 GiB");
  CHECK(memscale::format_size(bytes{5ULL << 40}) == "5.00 TiB");
}

TEST_CASE("format_size: a value that rounds to 1024 of a unit moves to the next unit") {
  CHECK(memscale::format_size(bytes{(1ULL << 30) - 1}) == "1.00 GiB");
  CHECK(memscale::format_size(bytes{(1ULL << 20) - 1}) == "1.0 MiB");
  CHECK(memscale::format_size(bytes{~0ULL}) == "16.00 EiB");
}

TEST_CASE("fmt::formatter<bytes>: prints the human size and honours fill, align and width") {
  std::uint64_t mib = 512;  // not a constant: the path at run time
  const bytes b{mib << 20};
  CHECK(fmt::format("{}", b) == "512.0 MiB");
  CHECK(fmt::format("{:>12}", b) == "   512.0 MiB");
  CHECK(fmt::format("{:<11}|", bytes{12}) == "12 B       |");
  CHECK(fmt::format("{}", bytes{3ULL << 29}) == "1.50 GiB");
}

TEST_CASE("format_count: groups digits in threes with commas") {
  CHECK(memscale::format_count(0) == "0");
  CHECK(memscale::format_count(999) == "999");
  CHECK(memscale::format_count(1000) == "1,000");
  CHECK(memscale::format_count(124439808) == "124,439,808");
  CHECK(memscale::format_count(18446744073709551615ULL) == "18,446,744,073,709,551,615");
}

TEST_CASE("fmt::formatter for the enums prints their to_string") {
  CHECK(fmt::format("{}", memscale::precision::amp_bf16) == "amp_bf16");
  CHECK(fmt::format("{}", memscale::optimizer_kind::adamw_8bit) == "adamw_8bit");
  CHECK(fmt::format("{}", memscale::checkpointing::selective) == "selective");
  CHECK(fmt::format("{}", memscale::attention_impl::sdpa_math) == "sdpa_math");
  CHECK(fmt::format("{}", memscale::phase::optimizer_step) == "optimizer_step");
  CHECK(fmt::format("{}", memscale::dtype::bf16) == "bf16");
  CHECK(fmt::format("[{:>6}]", memscale::precision::fp32) == "[  fp32]");
}

TEST_CASE("format_breakdown: one row per component, shares of the peak and a 30-column bar") {
  const auto result = memscale::estimate(memscale::presets::gpt2, memscale::training_spec{.micro_batch = 2});
  const std::string table = memscale::format_breakdown(result);
  for (const char* name : {"parameters", "gradients", "optimizer", "activations", "workspace", "total"})
    CHECK(table.find(name) != std::string::npos);
  CHECK(table.find(memscale::format_count(result.steady.tensor.value)) != std::string::npos);
  CHECK(table.find("100.0%") != std::string::npos);

  bool saw_total = false;
  for (const auto& line : lines_of(table)) {
    CHECK(hashes_in(line) <= 30);
    if (line.rfind("total", 0) == 0) {
      saw_total = true;
      CHECK(hashes_in(line) == 30);
    }
  }
  CHECK(saw_total);
}

TEST_CASE("format_breakdown: bar length is the share of the peak, rounded") {
  const memscale::memory_breakdown b{.parameters = bytes{100}, .optimizer = bytes{200}, .activations = bytes{700}};
  const auto lines = lines_of(memscale::format_breakdown(b));
  const auto row = [&](const std::string& name) {
    for (const auto& line : lines)
      if (line.rfind(name, 0) == 0) return line;
    return std::string();
  };
  CHECK(hashes_in(row("parameters")) == 3);   // 10 % of 30
  CHECK(hashes_in(row("optimizer")) == 6);    // 20 %
  CHECK(hashes_in(row("activations")) == 21); // 70 %
  CHECK(hashes_in(row("gradients")) == 0);
  CHECK(row("activations").find("70.0%") != std::string::npos);
}

TEST_CASE("format_breakdown: an empty breakdown prints zero shares") {
  const std::string table = memscale::format_breakdown(memscale::memory_breakdown{});
  CHECK(table.find("0.0%") != std::string::npos);
  CHECK(table.find('#') == std::string::npos);
}

TEST_CASE("json_io::estimate_record: a CPU-traced GPT-2 record answers a positive tensor estimate") {
  const auto answer = memscale::json_io::estimate_record(gpt2_cpu_record());
  REQUIRE_FALSE(answer.contains("error"));
  CHECK(answer.at("id") == "inline-gpt2-b1-s128");
  CHECK(answer.at("quantity") == "tensor");
  REQUIRE(answer.at("estimated_bytes").is_number_unsigned());
  CHECK(answer.at("estimated_bytes").get<std::uint64_t>() > 0);
}

TEST_CASE("json_io::estimate_record: an unknown torchvision model answers an error naming model.name") {
  auto record = gpt2_cpu_record();
  record["id"] = "inline-resnet18";
  record["model"] = {{"family", "alexnet"}, {"name", "alexnet"}, {"impl", "torchvision"}};
  const auto answer = memscale::json_io::estimate_record(record);
  CHECK(answer.at("id") == "inline-resnet18");
  REQUIRE(answer.contains("error"));
  CHECK_FALSE(answer.contains("estimated_bytes"));
  const auto message = answer.at("error").get<std::string>();
  CHECK(message.find("model.name") != std::string::npos);
  CHECK(message.find("alexnet") != std::string::npos);
}

}  // namespace cli_test
