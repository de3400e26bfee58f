// 02_training_loop: plan a run at compile time, then drive a (fake) training loop with it.
//
// No framework is involved: the "forward/backward" and "optimizer step" below only print
// what a real loop would do. The plan is a constant: if the run stopped fitting the GPU
// (a bigger model, a longer sequence), the static_assert would fail the build instead of
// the job failing with CUDA out-of-memory an hour in.
#include <algorithm>
#include <cstdint>
#include <cstdio>

#include <memscale/gpus.hpp>
#include <memscale/planner.hpp>
#include <memscale/presets.hpp>
#include <memscale/training.hpp>

// In a namespace: the library's templates name their parameters model, run and gpu, and -Wshadow
// would flag globals of those names where a template is instantiated.
namespace training_loop {

inline constexpr memscale::model_spec model = memscale::presets::gpt2_xl;
// fp32 weights, AdamW; 4 sequences of 512 tokens per micro-step, 4 micro-steps per
// optimizer step (an effective batch of 16).
inline constexpr memscale::training_spec run{.micro_batch = 4, .seq_len = 512, .grad_accum = 4};
inline constexpr memscale::gpu_spec gpu = *memscale::find_gpu("rtx3090");

constexpr auto plan = memscale::make_plan(model, run, gpu);
static_assert(plan.fits, "gpt2-xl 4x512 does not fit an RTX 3090 in any MemScale mode");

}  // namespace training_loop

int main() {
  using namespace training_loop;
  const std::uint64_t micro_batch = std::min(plan.max_micro_batch, run.micro_batch);
  const std::uint64_t accumulate = plan.grad_accumulation;
  const std::uint64_t optimizer_steps = 2;

  std::printf("%.*s on %.*s: mode %.*s (%.*s)\n", static_cast<int>(model.name.size()), model.name.data(),
              static_cast<int>(gpu.name.size()), gpu.name.data(), static_cast<int>(memscale::to_string(plan.chosen).size()),
              memscale::to_string(plan.chosen).data(), static_cast<int>(plan.reason.size()), plan.reason.data());
  std::printf("peak %llu MiB of a %llu MiB budget\n",
              static_cast<unsigned long long>(plan.chosen_plan().peak.value >> 20),
              static_cast<unsigned long long>(plan.budget.value >> 20));

  std::uint64_t k = 0;
  for (std::uint64_t step = 0; step < optimizer_steps; ++step) {
    for (std::uint64_t micro = 0; micro < accumulate; ++micro) {
      // forward + backward on `micro_batch` sequences; gradients add up.
      std::printf("step %llu: micro-batch %llu, accumulating %llu\n", static_cast<unsigned long long>(k++),
                  static_cast<unsigned long long>(micro_batch), static_cast<unsigned long long>(accumulate));
    }
    // optimizer.step(); optimizer.zero_grad(set_to_none=True)
    std::printf("optimizer step %llu: %llu sequences\n", static_cast<unsigned long long>(step + 1),
                static_cast<unsigned long long>(micro_batch * accumulate));
  }
  return 0;
}

// Output (g++ 12 and clang++ 14):
// -> gpt2-xl on rtx3090: mode balanced (checkpointing is not enough; with optimizer state and checkpointed activations offloaded to the CPU the run fits)
// -> peak 8962 MiB of a 20628 MiB budget
// -> step 0: micro-batch 4, accumulating 4
// -> step 1: micro-batch 4, accumulating 4
// -> step 2: micro-batch 4, accumulating 4
// -> step 3: micro-batch 4, accumulating 4
// -> optimizer step 1: 16 sequences
// -> step 4: micro-batch 4, accumulating 4
// -> step 5: micro-batch 4, accumulating 4
// -> step 6: micro-batch 4, accumulating 4
// -> step 7: micro-batch 4, accumulating 4
// -> optimizer step 2: 16 sequences
