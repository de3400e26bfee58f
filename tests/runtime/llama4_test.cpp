// Llama 4 (json/hf/llama4.hpp): the published parameter totals, and each layer feature the
// family added changing exactly what its mechanism saves, on the CPU-traced small config
// (docs/data/cpu_traced_families_2025.json: 4 layers, MoE layers 1 and 3, NoPE layer 3).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <string>

#include "error_capture.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace llama4_test {
namespace {

using namespace memscale;
using memscale_test::contains;
using memscale_test::error_message;

json_io::json small_llama4() {
  return json_io::json{{"architectures", {"Llama4ForCausalLM"}},
                       {"model_type", "llama4_text"},
                       {"hidden_size", 256},
                       {"num_hidden_layers", 4},
                       {"num_attention_heads", 8},
                       {"num_key_value_heads", 2},
                       {"intermediate_size", 256},
                       {"vocab_size", 4096},
                       {"max_position_embeddings", 2048},
                       {"head_dim", 32},
                       {"intermediate_size_mlp", 512},
                       {"num_local_experts", 4},
                       {"num_experts_per_tok", 1},
                       {"interleave_moe_layer_step", 2},
                       {"no_rope_layer_interval", 4},
                       {"attention_chunk_size", 128},
                       {"use_qk_norm", true},
                       {"attn_temperature_tuning", true},
                       {"floor_scale", 128},
                       {"attn_scale", 0.1}};
}

model_spec read(const json_io::json& c) { return json_io::model_from_hf_config(c); }

model_spec with(const char* key, const json_io::json& value) {
  json_io::json c = small_llama4();
  c[key] = value;
  return read(c);
}

// Sizes of the small model: tokens, widths, and its layers by kind.
constexpr std::uint64_t batch = 2, seq = 256, tokens = batch * seq, hidden = 256, heads = 8, kv_heads = 2,
                        head_dim = 32, ffn = 256;
constexpr std::uint64_t moe_layers = 2, dense_layers = 2, rope_layers = 3, nope_layers = 1;

const training_spec fp32_run{.micro_batch = batch, .seq_len = seq, .attention = attention_impl::eager, .dropout = false};

std::uint64_t saved(const model_spec& m, const training_spec& run = fp32_run) {
  return estimate(m, run).saved_activation_bytes.value;
}

std::uint64_t block_forward_temporaries(const model_spec& m, const training_spec& run) {
  const model_graph g = build(m, run);
  std::uint64_t sum = 0;
  for (std::size_t i = g.stack().block_begin; i < g.stack().block_end; ++i) sum += g.stack().ops[i].fwd_temp.value;
  return sum;
}

}  // namespace

