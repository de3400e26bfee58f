// DeepSeek-V2 / V3 (json/hf/deepseek.hpp): the model cards' totals from the configs' arithmetic,
// multi-head latent attention (graph/layers/latent_attention.hpp) and the DeepSeek MoE (fp32
// router, e_score_correction_bias, leading dense layers) tensor by tensor, and what is refused.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <memory>
#include <string>

#include "error_capture.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"
#include "memscale/parallel/per_gpu.hpp"
#include "test_inputs.hpp"

namespace deepseek_test {
namespace {

using memscale_test::config_path;

using memscale::json_io::json;
using memscale_test::contains;
using memscale_test::error_message;

// The sizes a DeepSeek config gives, and the parameters transformers builds from them.
struct shape {
  std::uint64_t layers, hidden, heads, ffn, vocab, moe_ffn, experts, shared, dense, q_rank, kv_rank, nope, rope, v;
};

std::uint64_t parameters(const shape& s) {
  const std::uint64_t h = s.hidden;
  const std::uint64_t q_width = s.heads * (s.nope + s.rope);
  const std::uint64_t q = s.q_rank == 0 ? h * q_width : h * s.q_rank + s.q_rank + s.q_rank * q_width;
  const std::uint64_t attention = q + h * (s.kv_rank + s.rope) + s.kv_rank + s.kv_rank * s.heads * (s.nope + s.v) +
                                  s.heads * s.v * h;
  const std::uint64_t norms = 2 * h;
  const std::uint64_t sparse = s.experts * h + s.experts * 3 * h * s.moe_ffn + 3 * h * s.moe_ffn * s.shared;
  const std::uint64_t dense = 3 * h * s.ffn;
  return s.layers * (attention + norms) + s.dense * dense + (s.layers - s.dense) * sparse + 2 * s.vocab * h + h;
}

// A small DeepSeek-V3 (q_proj without a latent, as DeepSeek-V2-Lite): the sizes the tests count with.
constexpr std::uint64_t hidden = 64, heads = 4, nope = 16, rope = 8, qk = nope + rope, v_dim = 16, kv_rank = 32,
                        experts = 8, per_token = 2, moe_ffn = 24, dense_ffn = 96;
constexpr std::uint64_t batch = 2, seq = 32, tokens = batch * seq, routed = tokens * per_token;

memscale::model_spec small_v3() {
  return memscale::json_io::model_from_hf_config(json{
      {"model_type", "deepseek_v3"}, {"hidden_size", hidden}, {"num_hidden_layers", 3}, {"num_attention_heads", heads},
      {"num_key_value_heads", heads}, {"intermediate_size", dense_ffn}, {"vocab_size", 512}, {"q_lora_rank", nullptr},
      {"kv_lora_rank", kv_rank}, {"qk_nope_head_dim", nope}, {"qk_rope_head_dim", rope}, {"v_head_dim", v_dim},
      {"moe_intermediate_size", moe_ffn}, {"n_routed_experts", experts}, {"num_experts_per_tok", per_token},
      {"n_shared_experts", 1}, {"n_group", 4}, {"topk_group", 2}, {"first_k_dense_replace", 1}});
}

memscale::training_spec eager_run(memscale::precision prec) {
  memscale::training_spec run{};
  run.micro_batch = batch;
  run.seq_len = seq;
  run.prec = prec;
  run.attention = memscale::attention_impl::eager;
  run.torch_version = 113;  // mean keeps x^2 (norms.hpp mean_keeps_input)
  return run;
}

std::uint64_t block_saved_bytes(const memscale::model_spec& m, const memscale::training_spec& run) {
  const auto g = std::make_unique<memscale::graph>(memscale::build(m, run).stack());
  std::uint64_t total = 0;
  for (std::size_t i = g->block_begin; i < g->block_end; ++i) total += memscale::op_saved_bytes(g->ops[i]).value;
  return total;
}

}  // namespace

TEST_CASE("deepseek: parameter counts are the model cards' totals") {
  using memscale::json_io::load_hf_model;
  // DeepSeek-V2-Lite card: 15.7B total.
  const std::uint64_t lite = memscale::parameter_count(load_hf_model(config_path("deepseek-ai--DeepSeek-V2-Lite")));
  CHECK(lite == parameters({.layers = 27, .hidden = 2048, .heads = 16, .ffn = 10944, .vocab = 102400, .moe_ffn = 1408,
                            .experts = 64, .shared = 2, .dense = 1, .q_rank = 0, .kv_rank = 512, .nope = 128,
                            .rope = 64, .v = 128}));
  CHECK(lite == 15'706'484'224ULL);
  CHECK(lite / 100'000'000 == 157);  // 15.7B
  // DeepSeek-V3 card: 671B in the main model; the Hub's 685B adds the 14B multi-token-prediction
  // module (num_nextn_predict_layers), which transformers does not build.
  const std::uint64_t v3 = memscale::parameter_count(load_hf_model(config_path("deepseek-ai--DeepSeek-V3")));
  CHECK(v3 == parameters({.layers = 61, .hidden = 7168, .heads = 128, .ffn = 18432, .vocab = 129280, .moe_ffn = 2048,
                          .experts = 256, .shared = 1, .dense = 3, .q_rank = 1536, .kv_rank = 512, .nope = 128,
                          .rope = 64, .v = 128}));
  CHECK(v3 == 671'026'404'352ULL);
  CHECK((v3 + 500'000'000) / 1'000'000'000 == 671);
  // An empty config is DeepseekV3Config(): DeepSeek-V3's shape.
  CHECK(memscale::parameter_count(memscale::json_io::model_from_hf_config(json{{"model_type", "deepseek_v3"}})) == v3);
}

TEST_CASE("deepseek: the checkpoint's multi-token-prediction layers are stated, not counted") {
  using memscale::json_io::load_hf_model;
  const memscale::model_spec v3 = load_hf_model(config_path("deepseek-ai--DeepSeek-V3"));
  CHECK(v3.unbuilt_mtp_layers == 1);  // num_nextn_predict_layers 1
  CHECK(load_hf_model(config_path("deepseek-ai--DeepSeek-V2-Lite")).unbuilt_mtp_layers == 0);
  // Not a DeepseekV3Config key: absent, the config has none.
  CHECK(memscale::json_io::model_from_hf_config(json{{"model_type", "deepseek_v3"}}).unbuilt_mtp_layers == 0);
  const memscale::training_spec run{.micro_batch = 1, .seq_len = 64};
  memscale::model_spec small = memscale::json_io::model_from_hf_config(
      json{{"model_type", "deepseek_v3"}, {"num_hidden_layers", 2}, {"first_k_dense_replace", 1}, {"hidden_size", 64},
           {"intermediate_size", 128}, {"moe_intermediate_size", 32}, {"num_attention_heads", 4}, {"num_key_value_heads", 4},
           {"n_routed_experts", 8}, {"n_group", 1}, {"topk_group", 1}, {"num_experts_per_tok", 2}, {"q_lora_rank", 32},
           {"kv_lora_rank", 16}, {"qk_nope_head_dim", 16}, {"qk_rope_head_dim", 8}, {"v_head_dim", 16}, {"vocab_size", 100},
           {"num_nextn_predict_layers", 2}});
  CHECK(small.unbuilt_mtp_layers == 2);
  const memscale::estimate_result with_mtp = memscale::estimate(small, run);
  CHECK(memscale::json_io::estimate_report_json(small, run, with_mtp).at("unbuilt_mtp_layers") == 2);
  // Nothing of them is counted: the same estimate as a config without the key.
  small.unbuilt_mtp_layers = 0;
  const memscale::estimate_result without = memscale::estimate(small, run);
  CHECK(with_mtp.parameter_count == without.parameter_count);
  CHECK(with_mtp.steady.tensor == without.steady.tensor);
  CHECK_FALSE(memscale::json_io::estimate_report_json(small, run, without).contains("unbuilt_mtp_layers"));
}

TEST_CASE("deepseek: one sparse layer saves what MLA and the DeepSeek MoE keep, tensor by tensor") {
  const std::uint64_t T = tokens, h = hidden, H = heads;
  const std::uint64_t scores = batch * H * seq * seq;
  const std::uint64_t rms_norm = T + 2 * T * h;  // rsqrt, normalized x, x^2 (an fp32 input is kept itself)
  const std::uint64_t fp32_elements =
      T * h + rms_norm + T * h                                       // stream, input_layernorm, its output (q_proj, kv_a)
      + T * (kv_rank + rope) + T + 2 * T * kv_rank + T * kv_rank     // kv_a output (the norm reads a view of it), norm, output
      + 2 * T * H * qk + scores + 2 * T * H * v_dim                  // cat q, cat k, softmax, contiguous v, merged heads
      + T * h + rms_norm + T * h                                     // residual, post_attention_layernorm, its output
      + T * experts + routed                                         // sigmoid scores, routing weights
      + routed * h + 4 * routed * moe_ffn + 2 * routed * h           // gathered rows, SwiGLU, expert output, weighted rows
      + 4 * T * moe_ffn;                                             // the shared expert's SwiGLU
  const std::uint64_t int64_elements = 3 * routed;                  // top-k indices, torch.where's rows and slots
  CHECK(block_saved_bytes(small_v3(), eager_run(memscale::precision::fp32)) == 4 * fp32_elements + 8 * int64_elements);
}

TEST_CASE("deepseek: leading dense layers are written once each, the sparse layer repeats") {
  const memscale::model_spec m = small_v3();
  const auto run = eager_run(memscale::precision::fp32);
  const auto g = std::make_unique<memscale::model_graph>(memscale::build(m, run));
  CHECK(g->stack().block_repeats == 2);
  CHECK(memscale::parameter_count(*g) ==
        parameters({.layers = 3, .hidden = hidden, .heads = heads, .ffn = dense_ffn, .vocab = 512, .moe_ffn = moe_ffn,
                    .experts = experts, .shared = 1, .dense = 1, .q_rank = 0, .kv_rank = kv_rank, .nope = nope,
                    .rope = rope, .v = v_dim}));
  // Against three sparse layers: the first layer keeps a dense SwiGLU (four tokens x 96 tensors)
  // instead of the routing, the experts' rows and the shared expert.
  memscale::model_spec all_sparse = m;
  all_sparse.leading_dense_layers = 0;
  all_sparse.leading_dense_ffn = 0;
  const std::uint64_t sparse_mlp =
      4 * (tokens * experts + routed + 3 * routed * hidden + 4 * routed * moe_ffn + 4 * tokens * moe_ffn) + 8 * 3 * routed;
  const std::uint64_t dense_mlp = 4 * 4 * tokens * dense_ffn;
  CHECK(memscale::estimate(all_sparse, run).saved_activation_bytes.value -
            memscale::estimate(m, run).saved_activation_bytes.value ==
        sparse_mlp - dense_mlp);
}

TEST_CASE("deepseek: checkpointing covers the sparse layers and keeps the leading dense layers whole") {
  const memscale::model_spec m = small_v3();
  memscale::model_spec deeper = m;  // two more sparse layers
  deeper.layers += 2;
  memscale::model_spec all_sparse = m;
  all_sparse.leading_dense_layers = 0;
  all_sparse.leading_dense_ffn = 0;
  auto none = eager_run(memscale::precision::fp32);
  auto full = none;
  full.ckpt = memscale::checkpointing::full;
  const auto saved = [](const memscale::model_spec& model, const memscale::training_spec& run) {
    return static_cast<std::int64_t>(memscale::estimate(model, run).saved_activation_bytes.value);
  };
  // A sparse layer saves S without checkpointing and keeps its input I with it.
  const std::int64_t sparse_saved = (saved(deeper, none) - saved(m, none)) / 2;
  const std::int64_t kept_input = (saved(deeper, full) - saved(m, full)) / 2;
  REQUIRE(kept_input > 0);
  REQUIRE(kept_input < sparse_saved);
  // Swapping the dense layer for a sparse one moves the saved bytes by D - S without
  // checkpointing and by D - I with it: the dense layer keeps all it saves (the upper side).
  CHECK((saved(m, full) - saved(all_sparse, full)) - (saved(m, none) - saved(all_sparse, none)) ==
        sparse_saved - kept_input);
}

TEST_CASE("deepseek: a plan where no mode fits skips parameter streaming, which is not modelled for it") {
  const memscale::model_spec m = memscale::json_io::load_hf_model(config_path("deepseek-ai--DeepSeek-V2-Lite"));
  memscale::training_spec run{};
  run.seq_len = 1024;
  run.micro_batch = 1;
  memscale::plan_result plan{};
  REQUIRE_NOTHROW(plan = memscale::make_plan(m, run, *memscale::find_gpu("a100-80gb")));
  CHECK(plan.status != memscale::plan_status::parameter_offload);
  CHECK(!plan.parameter_offload.fits);
  CHECK(plan.parameter_offload.range.high.value == 0);  // never estimated
}

TEST_CASE("deepseek: the router runs in fp32 and V3 keeps its correction bias") {
  memscale::model_spec m = small_v3();
  const auto run = eager_run(memscale::precision::pure_bf16);
  // x.type(float32) and weight.type(float32), saved by the fp32 linear; the routing weights and
  // the weighted rows fp32 instead of bf16 (the fp32 sum is cast back, not saved).
  const std::uint64_t fp32_router = block_saved_bytes(m, run);
  m.router_fp32 = false;
  CHECK(fp32_router - block_saved_bytes(m, run) ==
        4 * tokens * hidden + 4 * experts * hidden + 2 * routed + 2 * routed * hidden);
  // e_score_correction_bias: one value per expert in each of the two sparse layers, in the model's bf16.
  const memscale::model_spec v3 = small_v3();
  memscale::model_spec v2 = v3;
  v2.router_score_correction = false;
  const auto g3 = std::make_unique<memscale::model_graph>(memscale::build(v3, run));
  const auto g2 = std::make_unique<memscale::model_graph>(memscale::build(v2, run));
  CHECK(g3->stack().buffers.value - g2->stack().buffers.value == 2 * experts * 2);
}

TEST_CASE("deepseek: fused kernels keep q, k and the value, flash_attention_2 a padded value") {
  const memscale::model_spec m = small_v3();
  auto run = eager_run(memscale::precision::pure_bf16);
  run.device = memscale::device_kind::cuda;
  run.torch_version = 205;
  run.attention = memscale::attention_impl::sdpa;
  REQUIRE(memscale::is_fused(memscale::attention_kernel_of(m, run)));
  const std::uint64_t sdpa = block_saved_bytes(m, run);
  run.attention = memscale::attention_impl::flash;
  const std::uint64_t flash = block_saved_bytes(m, run);
  // SDPA: the value view keeps kv_b_proj's whole output; its output is the merged heads.
  // flash_attention_2: F.pad's value and the output at qk_head_dim, the sliced output copied for o_proj.
  const std::uint64_t T = tokens, H = heads;
  CHECK(flash - sdpa == 2 * (T * H * qk + T * H * qk + T * H * v_dim) - 2 * (T * H * (nope + v_dim) + T * H * v_dim));
}

TEST_CASE("deepseek: what is not modelled is refused by name") {
  using memscale::json_io::model_from_hf_config;
  CHECK(contains(error_message([] { (void)model_from_hf_config(json{{"model_type", "deepseek_v2"}, {"num_experts_per_tok", 6}, {"moe_layer_freq", 2}}); }),
                 "config.moe_layer_freq"));
  CHECK(contains(error_message([] { (void)model_from_hf_config(json{{"model_type", "deepseek_v3"}, {"num_key_value_heads", 8}}); }),
                 "config.num_key_value_heads"));
  CHECK(contains(error_message([] { (void)model_from_hf_config(json{{"model_type", "deepseek_v2"}, {"num_experts_per_tok", 6}, {"topk_method", "noaux_tc"}}); }),
                 "config.topk_method"));
  // DeepseekV2Config's num_experts_per_tok is None: the key is required.
  CHECK(contains(error_message([] { (void)model_from_hf_config(json{{"model_type", "deepseek_v2"}}); }),
                 "num_experts_per_tok"));
  const memscale::model_spec m = small_v3();
  auto run = eager_run(memscale::precision::amp_bf16);
  run.target = memscale::training_target::lora;
  run.lora_rank = 8;
  // The default targets q_proj and v_proj: multi-head latent attention has no v_proj.
  CHECK(contains(error_message([&] { (void)memscale::estimate(m, run); }), "run.lora_targets"));
  CHECK_NOTHROW(memscale::estimate_inference(m, memscale::inference_spec{}));  // deepseek_generate_test.cpp
  run.target = memscale::training_target::full;
  run.lora_rank = 0;
  CHECK(contains(error_message([&] {
                   (void)memscale::estimate_per_gpu(m, run, memscale::parallel_spec{.gpus_per_node = 2, .tp = 2});
                 }),
                 "parallel.tp * parallel.pp"));
  // ZeRO-3 would hold the leading dense layers as the root unit: refused with the sharding.
  run.data_parallel = 2;
  run.shard = memscale::sharding::full;
  CHECK(contains(error_message([&] { (void)memscale::estimate(m, run); }), "run.shard"));
}

}  // namespace deepseek_test
