// Liger-Kernel's RoPE, GEGLU and LayerNorm (v0.5.10 @ 44a8f2fb, src/liger_kernel/ops/rope.py,
// geglu.py, layer_norm.py), each against what the modeling file's module saves, and the kernels
// transformers' use_liger_kernel=True applies per family (transformers/monkey_patch.py
// MODEL_TYPE_TO_APPLY_LIGER_FN; memscale/liger.hpp).
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#endif

#include <cstdint>
#include <string>

#include "error_capture.hpp"
#include "memscale/graph/model_graph.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace liger_kernels_test {
namespace {

using namespace memscale;
using nlohmann::json;
using memscale_test::error_message;

constexpr std::uint64_t layers = 2;
constexpr std::uint64_t hidden = 256;
constexpr std::uint64_t ffn = 688;
constexpr std::uint64_t tokens = 2 * 256;

model_spec from_config(const std::string& type, json extra = json::object()) {
  json cfg{{"model_type", type},         {"hidden_size", hidden},       {"num_hidden_layers", layers},
           {"num_attention_heads", 4},   {"num_key_value_heads", 2},    {"intermediate_size", ffn},
           {"vocab_size", 16000},        {"max_position_embeddings", 4096}};
  cfg.update(extra);
  return json_io::model_from_hf_config(cfg);
}

model_spec gpt2() {
  return json_io::model_from_hf_config(json{{"model_type", "gpt2"}, {"n_layer", layers}, {"n_embd", hidden},
                                            {"n_head", 4}, {"vocab_size", 16000}, {"n_positions", 1024}});
}

constexpr training_spec full_bf16{.micro_batch = 2,
                                  .seq_len = 256,
                                  .prec = precision::pure_bf16,
                                  .attention = attention_impl::flash,
                                  .dropout = false,
                                  .torch_version = 211};

std::uint64_t saved(const model_spec& m, const training_spec& run) { return estimate(m, run).saved_activation_bytes.value; }

}  // namespace

TEST_CASE("Liger's RoPE rotates q and k in place: attention saves the projections' outputs, nothing more") {
  const model_spec llama = from_config("llama");
  training_spec rope = full_bf16;
  rope.liger_rope = true;
  // apply_rotary_pos_emb's products are new q and k tensors that attention saves; Liger's kernel
  // hands attention the projections' own storage, rotated, and saves only cos and sin.
  CHECK(saved(llama, rope) == saved(llama, full_bf16));
  // Its forward makes no q- or k-sized tensor of its own, and its backward copies dq (256 wide)
  // and dk (2 heads of 64) per token, in bf16, beside the gradients attention hands it.
  const graph plain = recipes::build_decoder_stack(llama, full_bf16);
  const graph fused = recipes::build_decoder_stack(llama, rope);
  CHECK((plain.block_end - plain.block_begin) - (fused.block_end - fused.block_begin) == 2);
  const auto backward_temporaries = [](const graph& g) {
    std::uint64_t total = 0;
    for (std::size_t i = g.block_begin; i < g.block_end; ++i) total += g.ops[i].bwd_temp.value;
    return total;
  };
  CHECK(backward_temporaries(fused) - backward_temporaries(plain) == tokens * (256 + 128) * 2);
  // A fused projection's q and k are strided slices: .contiguous() copies them, rotated in place.
  const model_spec phi3 = from_config("phi3");
  CHECK(saved(phi3, rope) == saved(phi3, full_bf16));
}

TEST_CASE("Liger's GEGLU keeps the gate and up outputs, not gelu(gate)") {
  const model_spec gemma = from_config("gemma", {{"head_dim", 64}});
  REQUIRE(gemma.mlp == mlp_kind::geglu);
  training_spec geglu = full_bf16;
  geglu.liger_geglu = true;
  CHECK(saved(gemma, full_bf16) - saved(gemma, geglu) == layers * tokens * ffn * 2);
}

TEST_CASE("Liger's LayerNorm keeps mean and rstd in the input's dtype, not fp32") {
  training_spec ln = full_bf16;
  ln.liger_layer_norm = true;
  // torch's layer_norm saves an fp32 mean and rstd per row, Liger's a bf16 one: 4 bytes less a
  // row for ln_1, ln_2 of each block and ln_f.
  CHECK(saved(gpt2(), full_bf16) - saved(gpt2(), ln) == (2 * layers + 1) * tokens * 4);
}

