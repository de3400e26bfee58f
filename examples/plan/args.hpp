// memscale-plan: the command line, parsed into one `options` value.
//
// The parser is CLI11 (args.cpp). Options are registered per feature group, each group in
// its own file (option_groups.hpp lists them: options_run.cpp, options_lora.cpp, ...), so
// a feature adds its flags, their help and their fields without touching the others.
// The --help text is CLI11's, generated from the same registrations.
//
// A group's settings live in `options` below: the run itself (model, training_spec), or a
// group struct of its own (config, cluster, vision, inference) for a helper feature.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "memscale/gpus.hpp"
#include "memscale/bytes.hpp"
#include "memscale/inference.hpp"
#include "memscale/json/hf/quantization.hpp"
#include "memscale/json/run_settings.hpp"
#include "memscale/model.hpp"
#include "memscale/parallel/strategy.hpp"
#include "memscale/presets.hpp"
#include "memscale/training.hpp"
#include "memscale/vision/model.hpp"

namespace memscale::json_io {
struct generic_checkpoint;  // memscale/json/generic_model.hpp
}  // namespace memscale::json_io

namespace memscale_plan {

// Invalid command-line input; what() is one line naming the option and the value. The
// run-document reader (memscale/json/run_document.hpp) throws the same type.
using usage_error = memscale::json_io::input_error;

// What the program does; `run` (estimate one training run) is the default.
enum class command : std::uint8_t {
  run,
  list_models,
  cases,
  help,
  list_gpus,
  list_families,
};

// The run estimated when no run option is given: GPT-2 small, 4 x 512 tokens, fp32,
// AdamW (foreach), flash attention, no checkpointing.
using memscale::json_io::default_run;

// --- per-group settings of features registered in their own files -------------------
// options_config.cpp: --config PATH|HUB_ID.
struct config_options {
  std::string source;  // as typed; empty: the model is a preset (--model)
  // An unknown model_type read from its checkpoint (generic.hpp); the model is its decoder.
  std::shared_ptr<const memscale::json_io::generic_checkpoint> generic;
  // A family's config.json with a quantization_config: how its linear layers are stored
  // (options_config.cpp applies it to the run); reset by a --model given after --config.
  std::optional<memscale::json_io::hf::quantization> quantization;
};

// options_cluster.cpp: multi-GPU engines and the cluster planner.
enum class emit_format : std::uint8_t { none, deepspeed, accelerate_fsdp, torchtitan, torchtune };
struct cluster_options {
  std::uint64_t gpus = 0;                     // --gpus N in all (0: one GPU, no cluster output)
  std::uint64_t nodes = 1;                    // --nodes M
  memscale::bytes host_memory{};              // --host-memory SIZE per node (0: not checked)
  std::optional<memscale::strategy> engine;   // --strategy; absent: the cluster planner chooses
  std::uint64_t tp = 1;                       // --tp N
  std::uint64_t pp = 1;                       // --pp N
  std::uint64_t cp = 1;                       // --cp N (torchtitan's context_parallel_degree)
  bool tp_given = false;                      // --tp / --pp given: the planner keeps them, not searches
  bool pp_given = false;
  bool sp = false;                            // --sp
  std::uint64_t global_batch = 0;             // --global-batch N (planner); 0: batch x grad-accum
  emit_format emit = emit_format::none;       // --emit deepspeed|accelerate-fsdp|torchtitan|torchtune
  memscale::engine_precision ds_precision = memscale::engine_precision::none;  // --ds-precision fp16|bf16
};

// options_vision.cpp: CNN / ViT models. A torchvision --model NAME sets
// `model` (options_run.cpp); --image and --channels-last size and lay out its input.
struct vision_options {
  std::optional<memscale::vision::vision_spec> model;
  std::string name;                // as --model or a --run document gave it (a timm tag kept)
  std::uint64_t image_height = 0;  // 0: the preset's 224
  std::uint64_t image_width = 0;
  bool channels_last = false;
};

// options_inference.cpp: inference estimates and SVG output.
struct inference_options {
  bool enabled = false;             // --inference: estimate generate() instead of a training step
  // --context, --new-tokens, --kv-dtype, --kv-cache, --weights; batch and attention come from
  // --batch and --attention (options_run.cpp).
  memscale::inference_spec spec{.batch = 1,
                                .context = 512,
                                .new_tokens = 128,
                                .transformers_version = memscale::current_transformers_release,
                                .torch_version = memscale::current_torch_release};
  bool kv_dtype_given = false;      // otherwise the KV cache takes the weights' dtype
  std::string kv_dtype;             // --kv-dtype as given: a dtype, or a quantized cache's int2 / int4
  bool gpt_fast = false;            // --framework gpt-fast: gpt-fast's generate() (training with it is refused)
  bool weights_given = false;       // --weights (a config's quantization_config says it too)
  bool group_size_given = false;    // --group-size: gptfast-int4's groupsize (refused with other weights)
  std::string setting_option;       // the first inference setting given (it needs --inference)
  std::string svg;                  // --svg FILE: the plan (or the inference peaks) as stacked bars
  std::string svg_batch;            // --svg-batch FILE: the OOM cliff (needs --gpu)
};
// -------------------------------------------------------------------------------------

struct options {
  command cmd = command::run;
  memscale::model_spec model = memscale::presets::gpt2;  // --model NAME; default gpt2
  memscale::training_spec run = default_run();
  bool json = false;               // --json: one JSON document on stdout
  std::string cases_path;          // --cases FILE
  std::string cases_stack_path;    // --cases-stack FILE: the versions the records' sources state
  std::string gpu;                 // --gpu NAME (a gpu_catalog slug); empty: no plan
  std::optional<memscale::gpu_spec> custom_gpu;  // --gpu-memory SIZE (a GPU described by its memory)
  std::optional<double> headroom;  // --headroom FRACTION
  std::optional<double> lora_alpha;  // --lora-alpha: scales the adapter output; no memory of its own
  bool lora_targets_given = false;   // --lora-targets: needs --lora or --qlora
  bool loss_given = false;  // --loss or --loss-chunk(s), or a --run document's: otherwise the script's (with_script_loss)
  // --loss, --loss-chunk, --loss-chunks: applied after every option, so that a later --framework
  // (whose defaults set the loss) does not reset them; 0: not given.
  std::optional<memscale::loss_impl> loss;
  std::uint64_t loss_chunk = 0;
  std::uint64_t loss_chunks = 0;
  std::string lora_setting_given;    // --lora-dropout, --lora-variant or --adapter-dtype, as given: needs --lora or --qlora
  // --adapter-dtype: applied after every option, so that a later --framework does not reset it.
  std::optional<memscale::adapter_dtype> adapter_dtype;
  bool double_quant = false;         // --qlora-double-quant: needs --qlora
  std::string units = "gib";         // --units gib | gb | mib: sizes in the text report
  std::string alloc_conf;            // --alloc-conf: PYTORCH_CUDA_ALLOC_CONF for the allocator replay
  std::string stack;                 // every --stack list, joined: --inference reads it into its own spec
  memscale::bytes context_memory{};  // --context-memory SIZE: a measured context; zero: modelled
  std::string sac_policy;            // --sac-policy: torchtitan's checkpointing policy, applied in check_run
  bool emit_torchtitan = false;      // --emit torchtitan with --framework torchtitan: the job TOML, not the report
  bool liger = false;                // --liger: use_liger_kernel's kernels for the model's family, applied in check_run

  // How the model was given, echoed by --json so that its output is a --run input: null
  // for a preset (written as its name), or the model object of a --run file.
  nlohmann::json model_description;
  std::string run_source;  // "--run \"FILE\"" once a run file was read: errors found later name it

  config_options config;
  cluster_options cluster;
  vision_options vision;
  inference_options inference;
};

// Parses argv[1..]. Throws usage_error (bad syntax, unknown option or model, bad number,
// options that cannot be combined) or memscale::error (an enum string json_io::parse_*
// rejects, an invalid run).
options parse_args(const std::vector<std::string_view>& args);

// A count for `option`: decimal digits only (std::from_chars), > 0, fits in 64 bits.
std::uint64_t parse_positive(std::string_view option, std::string_view text);

// The --help text (usage, the options by group, exit codes), ending in a newline.
std::string help_text();

}  // namespace memscale_plan
