// Run-time checks for bytes, presets and the estimators: the key values of
// tests/static/{bytes,presets,estimators}_static.cpp again, with batch, sequence and
// other inputs the compiler cannot fold (read through volatile), so the run-time path
// runs; plus the errors validate() throws for invalid input.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <string>
#include <string_view>

#include "memscale/memscale.hpp"
#include "error_capture.hpp"
#include "test_inputs.hpp"

namespace estimate_test {
namespace {

using memscale_test::opaque;

using memscale_test::contains;
using memscale_test::error_code_of;
using memscale_test::error_message;

using namespace memscale;
using namespace memscale::literals;

// A value the optimiser cannot see through.
double opaque_double(double v) {
  volatile double x = v;
  return x;
}

constexpr std::uint64_t P = 124'439'808;  // GPT-2
constexpr std::uint64_t gpt2_tensors = 148;


// 2 layers, hidden 64, 4 heads, ffn 256; derivation in tests/static/estimators_static.cpp.
model_spec tiny_model() {
  return {.name = "tiny",
          .layers = opaque(2),
          .hidden = opaque(64),
          .heads = opaque(4),
          .ffn = opaque(256),
          .vocab = opaque(1000),
          .positions = position_kind::none,
          .mlp = mlp_kind::gelu,
          .norm_bias = false,
          .dropout = false};
}

training_spec gpt2_cpu_run() {
  return {.micro_batch = opaque(1),
          .seq_len = opaque(128),
          .optimizer_impl = optimizer_implementation::for_loop,
          .attention = attention_impl::eager,
          .device = device_kind::cpu,
          .torch_version = 113};
}

}  // namespace

TEST_CASE("bytes arithmetic at run time", "[bytes]") {
  const bytes kib{opaque(1024)};
  CHECK(kib == 1_KiB);
  CHECK(bytes{opaque(1'000'000'000)} == 1_GB);
  CHECK(kib + kib == 2_KiB);
  CHECK(2_KiB - kib == 1_KiB);
  CHECK(kib * opaque(1024) == 1_MiB);
  CHECK(opaque(3) * kib == 3_KiB);
  CHECK(ceil_div(bytes{opaque(10)}, 3U) == bytes{4});
  CHECK(ceil_div(bytes{opaque(9)}, 3U) == bytes{3});
  CHECK(round_up(bytes{opaque(513)}, 512_B) == 1024_B);
  CHECK(round_up(bytes{opaque(0)}, 2_MiB) == bytes{0});
  CHECK(bytes::from_double(opaque_double(1.2)) == bytes{2});
  CHECK(bytes::from_double(opaque_double(3.0)) == bytes{3});
  CHECK(bytes::from_double(opaque_double(0.0)) == bytes{0});
  CHECK(ratio(bytes{opaque(3)} * (1ULL << 30), 2_GiB) == 1.5);
  CHECK(to_gib(bytes{opaque(1ULL << 29)}) == 0.5);
  CHECK(1_KB < kib);
  CHECK(max(1_KB, kib) == kib);
  CHECK(storage(dtype::nf4, opaque(3)) == bytes{2});
  CHECK(storage(dtype::bf16, opaque(10)) == bytes{20});
  CHECK(storage(dtype::boolean, opaque(7)) == bytes{7});
}

TEST_CASE("bytes overflow and underflow throw instead of wrapping", "[bytes][error]") {
  const bytes all_ones{~opaque(0)};
  CHECK_THROWS_AS(all_ones + bytes{1}, error);
  CHECK(error_code_of([&] { (void)(all_ones + bytes{1}); }) == error_code::overflow);
  CHECK(error_code_of([&] { (void)(bytes{opaque(1ULL << 40)} * (1ULL << 40)); }) == error_code::overflow);
  CHECK(error_code_of([&] {
          bytes b = all_ones;
          b += bytes{opaque(1)};
        }) == error_code::overflow);
  CHECK(error_code_of([&] { (void)(bytes{opaque(1)} - bytes{2}); }) == error_code::underflow);
  CHECK(error_code_of([&] { (void)bytes::from_double(opaque_double(-1.0)); }) == error_code::underflow);
  CHECK(error_code_of([&] { (void)bytes::from_double(opaque_double(1e20)); }) == error_code::overflow);
  CHECK(error_code_of([&] { (void)ceil_div(bytes{opaque(1)}, 0U); }) == error_code::invalid_run);
  CHECK(contains(error_message([&] { (void)(all_ones + bytes{1}); }), "[memscale.overflow]"));
  // The largest representable sum still works.
  CHECK((bytes{~opaque(0) - 1} + bytes{1}).value == ~0ULL);
}

TEST_CASE("presets match the published parameter counts", "[presets]") {
  struct published {
    std::string name;
    std::uint64_t params;
  };
  const published table[] = {
      {"gpt2", 124'439'808},          {"gpt2-medium", 354'823'168},       {"gpt2-large", 774'030'080},
      {"gpt2-xl", 1'557'611'200},     {"bert-base-uncased", 109'482'240}, {"bert-large-uncased", 335'141'888},
      {"llama-2-7b", 6'738'415'616},  {"llama-2-13b", 13'015'864'320},    {"llama-2-70b", 68'976'648'192},
      {"llama-3-8b", 8'030'261'248},  {"mistral-7b", 7'241'732'096},      {"mixtral-8x7b", 46'702'792'704},
      {"qwen2.5-7b", 7'615'616'512},  {"t5-small", 60'506'624},           {"t5-base", 222'903'552},
      {"t5-large", 737'668'096},      {"flan-t5-base", 247'577'856},
  };
  CHECK(presets::all.size() == std::size(table));
  for (const auto& row : table) {
    INFO(row.name);
    const std::string name = row.name;  // a run-time string: find() is not folded
    const auto m = presets::find(name);
    REQUIRE(m.has_value());
    CHECK(parameter_count(*m) == row.params);
  }
  CHECK_FALSE(presets::find(std::string("nope")).has_value());
  CHECK_FALSE(presets::find(std::string("GPT2")).has_value());
}

TEST_CASE("GPT-2 fp32 AdamW on the CPU", "[estimate]") {
  const training_spec run = gpt2_cpu_run();
  const graph g = build(presets::gpt2, run).stack();
  CHECK(parameter_count(g) == P);
  CHECK(parameter_bytes(g, run) == bytes{4 * P});
  CHECK(gradient_bytes(g, run) == bytes{4 * P});
  CHECK(optimizer_state_bytes(g, run) == bytes{8 * P + 4 * gpt2_tensors});  // 995,519,056
  CHECK(optimizer_step_temporaries(g, run) == bytes{308'779'008});          // 2 x fp32 wte
  CHECK(g.buffers == 12_MiB);
  CHECK(g.inputs == bytes{2048});

  const estimate_result r = estimate(presets::gpt2, run);
  CHECK(r.parameter_count == P);
  CHECK(r.trainable_parameter_count == P);
  CHECK(r.optimizer_bytes == bytes{995'519'056});
  CHECK(r.steady.at == phase::optimizer_step);
  CHECK(r.steady.tensor == bytes{2'312'401'488});  // measured 2,312,401,504
  CHECK(r.steady.reserved == r.steady.tensor);
  CHECK(r.steady.device == r.steady.tensor);
  CHECK(r.first_step.tensor == r.steady.tensor);
}

TEST_CASE("optimizer state and temporaries on CUDA", "[estimate][optimizer]") {
  const auto run = [](optimizer_kind o, optimizer_implementation impl, precision p = precision::fp32,
                      std::uint32_t torch = 205) {
    return training_spec{.micro_batch = opaque(1),
                         .seq_len = opaque(128),
                         .prec = p,
                         .optimizer = o,
                         .optimizer_impl = impl,
                         .torch_version = torch};
  };
  const auto state = [](const training_spec& t) { return optimizer_state_bytes(build(presets::gpt2, t).stack(), t); };
  const auto temps = [](const training_spec& t) {
    return optimizer_step_temporaries(build(presets::gpt2, t).stack(), t);
  };
  using ok = optimizer_kind;
  using oi = optimizer_implementation;
  CHECK(state(run(ok::adamw, oi::foreach)) == bytes{8 * P});
  CHECK(state(run(ok::adamw, oi::fused)) == bytes{8 * P + 4 * gpt2_tensors});
  CHECK(temps(run(ok::adamw, oi::foreach)) == bytes{4 * P});
  CHECK(temps(run(ok::adamw, oi::foreach, precision::fp32, 200)) == bytes{8 * P});
  CHECK(temps(run(ok::adamw, oi::fused)) == bytes{});
  CHECK(state(run(ok::sgd, oi::foreach)) == bytes{});
  CHECK(temps(run(ok::sgd, oi::foreach)) == bytes{});
  CHECK(state(run(ok::sgd_momentum, oi::foreach)) == bytes{4 * P});
  CHECK(state(run(ok::lion, oi::foreach)) == bytes{4 * P});
  CHECK(state(run(ok::adafactor, oi::foreach)) == bytes{1'286'468});
  CHECK(state(run(ok::adamw_8bit, oi::foreach)) == bytes{253'492'632});
  const training_spec adam8 = run(ok::adamw_8bit, oi::foreach);
  CHECK(tensor_state_bytes(1, opaque(4095), adam8) == bytes{32'760});
  CHECK(tensor_state_bytes(1, opaque(4096), adam8) == bytes{8'320});
  CHECK(tensor_state_bytes(opaque(4096), 4096, adam8) == bytes{34'078'720});

  // pure_bf16 halves parameters, gradients and state.
  const training_spec bf16 = run(ok::adamw, oi::foreach, precision::pure_bf16);
  const graph g = build(presets::gpt2, bf16).stack();
  CHECK(parameter_bytes(g, bf16) == bytes{2 * P});
  CHECK(gradient_bytes(g, bf16) == bytes{2 * P});
  CHECK(optimizer_state_bytes(g, bf16) == bytes{4 * P});
}

TEST_CASE("LoRA and QLoRA", "[estimate][lora]") {
  training_spec lora{.micro_batch = opaque(1),
                     .seq_len = opaque(512),
                     .prec = precision::pure_bf16,
                     .target = training_target::lora,
                     .lora_rank = opaque(8)};
  const estimate_result r = estimate(presets::llama_2_7b, lora);
  CHECK(r.trainable_parameter_count == 4'194'304);  // 32 * 2 * 8 * (4096 + 4096)
  CHECK(r.parameter_count == 6'738'415'616 + 4'194'304);
  // PEFT keeps adapters over the bf16 base in fp32 (autocast_adapter_dtype): 4 B per element.
  CHECK(r.gradient_bytes == bytes{16'777'216});
  CHECK(r.optimizer_bytes == bytes{33'554'432});
  CHECK(trainable_parameter_count(build(presets::llama_3_8b, lora).stack()) == 3'407'872);

  CHECK(nf4_weight_bytes(opaque(4096) * 4096, base_quant::nf4) == bytes{8'388'608 + 4 * 262'144});
  CHECK(nf4_weight_bytes(opaque(4096) * 4096, base_quant::nf4_double_quant) == bytes{8'654'848});
  training_spec qlora = lora;
  qlora.target = training_target::qlora;
  const op frozen_projection{.kind = op_kind::linear, .weight = {opaque(4096), 4096, 1},
                             .role = param_role::matmul, .frozen = true};
  CHECK(op_parameter_bytes(frozen_projection, qlora) == bytes{9'437'184});
  CHECK(op_parameter_bytes(frozen_projection, lora) == bytes{33'554'432});
  const graph g = build(presets::llama_2_7b, qlora).stack();
  bytes block{};
  for (std::size_t i = g.block_begin; i < g.block_end; ++i) block += op_parameter_bytes(g.ops[i], qlora);
  CHECK(block == bytes{114'114'560});
}

TEST_CASE("workspace", "[estimate][workspace]") {
  CHECK(cublas_workspace_bytes(static_cast<std::uint32_t>(opaque(80))) == bytes{8'519'680});
  CHECK(cublas_workspace_bytes(static_cast<std::uint32_t>(opaque(90))) == 32_MiB);
  CHECK(cuda_context_bytes(opaque(1) == 1) == 400_MiB);
  CHECK(cuda_context_bytes(opaque(0) == 1) == 1343_MiB);

  const training_spec fused{.micro_batch = opaque(1),
                            .seq_len = opaque(128),
                            .optimizer_impl = optimizer_implementation::fused};
  const estimate_result r = estimate(presets::gpt2, fused);
  CHECK(r.first_step.at == phase::optimizer_step);
  CHECK(r.first_step.tensor == bytes{2'012'142'160});
  CHECK(r.first_step.breakdown.workspace == bytes{8'519'680});
  CHECK(r.steady.reserved.value % (2ULL << 20) == 0);
  CHECK(r.steady.reserved >= r.steady.tensor);
  CHECK(r.steady.device == r.steady.reserved + 400_MiB);
}

TEST_CASE("saved activations of the tiny model", "[estimate][activations]") {
  const model_spec tiny = tiny_model();
  const auto run = [](attention_impl a, checkpointing c, std::uint64_t batch) {
    return training_spec{.micro_batch = opaque(batch), .seq_len = opaque(16), .ckpt = c, .attention = a};
  };
  CHECK(parameter_count(tiny) == 226'624);
  CHECK(estimate(tiny, run(attention_impl::flash, checkpointing::none, 2)).saved_activation_bytes == bytes{400'832});
  CHECK(estimate(tiny, run(attention_impl::eager, checkpointing::none, 2)).saved_activation_bytes == bytes{416'192});
  CHECK(estimate(tiny, run(attention_impl::eager, checkpointing::selective, 2)).saved_activation_bytes ==
        bytes{399'808});
  CHECK(estimate(tiny, run(attention_impl::flash, checkpointing::full, 2)).saved_activation_bytes == bytes{153'024});
  CHECK(estimate(tiny, run(attention_impl::flash, checkpointing::none, 4)).saved_activation_bytes == bytes{801'664});
}

TEST_CASE("monotonic properties on GPT-2", "[estimate][activations]") {
  const auto saved = [](std::uint64_t batch, std::uint64_t seq, attention_impl a, precision p, checkpointing c) {
    const training_spec t{.micro_batch = opaque(batch), .seq_len = opaque(seq), .prec = p, .ckpt = c, .attention = a};
    return estimate(presets::gpt2, t).saved_activation_bytes;
  };
  using ai = attention_impl;
  using pr = precision;
  using ck = checkpointing;
  const bytes base = saved(2, 1024, ai::eager, pr::fp32, ck::none);
  // batch: linear; sequence: super-linear with eager attention
  CHECK(saved(1, 1024, ai::eager, pr::fp32, ck::none) * 2U == base);
  CHECK(saved(4, 1024, ai::eager, pr::fp32, ck::none) == base * 2U);
  CHECK(saved(2, 512, ai::eager, pr::fp32, ck::none) * 2U < base);
  // flash < eager at s = 1024; sdpa_math == eager
  const bytes flash = saved(2, 1024, ai::flash, pr::fp32, ck::none);
  CHECK(flash < base);
  CHECK(saved(2, 512, ai::flash, pr::fp32, ck::none) < flash);
  CHECK(saved(2, 1024, ai::sdpa_math, pr::fp32, ck::none) == base);
  // checkpointing
  const bytes selective = saved(2, 1024, ai::eager, pr::fp32, ck::selective);
  const bytes full = saved(2, 1024, ai::eager, pr::fp32, ck::full);
  CHECK(full < selective);
  CHECK(selective < base);
  // precision
  const bytes amp = saved(2, 1024, ai::eager, pr::amp_bf16, ck::none);
  const bytes pure = saved(2, 1024, ai::eager, pr::pure_bf16, ck::none);
  CHECK(base > amp);
  CHECK(amp > pure);
  CHECK(saved(2, 1024, ai::eager, pr::amp_fp16, ck::none) == amp);
  CHECK(saved(2, 1024, ai::eager, pr::pure_fp16, ck::none) == pure);
}

TEST_CASE("steady-state peak versus the first step", "[estimate][peak]") {
  using ok = optimizer_kind;
  using oi = optimizer_implementation;
  // The state exists in every moment of a steady step, but only inside step 1's
  // optimizer.step(): the steady peak is never below the first step's.
  for (const auto o : {ok::sgd, ok::sgd_momentum, ok::adam, ok::adamw, ok::adamw_8bit, ok::adafactor, ok::lion}) {
    for (const auto impl : {oi::for_loop, oi::foreach, oi::fused}) {
      const training_spec t{.micro_batch = opaque(1), .seq_len = opaque(128), .optimizer = o, .optimizer_impl = impl};
      const estimate_result r = estimate(presets::gpt2, t);
      INFO(std::string(to_string(o)) << " impl " << static_cast<int>(impl));
      CHECK(r.steady.tensor >= r.first_step.tensor);
      if (r.optimizer_bytes > bytes{} && r.steady.at == phase::backward) CHECK(r.steady.tensor > r.first_step.tensor);
      if (r.optimizer_bytes == bytes{}) CHECK(r.steady.tensor == r.first_step.tensor);
    }
  }
  // Fused AdamW: the steady peak is in backward, above step 1's optimizer-step peak.
  const estimate_result fused = estimate(
      presets::gpt2, training_spec{.micro_batch = opaque(1), .seq_len = opaque(128), .optimizer_impl = oi::fused});
  CHECK(fused.steady.at == phase::backward);
  CHECK(fused.first_step.at == phase::optimizer_step);
  CHECK(fused.steady.tensor > fused.first_step.tensor);
  // Both peaks in forward: they differ by exactly the optimizer state.
  const estimate_result eager = estimate(
      presets::gpt2, training_spec{.micro_batch = opaque(2), .seq_len = opaque(1024), .attention = attention_impl::eager});
  CHECK(eager.steady.at == phase::forward);
  CHECK(eager.first_step.at == phase::forward);
  CHECK(eager.steady.tensor - eager.first_step.tensor == eager.optimizer_bytes);
}

TEST_CASE("validate() names the offending field", "[validate][error]") {
  SECTION("model.layers = 0") {
    model_spec m = presets::gpt2;
    m.layers = opaque(0);
    const std::string msg = error_message([&] { (void)validate(m); });
    CHECK(contains(msg, "model.layers"));
    CHECK(contains(msg, "[memscale.invalid_model]"));
    CHECK(contains(msg, "(got 0)"));
    CHECK(error_code_of([&] { (void)validate(m); }) == error_code::invalid_model);
    // estimate() validates too.
    CHECK(contains(error_message([&] { (void)estimate(m, training_spec{}); }), "model.layers"));
  }
  SECTION("kv_heads does not divide heads") {
    model_spec m = presets::llama_2_7b;
    m.kv_heads = opaque(5);
    const std::string msg = error_message([&] { (void)validate(m); });
    CHECK(contains(msg, "model.kv_heads"));
    CHECK(contains(msg, "must divide model.heads"));
    CHECK(contains(msg, "(got 5)"));
    CHECK(contains(error_message([&] { (void)estimate(m, training_spec{}); }), "model.kv_heads"));
  }
  SECTION("kv_heads above heads") {
    model_spec m = presets::llama_2_7b;
    m.kv_heads = opaque(64);
    CHECK(contains(error_message([&] { (void)validate(m); }), "model.kv_heads must be <= model.heads"));
  }
  SECTION("heads does not divide hidden") {
    model_spec m = presets::gpt2;
    m.heads = opaque(7);  // 768 % 7 == 5
    const std::string msg = error_message([&] { (void)validate(m); });
    CHECK(contains(msg, "model.heads"));
    CHECK(contains(msg, "must divide model.hidden"));
    // An explicit head_dim lifts the requirement.
    m.head_dim = opaque(64);
    CHECK_NOTHROW(validate(m));
  }
  SECTION("run.micro_batch = 0") {
    const training_spec t{.micro_batch = opaque(0)};
    const std::string msg = error_message([&] { (void)validate(t); });
    CHECK(contains(msg, "run.micro_batch"));
    CHECK(contains(msg, "[memscale.invalid_run]"));
    CHECK(error_code_of([&] { (void)validate(t); }) == error_code::invalid_run);
    CHECK(contains(error_message([&] { (void)estimate(presets::gpt2, t); }), "run.micro_batch"));
  }
  SECTION("LoRA without a rank") {
    const training_spec t{.target = training_target::lora, .lora_rank = opaque(0)};
    CHECK(contains(error_message([&] { (void)validate(t); }), "run.lora_rank"));
  }
  SECTION("valid specs pass unchanged") {
    for (const auto& m : presets::all) CHECK(&validate(m) == &m);
  }
}

}  // namespace estimate_test
