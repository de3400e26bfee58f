// memscale-plan: command-line parsing on CLI11 (see args.hpp, option_groups.hpp).
#include "args.hpp"

#include <CLI/CLI.hpp>
#include <charconv>
#include <limits>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "memscale/graph/model_layout.hpp"
#include "memscale/json.hpp"
#include "memscale/liger.hpp"
#include "memscale/model.hpp"
#include "memscale/training.hpp"
#include "memscale/validate.hpp"
#include "emit_torchtune.hpp"
#include "option_groups.hpp"
#include "suggest.hpp"

namespace memscale_plan {
namespace {

// Every group, in --help order (option_groups.hpp).
void register_all(CLI::App& app, options& o) {
  add_config_options(app, o);
  add_run_options(app, o);
  add_lora_options(app, o);
  add_gpu_options(app, o);
  add_cluster_options(app, o);
  add_vision_options(app, o);
  add_inference_options(app, o);
  add_output_options(app, o);
  add_command_options(app, o);
}

constexpr const char* description =
    "Estimates the GPU memory of one training step before it runs: the breakdown at the\n"
    "steady-state peak, the peak itself (tensor / reserved / device) and the step-1 peak.\n"
    "With no run options: gpt2, micro-batch 4, seq 512, fp32, adamw (foreach), flash attention.\n";

constexpr const char* usage =
    "usage: memscale-plan [run options] [--json]\n"
    "       memscale-plan --list-models [--json]\n"
    "       memscale-plan --list-gpus [--json]\n"
    "       memscale-plan --list-families [--json]\n"
    "       memscale-plan --cases FILE.json\n"
    "       memscale-plan --help\n";

constexpr const char* footer =
    "Values may also be given as --option=value; the last occurrence of an option wins.\n"
    "Counts are positive decimal integers; --headroom is a decimal fraction.\n"
    "exit status: 0 success, 2 invalid input (one line on stderr starting with \"memscale-plan: \").";

// CLI11's formatter with our usage lines instead of "Usage: memscale-plan [OPTIONS]".
class help_formatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* /*app*/, std::string /*name*/) const override { return usage; }
};

std::unique_ptr<CLI::App> make_app(options& o) {
  auto app = std::make_unique<CLI::App>(description, "memscale-plan");
  app->set_help_flag();  // --help / -h are ours (options_commands.cpp): they win over errors
  app->allow_extras();   // unknown arguments are reported by us, with a suggestion
  auto formatter = std::make_shared<help_formatter>();
  formatter->column_width(30);
  app->formatter(formatter);
  app->footer(footer);
  register_all(*app, o);
  return app;
}

bool is_command(const CLI::Option* opt) { return opt->get_group() == group::commands; }
bool is_output(const CLI::Option* opt) { return opt->get_group() == group::output; }

// Commands exclude each other and every run option; --lora and --qlora exclude each other.
void check_groups(const CLI::App& app) {
  const CLI::Option* command_opt = nullptr;
  const CLI::Option* first_run_opt = nullptr;
  const CLI::Option* adapter_opt = nullptr;
  for (const CLI::Option* opt : app.parse_order()) {
    if (opt->get_name() == "--cases-stack") continue;  // a setting of --cases, checked in parse_args
    if (is_command(opt)) {
      if (command_opt != nullptr && command_opt != opt)
        throw usage_error(opt->get_name() + " cannot be combined with " + command_opt->get_name());
      command_opt = opt;
    } else if (!is_output(opt)) {
      if (first_run_opt == nullptr) first_run_opt = opt;
      const std::string name = opt->get_name();
      if (name == "--lora" || name == "--qlora") {
        if (adapter_opt != nullptr && adapter_opt != opt)
          throw usage_error(name + " cannot be combined with " + adapter_opt->get_name());
        adapter_opt = opt;
      }
    }
  }
  if (command_opt != nullptr && first_run_opt != nullptr)
    throw usage_error(first_run_opt->get_name() + " cannot be combined with " + command_opt->get_name());
}

