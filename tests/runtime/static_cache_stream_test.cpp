// Hugging Face's StaticCache in the allocator's generate() stream (memscale/allocator/generate_events.hpp):
// each layer's keys and values allocated once, at max_length - 1 positions, when the layer first
// updates, and never again; every decoding step attends over the whole cache (under GQA through
// repeat_kv copies of it). Checked against the H100 runs of docs/data/gpu_caches_h100.json and their
// allocator histories (docs/data/gpu_allocator_history/*-static.json.gz).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "h100_runs.hpp"
#include "memscale/allocator/replay_generate.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace static_cache_stream_test {
namespace {

using namespace memscale;
using namespace memscale::allocator;
using memscale_test::h100_run;
using memscale_test::measured_run;
using memscale_test::reserved_error;

constexpr const char* tinyllama_static = "h100-infer-tinyllama-bf16-b16-c1024-n256-static";
constexpr const char* llama2_static = "h100-infer-llama2-7b-bf16-b8-c2048-n128-static";

measured_run caches_run(const std::string& id) { return h100_run("gpu_caches_h100.json", id); }

// Every allocation's size, by the moment it is made in.
struct moment_sizes {
  std::vector<std::uint64_t> prefill, decode;
  moment at = moment::setup;
  void alloc(std::uint32_t, std::uint64_t size) {
    if (at == moment::prefill) prefill.push_back(size);
    if (at == moment::decode) decode.push_back(size);
  }
  void free(std::uint32_t) {}
  void enter(std::uint32_t, moment m) { at = m; }
};

std::size_t count_of(const std::vector<std::uint64_t>& sizes, std::uint64_t size) {
  std::size_t n = 0;
  for (const std::uint64_t s : sizes) n += s == size ? 1 : 0;
  return n;
}

TEST_CASE("StaticCache stream: each layer's keys and values allocated once, at max_length - 1, never grown",
          "[allocator][generate][static]") {
  // TinyLlama, 16 x 1024 prompt, 256 new tokens, transformers 5.17: the history allocates 44 tensors of
  // 16 x 4 kv heads x 1279 x 64 bf16 = 10,477,568 B in the prefill and none afterwards.
  const measured_run run = caches_run(tinyllama_static);
  const model_spec m = json_io::model_for_record(run.record);
  const inference_spec r = json_io::inference_from_record(run.record);
  REQUIRE(r.cache == kv_cache_kind::static_preallocated);
  CHECK(static_cache_length(r) == 1279);
  const std::uint64_t half = 16ULL * 4 * 1279 * 64 * 2;
  auto sizes = std::make_unique<moment_sizes>();
  emit_generate<16384>(m, r, *sizes);
  CHECK(count_of(sizes->prefill, half) == 2 * m.layers);
  CHECK(count_of(sizes->decode, half) == 0);
  // No decoding step makes a tensor of the cache's growth (a torch.cat one position larger).
  const std::uint64_t grown = 16ULL * 4 * 1280 * 64 * 2;
  CHECK(count_of(sizes->decode, grown) == 0);
  // Each decoding step attends over the whole cache through repeat_kv's copies of it: two
  // 83,820,544-byte tensors per layer and step, as in the history (11,220 of them).
  CHECK(count_of(sizes->decode, 16ULL * 32 * 1279 * 64 * 2) == 2 * m.layers * (r.new_tokens - 1));
}

TEST_CASE("StaticCache stream: the replay is no longer refused and holds the tensor peak", "[allocator][generate][static]") {
  for (const char* id : {tinyllama_static, llama2_static}) {
    const measured_run run = caches_run(id);
    const model_spec m = json_io::model_for_record(run.record);
    const inference_spec r = json_io::inference_from_record(run.record);
    const replay_result rep = replay_generate<16384, 16384>(m, r);
    const inference_result tensors = estimate_inference(m, r);
    const double error = reserved_error(rep, run.reserved);
    INFO(id << ": replayed reserved " << rep.reserved_peak.value << " B, tensor peak " << tensors.peak.tensor.value
            << " B, error " << error * 100 << "%");
    CHECK(rep.reserved_peak >= tensors.peak.tensor);
    CHECK(rep.allocated_peak >= tensors.peak.tensor);
    // Measured: Llama-2 27,420,262,400 B, TinyLlama 3,909,091,328 B reserved; the rounding rule was
    // 11% under.
    CHECK(error > -0.03);
    CHECK(error < 0.03);
  }
}

TEST_CASE("StaticCache estimate: the cache at max_length - 1 from 5.0, at max_length before", "[inference][static]") {
  const measured_run run = caches_run(llama2_static);
  const model_spec m = json_io::model_for_record(run.record);
  inference_spec r = json_io::inference_from_record(run.record);
  const std::uint64_t per_position = 2ULL * 32 * 8 * 4096 * 2;  // keys and values, 32 layers, batch 8
  CHECK(estimate_inference(m, r).kv_cache_bytes.value == per_position * 2175);
  r.transformers_version = 444;
  CHECK(static_cache_length(r) == 2176);
  r.max_cache_len = 4096;
  CHECK(static_cache_length(r) == 4096);
}

TEST_CASE("generate() allocated on the H100: the caller holds each block's input until the block returns",
          "[inference][generate]") {
  // The same -2.7% under for DynamicCache and StaticCache: at the last layer's MLP the history holds
  // four (16, 1024, 2048) bf16 tensors (the embeddings, the layer's input, its residual, the normed
  // copy) and the 32 MiB Hopper cuBLAS workspace; the estimate freed the input at the first residual
  // and took the 8 MiB default workspace.
  const measured_run dynamic = h100_run("gpu_measured_h100.json", "h100-infer-tinyllama-bf16-b16-c1024-n256");
  for (const nlohmann::json& record : {dynamic.record, caches_run(tinyllama_static).record}) {
    const inference_spec r = json_io::inference_from_record(record);
    CHECK(r.blas_workspace.value == 32ULL << 20);
    const double measured = record.at("measured_bytes").get<double>();
    const double estimate =
        static_cast<double>(estimate_inference(json_io::model_for_record(record), r).peak.tensor.value);
    INFO(record.at("id").get<std::string>() << ": estimate " << estimate << " B, measured " << measured << " B");
    CHECK(estimate / measured - 1 > -0.01);
    CHECK(estimate / measured - 1 < 0.01);
  }
}

}  // namespace
}  // namespace static_cache_stream_test
