// Positive control for run_does_not_fit.cpp: the same assert_fits call with a run that
// fits (BERT-base, micro-batch 16, seq 128, fp32 AdamW on an RTX 3090) must compile.
#include <memscale/gpus.hpp>
#include <memscale/planner.hpp>
#include <memscale/presets.hpp>
#include <memscale/training.hpp>

inline constexpr memscale::gpu_spec rtx3090 = *memscale::find_gpu("rtx3090");
inline constexpr memscale::training_spec run{.micro_batch = 16, .seq_len = 128};  // fp32, AdamW

static_assert(memscale::assert_fits<memscale::presets::bert_base_uncased, run, rtx3090>());
