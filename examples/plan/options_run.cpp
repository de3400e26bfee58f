// memscale-plan: the run options (model and training settings).
#include <CLI/CLI.hpp>
#include <string>

#include "memscale/json.hpp"
#include "memscale/presets.hpp"
#include "memscale/vision/presets.hpp"
#include "option_groups.hpp"
#include "run_file.hpp"
#include "suggest.hpp"

namespace memscale_plan {
namespace {

std::string preset_names() {
  std::string names;
  for (const auto& m : memscale::presets::all) {
    if (!names.empty()) names += ", ";
    names += m.name;
  }
  for (const auto& m : memscale::vision::presets::all) names += ", " + std::string(m.name);
  return names;
}

}  // namespace

void set_offload(options& o, std::string_view list, const std::string& field) {
  memscale::json_io::set_offload(o.run, list, field);  // memscale/json/run_settings.hpp
}

void add_run_options(CLI::App& app, options& o) {
  const auto g = group::run;
  add_value(app, g, "--model", "NAME", "a preset (see --list-models); default gpt2", [&o](const std::string& v) {
    if (const auto vision = memscale::vision::presets::find(v)) {  // torchvision or timm (options_vision.cpp)
      o.vision.model = *vision;
      o.vision.name = v;
      return;
    }
    o.vision.model.reset();
    if (const auto why = memscale::vision::presets::refusal(v); !why.empty())  // a timm name memscale does not model
      throw usage_error("--model " + in_quotes(v) + ": " + std::string(why));
    const auto found = memscale::presets::find(v);
    if (!found) {
      nearest_name nearest(v);
      for (const auto& m : memscale::presets::all) nearest.offer(m.name);
      throw usage_error("--model must be one of " + preset_names() + " (got " + in_quotes(v) + ")" + nearest.hint());
    }
    o.model = *found;
    o.config.quantization.reset();  // a --config given before described another model
  });
  add_value(app, g, "--batch", "N", "micro-batch size, sequences per step; default 4",
            [&o](const std::string& v) { o.run.micro_batch = parse_positive("--batch", v); });
  add_value(app, g, "--seq", "N", "sequence length in tokens; default 512",
            [&o](const std::string& v) { o.run.seq_len = parse_positive("--seq", v); });
  add_value(app, g, "--target-len", "N", "encoder-decoder (T5) decoder tokens per sequence; default --seq",
            [&o](const std::string& v) { o.run.target_len = parse_positive("--target-len", v); });
  add_value(app, g, "--precision", "P", "fp32 | amp_fp16 | amp_bf16 | pure_bf16 | pure_fp16; default fp32",
            [&o](const std::string& v) { o.run.prec = memscale::json_io::parse_precision(v, "--precision"); });
  add_value(app, g, "--optimizer", "O",
            "sgd | sgd_momentum | adam | adamw | adamw_8bit | adafactor | lion; default adamw",
            [&o](const std::string& v) { o.run.optimizer = memscale::json_io::parse_optimizer(v, "--optimizer"); });
  add_value(app, g, "--optimizer-impl", "I", "for_loop | foreach | fused; default foreach", [&o](const std::string& v) {
    o.run.optimizer_impl = memscale::json_io::parse_optimizer_impl(v, "--optimizer-impl");
  });
  add_value(app, g, "--grad-accum", "N", "gradient-accumulation steps; default 1",
            [&o](const std::string& v) { o.run.grad_accum = parse_positive("--grad-accum", v); });
  add_value(app, g, "--checkpointing", "C", "none | full | selective; default none", [&o](const std::string& v) {
    o.run.ckpt = memscale::json_io::parse_checkpointing(v, "--checkpointing");
    o.run.sac = memscale::selective_ac::none;  // a --run document's policy; --sac-policy sets it again
    o.run.sac_every = 0;
  });
  add_value(app, g, "--use-reentrant", "true|false",
            "with --checkpointing full: which torch.utils.checkpoint wraps each block (reentrant holds each block's "
            "rerun output through its backward); default: the framework's (Hugging Face: true before transformers "
            "5.1, false from it and when no release is stated; lit-gpt, torchtune, torchtitan: false)",
            [&o](const std::string& v) {
              if (v == "true") o.run.ckpt_variant = memscale::checkpoint_variant::reentrant;
              else if (v == "false") o.run.ckpt_variant = memscale::checkpoint_variant::non_reentrant;
              else throw usage_error("--use-reentrant must be true or false (got " + in_quotes(v) + ")");
            });
  add_value(app, g, "--sac-policy", "P",
            "torchtitan's activation checkpointing: full (with --checkpointing full) | op (the per-op save list) | "
            "layer:K (every K-th block) (both with --checkpointing selective) | none",
            [&o](const std::string& v) { o.sac_policy = v; });
  add_value(app, g, "--attention", "A",
            "eager | sdpa_math | sdpa (PyTorch picks the kernel) | flash | flash_attention_2 (transformers' "
            "flash-attn path); default flash",
            [&o](const std::string& v) {
              o.run.attention = memscale::json_io::parse_attention(v, "--attention");
              o.run.flash_attention_2 = memscale::json_io::names_flash_attention_2(v);
            });
  add_value(app, g, "--ssm-kernels", "K",
            "state-space (Mamba) mixers: fused (mamba-ssm) | torch (the modeling file's loop) | default (fused on "
            "cuda, torch on cpu)",
            [&o](const std::string& v) { o.run.ssm_kernels = memscale::json_io::parse_ssm_kernels(v, "--ssm-kernels"); });
  add_flag(app, g, "--no-dropout", "the model's dropout layers are off (p = 0)", [&o] { o.run.dropout = false; });
  add_value(app, g, "--use-cache", "on|off",
            "the use_cache the script passes to forward (Hugging Face releases before 5.0 keep each layer's keys and "
            "values until the loss unless checkpointing); default: the config's use_cache, which with no "
            "transformers release stated (--stack) keeps no cache, as from 5.0",
            [&o](const std::string& v) {
              if (v == "on") o.run.use_cache = memscale::cache_setting::on;
              else if (v == "off") o.run.use_cache = memscale::cache_setting::off;
              else throw usage_error("--use-cache must be on or off (got " + in_quotes(v) + ")");
            });
  add_value(app, g, "--packing", "P",
            "how examples become rows: none (padded rows of --seq) | packed (examples concatenated into full rows of "
            "--seq, TRL packing) | padding_free (the --batch examples flattened into one row, TRL padding_free; "
            "flash_attention_2 only); default none",
            [&o](const std::string& v) { o.run.packing = memscale::json_io::parse_packing(v, "--packing"); });
  add_flag(app, g, "--padded",
           "the batch is padded to its longest example (the attention_mask has zeros; with --inference, left-padded "
           "prompts): every forward builds a (batch, 1, rows, keys) mask and SDPA runs without flash and enable_gqa; "
           "sdpa or eager attention",
           [&o] { o.run.padded = true; });
  add_value(app, g, "--example-tokens", "N",
            "padding_free: mean tokens per example (the row holds --batch x N tokens; --seq stays the longest "
            "example); default --seq",
            [&o](const std::string& v) { o.run.example_tokens = parse_positive("--example-tokens", v); });
  add_value(app, g, "--framework", "NAME[@VERSION]",
            "the training code: hf (transformers; @VERSION sets its release) | gpt-fast (with --inference: its generate()) | litgpt[@0.4.9|@main] (its fine-tuning scripts, the model as "
            "lit-gpt builds it; plain: the 2023 scripts, @0.4.x: the 2024 release, RMSNorm in fp32, @main: v0.5.13 on one GPU) | torchtune[@0.6.1] (with --gpus N: full_finetune_distributed, FSDP2) | torchtitan[@0.1.0] (FSDP2 over --gpus N, bf16 compute); its defaults "
            "(loss, adapter dtype) apply; default hf",
            [&o](const std::string& v) {
              // gpt-fast is modelled for generate() only: check_inference_options refuses it without --inference.
              if (v == "gpt-fast") {
                o.inference.gpt_fast = true;
                return;
              }
              memscale::json_io::read_framework_option(v, o.run, "--framework");
            });
  add_value(app, g, "--loss", "L",
            "standard (the whole logits) | chunked (lit-gpt's, torchtune's) | fused_linear_ce (Liger's); default: the "
            "framework's",
            [&o](const std::string& v) {
              o.loss_given = true;
              if (v == "standard") {
                o.loss = memscale::loss_impl::standard;
              } else if (v == "chunked") {
                o.loss = memscale::loss_impl::chunked;
              } else if (v == "fused_linear_ce") {
                o.loss = memscale::loss_impl::fused_linear;
              } else {
                throw usage_error("--loss must be standard, chunked or fused_linear_ce (got " + in_quotes(v) + ")");
              }
            });
  add_flag(app, g, "--liger",
           "Liger's kernels as transformers' use_liger_kernel applies them to the model's family (LLaMA-like: fused "
           "linear cross-entropy, RMSNorm, SwiGLU, RoPE; Gemma: GEGLU for SwiGLU)",
           [&o] { o.liger = true; });
  add_value(app, g, "--loss-chunk", "TOKENS", "tokens per chunk of a chunked loss counted in tokens (lit-gpt: 128)",
            [&o](const std::string& v) {
              o.loss_given = true;  // a chunk size names the chunked loss
              o.loss_chunk = parse_positive("--loss-chunk", v);
            });
  add_value(app, g, "--loss-chunks", "N", "chunks of torchtune's chunked loss (its default 8)",
            [&o](const std::string& v) {
              o.loss_given = true;
              o.loss_chunks = parse_positive("--loss-chunks", v);
            });
  add_flag(app, g, "--paged-optimizer",
           "bitsandbytes' paged optimizer of --optimizer (adam, adamw, adamw_8bit, lion: Trainer's optim=\"paged_adamw_32bit\" "
           "and siblings): state of tensors of 1e5 elements or more in CUDA unified memory, outside PyTorch's allocator",
           [&o] { o.run.paged_optimizer = true; });
  add_value(app, g, "--custom-sharded-layers", "LIST",
            "torchtune's custom_sharded_layers with --gpus: tok_embeddings,output (the stock configs') as FSDP2 units "
            "of their own; none (the recipe's default)",
            [&o](const std::string& v) {
              o.run.custom_sharded =
                  memscale::json_io::parse_custom_sharded_layers(v, "--custom-sharded-layers");
            });
  add_flag(app, g, "--optimizer-in-backward",
           "each parameter steps in its gradient hook and frees its gradient (torchtune's optimizer_in_bwd)",
           [&o] { o.run.optimizer_in_backward = true; });
  add_value(app, g, "--offload", "WHAT",
            "keep on the host: optimizer | parameters | activations | none; repeat, or join with , or +",
            [&o](const std::string& v) { set_offload(o, v, "--offload"); });
  add_flag(app, g, "--fp8", "fp8 training: not modelled yet; refused with the reason", [] {
    throw usage_error(
        "--fp8 is not modelled yet: the estimators have no fp8 matmul-input path (Transformer Engine's fp8 "
        "casts and scaling state); the GPU catalog only records which GPUs have fp8 tensor cores (--list-gpus --json)");
  });
  add_flag(app, g, "--compile", "torch.compile: not modelled; refused with the reason", [] {
    memscale::json_io::refuse_compile_or_float8("--compile", false);
  });
  add_value(app, g, "--run", "FILE",
            "a whole run as JSON (model, run settings, GPU; docs/run-json.md); options after it override it",
            [&o](const std::string& v) { read_run_file(v, o); });
}

}  // namespace memscale_plan
