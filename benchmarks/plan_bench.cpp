// How long make_plan takes at run time (target: at most 10 us), one benchmark per path
// through the planner. Each plan estimates the four modes at the request, then searches
// the largest micro-batch (memscale/detail/largest_fitting.hpp); the counts of estimates in
// the comments are for the current planner.
#include <benchmark/benchmark.h>

#include <memscale/memscale.hpp>

namespace {

void run_plan(benchmark::State& state, const memscale::model_spec& model, memscale::training_spec run,
              const char* gpu_name) {
  const memscale::gpu_spec gpu = *memscale::find_gpu(gpu_name);
  for ([[maybe_unused]] auto _ : state) {
    benchmark::DoNotOptimize(run);
    auto plan = memscale::make_plan(model, run, gpu);
    benchmark::DoNotOptimize(plan);
  }
}

// GPT-2 XL 1x512 fp32 fits only with a mode (CONSERVATIVE); largest micro-batch 84 (9 estimates).
void make_plan_gpt2_xl_rtx3090(benchmark::State& state) {
  run_plan(state, memscale::presets::gpt2_xl, {.micro_batch = 1, .seq_len = 512}, "rtx3090");
}
BENCHMARK(make_plan_gpt2_xl_rtx3090);

// Nothing fits as asked (64x1024, accumulation 2): the plan is a smaller micro-batch that
// divides the effective batch, 32 in AGGRESSIVE, and the gentler modes are asked about it (9).
void make_plan_gpt2_xl_smaller_micro_batch(benchmark::State& state) {
  run_plan(state, memscale::presets::gpt2_xl, {.micro_batch = 64, .seq_len = 1024, .grad_accum = 2}, "rtx3090");
}
BENCHMARK(make_plan_gpt2_xl_smaller_micro_batch);

// BERT-base 16x128 fits as it is, and so does every micro-batch up to the search's upper
// bound (plan_options::max_batch_search, 4096): the search runs to its limit (5).
void make_plan_bert_base_search_to_upper_bound(benchmark::State& state) {
  run_plan(state, memscale::presets::bert_base_uncased, {.micro_batch = 16, .seq_len = 128}, "rtx3090");
}
BENCHMARK(make_plan_bert_base_search_to_upper_bound);

// The slowest path: not even micro-batch 1 fits at 262,144 tokens, nor with parameters
// streamed from the host; the plan searches the longest sequence in every mode (23).
// Llama-2-7B without its 4096-token context (a config without max_position_embeddings), so
// the request reaches the planner instead of the context check.
void make_plan_llama_2_7b_shorter_sequence(benchmark::State& state) {
  memscale::model_spec llama_without_context = memscale::presets::llama_2_7b;
  llama_without_context.context_length = 0;
  run_plan(state, llama_without_context, {.micro_batch = 4, .seq_len = 262'144}, "a100-80gb");
}
BENCHMARK(make_plan_llama_2_7b_shorter_sequence);

}  // namespace
