// generate() records of the H100 caches pass (docs/data/gpu_caches_h100.json, transformers 5.17):
// the record's GPU sets the cuBLAS workspace of the estimate, as it does for a training record.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "test_inputs.hpp"

namespace gemma3_generate_test {
namespace {

using memscale::bytes;

TEST_CASE("An H100 generate() record holds the 32 MiB cuBLAS workspace of Hopper") {
  // Every infer-* allocator history of the pass allocates 33,554,432 bytes at the first matmul and
  // never frees them (docs/data/gpu_allocator_history/infer-gemma3-1b-bf16-b4-c2048-n64.json.gz).
  const auto record = memscale_test::data_record("gpu_caches_h100.json", "h100-infer-gemma3-1b-bf16-b4-c2048-n64-allocated");
  const memscale::inference_spec run = memscale::json_io::inference_from_record(record);
  CHECK(run.blas_workspace == memscale::pytorch_cublas_workspace_sm90_plus);
  CHECK(run.blas_workspace == bytes{32u << 20});
  const memscale::inference_result res =
      memscale::estimate_inference(memscale::json_io::inference_model_for_record(record), run);
  CHECK(res.prefill.breakdown.workspace == bytes{32u << 20});
  // A CPU record keeps no cuBLAS workspace.
  auto cpu = record;
  cpu["device"] = "cpu";
  CHECK(memscale::estimate_inference(memscale::json_io::inference_model_for_record(cpu),
                                     memscale::json_io::inference_from_record(cpu))
            .prefill.breakdown.workspace == bytes{});
}

TEST_CASE("The gpt-oss generate() record of transformers 5.17 is estimated, its peak in the prefill") {
  const auto record = memscale_test::data_record("gpu_caches_h100.json", "h100-infer-gpt_oss-l4-e8-bf16-b4-c1024-n64-allocated");
  const memscale::inference_spec run = memscale::json_io::inference_from_record(record);
  CHECK(run.transformers_version == 517);
  const memscale::inference_result res =
      memscale::estimate_inference(memscale::json_io::inference_model_for_record(record), run);
  CHECK(res.peak.at == memscale::inference_phase::prefill);
  // The decoding steps' batched_mm copies (batch 4 x top-4 rows of gate_up_proj and down_proj, bf16).
  CHECK(res.decode.breakdown.activations > bytes{16ull * (2880 * 5760 + 2880 * 2880) * 2});
}

}  // namespace
}  // namespace gemma3_generate_test
