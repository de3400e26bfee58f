// Planner in constant evaluation: the two MemScale scenarios and assert_fits.
// A make_plan estimates the four modes and then searches the largest micro-batch: about
// ten estimates (BERT-base 16x128: 5, GPT-2 XL 1x512: 9), each a noticeable cost for the
// constant evaluator, so the plans here stay few. fits() and assert_fits() only need the
// verdict and stop at the first mode that fits (BERT-base: one estimate).
#include <memscale/gpus.hpp>
#include <memscale/planner.hpp>
#include <memscale/presets.hpp>
#include <memscale/training.hpp>

namespace planner_static {

inline constexpr memscale::gpu_spec rtx3090 = *memscale::find_gpu("rtx3090");
inline constexpr memscale::training_spec bert_run{.micro_batch = 16, .seq_len = 128};  // fp32, AdamW
inline constexpr memscale::training_spec gpt2_xl_run{.micro_batch = 1, .seq_len = 512};  // fp32, AdamW

// BERT-base 16x128 fits an RTX 3090 without any memory-saving technique.
inline constexpr memscale::plan_result bert_plan =
    memscale::make_plan(memscale::presets::bert_base_uncased, bert_run, rtx3090);
static_assert(bert_plan.fits);
static_assert(bert_plan.chosen == memscale::mode::none);
static_assert(bert_plan.modes[0].fits);

// GPT-2 XL 1x512 does not fit as is, but one of the modes makes it fit.
inline constexpr memscale::plan_result gpt2_xl_plan = memscale::make_plan(memscale::presets::gpt2_xl, gpt2_xl_run, rtx3090);
static_assert(!gpt2_xl_plan.modes[0].fits);
static_assert(gpt2_xl_plan.fits);
static_assert(gpt2_xl_plan.chosen != memscale::mode::none);
static_assert(gpt2_xl_plan.chosen_plan().peak <= gpt2_xl_plan.budget);

static_assert(memscale::assert_fits<memscale::presets::bert_base_uncased, bert_run, rtx3090>());

// Llama-3-8B LoRA r16 on every linear layer, pure bf16, 1x2048 on an RTX 4090: no mode fits
// even micro-batch 1; checkpointing with a chunked loss likely fits, so the plan is that, not
// streaming the parameters from the host.
inline constexpr memscale::gpu_spec rtx4090 = *memscale::find_gpu("rtx4090");
inline constexpr memscale::training_spec llama3_lora{.micro_batch = 1, .seq_len = 2048,
                                                     .prec = memscale::precision::pure_bf16,
                                                     .attention = memscale::attention_impl::sdpa,
                                                     .target = memscale::training_target::lora, .lora_rank = 16,
                                                     .lora_targets = memscale::lora_all_linear};
inline constexpr memscale::plan_result llama3_plan = memscale::make_plan(memscale::presets::llama_3_8b, llama3_lora, rtx4090);
static_assert(llama3_plan.status == memscale::plan_status::cheaper_levers);
static_assert(llama3_plan.levers.advised().what == memscale::lever::chunked_loss);
static_assert(llama3_plan.chosen_plan().peak <= llama3_plan.budget);

}  // namespace planner_static