// Why an option given on the command line has no effect on the path the run takes (a
// vision model, --inference), or "" when it has one: such an option is refused by name
// instead of being dropped. One table per path, by option group where a whole group is
// beside the point.
std::string_view unread_by_vision(const CLI::Option& opt) {
  const std::string name = opt.get_name();
  const std::string g = opt.get_group();
  if (name == "--seq" || name == "--target-len") return "its input is sized by --image N or HxW, not a sequence length";
  if (g == group::lora) return "adapters are modelled on transformer layers only";
  // --svg and --svg-batch draw the vision plan's modes and its cliff (vision.cpp), though listed with inference.
  if (g == group::inference && name != "--svg" && name != "--svg-batch")
    return "inference is estimated for transformer models only";
  if (g == group::cluster) return "the multi-GPU estimate and planner take transformer models only";
  if (g == group::config) return "--config gives a transformer model";
  if (name == "--attention" || name == "--offload" || name == "--no-dropout" || name == "--use-cache" ||
      name == "--packing" || name == "--example-tokens" || name == "--padded" || name == "--ssm-kernels")
    return "the vision estimate has no such setting";
  // torchvision's stages run under the non-reentrant checkpoint (vision/estimate.hpp).
  if (name == "--use-reentrant") return "the vision estimate checkpoints stages with the non-reentrant checkpoint";
  if (name == "--framework" || name == "--loss" || name == "--loss-chunk" || name == "--loss-chunks" ||
      name == "--optimizer-in-backward")
    return "the vision estimate models torchvision's training step, not a language-model framework's";
  return {};
}

std::string_view unread_by_inference(const CLI::Option& opt) {
  const std::string name = opt.get_name();
  if (opt.get_group() == group::lora)
    return "inference with LoRA adapters (merged into the weights, or beside them unmerged as PEFT runs them) "
           "is not modelled yet";
  if (name == "--seq" || name == "--target-len") return "the prompt is --context N and the output --new-tokens N";
  if (name == "--precision") return "the weights' format is --weights W (and the KV cache's --kv-dtype D)";
  if (name == "--optimizer" || name == "--optimizer-impl" || name == "--grad-accum" || name == "--checkpointing" ||
      name == "--offload" || name == "--no-dropout" || name == "--loss" || name == "--loss-chunk" ||
      name == "--loss-chunks" || name == "--optimizer-in-backward" || name == "--use-cache" || name == "--packing" ||
      name == "--example-tokens" || name == "--use-reentrant" || name == "--paged-optimizer")
    return "generate() runs no training step";
  if (name == "--images" || name == "--image-size" || name == "--frozen-tower")
    return "images through a multimodal model's vision tower are modelled for training steps only";
  return {};
}

// Refuses what the run's path would drop: options (above), and adapters a --run document asked for.
void check_path(const CLI::App& app, const options& o) {
  const bool vision = o.vision.model.has_value();
  if (!vision && !o.inference.enabled) return;
  const std::string path = vision ? "the vision model " + std::string(o.vision.model->name) : "--inference";
  for (const CLI::Option* opt : app.parse_order()) {
    const std::string_view why = vision ? unread_by_vision(*opt) : unread_by_inference(*opt);
    if (!why.empty()) throw usage_error(opt->get_name() + " does not apply to " + path + ": " + std::string(why));
  }
  if (o.run.framework != memscale::framework_kind::hf)  // --framework, or a --run document's
    throw usage_error("framework " + in_quotes(memscale::to_string(o.run.framework)) + " does not apply to " + path +
                      ": " +
                      std::string(vision ? "the vision estimate models torchvision's training step"
                                         : "generate() is modelled as Hugging Face transformers runs it"));
  if (memscale::is_lora(o.run))  // from a --run document (the options were refused above)
    throw usage_error("run.target " + in_quotes(memscale::json_io::name_of(o.run.target)) + " of " +
                      o.run_source + " does not apply to " + path + ": " +
                      std::string(vision ? "adapters are modelled on transformer layers only"
                                         : "inference with LoRA adapters is not modelled yet"));
}

