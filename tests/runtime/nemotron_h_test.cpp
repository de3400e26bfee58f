// The nemotron_h reader and its single-mixer blocks (graph/recipes/decoder_stack.hpp
// single_mixer_layer): the published parameter total, NemotronHConfig defaults, the per-layer
// pattern in both spellings, the refusals by name and the CPU-traced record of
// docs/data/cpu_traced_ssm.json.
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
  const json r = ssm_record("cpu-nemotron_h-small-b2-s256-adamw");
  CHECK(memscale::parameter_count(memscale::json_io::model_for_record(r)) == r.at("model").at("params").get<std::uint64_t>());
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
  // The legacy mamba_* spellings win (NemotronHConfig.__post_init__).
  json legacy{{"model_type", "nemotron_h"}, {"hybrid_override_pattern", "M"}, {"n_groups", 8}, {"mamba_n_groups", 4}};
  CHECK(json_io::model_from_hf_config(legacy).ssm_groups == 4);
}

TEST_CASE("nemotron_h: unmodelled or invalid patterns and settings are refused by name") {
  using namespace memscale;
  CHECK_THROWS_WITH(json_io::model_from_hf_config(small_with("hybrid_override_pattern", "M-E*")),
                    Catch::Contains("config.hybrid_override_pattern") && Catch::Contains("MoE"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(small_with("hybrid_override_pattern", "M-X")),
                    Catch::Contains("config.hybrid_override_pattern") && Catch::Contains("'X'"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(small_with("hybrid_override_pattern", "")),
                    Catch::Contains("config.hybrid_override_pattern"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(small_with("hybrid_override_pattern", std::string(129, 'M'))),
                    Catch::Contains("at most 128"));
  CHECK_THROWS_WITH(json_io::model_from_hf_config(small_with("num_hidden_layers", 8)),
                    Catch::Contains("config.num_hidden_layers"));
  // No pattern: NemotronHConfig's default list has an MoE layer.
  CHECK_THROWS_WITH(json_io::model_from_hf_config(json{{"model_type", "nemotron_h"}}),
                    Catch::Contains("config.hybrid_override_pattern"));
  json listed = small_config();
  listed.erase("hybrid_override_pattern");
  listed["layers_block_type"] = json::array({"mamba", "moe"});
  CHECK_THROWS_WITH(json_io::model_from_hf_config(listed), Catch::Contains("config.layers_block_type"));
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

TEST_CASE("nemotron_h: the CPU-traced record is modelled within the band") {
  REQUIRE(memscale_test::check_ssm_records_within_band({"nemotron_h"}) == 1);
}

TEST_CASE("nemotron_h: generate() is refused by name") {
  using namespace memscale;
  const json r = ssm_record("cpu-nemotron_h-small-b2-s256-adamw");
  const model_spec m = json_io::model_for_record(r);
  const training_spec run = json_io::run_from_record(r);
  CHECK_THROWS_WITH(build_forward(m, run, 0), Catch::Contains("model.hybrid_mixer"));
}

}  // namespace nemotron_h_test
