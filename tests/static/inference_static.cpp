// Compile-time checks of the inference estimator.
#include <memscale/inference.hpp>
#include <memscale/presets.hpp>

namespace {

using namespace memscale;
using namespace memscale::literals;

// The guides' arithmetic: a 7B model with 32 layers and 32 heads of 128 caches
// 2 x 32 x 32 x 128 x 2 bytes = 524,288 bytes of fp16 keys and values per token.
static_assert(kv_bytes_per_token(presets::llama_2_7b, inference_spec{.kv = dtype::fp16}) == bytes{524'288});
// 4,096 tokens of it: 2 GiB per sequence.
static_assert(kv_cache_bytes(presets::llama_2_7b, inference_spec{.context = 4096, .new_tokens = 0}, 4096) == 2_GiB);
// Grouped-query attention divides it by heads / kv_heads (LLaMA-3-8B: 8 kv heads).
static_assert(kv_bytes_per_token(presets::llama_3_8b, inference_spec{}) == bytes{131'072});
// fp8 and int8 caches halve it.
static_assert(kv_bytes_per_token(presets::llama_2_7b, inference_spec{.kv = dtype::fp8_e4m3}) == bytes{262'144});
// MLA (DeepSeek-V2 config: kv_lora_rank 512, qk_rope_head_dim 64, 60 layers): 576 values
// per token and layer instead of 2 x heads x head_dim.
static_assert(kv_bytes_per_token(model_spec{.layers = 60, .hidden = 5120, .heads = 128, .head_dim = 128,
                                            .ffn = 12288, .vocab = 102400, .positions = position_kind::rotary,
                                            .norm = norm_kind::rmsnorm, .mlp = mlp_kind::swiglu},
                                 inference_spec{.kv_lora_rank = 512, .qk_rope_head_dim = 64}) ==
              bytes{60ULL * 576 * 2});
// A static cache is preallocated to its maximum length whatever has been generated.
static_assert(kv_cache_bytes(presets::llama_2_7b,
                             inference_spec{.context = 10, .new_tokens = 10, .cache = kv_cache_kind::static_preallocated,
                                            .max_cache_len = 1024},
                             11) == bytes{524'288ULL * 1024});
// A sliding-window cache holds at most the window.
static_assert(kv_cache_bytes(presets::mistral_7b,
                             inference_spec{.context = 8000, .new_tokens = 100, .cache = kv_cache_kind::sliding_window,
                                            .sliding_window = 4096},
                             8099) == kv_bytes_per_token(presets::mistral_7b, inference_spec{}) * 4096u);

// Weights: fp16 LLaMA-2-7B is 2 bytes a parameter; NF4 about 0.5 plus block constants.
constexpr auto fp16_7b = estimate_inference(presets::llama_2_7b, inference_spec{.context = 128, .new_tokens = 16});
static_assert(fp16_7b.parameter_count == 6'738'415'616);
static_assert(fp16_7b.weight_bytes == bytes{6'738'415'616ULL * 2});
constexpr auto nf4_7b = estimate_inference(presets::llama_2_7b, inference_spec{.context = 128, .new_tokens = 16,
                                                                               .weights = weight_format::bnb_nf4});
static_assert(nf4_7b.weight_bytes < fp16_7b.weight_bytes);
// Double quantisation shrinks the block constants (QLoRA paper: 0.5 -> 0.127 bits a parameter).
constexpr auto dq_7b = estimate_inference(presets::llama_2_7b,
                                          inference_spec{.context = 128, .new_tokens = 16,
                                                         .weights = weight_format::bnb_nf4, .double_quant = true});
static_assert(dq_7b.weight_bytes < nf4_7b.weight_bytes);

// Peaks grow with batch and context (the planner's searches rely on it).
static_assert(estimate_inference(presets::llama_2_7b, inference_spec{.batch = 2, .context = 512}).peak.tensor >
              estimate_inference(presets::llama_2_7b, inference_spec{.batch = 1, .context = 512}).peak.tensor);
static_assert(estimate_inference(presets::llama_2_7b, inference_spec{.context = 1024}).peak.tensor >
              estimate_inference(presets::llama_2_7b, inference_spec{.context = 512}).peak.tensor);

// A 7B fp16 model serves a 4k-token conversation on an 80 GB GPU, with its batch and context
// searches (8 estimates solved from the peak values, 36 by bisection): about 0.55 million clang
// constexpr steps, under the 900,000 tests/CMakeLists.txt allows (clang's default is 1,048,576).
static_assert(plan_inference(presets::llama_2_7b, inference_spec{.context = 4000, .new_tokens = 96},
                             *find_gpu("a100-80gb"))
                  .fits);
static_assert(plan_inference(presets::llama_2_7b, inference_spec{.context = 4000, .new_tokens = 96},
                             *find_gpu("a100-80gb"))
                  .max_batch > 1);

}  // namespace