// torchtitan's run: FSDP2 (fully_shard) over all --gpus N, one GPU's step reported; bf16 compute
// unless --precision says otherwise (mixed_precision_param bfloat16, config_manager.py @
// f7084fc7); --sac-policy over --checkpointing. Its layout is fixed, so the cluster options that
// would choose another are refused by name rather than ignored.
void apply_torchtitan(const CLI::App& app, options& o) {
  const bool titan = o.run.framework == memscale::framework_kind::torchtitan;
  if (!o.sac_policy.empty()) {
    if (!titan) throw usage_error("--sac-policy needs --framework torchtitan (its activation checkpointing policy)");
    memscale::json_io::apply_sac_policy(o.run, o.sac_policy, "--sac-policy", "--checkpointing");
  }
  if (o.cluster.emit == emit_format::torchtitan && !titan)
    throw usage_error("--emit torchtitan needs --framework torchtitan (the job config of its FSDP2 run)");
  if (!titan && app.count("--cp") > 0)
    throw usage_error("--cp is torchtitan's context_parallel_degree: it needs --framework torchtitan");
  if (!titan) return;
  if (!o.inference.svg.empty() || !o.inference.svg_batch.empty())
    throw usage_error(std::string(o.inference.svg.empty() ? "--svg-batch" : "--svg") +
                      " draws a single-GPU plan's modes; torchtitan's run has no plan (its FSDP2 layout and policy are "
                      "fixed): leave it out");
  if (app.count("--precision") == 0 && o.run_source.empty()) o.run.prec = memscale::precision::pure_bf16;
  if (o.cluster.gpus < 2) {
    if (o.cluster.gpus == 1 || o.run.data_parallel < 2)  // a --run document may give run.data_parallel
      throw usage_error("--framework torchtitan needs --gpus N > 1: torchtitan is modelled with FSDP2 (fully_shard) "
                        "over N ranks, its bf16 compute from FSDP2's MixedPrecisionPolicy");
    return;
  }
  if (o.cluster.emit != emit_format::none && o.cluster.emit != emit_format::torchtitan)
    throw usage_error("--emit deepspeed and accelerate-fsdp do not apply to --framework torchtitan: its config is "
                      "--emit torchtitan");
  for (const char* name : {"--pp", "--sp", "--host-memory", "--global-batch", "--no-sync", "--ds-precision"})
    if (app.count(name) > 0)
      throw usage_error(std::string(name) + " does not apply to --framework torchtitan: it is modelled as FSDP2 over "
                        "--gpus / (--tp x --cp) ranks with --tp tensor parallelism (its sequence parallelism included) and --cp "
                        "context parallelism, without PP or offload");
  const std::uint64_t tp = app.count("--tp") > 0 ? o.cluster.tp : 1;
  const std::uint64_t cp = o.cluster.cp;
  // ParallelDims._validate: dp_shard x cp x tp must be the world size (distributed/parallel_dims.py @ f7084fc7).
  if (cp > 1 && o.cluster.gpus % (tp * cp) != 0)
    throw usage_error("--cp " + std::to_string(cp) + (tp > 1 ? " --tp " + std::to_string(tp) : std::string()) +
                      " with --framework torchtitan needs --gpus a multiple of " + std::to_string(tp * cp) +
                      " (data_parallel_shard_degree = --gpus / (--tp x --cp))");
  if (cp == 1 && (o.cluster.gpus % tp != 0 || o.cluster.gpus / tp < 2))
    throw usage_error("--tp " + std::to_string(tp) + " with --framework torchtitan needs --gpus a multiple of it with "
                      "at least two FSDP2 ranks left (data_parallel_shard_degree = --gpus / --tp > 1)");
  if (o.cluster.engine && *o.cluster.engine != memscale::strategy::fsdp_full)
    throw usage_error("--strategy " + std::string(memscale::to_string(*o.cluster.engine)) +
                      " does not apply to --framework torchtitan: its FSDP2 is fully_shard (fsdp-full)");
  o.run.shard = memscale::sharding::full;
  o.run.data_parallel = o.cluster.gpus / tp / cp;
  o.run.tensor_parallel = tp;
  o.run.context_parallel = cp;
  o.emit_torchtitan = o.cluster.emit == emit_format::torchtitan;
  o.cluster = cluster_options{};  // the report is one GPU's step of the whole run
}

