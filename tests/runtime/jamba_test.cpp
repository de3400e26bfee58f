// The jamba reader and its hybrid layers (graph/layers/hybrid.hpp, layer_pattern.hpp): the
// published parameter total, JambaConfig defaults, the layer period and its refusals, the
// CPU-traced records of docs/data/cpu_traced_ssm.json and the paths refused by name.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "memscale/inference.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "ssm_test_support.hpp"

namespace jamba_test {
namespace {

using memscale::json_io::json;

using memscale_test::ssm_config;
using memscale_test::ssm_record;
using memscale_test::ssm_records;

json jamba_with(const char* key, const json& value) {
  json c = json::parse(std::ifstream(ssm_config("ai21labs--AI21-Jamba-1.5-Mini")));
  c[key] = value;
  return c;
}

}  // namespace

TEST_CASE("jamba: parameter counts equal the published totals") {
  using memscale::json_io::load_hf_model;
  // AI21-Jamba-1.5-Mini (Jamba paper: 51.6B total, 12B active; card 52B): 4 attention and 28
  // Mamba layers, 16 MoE layers of 16 experts. Jamba-v0.1 has the same sizing keys.
  CHECK(memscale::parameter_count(load_hf_model(ssm_config("ai21labs--AI21-Jamba-1.5-Mini"))) == 51'570'323'328ULL);
  // The traced small model: sum(p.numel()) of the re-implementation.
  const json r = ssm_record("cpu-jamba-small-b2-s128-adamw");
  CHECK(memscale::parameter_count(memscale::json_io::model_for_record(r)) == r.at("model").at("params").get<std::uint64_t>());
}

TEST_CASE("jamba: a config that omits keys reads as JambaConfig") {
  using namespace memscale;
  const model_spec m = json_io::model_from_hf_config(json{{"model_type", "jamba"}});
  CHECK(m.layers == 32);
  CHECK(m.hidden == 4096);
  CHECK(m.heads == 32);
  CHECK(m.kv_heads == 8);
  CHECK(m.ffn == 14336);
  CHECK(m.vocab == 65536);
  CHECK(m.positions == position_kind::none);
  CHECK(m.hybrid_mixer == mixer_kind::mamba1);
  CHECK(m.attention_layer_period == 8);
  CHECK(m.attention_layer_offset == 4);
  CHECK(m.experts == 16);
  CHECK(m.experts_per_token == 2);
  CHECK(m.moe_layer_step == 2);
  CHECK(m.moe_layer_offset == 0);  // expert_layer_offset 1 of period 2: the period's last layer
  CHECK(m.ssm_inner == 8192);      // mamba_expand 2 x hidden
  CHECK(m.ssm_state == 16);
  CHECK(m.ssm_conv == 4);
  CHECK(m.ssm_dt_rank == 256);     // "auto": ceil(4096 / 16)
  CHECK(m.ssm_dt_norms == ssm_dt_norm_kind::weighted);
  CHECK_FALSE(m.tied_embeddings);
  CHECK(graph_layers::layers_per_block(m) == 8);  // lcm(8, 2)
  // The defaults are Jamba-v0.1's shape: the same total as the 1.5-Mini config.
  CHECK(parameter_count(m) == 51'570'323'328ULL);
  // num_experts 1: every layer a JambaMLP.
  const model_spec dense = json_io::model_from_hf_config(json{{"model_type", "jamba"}, {"num_experts", 1}});
  CHECK(dense.experts == 0);
  CHECK(dense.moe_layer_step == 0);
}

TEST_CASE("jamba: layers and experts follow the periods and their offsets") {
  using namespace memscale;
  const model_spec m = json_io::model_from_hf_config(json{{"model_type", "jamba"}, {"expert_layer_period", 4},
                                                           {"expert_layer_offset", 1}, {"attn_layer_period", 2},
                                                           {"attn_layer_offset", 1}, {"num_hidden_layers", 8}});
  REQUIRE(graph_layers::layers_per_block(m) == 4);
  for (std::uint64_t i = 0; i < 4; ++i) {
    const model_spec layer = graph_layers::layer_at(m, i);
    CHECK((layer.mixer == mixer_kind::attention) == (i % 2 == 1));
    CHECK((layer.experts > 0) == (i % 4 == 1));
  }
}

TEST_CASE("jamba: a bad period or offset is refused by name") {
  using namespace memscale;
  // 30 layers are not whole periods of lcm(8, 2) = 8.
  CHECK_THROWS_WITH(json_io::model_from_hf_config(jamba_with("num_hidden_layers", 30)),
                    Catch::Contains("config.num_hidden_layers") && Catch::Contains("lcm"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(jamba_with("attn_layer_offset", 8)),
                    Catch::Contains("config.attn_layer_offset"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(jamba_with("expert_layer_period", 0)),
                    Catch::Contains("config.expert_layer_period"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(jamba_with("output_router_logits", true)),
                    Catch::Contains("config.output_router_logits"));
}

TEST_CASE("jamba: the CPU-traced records are modelled within the band") {
  REQUIRE(memscale_test::check_ssm_records_within_band({"jamba"}) == 2);
}

TEST_CASE("jamba: the kernel path keeps what its separate kernels save, far less than the torch loop") {
  using namespace memscale;
  const json r = ssm_record("cpu-jamba-small-b2-s128-adamw");
  const model_spec m = json_io::model_for_record(r);
  training_spec run = json_io::run_from_record(r);
  run.ssm_kernels = ssm_kernel_choice::fused;
  REQUIRE(run.prec == precision::fp32);
  const std::uint64_t t = run.micro_batch * run.seq_len;
  const std::uint64_t d = m.ssm_inner;
  const std::uint64_t n = m.ssm_state;
  const std::uint64_t dbl = m.ssm_dt_rank + 2 * n;  // x_proj's width
  // fp32, T tokens: in_proj's output (CausalConv1dFn's x view) 2D; the conv output (u) D and
  // x_proj's contiguous copy of it D; x_proj's output R + 2N (the norms read views of it); per
  // norm rsqrt 1 and the normalised slice, x^2 before torch 2.2 (R + 2N over the three); dt_proj's
  // input R; the scan's delta, z and out copies 3D and B and C 2N; out_proj's contiguous input D;
  // A and exp's result 2DN; the chunk-boundary states B x D x 1 chunk x 2N.
  std::uint64_t per_token = 2 * d + d + d + dbl + 3 + dbl + m.ssm_dt_rank + 3 * d + 2 * n + d;
  if (graph_layers::mean_keeps_input(run.torch_version)) per_token += dbl;
  const std::uint64_t by_hand = 4 * (t * per_token + 2 * d * n + run.micro_batch * d * 2 * n);
  const std::uint64_t fused = memscale_test::mixer_saved_bytes(m, run, graph_layers::mamba1_mixer);
  CHECK(fused == by_hand);
  training_spec loop = run;
  loop.ssm_kernels = ssm_kernel_choice::torch;
  CHECK(fused < memscale_test::mixer_saved_bytes(m, loop, graph_layers::mamba1_mixer));
  // Both paths own the same weights; the whole step keeps less on the kernel path, and the
  // report names the path assumed.
  CHECK(estimate(m, run).parameter_count == estimate(m, loop).parameter_count);
  CHECK(estimate(m, run).steady.tensor < estimate(m, loop).steady.tensor);
  CHECK(json_io::estimate_report_json(m, run, estimate(m, run)).at("ssm_kernels") == "fused");
  run.ssm_kernels = ssm_kernel_choice::framework_default;
  run.device = device_kind::cuda;
  CHECK(json_io::estimate_report_json(m, run, estimate(m, run)).at("ssm_kernels") == "fused");
}

TEST_CASE("jamba: generate(), selective checkpointing, sharding and LoRA are refused by name") {
  using namespace memscale;
  const json r = ssm_record("cpu-jamba-small-b2-s128-adamw");
  const model_spec m = json_io::model_for_record(r);
  training_spec run = json_io::run_from_record(r);
  run.ssm_kernels = ssm_kernel_choice::torch;
  CHECK_THROWS_WITH(build_forward(m, run, 0), Catch::Contains("model.hybrid_mixer"));
  run.sac = selective_ac::op_save_list;
  CHECK_THROWS_WITH(estimate(m, run), Catch::Contains("run.sac"));
  run.sac = selective_ac::none;
  // FSDP would wrap a period of layers as one unit; LoRA targets miss the Mamba projections.
  run.shard = sharding::full;
  CHECK_THROWS_WITH(estimate(m, run), Catch::Contains("run.shard"));
  run.shard = sharding::none;
  CHECK_NOTHROW(estimate(m, run));
  run.target = training_target::lora;
  run.lora_rank = 8;
  CHECK_THROWS_WITH(estimate(m, run), Catch::Contains("model.hybrid_mixer") && Catch::Contains("LoRA"));
}

}  // namespace jamba_test
