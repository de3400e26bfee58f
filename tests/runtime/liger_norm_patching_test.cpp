// Which RMSNorm modules Liger replaces, and with which in_place, as its apply_liger_kernel_to_<model_type>
// meets the model (Liger-Kernel v0.5.10 @ 44a8f2fb, transformers/monkey_patch.py): before the model
// is built it swaps the family's class (every norm, the class's in_place); on the built model
// (transformers' use_liger_kernel) it patches the modules it names, each with its own in_place.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#endif

#include <cstdint>
#include <string>
#include <vector>

#include "error_capture.hpp"
#include "memscale/graph/model_graph.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace liger_norm_patching_test {
namespace {

using namespace memscale;
using nlohmann::json;
using memscale_test::error_message;

constexpr std::uint64_t hidden = 256;
constexpr std::uint64_t tokens = 2 * 256;

// The table, site by site.
constexpr auto use = liger_rms_norm_use;
static_assert(use(liger_patch::llama, liger_patching::instance, norm_site::block) == liger_norm_use::in_place);
static_assert(use(liger_patch::llama, liger_patching::instance, norm_site::qk) == liger_norm_use::kept);  // Qwen3
static_assert(use(liger_patch::llama, liger_patching::classes, norm_site::qk) == liger_norm_use::in_place);
static_assert(use(liger_patch::olmo2, liger_patching::instance, norm_site::block) == liger_norm_use::out_of_place);
static_assert(use(liger_patch::olmo2, liger_patching::instance, norm_site::final) == liger_norm_use::in_place);
static_assert(use(liger_patch::olmo2, liger_patching::instance, norm_site::qk) == liger_norm_use::kept);
static_assert(use(liger_patch::olmo2, liger_patching::classes, norm_site::final) == liger_norm_use::out_of_place);
static_assert(use(liger_patch::gemma, liger_patching::instance, norm_site::final) == liger_norm_use::in_place);
static_assert(use(liger_patch::gemma2, liger_patching::instance, norm_site::qk) == liger_norm_use::out_of_place);
static_assert(use(liger_patch::glm4, liger_patching::instance, norm_site::final) == liger_norm_use::out_of_place);

model_spec from_config(const std::string& type) {
  return json_io::model_from_hf_config(json{{"model_type", type},       {"hidden_size", hidden},
                                            {"num_hidden_layers", 2},    {"num_attention_heads", 4},
                                            {"num_key_value_heads", 2},  {"head_dim", 64},
                                            {"intermediate_size", 688},  {"vocab_size", 16000},
                                            {"max_position_embeddings", 4096}});
}

constexpr training_spec full_bf16{.micro_batch = 2,
                                  .seq_len = 256,
                                  .prec = precision::pure_bf16,
                                  .attention = attention_impl::flash,
                                  .dropout = false,
                                  .torch_version = 211};

// Each norm op of the graph, in order (the block once, then the final norm): its input gradient's
// bytes and whether it is Liger's (one fp32 rstd a row saved, nothing else of the fp32 kind).
struct norm_seen {
  std::uint64_t grad_in = 0;
  std::uint64_t extra_saved = 0;
};

std::vector<norm_seen> norms_of(const model_spec& m, const training_spec& run) {
  const model_graph g = build(m, run);
  std::vector<norm_seen> out;
  const graph& d = g.stacks.decoder;
  for (std::size_t i = 0; i < d.size; ++i)
    if (d.ops[i].kind == op_kind::norm) out.push_back({d.ops[i].grad_in.value, d.ops[i].extra_saved.value});
  return out;
}

constexpr std::uint64_t stream_bf16 = tokens * hidden * 2;

training_spec trainer_liger(const model_spec& m) {
  training_spec run = full_bf16;
  return apply_liger(run, m);
}

}  // namespace

TEST_CASE("use_liger_kernel patches the modules its family's function names") {
  // Llama: input_layernorm, post_attention_layernorm and the final norm, in place: no dX of their own.
  for (const norm_seen& n : norms_of(from_config("llama"), trainer_liger(from_config("llama")))) CHECK(n.grad_in == 0);
  // Gemma 2: every norm (four a block and the final one) with in_place=False: a new dX each.
  const auto gemma2 = norms_of(from_config("gemma2"), trainer_liger(from_config("gemma2")));
  REQUIRE(gemma2.size() == 5);
  for (const norm_seen& n : gemma2) CHECK(n.grad_in == stream_bf16);
  // GLM-4: its four block norms and the final one, in_place=False.
  for (const norm_seen& n : norms_of(from_config("glm4"), trainer_liger(from_config("glm4")))) CHECK(n.grad_in == stream_bf16);
}

