// memscale-plan --inference: the inference report (text and JSON).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "memscale/gpus.hpp"
#include "memscale/inference.hpp"
#include "memscale/model.hpp"

namespace memscale_plan {

// The text report (its JSON is the library's, memscale/json/inference_report.hpp): weights, KV cache per token and in total, prefill and decode peaks;
// on a CUDA device the caching allocator's figures (`device`; `alloc_conf`: PYTORCH_CUDA_ALLOC_CONF as
// given); with `plan` (--gpu), the verdict with its band and the largest batch and context that fit.
std::string inference_text(const memscale::model_spec& model, const memscale::inference_spec& spec,
                           const memscale::inference_result& result, const memscale::inference_device_estimate* device,
                           const memscale::gpu_spec* gpu, const memscale::inference_plan* plan,
                           const std::string& alloc_conf);

}  // namespace memscale_plan

namespace memscale_plan {
struct options;

// memscale-plan --inference: the report (text or JSON), after writing --svg / --svg-batch.
std::string inference_command(const options& opt);
}  // namespace memscale_plan
