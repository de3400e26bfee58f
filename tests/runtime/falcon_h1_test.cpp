// The falcon_h1 reader and its hybrid layers (graph/layers/hybrid.hpp): the published parameter
// total, FalconH1Config defaults, the muP products and the mup_vector buffer, the refusals, the
// CPU-traced records of docs/data/cpu_traced_ssm.json and the paths refused by name.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "memscale/inference.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "ssm_test_support.hpp"

namespace falcon_h1_test {
namespace {

using memscale::json_io::json;

using memscale_test::ssm_config;
using memscale_test::ssm_record;
using memscale_test::ssm_records;

json small_with(const char* key, const json& value) {
  json c = ssm_record("cpu-falcon_h1-small-b2-s256-adamw").at("model").at("hf_config");
  c[key] = value;
  return c;
}

}  // namespace

TEST_CASE("falcon_h1: parameter counts equal the published totals") {
  using memscale::json_io::load_hf_model;
  // Falcon-H1-0.5B-Base (Falcon-H1 report: 0.52B): 36 layers of attention (8 x 64, 2 kv heads),
  // a Mamba-2 mixer (24 x 64, state 128) and a 2048-wide SwiGLU.
  CHECK(memscale::parameter_count(load_hf_model(ssm_config("tiiuae--Falcon-H1-0.5B-Base"))) == 521'411'104ULL);
  const json r = ssm_record("cpu-falcon_h1-small-b2-s256-adamw");
  CHECK(memscale::parameter_count(memscale::json_io::model_for_record(r)) == r.at("model").at("params").get<std::uint64_t>());
}

TEST_CASE("falcon_h1: a config that omits keys reads as FalconH1Config") {
  using namespace memscale;
  const model_spec m = json_io::model_from_hf_config(json{{"model_type", "falcon_h1"}});
  CHECK(m.layers == 32);
  CHECK(m.hidden == 4096);
  CHECK(m.heads == 32);
  CHECK(m.kv_heads == 8);
  CHECK(m.ffn == 14336);
  CHECK(m.vocab == 128000);
  CHECK(m.positions == position_kind::rotary);
  CHECK(m.hybrid_mixer == mixer_kind::mamba2);
  CHECK(m.ssm_beside_attention);
  CHECK(m.mup_multipliers);
  CHECK(m.scale_embeddings);
  CHECK(m.logits_scale);
  CHECK(m.ssm_inner == 1024);  // mamba_d_ssm
  CHECK(m.ssm_heads == 128);   // d_head "auto": 1024 / 128 = 8
  CHECK(m.ssm_groups == 1);
  CHECK(m.ssm_state == 256);
  CHECK(m.ssm_chunk == 256);
  CHECK(m.ssm_conv == 4);
  CHECK_FALSE(m.ssm_gated_norm);  // mamba_rms_norm False
  CHECK_FALSE(m.tied_embeddings);
  CHECK(graph_layers::layers_per_block(m) == 1);
  // mamba_d_ssm None: mamba_expand x hidden.
  const model_spec wide = json_io::model_from_hf_config(json{{"model_type", "falcon_h1"}, {"mamba_d_ssm", nullptr}});
  CHECK(wide.ssm_inner == 8192);
}

TEST_CASE("falcon_h1: the mup_vector buffer of every layer is counted in the model's dtype") {
  using namespace memscale;
  const json r = ssm_record("cpu-falcon_h1-small-b2-s256-adamw");
  const model_spec m = json_io::model_for_record(r);
  const training_spec run = json_io::run_from_record(r);
  const auto g = std::make_unique<graph>(build(m, run).stack());
  // 2 x 512 + 2 x 1 x 32 + 8 = 1,096 fp32 elements per layer, 4 layers (the trace's buffers).
  CHECK(g->buffers.value == 1'096ULL * 4 * 4);
  CHECK(r.at("detail").at("buffers_enum").get<std::uint64_t>() == 1'096ULL * 4 * 4);
}

TEST_CASE("falcon_h1: unmodelled settings are refused by name") {
  using namespace memscale;
  CHECK_THROWS_WITH(json_io::model_from_hf_config(small_with("mamba_n_heads", 7)), Catch::Contains("config.mamba_n_heads"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(small_with("mamba_d_head", 32)), Catch::Contains("config.mamba_d_head"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(small_with("projectors_bias", true)),
                    Catch::Contains("config.projectors_bias"));
  json gated = small_with("mamba_rms_norm", true);
  gated["mamba_norm_before_gate"] = true;  // FalconH1RMSNormGated normalising before the gate
  CHECK_THROWS_WITH(json_io::model_from_hf_config(gated), Catch::Contains("config.mamba_norm_before_gate"));
  // Gate first, one group: Mamba-2's gated RMSNorm, with its weight.
  CHECK(json_io::model_from_hf_config(small_with("mamba_rms_norm", true)).ssm_gated_norm);
  CHECK_THROWS_WITH(json_io::model_from_hf_config(small_with("ssm_multipliers", json::array({1.0, 2.0}))),
                    Catch::Contains("config.ssm_multipliers"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(small_with("attn_layer_indices", json::array({0, 1}))),
                    Catch::Contains("config.attn_layer_indices"));
}

TEST_CASE("falcon_h1: the CPU-traced records are modelled within the band") {
  REQUIRE(memscale_test::check_ssm_records_within_band({"falcon_h1"}) == 2);
}

TEST_CASE("falcon_h1: the kernel path keeps the mup product and the ungated scan output, far less than torch_forward") {
  using namespace memscale;
  const json r = ssm_record("cpu-falcon_h1-small-b2-s256-adamw");
  const model_spec m = json_io::model_for_record(r);
  training_spec run = json_io::run_from_record(r);
  run.ssm_kernels = ssm_kernel_choice::fused;
  REQUIRE(run.prec == precision::fp32);
  REQUIRE_FALSE(m.ssm_gated_norm);
  const std::uint64_t t = run.micro_batch * run.seq_len;
  // fp32: MambaSplitConv1dScanCombinedFn saves in_proj's output times mup_vector (2D + 2GN + h
  // wide; in_proj's own output is freed) and out_x (D), no rstd without mamba_rms_norm.
  const std::uint64_t projection = 2 * m.ssm_inner + 2 * m.ssm_groups * m.ssm_state + m.ssm_heads;
  const std::uint64_t fused = memscale_test::mixer_saved_bytes(m, run, graph_layers::hybrid_mamba2_mixer);
  CHECK(fused == 4 * t * (projection + m.ssm_inner));
  training_spec loop = run;
  loop.ssm_kernels = ssm_kernel_choice::torch;
  CHECK(fused < memscale_test::mixer_saved_bytes(m, loop, graph_layers::hybrid_mamba2_mixer));
  CHECK(estimate(m, run).parameter_count == estimate(m, loop).parameter_count);
  CHECK(estimate(m, run).steady.tensor < estimate(m, loop).steady.tensor);
  CHECK(json_io::estimate_report_json(m, run, estimate(m, run)).at("ssm_kernels") == "fused");
  // Under autocast the product is promoted to the fp32 buffer's dtype: the kernels keep it in fp32.
  training_spec amp = run;
  amp.prec = precision::amp_bf16;
  amp.device = device_kind::cuda;
  const std::uint64_t hidden_cast = 2 * m.hidden * m.ssm_inner;  // out_proj's bf16 weight
  CHECK(memscale_test::mixer_saved_bytes(m, amp, graph_layers::hybrid_mamba2_mixer) ==
        4 * t * (projection + m.ssm_inner) + 2 * t * m.hidden + 2 * m.hidden * projection + hidden_cast);
}

TEST_CASE("falcon_h1: generate() is refused by name") {
  using namespace memscale;
  const json r = ssm_record("cpu-falcon_h1-small-b2-s256-adamw");
  const model_spec m = json_io::model_for_record(r);
  training_spec run = json_io::run_from_record(r);
  run.ssm_kernels = ssm_kernel_choice::torch;
  CHECK_THROWS_WITH(build_forward(m, run, 0), Catch::Contains("model.hybrid_mixer"));
}

}  // namespace falcon_h1_test