// --framework torchtune --gpus N: full_finetune_distributed (lora_finetune_distributed with
// --lora), one rank's FSDP2 step of the run
// (estimate/fsdp2.hpp), as torchtitan's is.
void apply_torchtune_distributed(const CLI::App& app, options& o) {
  if (o.run.framework != memscale::framework_kind::torchtune || o.cluster.gpus == 0) return;
  check_torchtune_emit(o);  // emit_torchtune.cpp: --emit torchtune writes full_finetune_distributed's config
  if (o.cluster.gpus < 2)
    throw usage_error("--framework torchtune with --gpus needs N > 1: its distributed recipes shard with FSDP2 "
                      "(fully_shard) over N ranks; for one GPU leave out --gpus");
  if (o.cluster.emit != emit_format::none && o.cluster.emit != emit_format::torchtune)
    throw usage_error("--emit deepspeed and accelerate-fsdp do not apply to --framework torchtune: its distributed "
                      "recipes run FSDP2 themselves");
  for (const char* name : {"--tp", "--pp", "--sp", "--host-memory", "--global-batch", "--no-sync", "--strategy",
                           "--ds-precision"})
    if (app.count(name) > 0)
      throw usage_error(std::string(name) + " does not apply to --framework torchtune: its distributed recipe is "
                        "modelled as FSDP2 over all --gpus (full_ or lora_finetune_distributed), without TP, PP or "
                        "offload");
  if (!o.inference.svg.empty() || !o.inference.svg_batch.empty())
    throw usage_error(std::string(o.inference.svg.empty() ? "--svg-batch" : "--svg") +
                      " draws a single-GPU plan's modes; torchtune's distributed run has no plan (its FSDP2 layout is "
                      "fixed): leave it out");
  if (app.count("--precision") == 0 && o.run_source.empty()) o.run.prec = memscale::precision::pure_bf16;
  o.run.shard = memscale::sharding::full;
  o.run.data_parallel = o.cluster.gpus;
  const emit_format emit = o.cluster.emit;
  o.cluster = cluster_options{};  // the report is one GPU's step of the whole run
  o.cluster.emit = emit;          // --emit torchtune: the recipe config of that run
}

// litgpt main's finetune/full.py over --gpus N: Fabric's FSDPStrategy, FSDP1 FULL_SHARD with every
// Block checkpointed and no CPU offload (litgpt/finetune/full.py lines 107-114 @ 26857050), the
// cluster path's per-GPU estimate under --strategy fsdp-full.
void apply_litgpt_full_fsdp(const CLI::App& app, options& o) {
  if (o.cluster.engine && *o.cluster.engine != memscale::strategy::fsdp_full)
    throw usage_error("--strategy " + std::string(memscale::to_string(*o.cluster.engine)) +
                      " does not apply to --framework litgpt@main without --lora: full.py shards with FSDPStrategy's "
                      "FULL_SHARD (--strategy fsdp-full)");
  for (const char* name : {"--tp", "--pp", "--sp", "--offload", "--emit", "--ds-precision"})
    if (app.count(name) > 0)
      throw usage_error(std::string(name) + " does not apply to --framework litgpt@main without --lora: full.py "
                        "is modelled as FSDPStrategy's FULL_SHARD over all --gpus with every Block checkpointed, "
                        "without TP, PP or offload");
  // full.py's default precision is bf16-true on a bf16 device; activation_checkpointing_policy={Block}.
  if (app.count("--precision") == 0 && o.run_source.empty()) o.run.prec = memscale::precision::pure_bf16;
  if (app.count("--checkpointing") == 0 && o.run_source.empty()) o.run.ckpt = memscale::checkpointing::full;
  o.cluster.engine = memscale::strategy::fsdp_full;
}

