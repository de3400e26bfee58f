// The Mamba-1 layer kind (graph/layers/mamba.hpp) and the mamba / falcon_mamba readers:
// published parameter counts, MambaConfig defaults, one block's saved bytes against the
// listing of docs/research/ssm-saved-tensors.txt, the CPU-traced records of
// docs/data/cpu_traced_ssm.json, and the paths that refuse a state-space stack by name.
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

namespace mamba_test {
namespace {

using memscale::json_io::json;

using memscale_test::block_saved_bytes;
using memscale_test::ssm_config;
using memscale_test::ssm_record;
using memscale_test::ssm_records;

}  // namespace

TEST_CASE("mamba: parameter counts equal the published totals") {
  using memscale::json_io::load_hf_model;
  // tools/families/ssm_vision_params.py; Hub model cards: 129M (exact sum), 2.77B, 7.27B.
  CHECK(memscale::parameter_count(load_hf_model(ssm_config("state-spaces--mamba-130m-hf"))) == 129'135'360ULL);
  CHECK(memscale::parameter_count(load_hf_model(ssm_config("state-spaces--mamba-2.8b-hf"))) == 2'768'345'600ULL);
  // intermediate_size 8192 wins over expand 16; untied head; no parameters in the dt/B/C norms.
  CHECK(memscale::parameter_count(load_hf_model(ssm_config("tiiuae--falcon-mamba-7b"))) == 7'272'665'088ULL);
}

TEST_CASE("mamba: a config that omits keys reads as MambaConfig / FalconMambaConfig") {
  using namespace memscale;
  const model_spec m = json_io::model_from_hf_config(json{{"model_type", "mamba"}});
  CHECK(m.mixer == mixer_kind::mamba1);
  CHECK(m.layers == 32);
  CHECK(m.hidden == 768);
  CHECK(m.vocab == 50280);
  CHECK(m.ssm_inner == 1536);   // int(expand 2 * hidden)
  CHECK(m.ssm_state == 16);
  CHECK(m.ssm_conv == 4);
  CHECK(m.ssm_dt_rank == 48);   // "auto": ceil(768 / 16)
  CHECK(m.ssm_proj_bias);       // use_bias True
  CHECK(m.ssm_conv_bias);
  CHECK(m.residual_fp32);
  CHECK(m.tied_embeddings);
  CHECK(m.ssm_dt_norms == ssm_dt_norm_kind::none);
  const model_spec f = json_io::model_from_hf_config(json{{"model_type", "falcon_mamba"}});
  CHECK_FALSE(f.ssm_proj_bias);  // FalconMambaConfig use_bias False
  CHECK(f.ssm_dt_norms == ssm_dt_norm_kind::weightless);
  // time_step_rank "auto" rounds up; a count is taken as given; expand may be a float.
  CHECK(json_io::model_from_hf_config(json{{"model_type", "mamba"}, {"hidden_size", 100}}).ssm_dt_rank == 7);
  CHECK(json_io::model_from_hf_config(json{{"model_type", "mamba"}, {"time_step_rank", 9}}).ssm_dt_rank == 9);
  CHECK(json_io::model_from_hf_config(json{{"model_type", "mamba"}, {"expand", 1.5}}).ssm_inner == 1152);
  CHECK(json_io::model_from_hf_config(json{{"model_type", "mamba"}, {"expand", 16}, {"intermediate_size", 512}})
            .ssm_inner == 512);
  CHECK_THROWS_WITH(json_io::model_from_hf_config(json{{"model_type", "mamba"}, {"time_step_rank", "full"}}),
                    Catch::Contains("config.time_step_rank"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(json{{"model_type", "mamba"}, {"hidden_act", "gelu"}}),
                    Catch::Contains("config.hidden_act"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(json{{"model_type", "mamba"}, {"use_mambapy", true}}),
                    Catch::Contains("config.use_mambapy"));
}

TEST_CASE("mamba: one block saves what ssm-saved-tensors.txt lists (torch path, torch 1.13)") {
  using namespace memscale;
  // The listing's block: B 2, L 64, hidden 64, inner 128, state 16 (the records' small model).
  json record = ssm_record("cpu-mamba-small-b2-s128-adamw");
  record["train"]["seq"] = 64;
  const model_spec m = json_io::model_for_record(record);
  const training_spec fp32 = json_io::run_from_record(record);
  REQUIRE(ssm_kernels_of(fp32) == ssm_kernel_choice::torch);
  // fp32: 3,888,640 bytes besides the block input, which the norm keeps (2 x 64 x 64 x 4 = 32,768).
  CHECK(block_saved_bytes(m, fp32) == 3'888'640ULL + 32'768ULL);
  // bf16: 4,156,416 bytes; the fp32 residual input is kept by nothing (the norm reads a bf16 copy).
  training_spec bf16 = fp32;
  bf16.prec = precision::pure_bf16;
  CHECK(block_saved_bytes(m, bf16) == 4'156'416ULL);
}

// Records each allocation's size, as the allocator replay sees the training stream.
struct allocation_sizes {
  std::vector<std::uint64_t> sizes;
  void alloc(std::uint32_t, std::uint64_t size) { sizes.push_back(size); }
  void free(std::uint32_t) {}
  void enter(std::uint32_t, memscale::allocator::moment) {}
};

TEST_CASE("mamba: the torch loop's backward makes its (B, D, L, N) gradients as blocks of their own", "[allocator][stream]") {
  using namespace memscale;
  const json record = ssm_record("cpu-mamba-small-b2-s128-adamw");
  const model_spec m = json_io::model_for_record(record);
  const training_spec run = json_io::run_from_record(record);
  REQUIRE(ssm_kernels_of(run) == ssm_kernel_choice::torch);
  const auto built = std::make_unique<model_graph>(build(m, run));
  allocation_sizes sink;
  allocator::emit_training_steps<32768, 8192>(built->stack(), built->run, allocator::step_stream_options{}, sink);
  // The two select_backward accumulators and each step's zero-filled gradient, fp32 (B, D, L, N):
  // three blocks in the H100 falcon_mamba history, never one of three times the size.
  const std::uint64_t tdn = 2ULL * m.ssm_inner * 128 * m.ssm_state * 4;
  CHECK(*std::max_element(sink.sizes.begin(), sink.sizes.end()) < 2 * tdn);
  CHECK(std::count(sink.sizes.begin(), sink.sizes.end(), tdn) >= static_cast<std::ptrdiff_t>(3 * m.layers));
}

TEST_CASE("mamba: the CPU-traced mamba and falcon_mamba records are modelled within the band") {
  REQUIRE(memscale_test::check_ssm_records_within_band({"mamba", "falcon_mamba"}) == 7);
}

TEST_CASE("mamba: the fused path keeps far less than the torch loop, the default follows the device") {
  using namespace memscale;
  const model_spec m = json_io::load_hf_model(ssm_config("state-spaces--mamba-130m-hf"));
  training_spec run{.micro_batch = 1, .seq_len = 1024, .prec = precision::amp_bf16};
  CHECK(ssm_kernels_of(run) == ssm_kernel_choice::fused);  // CUDA
  training_spec cpu = run;
  cpu.device = device_kind::cpu;
  CHECK(ssm_kernels_of(cpu) == ssm_kernel_choice::torch);
  training_spec torch_path = run;
  torch_path.ssm_kernels = ssm_kernel_choice::torch;
  const std::uint64_t fused = block_saved_bytes(m, run);
  const std::uint64_t loop = block_saved_bytes(m, torch_path);
  // Torch: ~3 x B*D*L*N fp32 (dA, dB, the per-step states) = 302 MB of 406 MB per block at L 1024,
  // and under autocast each step's matmul saves a 16-bit copy of its fp32 state: B*D*N*L*2 = 48 MiB.
  // Fused: the fp32 norm (6.3 MB), xz's 16-bit copy (6.3 MB), the scan output (3.1 MB), x_dbl, B,
  // C, in_proj's cast input, and autocast's 16-bit copies of the four projection weights (7.1 MB).
  CHECK(loop == 405'943'296ULL);
  CHECK(fused == 25'202'688ULL);
  // The report names the assumption.
  const json report = json_io::estimate_report_json(m, run, estimate(m, run));
  CHECK(report.at("ssm_kernels") == "fused");
  CHECK(json_io::estimate_report_json(m, cpu, estimate(m, cpu)).at("ssm_kernels") == "torch");
}

TEST_CASE("mamba: paths that assume attention refuse a state-space stack by name") {
  using namespace memscale;
  const model_spec m = json_io::load_hf_model(ssm_config("state-spaces--mamba-130m-hf"));
  CHECK_THROWS_WITH(estimate_inference(m, inference_spec{}), Catch::Contains("model.mixer"));
  const training_spec run{.micro_batch = 1, .seq_len = 512, .prec = precision::amp_bf16};
  CHECK_THROWS_WITH(estimate_per_gpu(m, run, parallel_spec{.gpus_per_node = 2, .tp = 2}), Catch::Contains("model.mixer"));
  CHECK_NOTHROW(estimate_per_gpu(m, run, parallel_spec{.gpus_per_node = 2}));
  // The cluster planner searches data parallelism and pipeline stages only, and refuses a fixed tp.
  const cluster_spec node{.gpu = *find_gpu("a100-80gb"), .gpus_per_node = 8, .nodes = 1};
  const cluster_plan plan = plan_cluster(m, run, node, {.global_batch = 8});
  REQUIRE(plan.found);
  for (std::size_t i = 0; i < plan.count; ++i) CHECK(plan.considered[i].layout.tp == 1);
  CHECK_THROWS_WITH(plan_cluster(m, run, node, {.global_batch = 8, .tp = 2}), Catch::Contains("model.mixer"));
  training_spec lora = run;
  lora.target = training_target::lora;
  lora.lora_rank = 8;
  CHECK_THROWS_WITH(estimate(m, lora), Catch::Contains("model.mixer"));
  // The model checks: no attention fields on a Mamba stack, weighted dt norms (Jamba) not yet.
  model_spec with_heads = m;
  with_heads.heads = 12;
  CHECK_THROWS_WITH(validate(with_heads), Catch::Contains("model.heads"));
  model_spec weighted = m;
  weighted.ssm_dt_norms = ssm_dt_norm_kind::weighted;
  CHECK_THROWS_WITH(validate(weighted), Catch::Contains("model.ssm_dt_norms"));
  model_spec no_state = m;
  no_state.ssm_state = 0;
  CHECK_THROWS_WITH(validate(no_state), Catch::Contains("model.ssm_state"));
}

}  // namespace mamba_test
