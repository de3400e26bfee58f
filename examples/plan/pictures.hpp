// memscale-plan: pictures of a plan (--svg, --svg-batch) and the text OOM cliff.
#pragma once

#include <string>

#include "memscale/gpus.hpp"
#include "memscale/inference.hpp"
#include "memscale/model.hpp"
#include "memscale/planner.hpp"
#include "memscale/training.hpp"

namespace memscale_plan {

// --svg: one stacked bar per mode (parameters, gradients, optimizer, activations,
// workspace) against VRAM and the budget.
std::string plan_svg(const memscale::model_spec& model, const memscale::gpu_spec& gpu,
                     const memscale::plan_result& plan);

// --svg-batch: the OOM cliff, peak against micro-batch and against sequence length for
// each mode, with VRAM, the budget and the largest micro-batch marked.
std::string cliff_svg(const memscale::model_spec& model, const memscale::training_spec& run,
                      const memscale::gpu_spec& gpu, const memscale::plan_result& plan);

// The same cliff (peak against micro-batch) as a small text chart for the terminal report.
std::string cliff_text(const memscale::model_spec& model, const memscale::training_spec& run,
                       const memscale::gpu_spec& gpu, const memscale::plan_result& plan);

// --inference --svg: prefill and decode peaks as stacked bars (weights, KV cache,
// activations, logits, workspace); with a GPU, against its VRAM and budget.
std::string inference_svg(const memscale::model_spec& model, const memscale::inference_spec& run,
                          const memscale::inference_result& result, const memscale::inference_plan* plan);

// --inference --svg-batch: peak against batch and against context length.
std::string inference_cliff_svg(const memscale::model_spec& model, const memscale::inference_spec& run,
                                const memscale::gpu_spec& gpu, const memscale::inference_plan& plan,
                                const memscale::device_options& device);

}  // namespace memscale_plan

namespace memscale_plan {
struct options;

// Writes `text` to `path`; a failure is a usage_error naming `option` and the path.
void write_text_file(const std::string& option, const std::string& path, const std::string& text);

// --svg / --svg-batch of a training plan (parse_args checked that --gpu is given).
void write_plan_pictures(const options& opt, const memscale::gpu_spec& gpu, const memscale::plan_result& plan);
}  // namespace memscale_plan
