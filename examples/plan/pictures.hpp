// memscale-plan: pictures of a plan (--svg, --svg-batch) and the text OOM cliff.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "memscale/gpus.hpp"
#include "memscale/inference.hpp"
#include "memscale/json/run_document.hpp"
#include "memscale/model.hpp"
#include "memscale/planner.hpp"
#include "memscale/training.hpp"

namespace memscale_plan {

// The OOM cliff against micro-batch of one run: each mode's plan at another micro-batch (the
// planner's own, transformer or vision) and the input the cliff holds fixed ("seq 1024",
// "image 224x224").
struct micro_batch_cliff {
  std::function<memscale::mode_plan(std::uint64_t micro_batch, memscale::mode m)> plan_at;
  std::string fixed;
};

micro_batch_cliff transformer_cliff(const memscale::model_spec& model, const memscale::training_spec& run,
                                    const memscale::gpu_spec& gpu, const memscale::plan_result& plan);
// A vision run (in.vision set): the figures of the web calculator's cliff (json/vision_report.hpp).
micro_batch_cliff vision_cliff(const memscale::json_io::run_input& in, const memscale::gpu_spec& gpu,
                               const memscale::plan_result& plan);

// --svg: one stacked bar per mode (parameters, gradients, optimizer, activations,
// workspace) against VRAM and the budget.
std::string plan_svg(std::string_view model_name, const memscale::gpu_spec& gpu, const memscale::plan_result& plan);

// --svg-batch: the OOM cliff, peak against micro-batch and against sequence length for
// each mode, with VRAM, the budget and the largest micro-batch marked.
std::string cliff_svg(const memscale::model_spec& model, const memscale::training_spec& run,
                      const memscale::gpu_spec& gpu, const memscale::plan_result& plan);

// --svg-batch of a vision run: peak against micro-batch only (its input has no sequence).
std::string vision_cliff_svg(std::string_view model_name, const micro_batch_cliff& cliff,
                             const memscale::training_spec& run, const memscale::gpu_spec& gpu,
                             const memscale::plan_result& plan);

// The same cliff (peak against micro-batch) as a small text chart for the terminal report.
std::string cliff_text(const micro_batch_cliff& cliff, const memscale::training_spec& run,
                       const memscale::plan_result& plan);

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
