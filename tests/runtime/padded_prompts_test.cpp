// Padded prompts in generate() (inference_spec::padded, training_spec::padded) and the allocator walk
// of transformers 5's generate(): the DynamicLayer prompt copies, Hugging Face's RMSNorm and rotary
// temporaries, the SDPA mask conversion. Checked against the H100 runs of docs/data/gpu_padded_h100.json
// and gpu_measured_h100.json (transformers 5.17), measured before padding was modelled.
#ifdef MEMSCALE_CATCH2_V2
#include <catch2/catch.hpp>
#else
#include <catch2/catch_test_macros.hpp>
#endif

#include <cstdint>
#include <string>

#include "h100_runs.hpp"
#include "memscale/allocator/replay_generate.hpp"
#include "memscale/json.hpp"
#include "memscale/memscale.hpp"

namespace padded_prompts_test {
namespace {

using namespace memscale;
using namespace memscale::allocator;
using memscale_test::h100_run;
using memscale_test::measured_run;
using memscale_test::reserved_error;

measured_run padded_run(const std::string& id) { return h100_run("gpu_padded_h100.json", id); }

double allocated_error(const measured_run& run) {
  const inference_result e =
      estimate_inference(json_io::model_for_record(run.record), json_io::inference_from_record(run.record));
  const double measured = run.record.at("measured_bytes").get<double>();
  return static_cast<double>(e.peak.tensor.value) / measured - 1;
}

TEST_CASE("padded prompts: the record says so and the estimate holds the measured peak", "[inference][padded]") {
  for (const char* id : {"h100-infer-tinyllama-bf16-b16-c1024-n256-padded", "h100-infer-gpt2-fp32-b4-c512-n64-padded",
                         "h100-infer-llama2-7b-bf16-b4-c2048-n64-padded"}) {
    const measured_run run = padded_run(id);
    CHECK(json_io::inference_from_record(run.record).padded);
    const double error = allocated_error(run);
    INFO(id << ": allocated error " << error * 100 << "%");
    CHECK(error > -0.01);
    CHECK(error < 0.01);
  }
}

TEST_CASE("padded prompts: sdpa_mask's bool mask is held through the blocks", "[inference][padded]") {
  // TinyLlama 16 x 1024 under 5.17: the padded run's peak is the unpadded run's plus 16,776,704 B, the
  // (16, 1, 1024, 1024) bool mask the base model binds through its blocks at that moment.
  const measured_run padded = padded_run("h100-infer-tinyllama-bf16-b16-c1024-n256-padded");
  const model_spec m = json_io::model_for_record(padded.record);
  inference_spec r = json_io::inference_from_record(padded.record);
  const std::uint64_t with_mask = estimate_inference(m, r).peak.tensor.value;
  r.padded = false;
  const std::uint64_t without = estimate_inference(m, r).peak.tensor.value;
  CHECK(with_mask - without == 16ULL * 1024 * 1024);
  // A mask turns SDPA's flash kernel and enable_gqa off.
  r.padded = true;
  CHECK(attention_kernel_of(m, r) == attention_kernel::mem_efficient);
  r.padded = false;
  CHECK(attention_kernel_of(m, r) == attention_kernel::flash);
}

TEST_CASE("transformers 5 generate() replays: prompt copies, padded or not, within 1.5% of reserved",
          "[allocator][generate][padded]") {
  // Before the prompt copies and the walk of RMSNorm, rotary and the mask conversion: GPT-2 +15.0%,
  // TinyLlama -6.0%, Llama-2-7B b4 padded -14.0% (the rounding rule) and b8 -10.6% with copies alone.
  struct case_of {
    const char* file;
    const char* id;
  };
  for (const case_of c : {case_of{"gpu_padded_h100.json", "h100-infer-tinyllama-bf16-b16-c1024-n256-padded"},
                          case_of{"gpu_padded_h100.json", "h100-infer-llama2-7b-bf16-b4-c2048-n64-padded"},
                          case_of{"gpu_padded_h100.json", "h100-infer-llama2-7b-bf16-b8-c2048-n128-unpadded"},
                          case_of{"gpu_measured_h100.json", "h100-infer-gpt2-fp32-b4-c512-n64"},
                          case_of{"gpu_measured_h100.json", "h100-infer-tinyllama-bf16-b16-c1024-n256"}}) {
    const measured_run run = h100_run(c.file, c.id);
    const replay_result rep = replay_generate<16384, 16384>(json_io::model_for_record(run.record),
                                                            json_io::inference_from_record(run.record));
    const double error = reserved_error(rep, run.reserved);
    INFO(c.id << ": replayed reserved " << rep.reserved_peak.value << " B, error " << error * 100 << "%");
    CHECK(error > -0.015);
    CHECK(error < 0.015);
  }
}

TEST_CASE("padded prompts: what is not modelled is refused by name", "[inference][padded]") {
  const measured_run run = padded_run("h100-infer-tinyllama-bf16-b16-c1024-n256-padded");
  const model_spec m = json_io::model_for_record(run.record);
  inference_spec r = json_io::inference_from_record(run.record);
  r.attention = attention_impl::flash;
  CHECK_THROWS_WITH(estimate_inference(m, r), Catch::Contains("infer.padded") && Catch::Contains("_upad_input"));
  r.attention = attention_impl::sdpa;
  r.loop = generate_loop::gpt_fast;
  r.cache = kv_cache_kind::static_preallocated;
  CHECK_THROWS_WITH(estimate_inference(m, r), Catch::Contains("infer.padded") && Catch::Contains("gpt-fast"));
  // A model that builds its own mask (OPT) holds it whatever the padding.
  model_spec opt = m;
  opt.builds_attention_mask = true;
  r = json_io::inference_from_record(run.record);
  CHECK_THROWS_WITH(estimate_inference(opt, r), Catch::Contains("infer.padded") && Catch::Contains("OPT"));
  // Training: padded rows are rows of run.packing none.
  training_spec t{.micro_batch = 4, .seq_len = 512, .prec = precision::pure_bf16, .attention = attention_impl::sdpa};
  t.padded = true;
  t.packing = batch_packing::packed;
  CHECK_THROWS_WITH(estimate(m, t), Catch::Contains("run.padded"));
}

TEST_CASE("padded training: the mask is held and the additive copy saved per layer", "[training][padded]") {
  const measured_run run = padded_run("h100-infer-tinyllama-bf16-b16-c1024-n256-padded");
  const model_spec m = json_io::model_for_record(run.record);
  training_spec t{.micro_batch = 4, .seq_len = 1024, .prec = precision::pure_bf16, .attention = attention_impl::sdpa};
  t.transformers_version = 517;
  const estimate_result plain = estimate(m, t);
  t.padded = true;
  const estimate_result padded = estimate(m, t);
  // Every layer's saved (4, 1, 1024, 1024) bf16 additive mask (attention.hpp memory_efficient_mask_bias)
  // and the bool mask, beside what the unmasked kernel saves.
  CHECK(padded.saved_activation_bytes.value - plain.saved_activation_bytes.value >= m.layers * 4ULL * 1024 * 1024 * 2);
}

TEST_CASE("padded training: every mode plans it, AGGRESSIVE's tiled attention staying SDPA", "[training][padded]") {
  training_spec t{.micro_batch = 2, .seq_len = 2048, .prec = precision::pure_bf16, .attention = attention_impl::sdpa};
  t.padded = true;
  const gpu_spec gpu = *find_gpu("rtx4090");
  // flash_attention_2 with padding is refused: the mode keeps the memory-efficient kernel instead.
  CHECK(apply_mode(t, mode::aggressive, gpu).attention == attention_impl::sdpa);
  training_spec plain = t;
  plain.padded = false;
  CHECK(apply_mode(plain, mode::aggressive, gpu).attention == attention_impl::flash);
  const plan_result plan = make_plan(presets::llama_2_7b, t, gpu);
  CHECK(plan.modes[static_cast<std::size_t>(mode::aggressive)].peak.value > 0);
}

}  // namespace
}  // namespace padded_prompts_test