// litgpt main's finetune/lora.py over --gpus N: Fabric's ModelParallelStrategy, FSDP2 over N ranks
// with every Block checkpointed (parallel/litgpt_fsdp2.hpp). The report is one rank's step, as for
// torchtune's distributed recipes.
void apply_litgpt_model_parallel(const CLI::App& app, options& o) {
  if (o.run.framework != memscale::framework_kind::litgpt || o.cluster.gpus == 0) return;
  // The 2023 scripts and 0.4 shard with FSDPStrategy (FSDP1): --strategy fsdp-full.
  if (o.run.framework_version < memscale::litgpt_main) return;
  if (o.cluster.gpus < 2)
    throw usage_error("--framework litgpt@main with --gpus needs N > 1: finetune/lora.py (ModelParallelStrategy) "
                      "and full.py (FSDPStrategy) shard over N ranks; for one GPU leave out --gpus");
  if (o.run.target == memscale::training_target::full) return apply_litgpt_full_fsdp(app, o);
  if (o.run.target != memscale::training_target::lora)
    throw usage_error("--framework litgpt@main with --gpus models finetune/lora.py (--lora, ModelParallelStrategy) "
                      "and full.py (FSDPStrategy); lora.py refuses --quantize over several devices: use --lora, "
                      "leave out --qlora, or one GPU");
  for (const char* name : {"--tp", "--pp", "--sp", "--host-memory", "--global-batch", "--no-sync", "--strategy", "--emit",
                           "--ds-precision"})
    if (app.count(name) > 0)
      throw usage_error(std::string(name) + " does not apply to --framework litgpt@main with --gpus: finetune/lora.py "
                        "is modelled as FSDP2 over all --gpus with every Block checkpointed, without TP, PP or offload");
  if (!o.inference.svg.empty() || !o.inference.svg_batch.empty())
    throw usage_error(std::string(o.inference.svg.empty() ? "--svg-batch" : "--svg") +
                      " draws a single-GPU plan's modes; litgpt's ModelParallelStrategy layout is fixed: leave it out");
  // lora.py's default precision is bf16-true on a bf16 device; parallelize_fn always checkpoints.
  if (app.count("--precision") == 0 && o.run_source.empty()) o.run.prec = memscale::precision::pure_bf16;
  if (app.count("--checkpointing") == 0 && o.run_source.empty()) o.run.ckpt = memscale::checkpointing::full;
  o.run.shard = memscale::sharding::full;
  o.run.data_parallel = o.cluster.gpus;
  o.run.litgpt_model_parallel = true;
  o.cluster = cluster_options{};  // the report is one GPU's step of the whole run
}

// --loss, --loss-chunk and --loss-chunks over the framework's defaults, whichever came first. A
// chunk size is refused where no loss reads it rather than dropped.
void apply_loss_options(options& o) {
  if (o.loss) {
    o.run.loss = *o.loss;
    if (*o.loss != memscale::loss_impl::chunked) o.run.loss_chunks = 0;
  }
  if (o.loss_chunks != 0) o.run.loss_chunks = o.loss_chunks;
  if (o.loss_chunk == 0) return;
  if (o.run.loss != memscale::loss_impl::chunked)
    throw usage_error("--loss-chunk needs a chunked loss (--loss chunked, or --framework litgpt's): this run's loss "
                      "is not chunked");
  if (o.run.loss_chunks != 0)
    throw usage_error("--loss-chunk counts tokens per chunk (lit-gpt's loss); torchtune's chunked loss is cut into "
                      "--loss-chunks N pieces (" + std::to_string(o.run.loss_chunks) + " here)");
  o.run.loss_chunk = o.loss_chunk;
}

// Settings that only some models read, refused by name on a model that has nothing for them.
void check_model_settings(const CLI::App& app, const options& o) {
  const std::string model = in_quotes(std::string(o.model.name));
  if (o.run.target_len != 0 && memscale::layout_of(o.model) != memscale::model_layout::encoder_decoder)
    throw usage_error("--target-len sizes an encoder-decoder's (T5's) decoder; " + model +
                      " has one stack, whose tokens are --seq");
  if (o.run.ssm_kernels != memscale::ssm_kernel_choice::framework_default && !memscale::has_state_space_mixer(o.model))
    throw usage_error(std::string(app.count("--ssm-kernels") > 0 ? "--ssm-kernels" : "run.ssm_kernels") +
                      " chooses the code of state-space (Mamba) mixers; " + model + " has none");
  if (o.run.images.per_sample == 0 && (o.run.images.height != 0 || o.run.images.tower_frozen))
    throw usage_error(std::string(o.run.images.height != 0 ? "--image-size" : "--frozen-tower") +
                      " needs --images N: it describes the images through a multimodal model's vision tower");
}

