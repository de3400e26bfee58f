// Run-time checks for memscale/gpus.hpp: the same lookups as tests/static/gpus_static.cpp,
// with names the compiler cannot fold (built in std::string at run time).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cctype>
#include <set>
#include <string>
#include <vector>

#include "memscale/gpus.hpp"

namespace gpus_test {
namespace {

using namespace memscale::literals;

// Joins parts at run time so no lookup below is a constant expression.
std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i != 0) out += separator;
    out += parts[i];
  }
  return out;
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string slug_of(const std::string& query) {
  const auto gpu = memscale::find_gpu(query);
  return gpu ? std::string(gpu->name) : std::string("<none>");
}

}  // namespace

TEST_CASE("find_gpu resolves slugs, device names and ground-truth aliases", "[gpus]") {
  CHECK(slug_of(join({"rtx", "3090"}, "")) == "rtx3090");
  CHECK(slug_of(join({"RTX3090", "24GB"}, "-")) == "rtx3090");
  CHECK(slug_of(join({"A100", "SXM4", "40GB"}, "-")) == "a100-40gb");
  CHECK(slug_of(join({"V100", "SXM2", "16GB"}, "-")) == "v100-16gb");
  CHECK(slug_of(join({"NVIDIA", "GeForce", "RTX", "3090"}, " ")) == "rtx3090");
  CHECK(slug_of(join({"NVIDIA", "H100", "80GB", "HBM3"}, " ")) == "h100-80gb");
  CHECK(slug_of(join({"Tesla", "T4"}, " ")) == "t4");
  CHECK(slug_of(upper("mi300x")) == "mi300x");

  CHECK_FALSE(memscale::find_gpu(join({"no", "such", "gpu"}, "-")).has_value());
  CHECK_FALSE(memscale::find_gpu(std::string()).has_value());
  CHECK_FALSE(memscale::find_gpu(join({"A100"}, "")).has_value());
  CHECK_FALSE(memscale::find_gpu(join({"RTX3090", "48GB"}, "-")).has_value());
  CHECK_FALSE(memscale::find_gpu(std::string(200, 'a')).has_value());
}

TEST_CASE("every catalog entry round-trips through its slug and label at run time", "[gpus]") {
  std::set<std::string> seen;
  for (const auto& gpu : memscale::gpu_catalog) {
    const std::string slug(gpu.name);
    CHECK(seen.insert(slug).second);
    CHECK(slug_of(slug) == slug);
    CHECK(slug_of(upper(slug)) == slug);
    CHECK(slug_of(std::string(gpu.label)) == slug);
  }
  CHECK(seen.size() == memscale::gpu_catalog.size());
  CHECK(seen.size() >= 37);
}

TEST_CASE("catalog figures match their cited sources", "[gpus]") {
  const auto rtx3090 = memscale::find_gpu(join({"rtx", "3090"}, ""));
  REQUIRE(rtx3090.has_value());
  CHECK(rtx3090->memory == memscale::bytes{25447170048});
  CHECK(rtx3090->bf16);
  CHECK_FALSE(rtx3090->fp8);
  CHECK(rtx3090->compute_capability == 86);

  const auto a100 = memscale::find_gpu(join({"a100", "80gb"}, "-"));
  REQUIRE(a100.has_value());
  CHECK(a100->memory == 81049_MiB);
  CHECK(a100->cublas_workspace == 8_MiB + 128_KiB);

  const auto h100 = memscale::find_gpu(join({"h100", "80gb"}, "-"));
  REQUIRE(h100.has_value());
  CHECK(h100->fp8);
  CHECK(h100->cublas_workspace == 32_MiB);
  CHECK(h100->host_link_gb_per_s == 63.0);

  for (const std::string name : {"v100-16gb", "t4", "rtx2080"}) {
    const auto gpu = memscale::find_gpu(name);
    REQUIRE(gpu.has_value());
    CHECK_FALSE(gpu->bf16);
  }
  for (const std::string name : {"h100-80gb", "rtx4090"}) {
    const auto gpu = memscale::find_gpu(name);
    REQUIRE(gpu.has_value());
    CHECK(gpu->fp8);
  }
}

TEST_CASE("custom_gpu validates its input", "[gpus]") {
  volatile std::uint64_t zero = 0;
  const std::uint64_t twelve_gib = std::uint64_t{12} << 30;
  CHECK_THROWS_AS(memscale::custom_gpu(memscale::bytes{0}), memscale::error);
  CHECK_THROWS_AS(memscale::custom_gpu(memscale::bytes{zero}), memscale::error);
  CHECK_THROWS_AS(memscale::custom_gpu(memscale::bytes{twelve_gib}, true, 0.0), memscale::error);
  try {
    (void)memscale::custom_gpu(memscale::bytes{zero});
    FAIL("custom_gpu(bytes{0}) did not throw");
  } catch (const memscale::error& e) {
    CHECK(e.code() == memscale::error_code::invalid_gpu);
    CHECK(std::string(e.what()) == "[memscale.invalid_gpu] gpu.memory must be > 0 (got 0)");
  }

  const auto gpu = memscale::custom_gpu(memscale::bytes{twelve_gib}, false, 15.75);
  CHECK(gpu.memory == 12_GiB);
  CHECK_FALSE(gpu.bf16);
  CHECK(gpu.host_link_gb_per_s == 15.75);
  CHECK(gpu.memory_from == memscale::memory_source::user);
}

}  // namespace gpus_test