TEST_CASE("Liger's SwiGLU over Phi-3's one gate_up_proj copies the halves and joins their gradients") {
  const model_spec phi3 = from_config("phi3");
  REQUIRE(phi3.fused_gate_up);
  training_spec swiglu = full_bf16;
  swiglu.liger_swiglu = true;
  // LigerPhi3SwiGLUMLP: one (tokens, 2F) gradient for gate_up_proj, made by the chunk's backward.
  const model_graph g = build(phi3, swiglu);
  const graph& d = g.stacks.decoder;
  int joined = 0;
  for (std::size_t i = d.block_begin; i < d.block_end; ++i)
    if (d.ops[i].grad_in.value == tokens * 2 * ffn * 2) ++joined;
  CHECK(joined == 1);
  // The copies are what the kernel saves: the same bytes as the two halves of the one output.
  CHECK(saved(phi3, full_bf16) - saved(phi3, swiglu) == layers * tokens * ffn * 2);
}

TEST_CASE("use_liger_kernel applies its family's kernels") {
  training_spec run = full_bf16;
  apply_liger(run, from_config("llama"));
  CHECK(run.loss == loss_impl::fused_linear);
  CHECK(run.liger_rms_norm);
  CHECK(run.liger_swiglu);
  CHECK(run.liger_rope);
  CHECK_FALSE(run.liger_geglu);
  CHECK_FALSE(run.liger_layer_norm);
  training_spec gemma_run = full_bf16;
  const model_spec gemma = from_config("gemma", {{"head_dim", 64}});
  apply_liger(gemma_run, gemma);
  CHECK(gemma_run.liger_geglu);
  CHECK_FALSE(gemma_run.liger_swiglu);
  CHECK(gemma_run.liger_rope);
  CHECK(estimate(gemma, gemma_run).steady.tensor.value > 0);
  // apply_liger_kernel_to_glm4(rope: bool = False, ...)
  training_spec glm4_run = full_bf16;
  apply_liger(glm4_run, from_config("glm4"));
  CHECK_FALSE(glm4_run.liger_rope);
  CHECK(glm4_run.liger_swiglu);
  // The presets of the LLaMA family are patched as llama.
  CHECK(presets::llama_2_7b.liger == liger_patch::llama);
}

TEST_CASE("use_liger_kernel on a family Liger does not patch, or with a kernel that is not modelled, is refused") {
  training_spec run = full_bf16;
  CHECK_THAT(error_message([&] { apply_liger(run, gpt2()); }), Catch::Matchers::Contains("run.liger"));
  CHECK_THAT(error_message([&] { apply_liger(run, from_config("granite")); }),
             Catch::Matchers::Contains("granite") && Catch::Matchers::Contains("cross-entropy"));
  training_spec rope = full_bf16;
  rope.liger_rope = true;
  CHECK_THAT(error_message([&] { (void)estimate(gpt2(), rope); }), Catch::Matchers::Contains("run.fused_rope"));
  training_spec geglu = full_bf16;
  geglu.liger_geglu = true;
  CHECK_THAT(error_message([&] { (void)estimate(from_config("llama"), geglu); }), Catch::Matchers::Contains("run.fused_geglu"));
  training_spec ln = full_bf16;
  ln.liger_layer_norm = true;
  CHECK_THAT(error_message([&] { (void)estimate(from_config("llama"), ln); }),
             Catch::Matchers::Contains("run.fused_layernorm"));
  training_spec torchtune = with_framework(full_bf16, framework_kind::torchtune);
  torchtune.liger_rope = true;
  CHECK_THAT(error_message([&] { (void)estimate(from_config("llama"), torchtune); }),
             Catch::Matchers::Contains("modelled over Hugging Face models"));
}

TEST_CASE("A run document's liger field resolves the model's family and writes each kernel back") {
  json_io::run_input in;
  json_io::read_run_document(json::parse(R"({"model": "llama-2-7b", "run": {"micro_batch": 1, "seq_len": 1024,
      "precision": "pure_bf16", "liger": true}})"),
                             in);
  CHECK(in.run.liger_rope);
  const json back = json_io::run_to_json(in.run);
  CHECK(back.at("fused_rope") == true);
  json_io::run_input again;
  json_io::read_run_document(json{{"model", "llama-2-7b"}, {"run", back}}, again);
  CHECK(again.run.liger_rope);
  CHECK_FALSE(again.run.liger_geglu);
  json_io::run_input gpt;
  CHECK_THAT(error_message([&] {
               json_io::read_run_document(json::parse(R"({"model": "gpt2", "run": {"liger": true}})"), gpt);
             }),
             Catch::Matchers::Contains("run.liger"));
}

}  // namespace liger_kernels_test