TEST_CASE("OLMo2's instance patch leaves q_norm and k_norm to the modeling file and patches the final norm in place") {
  const model_spec olmo2 = from_config("olmo2");
  const auto norms = norms_of(olmo2, trainer_liger(olmo2));
  // q_norm, k_norm, post_attention_layernorm, post_feedforward_layernorm, then the final norm.
  REQUIRE(norms.size() == 5);
  // Olmo2RMSNorm's fp32 copy of q (heads x head_dim wide) and k: kept by the modeling file's norm.
  CHECK(norms[0].extra_saved >= tokens * 4 * 64 * 4);
  CHECK(norms[0].grad_in == tokens * 4 * 64 * 2);
  CHECK(norms[2].grad_in == stream_bf16);
  CHECK(norms[3].grad_in == stream_bf16);
  CHECK(norms[4].grad_in == 0);
  // Patched before the model is built, every norm is partial(LigerRMSNorm, in_place=False).
  training_spec classes = trainer_liger(olmo2);
  classes.liger_norm_patching = liger_patching::classes;
  const auto swapped = norms_of(olmo2, classes);
  for (const norm_seen& n : swapped) CHECK(n.extra_saved < norms[0].extra_saved);
  CHECK(swapped[4].grad_in == stream_bf16);
  // The modeling file's q_norm and k_norm keep more than Liger's.
  CHECK(estimate(olmo2, trainer_liger(olmo2)).saved_activation_bytes.value >
        estimate(olmo2, classes).saved_activation_bytes.value);
}

TEST_CASE("Qwen3's q_norm and k_norm stay Qwen3RMSNorm under use_liger_kernel") {
  const model_spec qwen3 = from_config("qwen3");
  const auto norms = norms_of(qwen3, trainer_liger(qwen3));
  // input_layernorm, q_norm, k_norm, post_attention_layernorm, the final norm.
  REQUIRE(norms.size() == 5);
  CHECK(norms[0].grad_in == 0);
  CHECK(norms[1].grad_in == tokens * 4 * 64 * 2);  // the modeling file's norm makes dX
  CHECK(norms[2].grad_in == tokens * 2 * 64 * 2);
  CHECK(norms[3].grad_in == 0);
  CHECK(norms[4].grad_in == 0);
}

TEST_CASE("A run document says how Liger was applied, and reads it back") {
  const json config{{"model_type", "olmo2"}, {"hidden_size", hidden}, {"num_hidden_layers", 2},
                    {"num_attention_heads", 4}, {"intermediate_size", 688}, {"vocab_size", 16000}};
  const auto read = [](const json& doc) {
    json_io::run_input in;
    json_io::read_run_document(doc, in);
    return in.run;
  };
  json doc{{"model", {{"hf_config", config}}},
           {"run", {{"micro_batch", 2}, {"seq_len", 256}, {"precision", "pure_bf16"}, {"liger", true}}}};
  const training_spec trainer = read(doc);
  CHECK(trainer.liger_norm_patching == liger_patching::instance);
  const json back = json_io::run_to_json(trainer);
  CHECK(back.at("liger_patching") == "instance");
  doc["run"] = back;
  CHECK(read(doc).liger_norm_patching == liger_patching::instance);
  // The kernel alone, as apply_liger_kernel_to_olmo2(rms_norm=True) before from_pretrained.
  doc["run"] = {{"micro_batch", 2}, {"seq_len", 256}, {"fused_rmsnorm", true}};
  CHECK(read(doc).liger_norm_patching == liger_patching::classes);
  CHECK_FALSE(json_io::run_to_json(read(doc)).contains("liger_patching"));
  doc["run"]["liger_patching"] = "before";
  CHECK_THAT(error_message([&] { (void)read(doc); }),
             Catch::Matchers::Contains("run.liger_patching") && Catch::Matchers::Contains("before"));
  doc["run"] = {{"micro_batch", 2}, {"seq_len", 256}, {"liger_patching", "instance"}};
  CHECK_THAT(error_message([&] { (void)read(doc); }),
             Catch::Matchers::Contains("run.liger_patching") && Catch::Matchers::Contains("fused_rmsnorm"));
}

TEST_CASE("An instance patch of a family without Liger's function is refused") {
  training_spec run = full_bf16;
  run.liger_rms_norm = true;
  run.liger_norm_patching = liger_patching::instance;
  const model_spec qwen2_moe = json_io::model_from_hf_config(
      json{{"model_type", "qwen2_moe"}, {"hidden_size", hidden}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
           {"intermediate_size", 688}, {"moe_intermediate_size", 128}, {"shared_expert_intermediate_size", 256},
           {"num_experts", 4}, {"num_experts_per_tok", 2}, {"vocab_size", 16000}});
  REQUIRE(qwen2_moe.liger == liger_patch::none);
  CHECK_THAT(error_message([&] { (void)estimate(qwen2_moe, run); }), Catch::Matchers::Contains("run.liger_patching"));
  run.liger_norm_patching = liger_patching::classes;
  CHECK(estimate(qwen2_moe, run).steady.tensor.value > 0);
}

}  // namespace liger_norm_patching_test