TEST_CASE("llama4: parameters of Scout, of Maverick's shape and of the traced model") {
  const model_spec scout =
      json_io::load_hf_model(std::string(MEMSCALE_SOURCE_DIR) + "/tests/data/hf_configs/meta-llama--Llama-4-Scout-17B-16E.json");
  // Model card: 109B total, 17B active (docs/research/families-2025.md sec. 3: text 107,769,861,120
  // + vision tower and projector 871,932,416).
  CHECK(parameter_count(scout) == 108'641'793'536ULL);
  CHECK(scout.idle_tower_parameters == 871'932'416ULL);
  const std::uint64_t expert = 3 * 5120 * 8192;  // gate_up and down of one expert
  const std::uint64_t text = parameter_count(scout) - scout.idle_tower_parameters;
  CHECK(text - 48 * 15 * expert == 17'172'894'720ULL);  // active: 1 of 16 experts per token
  CHECK(parameter_count(read(json_io::json{{"model_type", "llama4_text"}})) == text);  // Llama4TextConfig() is Scout's text
  // Maverick's text (card: 400B total, 17B active): 128 experts, MoE every second layer.
  const model_spec maverick = read(json_io::json{{"model_type", "llama4_text"},
                                                 {"num_local_experts", 128},
                                                 {"interleave_moe_layer_step", 2},
                                                 {"use_qk_norm", false}});
  const std::uint64_t maverick_total = parameter_count(maverick);
  CHECK(maverick_total > 399'000'000'000ULL);
  CHECK(maverick_total < 401'000'000'000ULL);
  const std::uint64_t active = maverick_total - 24 * 127 * expert;
  CHECK(active > 17'000'000'000ULL);
  CHECK(active < 17'500'000'000ULL);
  CHECK(parameter_count(read(small_llama4())) == 5'509'376ULL);  // the record's "params"
}

TEST_CASE("llama4 features: each changes exactly what its mechanism saves") {
  const model_spec m = read(small_llama4());
  CHECK(m.experts_on_every_token);
  CHECK(m.qk_norm == qk_norm_kind::l2);
  CHECK_FALSE(m.softmax_fp32);
  CHECK(build(m, fp32_run).stack().block_repeats == 1);  // one period of four layers

  SECTION("every expert on every token: each expert more saves 2h + 4f + 2 per token in each MoE layer") {
    // repeat, scaled input, gate, up, silu, product, the scores' column and sigmoid output.
    CHECK(saved(with("num_local_experts", 8)) - saved(m) == moe_layers * 4 * tokens * (2 * hidden + 4 * ffn + 2) * 4);
  }
  SECTION("LoRA adapts no 3-D expert parameter: more experts add only the router adapter's rows") {
    training_spec lora = fp32_run;
    lora.target = training_target::lora;
    lora.lora_rank = 8;
    lora.lora_targets = lora_all_linear;
    CHECK(estimate(with("num_local_experts", 8), lora).trainable_parameter_count -
              estimate(m, lora).trainable_parameter_count ==
          moe_layers * 4 * 8);
  }
  SECTION("dense layers between MoE layers take intermediate_size_mlp") {
    CHECK(parameter_count(with("intermediate_size_mlp", 513)) - parameter_count(m) == dense_layers * 3 * hidden);
    CHECK(parameter_count(with("interleave_moe_layer_step", 1)) > parameter_count(m));
  }
  SECTION("L2 qk-norm: the rotated q and k and one rsqrt per head row, on RoPE layers only, no weight") {
    const model_spec off = with("use_qk_norm", false);
    CHECK(parameter_count(off) == parameter_count(m));
    CHECK(saved(m) - saved(off) == rope_layers * tokens * (heads + kv_heads) * (head_dim + 1) * 4);
  }
  SECTION("query temperature on NoPE layers: the per-position fp32 scales") {
    CHECK(saved(m) - saved(with("attn_temperature_tuning", false)) == nope_layers * seq * 4);
    const training_spec bf16{.micro_batch = batch, .seq_len = seq, .prec = precision::pure_bf16,
                             .attention = attention_impl::eager, .dropout = false};
    CHECK(saved(m, bf16) - saved(with("attn_temperature_tuning", false), bf16) == nope_layers * seq * 4);
  }
  SECTION("complex RoPE: an fp32 copy and product beside q and k under 16 bits, nothing in fp32") {
    const training_spec bf16{.micro_batch = batch, .seq_len = seq, .prec = precision::pure_bf16,
                             .attention = attention_impl::eager, .dropout = false};
    model_spec real = m;
    real.rotary_complex = false;
    CHECK(block_forward_temporaries(m, bf16) - block_forward_temporaries(real, bf16) ==
          rope_layers * 2 * tokens * (heads + kv_heads) * head_dim * 4);
    CHECK(block_forward_temporaries(m, fp32_run) == block_forward_temporaries(real, fp32_run));
  }
  SECTION("softmax in the input dtype: one 16-bit probability tensor per layer, no fp32 one") {
    const training_spec bf16{.micro_batch = batch, .seq_len = seq, .prec = precision::pure_bf16,
                             .attention = attention_impl::eager, .dropout = false};
    model_spec fp32_softmax = m;
    fp32_softmax.softmax_fp32 = true;
    CHECK(saved(fp32_softmax, bf16) - saved(m, bf16) == 4 * batch * heads * seq * seq * 4);
  }
}

TEST_CASE("llama4: what is not modelled is refused by name") {
  const model_spec m = read(small_llama4());
  // Checkpointing takes the period of layers as its unit (the upper side of per-layer checkpointing).
  training_spec checkpointed = fp32_run;
  checkpointed.ckpt = checkpointing::full;
  CHECK(estimate(m, checkpointed).steady.tensor.value < estimate(m, fp32_run).steady.tensor.value);
  CHECK(contains(error_message([&] { (void)build_forward(m, fp32_run, 0); }), "model.moe_layer_step"));
  CHECK(contains(error_message([] { (void)with("moe_layers", {0, 1, 2}); }), "config.moe_layers"));
  CHECK_NOTHROW(with("moe_layers", {1, 3}));
  CHECK(contains(error_message([] { (void)with("no_rope_layers", {1, 0, 1, 1}); }), "config.no_rope_layers"));
  CHECK_NOTHROW(with("no_rope_layers", {1, 1, 1, 0, 1}));
  CHECK(contains(error_message([] {
                   (void)with("layer_types", {"full_attention", "full_attention", "full_attention", "full_attention"});
                 }),
                 "config.layer_types"));
  CHECK(contains(error_message([] { (void)build(with("num_hidden_layers", 6), fp32_run); }), "model.layers"));
  CHECK(contains(error_message([] { (void)with("output_router_logits", true); }), "config.output_router_logits"));
}

}  // namespace llama4_test