// Checks that need every option (the plan options, adapter options, the run against the
// model), and settings that depend on several options (--qlora-double-quant).
void check_run(const CLI::App& app, options& o) {
  if (o.cmd != command::run) return;
  check_path(app, o);
  if (o.headroom && o.gpu.empty() && !o.custom_gpu) throw usage_error("--headroom needs --gpu or --gpu-memory");
  if (app.count("--gpu") > 0 && app.count("--gpu-memory") > 0)
    throw usage_error("--gpu and --gpu-memory both describe the GPU: give one");
  if (o.lora_targets_given && !memscale::is_lora(o.run)) throw usage_error("--lora-targets needs --lora or --qlora");
  if (o.lora_alpha && !memscale::is_lora(o.run)) throw usage_error("--lora-alpha needs --lora or --qlora");
  if (!o.lora_setting_given.empty() && !memscale::is_lora(o.run))
    throw usage_error(o.lora_setting_given + " needs --lora or --qlora");
  if (o.adapter_dtype) o.run.adapters = *o.adapter_dtype;
  apply_loss_options(o);
  if (o.double_quant) {
    if (o.run.target != memscale::training_target::qlora) throw usage_error("--qlora-double-quant needs --qlora");
    o.run.quant = memscale::base_quant::nf4_double_quant;
  }
  apply_config_quantization(o);
  check_inference_options(o);
  apply_torchtitan(app, o);
  apply_torchtune_distributed(app, o);
  apply_litgpt_model_parallel(app, o);
  if (!o.loss_given) o.run = memscale::with_script_loss(o.run);
  // A vision model's step runs no transformers code (check_vision_stack refuses a release).
  if (!o.vision.model) o.run = memscale::json_io::with_current_transformers(o.run);
  if ((!o.alloc_conf.empty() || o.context_memory.value != 0) && (o.cluster.gpus > 0 || o.config.generic))
    throw usage_error(std::string(o.alloc_conf.empty() ? "--context-memory" : "--alloc-conf") + " does not apply to " +
                      (o.cluster.gpus > 0 ? "--gpus" : "a generic --config model") +
                      ": the allocator replay reaches single-GPU transformer training reports only");
  const std::string where = o.run_source.empty() ? "" : " (after " + o.run_source + ")";
  // --padded with --inference pads the prompts (infer.padded), not a training step's rows.
  if (o.inference.enabled && o.run.padded) {
    o.inference.spec.padded = true;
    o.run.padded = false;
  }
  try {
    // A vision model has no sequence (--seq was refused above); o.model is not its model.
    if (!o.vision.model) memscale::json_io::check_sequence_fits(o.model, o.run.seq_len, "--seq");
    if (o.liger) memscale::apply_liger(o.run, o.model);  // the family's defaults, once the model is known
    memscale::validate(o.run);
    if (!o.vision.model) {
      check_model_settings(app, o);
      o.model = memscale::json_io::model_for_framework(o.model, o.run);  // lit-gpt runs lit-gpt's model code
      memscale::check_framework(o.model, o.run);
    }
  } catch (const memscale::error& e) {
    throw usage_error(e.what() + where);
  }
}

// "; did you mean --X?" for the option of `app` nearest to `name`, or "".
std::string option_hint(const CLI::App& app, const std::string& name) {
  nearest_name nearest(name);
  for (const CLI::Option* opt : app.get_options())
    for (const std::string& candidate : opt->get_lnames()) nearest.offer("--" + candidate);
  return nearest.hint();
}

// The first argument CLI11 did not take: an unknown option or a stray word.
[[noreturn]] void reject_extra(const CLI::App& app, const std::string& arg) {
  if (arg.empty() || arg.front() != '-')
    throw usage_error("unexpected argument " + in_quotes(arg) + " (options start with --; see --help)");
  const std::string name = arg.substr(0, arg.find('='));
  throw usage_error("unknown option " + in_quotes(name) + option_hint(app, name) + " (see --help)");
}

