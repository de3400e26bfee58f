// The tensor / reserved / device figures and the point verdict in constant evaluation
// (memscale/device_peak.hpp): a small model replays; a deep one falls back to the rounding
// rule instead of exhausting the compiler's step limit.
#include <memscale/device_peak.hpp>
#include <memscale/gpus.hpp>
#include <memscale/presets.hpp>

namespace {

using namespace memscale;
using namespace memscale::literals;

constexpr model_spec tiny = presets::llama_base("tiny", 2, 256, 4, 2, 688, 1000);
constexpr training_spec tiny_run{.micro_batch = 2, .seq_len = 64, .prec = precision::amp_bf16};
constexpr gpu_spec h100 = *find_gpu("h100-80gb");

constexpr device_estimate tiny_on_h100 = estimate_on_device(tiny, tiny_run, &h100);
static_assert(tiny_on_h100.replayed());
static_assert(tiny_on_h100.reserved >= tiny_on_h100.replay_allocated);
static_assert(tiny_on_h100.replay_allocated >= tiny_on_h100.tensor);
static_assert(tiny_on_h100.device == tiny_on_h100.reserved + tiny_on_h100.context.total());

// Everything the tiny run reserves fits 2 GiB; the context alone does not fit 512 MiB.
static_assert(fit_on_device(tiny, tiny_run, tiny_on_h100, 2_GiB).fits);
static_assert(fit_on_device(tiny, tiny_run, tiny_on_h100, 512_MiB).basis == fit_basis::context_over);

// A 7B model's stream is too long for constant evaluation: the rounding rule, said so.
static_assert(estimate_on_device(presets::llama_2_7b, tiny_run, &h100).fallback == replay_fallback::constant_evaluation);

}  // namespace
