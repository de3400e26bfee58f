// The Mamba-2 layer kind (graph/layers/mamba2.hpp) and the mamba2 reader: published parameter
// counts, Mamba2Config defaults, one block's saved bytes against the listing of
// docs/research/ssm-saved-tensors.txt, the CPU-traced records of docs/data/cpu_traced_ssm.json,
// the fused path, and the paths that refuse a state-space stack by name.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "memscale/allocator/step_events.hpp"
#include "memscale/cluster_planner.hpp"
#include "memscale/inference.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "memscale/parallel/per_gpu.hpp"
#include "ssm_test_support.hpp"

namespace mamba2_test {
namespace {

using memscale::json_io::json;

using memscale_test::block_saved_bytes;
using memscale_test::ssm_config;
using memscale_test::ssm_record;
using memscale_test::ssm_records;

}  // namespace

TEST_CASE("mamba2: parameter counts equal the published totals") {
  using memscale::json_io::load_hf_model;
  // Mamba-Codestral-7B-v0.1 card: 7,285,403,648 parameters (its config.json keeps the bare
  // Infinity of time_step_limit, which the reader takes).
  CHECK(memscale::parameter_count(load_hf_model(ssm_config("mistralai--Mamba-Codestral-7B-v0.1"))) ==
        7'285'403'648ULL);
  // state-spaces/mamba2-2.7b (name 2.7b): 64 x 40,216,560 + 50,288 x 2,560 (tied) + 2,560.
  CHECK(memscale::parameter_count(load_hf_model(ssm_config("state-spaces--mamba2-2.7b"))) == 2'702'599'680ULL);
  // The traced small model: sum(p.numel()) of the re-implementation.
  const json r = ssm_record("cpu-mamba2-small-b2-s256-adamw");
  CHECK(memscale::parameter_count(memscale::json_io::model_for_record(r)) == r.at("model").at("params").get<std::uint64_t>());
  CHECK(r.at("model").at("params").get<std::uint64_t>() == 3'825'504ULL);
}

TEST_CASE("mamba2: a config that omits keys reads as Mamba2Config") {
  using namespace memscale;
  const model_spec m = json_io::model_from_hf_config(json{{"model_type", "mamba2"}});
  CHECK(m.mixer == mixer_kind::mamba2);
  CHECK(m.layers == 64);
  CHECK(m.hidden == 4096);
  CHECK(m.vocab == 32768);
  CHECK(m.ssm_inner == 8192);  // int(expand 2 * hidden)
  CHECK(m.ssm_heads == 128);   // x head_dim 64 = 8192
  CHECK(m.ssm_groups == 8);
  CHECK(m.ssm_state == 128);
  CHECK(m.ssm_conv == 4);
  CHECK(m.ssm_chunk == 256);
  CHECK(m.ssm_dt_rank == 0);
  CHECK_FALSE(m.ssm_proj_bias);
  CHECK(m.ssm_conv_bias);
  CHECK(m.residual_fp32);
  CHECK_FALSE(m.tied_embeddings);  // Mamba2Config(tie_word_embeddings=False)
  // The defaults describe Mamba-Codestral-7B: the same count as its config.json.
  CHECK(parameter_count(m) == 7'285'403'648ULL);
  // num_heads x head_dim must be the inner width; the mixer's activation and norm are fixed.
  CHECK_THROWS_WITH(json_io::model_from_hf_config(json{{"model_type", "mamba2"}, {"num_heads", 100}}),
                    Catch::Contains("config.num_heads"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(json{{"model_type", "mamba2"}, {"n_groups", 3}}),
                    Catch::Contains("model.ssm_groups"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(json{{"model_type", "mamba2"}, {"hidden_act", "gelu"}}),
                    Catch::Contains("config.hidden_act"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(json{{"model_type", "mamba2"}, {"rms_norm", false}}),
                    Catch::Contains("config.rms_norm"));
}

TEST_CASE("mamba2: one block saves what ssm-saved-tensors.txt lists (torch path, torch 1.13)") {
  using namespace memscale;
  // The listing's block: B 2, L 64, hidden 256, inner 512, state 32, 8 heads x 64, 2 groups,
  // chunk 64 (the records' small model).
  json record = ssm_record("cpu-mamba2-small-b2-s256-adamw");
  record["train"]["seq"] = 64;
  const model_spec m = json_io::model_for_record(record);
  const training_spec fp32 = json_io::run_from_record(record);
  REQUIRE(ssm_kernels_of(fp32) == ssm_kernel_choice::torch);
  // fp32: 5,751,112 bytes besides the block input, which the norm keeps (2 x 64 x 256 x 4).
  CHECK(block_saved_bytes(m, fp32) == 5'751'112ULL + 131'072ULL);
  // bf16: 5,342,024 bytes; the fp32 residual input is kept by nothing (the norm reads a bf16 copy).
  training_spec bf16 = fp32;
  bf16.prec = precision::pure_bf16;
  CHECK(block_saved_bytes(m, bf16) == 5'342'024ULL);
}

// Records each allocation's size, as the allocator replay sees the training stream.
struct allocation_sizes {
  std::vector<std::uint64_t> sizes;
  void alloc(std::uint32_t, std::uint64_t size) { sizes.push_back(size); }
  void free(std::uint32_t) {}
  void enter(std::uint32_t, memscale::allocator::moment) {}
};

TEST_CASE("mamba2: the torch path's allocator stream makes each chunked product on its own", "[allocator][stream]") {
  using namespace memscale;
  // The small traced model (chunk 64, 8 heads, state 32), fp32, B 2, L 256: 4 chunks.
  const json record = ssm_record("cpu-mamba2-small-b2-s256-adamw");
  const model_spec m = json_io::model_for_record(record);
  const training_spec run = json_io::run_from_record(record);
  REQUIRE(ssm_kernels_of(run) == ssm_kernel_choice::torch);
  const auto built = std::make_unique<model_graph>(build(m, run));
  allocation_sizes sink;
  allocator::emit_training_steps<32768, 8192>(built->stack(), built->run, allocator::step_stream_options{}, sink);
  // fp32 (b, c, Q, Q, h, N) G_intermediate and (b, c, Q, Q, h, P) Y_diag product. The H100
  // histories free G_intermediate right after G's sum, so no later op runs beside it, and the
  // backward of a broadcast product makes its two input gradients one after the other: no
  // allocation reaches the two products together (before: the Y_diag product with G held, 97 MiB,
  // and the product's gradients as one 128 MiB block).
  const std::uint64_t g_intermediate = 2ULL * 4 * 64 * 64 * 8 * 32 * 4;
  const std::uint64_t y_diag_product = 2ULL * 4 * 64 * 64 * 8 * 64 * 4;
  CHECK(*std::max_element(sink.sizes.begin(), sink.sizes.end()) < g_intermediate + y_diag_product);
  CHECK(std::count(sink.sizes.begin(), sink.sizes.end(), y_diag_product) > 0);
}

TEST_CASE("mamba2: a broadcast product's backward hands back both input gradients") {
  using namespace memscale;
  // The small traced model, fp32, B 2, L 256 (4 chunks of 64; 8 heads of 64; state 32). Y_diag's
  // MulBackward0 returns M's gradient (b, c, Q, Q, h) and hs's (b, c, Q, h, P), not one tensor of
  // its output's size. M's is reduced while both full-size products are alive (the op's input
  // gradient); hs's after the first is gone, into the buffer where the states' part of hs's
  // gradient already waits (graph.hpp waiting_gradient): not counted again here.
  const json record = ssm_record("cpu-mamba2-small-b2-s256-adamw");
  const auto built = std::make_unique<model_graph>(build(json_io::model_for_record(record), json_io::run_from_record(record)));
  const graph& g = built->stack();
  const std::uint64_t y_diag_product = 2ULL * 4 * 64 * 64 * 8 * 64 * 4;
  const std::uint64_t m_grad = 2ULL * 4 * 64 * 64 * 8 * 4;
  const std::uint64_t hs_grad = 2ULL * 256 * 512 * 4;
  int found = 0;
  for (std::size_t i = g.block_begin; i < g.block_end; ++i) {
    if (g.ops[i].bwd_temp.value != 2 * y_diag_product) continue;
    CHECK(g.ops[i].grad_in.value == m_grad);
    CHECK(g.ops[i].out.value == hs_grad);
    ++found;
  }
  CHECK(found == 1);
}

TEST_CASE("mamba2: the CPU-traced records are modelled within the band") {
  REQUIRE(memscale_test::check_ssm_records_within_band({"mamba2"}) == 5);
}

TEST_CASE("mamba2: the fused path saves in_proj's input and output, the scan output and rstd") {
  using namespace memscale;
  const model_spec m = json_io::load_hf_model(ssm_config("mistralai--Mamba-Codestral-7B-v0.1"));
  const training_spec run{.micro_batch = 1, .seq_len = 4096, .prec = precision::amp_bf16};
  CHECK(ssm_kernels_of(run) == ssm_kernel_choice::fused);  // CUDA
  // Per block at B 1, L 4096, bf16 under autocast: the norm (fp32 x^2 and normalised x, rstd, its
  // bf16 output's cast) ... counted op by op: the block's fp32 stream input is cast for the norm
  // (not kept); RMSNorm keeps 2 x T x H fp32 + T fp32; in_proj keeps its bf16 input T x H and
  // autocast's bf16 weight copy; the Function keeps zxbcdt T x (2D + 2GN + h) bf16, out_x T x D
  // bf16, rstd T x G fp32 and out_proj's bf16 weight copy.
  const std::uint64_t t = 4096, h = 4096, d = 8192, proj = 2 * 8192 + 2 * 8 * 128 + 128;
  const std::uint64_t norm = 2 * t * h * 4 + t * 4;
  const std::uint64_t expected = norm + t * h * 2 + proj * h * 2 + t * proj * 2 + t * d * 2 + t * 8 * 4 + h * d * 2;
  CHECK(block_saved_bytes(m, run) == expected);
  // The torch path at the same size saves several times more (the B and C repeated to 128 heads
  // alone are 2 x T x 128 x 128 x 4 = 537 MB; 4.46 GB per block in all).
  training_spec torch_path = run;
  torch_path.ssm_kernels = ssm_kernel_choice::torch;
  CHECK(block_saved_bytes(m, torch_path) > 7 * expected);
  const json report = json_io::estimate_report_json(m, run, estimate(m, run));
  CHECK(report.at("ssm_kernels") == "fused");
}

TEST_CASE("mamba2: paths that assume attention refuse it by name") {
  using namespace memscale;
  const model_spec m = json_io::load_hf_model(ssm_config("state-spaces--mamba2-2.7b"));
  // The reason follows the mixer's name once.
  CHECK_THROWS_WITH(estimate_inference(m, inference_spec{}),
                    Catch::Contains("model.mixer is mamba2 (a state-space stack): generate() keeps conv and ssm states") &&
                        !Catch::Contains("stack): is "));
  const training_spec run{.micro_batch = 1, .seq_len = 512, .prec = precision::amp_bf16};
  const auto decode = std::make_unique<graph>();
  CHECK_THROWS_WITH(recipes::build_decoder_stack(m, run, *decode, true),
                    Catch::Contains("model.mixer is mamba2 (a state-space stack): a forward with a KV cache"));
  CHECK_THROWS_WITH(estimate_per_gpu(m, run, parallel_spec{.gpus_per_node = 2, .tp = 2}),
                    Catch::Contains("model.mixer is mamba2 (a state-space stack): parallel.tp must be 1"));
  CHECK_NOTHROW(estimate_per_gpu(m, run, parallel_spec{.gpus_per_node = 2}));
  training_spec lora = run;
  lora.target = training_target::lora;
  lora.lora_rank = 8;
  CHECK_THROWS_WITH(estimate(m, lora), Catch::Contains("model.mixer is mamba2"));
  model_spec no_chunk = m;
  no_chunk.ssm_chunk = 0;
  CHECK_THROWS_WITH(validate(no_chunk), Catch::Contains("model.ssm_chunk"));
  model_spec odd_heads = m;
  odd_heads.ssm_heads = 3;
  CHECK_THROWS_WITH(validate(odd_heads), Catch::Contains("model.ssm_heads"));
}

TEST_CASE("mamba2: bare Infinity and NaN in a config.json read as strings, never inside strings") {
  using memscale::json_io::detail::python_constants_as_strings;
  CHECK(python_constants_as_strings(R"({"a": [0.0, Infinity], "b": -Infinity, "c": NaN})") ==
        R"({"a": [0.0, "Infinity"], "b": "-Infinity", "c": "NaN"})");
  CHECK(python_constants_as_strings(R"({"name": "NaN \"Infinity\""})") == R"({"name": "NaN \"Infinity\""})");
}

}  // namespace mamba2_test
