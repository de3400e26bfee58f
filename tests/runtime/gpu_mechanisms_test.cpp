// Mechanisms found by the H100 measurements (docs/gpu-measurements.md): each changes what
// autograd saves by a stated number of bytes, so each is checked as an exact difference.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>

#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace gpu_mechanisms_test {
namespace {

using namespace memscale;

constexpr std::uint64_t layers = 2;
constexpr std::uint64_t hidden = 256;
constexpr std::uint64_t heads = 8;
constexpr std::uint64_t kv_heads = 2;
constexpr model_spec small_llama = presets::llama_base("gqa-test", layers, hidden, heads, kv_heads, 688, 1000);

training_spec cuda_run(precision prec) {
  return training_spec{.micro_batch = 2, .seq_len = 64, .prec = prec, .dropout = false, .device = device_kind::cuda};
}

constexpr std::uint64_t tokens = 2 * 64;

std::uint64_t saved(const model_spec& m, const training_spec& r) { return estimate(m, r).saved_activation_bytes.value; }

}  // namespace

TEST_CASE("RMSNorm keeps x^2 only before torch 2.2, whose MeanBackward saved its input") {
  training_spec old_torch = cuda_run(precision::fp32);
  old_torch.torch_version = 113;
  training_spec new_torch = cuda_run(precision::fp32);
  new_torch.torch_version = 211;
  // Two norms per layer and the final norm, each one fp32 tokens x hidden tensor.
  CHECK(saved(small_llama, old_torch) - saved(small_llama, new_torch) == (2 * layers + 1) * tokens * hidden * 4);
}

TEST_CASE("CUDA autocast runs gelu_new's pow in fp32") {
  const model_spec gpt2 = presets::gpt2_base("gelu-test", layers, 128, 4);
  training_spec cpu = cuda_run(precision::amp_bf16);
  cpu.device = device_kind::cpu;
  const training_spec cuda = cuda_run(precision::amp_bf16);
  // Per layer and ffn element: CPU keeps x, tanh, 1+tanh, 0.5x and c_proj's input in bf16
  // (10 B); CUDA keeps an fp32 x, fp32 tanh and 1+tanh, a bf16 0.5x and c_proj's bf16 cast (16 B).
  CHECK(saved(gpt2, cuda) - saved(gpt2, cpu) == layers * tokens * gpt2.ffn * 6);
}

TEST_CASE("transformers 5 hands grouped k and v to SDPA: no repeat_kv copies in 16-bit") {
  training_spec v4 = cuda_run(precision::pure_bf16);
  training_spec v5 = v4;
  v5.transformers_version = 517;
  const std::uint64_t head_dim = hidden / heads;
  const std::uint64_t q_width = heads * head_dim;
  const std::uint64_t kv_width = kv_heads * head_dim;
  // Two bf16 tensors per layer shrink from the query's width to the kv width.
  CHECK(saved(small_llama, v4) - saved(small_llama, v5) == layers * 2 * tokens * (q_width - kv_width) * 2);
}

TEST_CASE("transformers 5 with fp32 and grouped k, v runs SDPA's math kernel, which saves the probabilities") {
  training_spec v4 = cuda_run(precision::fp32);
  v4.attention = attention_impl::sdpa;
  training_spec v5 = v4;
  v5.transformers_version = 517;
  const std::uint64_t probabilities = 2 * heads * 64 * 64 * 4;  // batch x heads x seq^2, fp32
  // Both keep q, k and v at the query's width and o_proj's input: the math kernel's merged copy
  // of its context, the memory-efficient kernel's output itself (merged as a view). The math
  // kernel keeps the probabilities where the memory-efficient kernel kept its log-sum-exp.
  const std::uint64_t log_sum_exp = 2 * heads * 64 * 4;
  CHECK(saved(small_llama, v5) - saved(small_llama, v4) == layers * (probabilities - log_sum_exp));
  // On the CPU the same call keeps the flash-style path.
  v4.device = device_kind::cpu;
  v5.device = device_kind::cpu;
  CHECK(saved(small_llama, v5) < saved(small_llama, v4));
}

TEST_CASE("a record's software and GPU set the transformers release, the loss and the BLAS workspace") {
  const auto record = json_io::json::parse(R"json({
    "id": "h100-test", "measure": "max_memory_allocated", "device": "h100-80gb",
    "model": {"hf_config": {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
              "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 688, "vocab_size": 1000,
              "max_position_embeddings": 512, "hidden_act": "silu", "tie_word_embeddings": false}},
    "train": {"batch": 2, "seq": 64, "precision": "amp_bf16", "optimizer": "adamw"},
    "software": {"torch": "2.11.0", "transformers": "5.17.0"},
    "measured_bytes": 1})json");
  const training_spec run = json_io::run_from_record(record);
  CHECK(run.transformers_version == 517);
  CHECK(run.torch_version == 211);
  CHECK(run.blas_workspace == pytorch_cublas_workspace_sm90_plus);
  const model_spec model = json_io::model_for_record(record);
  CHECK(model.upcast_logits);
  CHECK(model.shift_labels);
  auto older = record;
  older["software"]["transformers"] = "4.44.2";
  older["device"] = "a100-80gb";
  CHECK_FALSE(json_io::model_for_record(older).shift_labels);
  CHECK(json_io::run_from_record(older).blas_workspace == pytorch_cublas_workspace_default);
}

TEST_CASE("PEFT keeps adapters over a 16-bit base in fp32 by default, lit-gpt keeps the base dtype") {
  training_spec peft = cuda_run(precision::pure_bf16);
  peft.target = training_target::lora;
  peft.lora_rank = 8;
  const auto defaulted = estimate(small_llama, peft);
  training_spec as_base = peft;
  as_base.adapters = adapter_dtype::as_base;
  const auto bf16_adapters = estimate(small_llama, as_base);
  const std::uint64_t trainable = defaulted.trainable_parameter_count;
  CHECK(trainable == bf16_adapters.trainable_parameter_count);
  // Weights, gradients and both AdamW moments: 2 bytes more per element each.
  CHECK(defaulted.parameter_bytes.value - bf16_adapters.parameter_bytes.value == trainable * 2);
  CHECK(defaulted.gradient_bytes.value - bf16_adapters.gradient_bytes.value == trainable * 2);
  CHECK(defaulted.optimizer_bytes.value - bf16_adapters.optimizer_bytes.value == trainable * 4);
  // The adapter input is cast to fp32 and its dropout output (saved by lora_A) is fp32.
  CHECK(defaulted.saved_activation_bytes > bf16_adapters.saved_activation_bytes);
  model_spec litgpt = small_llama;
  litgpt.impl = implementation::litgpt;
  training_spec explicit_fp32 = peft;
  explicit_fp32.adapters = adapter_dtype::fp32;
  CHECK(estimate(litgpt, peft).parameter_bytes == estimate(litgpt, as_base).parameter_bytes);
  CHECK(estimate(litgpt, explicit_fp32).parameter_bytes.value - estimate(litgpt, as_base).parameter_bytes.value ==
        trainable * 2);
}

}  // namespace gpu_mechanisms_test