// CLI11's own errors, in the program's wording where it has one. ArgumentMismatch
// starts with the option's name: "--batch: 1 required N missing" (no value) or
// "--json was given a disallowed flag override" (a flag given a value).
[[noreturn]] void reword(const CLI::App& app, const CLI::ParseError& e, const std::vector<std::string_view>& args) {
  const std::string message = e.what();
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    const std::string name = message.substr(0, message.find_first_of(": "));
    const CLI::Option* opt = app.get_option_no_throw(name);
    if (opt == nullptr) opt = app.get_option_no_throw("--" + name);  // FlagOverride names it without --
    if (opt != nullptr) {
      if (opt->get_expected_max() > 0)
        throw usage_error(opt->get_name() + " needs a value (" + opt->get_type_name() + ")");
      const std::string prefix = opt->get_name() + "=";
      for (const auto arg : args)
        if (arg.substr(0, prefix.size()) == prefix)
          throw usage_error(opt->get_name() + " takes no value (got " + in_quotes(arg.substr(prefix.size())) + ")");
      throw usage_error(opt->get_name() + " takes no value");
    }
  }
  throw usage_error(message);
}

bool looks_like_option(const std::string& arg) { return arg.size() > 2 && arg.compare(0, 2, "--") == 0; }

}  // namespace

std::string in_quotes(std::string_view text) { return memscale::json_io::in_quotes(text); }

std::string path_in_quotes(std::string_view path) { return memscale::json_io::path_in_quotes(path); }

CLI::Option* add_value(CLI::App& app, std::string_view group, const std::string& name, const std::string& placeholder,
                       const std::string& help, std::function<void(const std::string&)> handle) {
  // CLI11 gives a required value the next argument even when it is an option ("--batch --seq 4").
  auto checked = [name, placeholder, handle = std::move(handle)](const std::string& value) {
    if (looks_like_option(value))
      throw usage_error(name.substr(name.rfind(',') + 1) + " needs a value (" + placeholder + ")");
    handle(value);
  };
  CLI::Option* opt = app.add_option_function<std::string>(name, std::move(checked), help);
  opt->type_name(placeholder)->group(std::string(group))->trigger_on_parse();
  return opt;
}

CLI::Option* add_flag(CLI::App& app, std::string_view group, const std::string& name, const std::string& help,
                      std::function<void()> handle) {
  CLI::Option* opt = app.add_flag_callback(name, std::move(handle), help);
  opt->group(std::string(group))->trigger_on_parse()->disable_flag_override();
  return opt;
}

std::uint64_t parse_positive(std::string_view option, std::string_view text) {
  std::uint64_t value = 0;
  const char* const first = text.data();
  const char* const last = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec == std::errc::result_out_of_range)
    throw usage_error(std::string(option) + " must be at most " +
                      std::to_string(std::numeric_limits<std::uint64_t>::max()) + " (got " + in_quotes(text) + ")");
  if (text.empty() || ec != std::errc{} || ptr != last || value == 0)
    throw usage_error(std::string(option) + " must be a positive integer (got " + in_quotes(text) + ")");
  return value;
}

options parse_args(const std::vector<std::string_view>& args) {
  options o{};
  // --help wins over everything else on the line, even over errors before it.
  for (const auto arg : args)
    if (arg == "--help" || arg == "-h") {
      o.cmd = command::help;
      return o;
    }

  const auto app = make_app(o);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last-first
  try {
    app->parse(std::move(reversed));
  } catch (const CLI::ParseError& e) {
    reword(*app, e, args);
  }
  if (const auto extras = app->remaining(); !extras.empty()) reject_extra(*app, extras.front());
  check_groups(*app);
  if (!o.cases_stack_path.empty() && o.cmd != command::cases) throw usage_error("--cases-stack needs --cases");
  if (app->count("--units") > 0 && (o.json || o.cmd == command::cases))
    throw usage_error(std::string("--units sets the sizes of a text report; ") +
                      (o.cmd == command::cases ? "--cases prints JSON, in bytes" : "--json gives bytes"));
  check_run(*app, o);
  return o;
}

std::string help_text() {
  options unused{};
  return make_app(unused)->help();
}

}  // namespace memscale_plan
