// The nemotron_h reader and its single-mixer blocks (graph/recipes/decoder_stack.hpp
// single_mixer_layer): the published parameter totals (Nemotron Nano 2, Nemotron 3 Nano's MoE
// layers), NemotronHConfig defaults, the per-layer pattern in both spellings, the refusals by name
// and the CPU-traced records of docs/data/cpu_traced_ssm.json.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstddef>
#include <cstdint>
#include <string>

#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "ssm_test_support.hpp"

namespace nemotron_h_test {
namespace {

using memscale::json_io::json;

using memscale_test::ssm_config;
using memscale_test::ssm_record;

json small_config() { return ssm_record("cpu-nemotron_h-small-b2-s256-adamw").at("model").at("hf_config"); }

json small_with(const char* key, const json& value) {
  json c = small_config();
  c[key] = value;
  return c;
}

}  // namespace

TEST_CASE("nemotron_h: parameter counts equal the published totals") {
  using memscale::json_io::load_hf_model;
  // NVIDIA-Nemotron-Nano-9B-v2 (model card: 8.89B): 27 Mamba-2 (128 x 80, 8 groups, state 128),
  // 25 relu2 MLP (15680) and 4 attention (40 x 128, 8 kv heads) layers of 4480, untied.
  CHECK(memscale::parameter_count(load_hf_model(ssm_config("nvidia--NVIDIA-Nemotron-Nano-9B-v2"))) == 8'888'227'328ULL);
  // NVIDIA-Nemotron-3-Nano-30B-A3B (model card: 31.6B total): 23 Mamba-2 (64 x 64), 23 MoE (128 relu2
  // experts of 1856, a shared one of 3712) and 6 attention (32 x 128, 2 kv heads) layers of 2688;
  // tools/families/ssm_vision_params.py sums the same shapes to the same total.
  CHECK(memscale::parameter_count(load_hf_model(ssm_config("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"))) ==
        31'577'937'344ULL);
  for (const char* id : {"cpu-nemotron_h-small-b2-s256-adamw", "cpu-nemotron_h_moe-small-b2-s256-adamw"}) {
    const json r = ssm_record(id);
    CHECK(memscale::parameter_count(memscale::json_io::model_for_record(r)) == r.at("model").at("params").get<std::uint64_t>());
  }
}

TEST_CASE("nemotron_h: 'E' layers are NemotronHMoE, the MLP layers keep intermediate_size") {
  using namespace memscale;
  const model_spec nano = json_io::load_hf_model(ssm_config("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"));
  CHECK(nano.experts == 128);
  CHECK(nano.experts_per_token == 6);
  CHECK(nano.ffn == 1856);
  CHECK(nano.shared_expert_ffn == 3712);
  CHECK_FALSE(nano.shared_expert_gate);
  CHECK(nano.router_fp32);
  CHECK(nano.router_score_correction);
  CHECK(nano.layer_blocks[1] == layer_block_kind::moe);
  // 23 copies of (M, E), the six attention layers before.
  const graph_layers::single_mixer_grouping g = graph_layers::group_single_mixer_layers(nano);
  CHECK(g.repeats == 23);
  CHECK(g.unit_layers() == 2);
  CHECK(g.leading[static_cast<std::size_t>(layer_block_kind::attention)] == 6);
  CHECK(graph_layers::moe_layers(nano) == 23);
  // A stack with both: '-' layers run intermediate_size, 'E' layers the experts.
  json both = ssm_record("cpu-nemotron_h_moe-small-b2-s256-adamw").at("model").at("hf_config");
  const std::uint64_t moe_only = parameter_count(json_io::model_from_hf_config(both));
  both["hybrid_override_pattern"] = "MEM*EM-";
  both["num_hidden_layers"] = 7;
  const model_spec mixed = json_io::model_from_hf_config(both);
  CHECK(mixed.dense_ffn == 512);
  CHECK(mixed.ffn == 384);
  CHECK(parameter_count(mixed) == moe_only + 2 * 256 * 512 + 256);  // NemotronHMLP up, down and the block's norm
}

TEST_CASE("nemotron_h: a pattern reads as one block per layer") {
  using namespace memscale;
  const model_spec m = json_io::model_from_hf_config(small_config());
  CHECK(m.layers == 7);
  CHECK(m.single_mixer_blocks);
  CHECK(m.hybrid_mixer == mixer_kind::mamba2);
  CHECK(m.mixer == mixer_kind::attention);
  CHECK(m.positions == position_kind::none);
  CHECK(m.mlp == mlp_kind::relu_squared);
  CHECK(m.layer_blocks[0] == layer_block_kind::mamba2);
  CHECK(m.layer_blocks[1] == layer_block_kind::mlp);
  CHECK(m.layer_blocks[3] == layer_block_kind::attention);
  CHECK(m.ssm_inner == 512);  // mamba_num_heads x mamba_head_dim
  CHECK(m.ssm_groups == 2);
  CHECK(m.ssm_chunk == 64);
  // M-M*-M-: three copies of an (M, -) unit after the attention layer.
  const graph_layers::single_mixer_grouping g = graph_layers::group_single_mixer_layers(m);
  CHECK(g.repeats == 3);
  CHECK(graph_layers::layers_per_block(m) == 2);
  CHECK(g.kinds == 3);
  CHECK(g.order[0] == layer_block_kind::mamba2);
  CHECK(g.order[1] == layer_block_kind::mlp);
  CHECK(g.leading[static_cast<std::size_t>(layer_block_kind::attention)] == 1);
  // Nemotron Nano 2: 25 copies of (M, -), the other two Mamba-2 and the four attention layers before.
  const graph_layers::single_mixer_grouping nano =
      graph_layers::group_single_mixer_layers(json_io::load_hf_model(ssm_config("nvidia--NVIDIA-Nemotron-Nano-9B-v2")));
  CHECK(nano.repeats == 25);
  CHECK(nano.unit_layers() == 2);
  CHECK(nano.leading[static_cast<std::size_t>(layer_block_kind::mamba2)] == 2);
  CHECK(nano.leading[static_cast<std::size_t>(layer_block_kind::attention)] == 4);
  // layers_block_type, current and legacy names, reads as the same pattern.
  json listed = small_config();
  listed.erase("hybrid_override_pattern");
  listed["layers_block_type"] =
      json::array({"mamba", "mlp", "linear_attention", "full_attention", "mamba", "mlp", "mlp"});
  const model_spec l = json_io::model_from_hf_config(listed);
  CHECK(l.layer_blocks[2] == layer_block_kind::mamba2);
  CHECK(l.layer_blocks[3] == layer_block_kind::attention);
  CHECK(l.layer_blocks[6] == layer_block_kind::mlp);
  CHECK(parameter_count(l) == parameter_count(json_io::model_from_hf_config(small_with("hybrid_override_pattern", "M-M*M--"))));
}

TEST_CASE("nemotron_h: NemotronHConfig's defaults fill what a config omits") {
  using namespace memscale;
  const model_spec m = json_io::model_from_hf_config(json{{"model_type", "nemotron_h"}, {"hybrid_override_pattern", "M*-"}});
  CHECK(m.layers == 3);
  CHECK(m.hidden == 4096);
  CHECK(m.heads == 32);
  CHECK(m.kv_heads == 8);
  CHECK(m.head_dim == 128);
  CHECK(m.ffn == 21504);
  CHECK(m.vocab == 131072);
  CHECK(m.ssm_heads == 128);
  CHECK(m.ssm_inner == 128 * 64);
  CHECK(m.ssm_groups == 8);
  CHECK(m.ssm_state == 128);
  CHECK(m.ssm_conv == 4);
  CHECK(m.ssm_chunk == 128);
  CHECK(m.ssm_gated_norm);
  CHECK_FALSE(m.tied_embeddings);
  CHECK(m.upcast_logits);
  // No pattern: NemotronHConfig's default list, mamba, moe, attention, moe, and its MoE defaults.
  const model_spec d = json_io::model_from_hf_config(json{{"model_type", "nemotron_h"}});
  CHECK(d.layers == 4);
  CHECK(d.layer_blocks[1] == layer_block_kind::moe);
  CHECK(d.layer_blocks[2] == layer_block_kind::attention);
  CHECK(d.experts == 8);
  CHECK(d.experts_per_token == 2);
  CHECK(d.ffn == 7688);
  CHECK(d.shared_expert_ffn == 7688);
  // The legacy mamba_* spellings win (NemotronHConfig.__post_init__).
  json legacy{{"model_type", "nemotron_h"}, {"hybrid_override_pattern", "M"}, {"n_groups", 8}, {"mamba_n_groups", 4}};
  CHECK(json_io::model_from_hf_config(legacy).ssm_groups == 4);
}

TEST_CASE("nemotron_h: unmodelled or invalid patterns and settings are refused by name") {
  using namespace memscale;
  // 'E' layers are read (NemotronHConfig's MoE defaults where the config has no MoE keys); their
  // latent projections and an impossible top-k are refused.
  CHECK(json_io::model_from_hf_config(small_with("hybrid_override_pattern", "M-E*-ME")).experts == 8);
  json latent = small_with("hybrid_override_pattern", "M-E*-ME");
  latent["moe_latent_size"] = 64;
  CHECK_THROWS_WITH(json_io::model_from_hf_config(latent), Catch::Contains("config.moe_latent_size"));
  json picks = small_with("hybrid_override_pattern", "M-E*-ME");
  picks["num_experts_per_tok"] = 9;
  CHECK_THROWS_WITH(json_io::model_from_hf_config(picks), Catch::Contains("config.num_experts_per_tok"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(small_with("hybrid_override_pattern", "M-X")),
                    Catch::Contains("config.hybrid_override_pattern") && Catch::Contains("'X'"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(small_with("hybrid_override_pattern", "")),
                    Catch::Contains("config.hybrid_override_pattern"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(small_with("hybrid_override_pattern", std::string(129, 'M'))),
                    Catch::Contains("at most 128"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(small_with("num_hidden_layers", 8)),
                    Catch::Contains("config.num_hidden_layers"));
  json listed = small_config();
  listed.erase("hybrid_override_pattern");
  listed["layers_block_type"] = json::array({"mamba", "conv"});
  CHECK_THROWS_WITH(json_io::model_from_hf_config(listed), Catch::Contains("config.layers_block_type"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(small_with("mlp_hidden_act", "gelu")),
                    Catch::Contains("config.mlp_hidden_act"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(small_with("mamba_hidden_act", "gelu")),
                    Catch::Contains("config.mamba_hidden_act"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(small_with("n_groups", 3)), Catch::Contains("model.ssm_groups"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(small_with("mamba_proj_bias", true)),
                    Catch::Contains("config.mamba_proj_bias"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(small_with("attention_bias", true)),
                    Catch::Contains("config.attention_bias"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(small_with("sliding_window", 128)),
                    Catch::Contains("config.sliding_window"));
}

TEST_CASE("nemotron_h: the CPU-traced records are modelled within the band") {
  REQUIRE(memscale_test::check_ssm_records_within_band({"nemotron_h"}) == 3);
}

TEST_CASE("nemotron_h: the kernel path keeps zxbcdt, out_x and the grouped norm's rstd, far less than torch_forward") {
  using namespace memscale;
  const json r = ssm_record("cpu-nemotron_h-small-b2-s256-adamw");
  const model_spec m = json_io::model_for_record(r);
  training_spec run = json_io::run_from_record(r);
  run.ssm_kernels = ssm_kernel_choice::fused;
  REQUIRE(run.prec == precision::fp32);
  REQUIRE(m.ssm_gated_norm);
  const std::uint64_t t = run.micro_batch * run.seq_len;
  // fp32: in_proj's output (2D + 2GN + h), out_x (D) and rstd, one per token and group (G).
  const std::uint64_t projection = 2 * m.ssm_inner + 2 * m.ssm_groups * m.ssm_state + m.ssm_heads;
  const std::uint64_t fused = memscale_test::mixer_saved_bytes(m, run, graph_layers::hybrid_mamba2_mixer);
  CHECK(fused == 4 * t * (projection + m.ssm_inner + m.ssm_groups));
  training_spec loop = run;
  loop.ssm_kernels = ssm_kernel_choice::torch;
  CHECK(fused < memscale_test::mixer_saved_bytes(m, loop, graph_layers::hybrid_mamba2_mixer));
  CHECK(estimate(m, run).parameter_count == estimate(m, loop).parameter_count);
  CHECK(estimate(m, run).steady.tensor < estimate(m, loop).steady.tensor);
  CHECK(json_io::estimate_report_json(m, run, estimate(m, run)).at("ssm_kernels") == "fused");
  CHECK(json_io::estimate_report_json(m, loop, estimate(m, loop)).at("ssm_kernels") == "torch");
}

TEST_CASE("nemotron_h: generate() is refused by name") {
  using namespace memscale;
  const json r = ssm_record("cpu-nemotron_h-small-b2-s256-adamw");
  const model_spec m = json_io::model_for_record(r);
  const training_spec run = json_io::run_from_record(r);
  CHECK_THROWS_WITH(build_forward(m, run, 0), Catch::Contains("model.hybrid_mixer"));
}

}  // namespace nemotron_h_test
