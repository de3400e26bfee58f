// memscale/parallel/litgpt_fsdp2.hpp: litgpt's finetune/lora.py over several devices, Lightning
// Fabric's ModelParallelStrategy with the script's parallelize_fn (Lightning-AI/litgpt @ 26857050,
// v0.5.13; from v0.5.11), as one rank's FSDP2 step (estimate/fsdp2.hpp).
//
// parallelize_fn (litgpt/finetune/lora.py lines 522-543 @ 26857050) wraps every Block in
// checkpoint_wrapper(preserve_rng_state=False): activation_checkpointing defaults to True and the
// strategy calls parallelize_fn(module, device_mesh) without it. It then applies fully_shard, with
// no MixedPrecisionPolicy and the default reshard_after_forward=True, to every nn.Linear whose
// weight requires a gradient, every CheckpointWrapper and every Block, and last to the root. Under
// LoRA no nn.Linear is trainable (mark_only_lora_as_trainable runs before setup_module; the adapters
// are parameters of LoRALinear and LoRAQKVLinear), and a CheckpointWrapper's unit manages nothing
// once its Block took every parameter: the units are the Blocks and the root (wte, ln_f, lm_head),
// as torchtune's lora_finetune_distributed shards its layers, in the model's bf16 (bf16-true).
#pragma once

#include "memscale/error.hpp"
#include "memscale/parallel/strategy.hpp"
#include "memscale/training.hpp"

namespace memscale {

// The run one rank executes when litgpt main's LoRA script shards with FSDP2 (parallel.fsdp fsdp2).
// The 2023 scripts and 0.4 under fsdp2 stay the FSDP1 walk without flat views.
constexpr training_spec litgpt_model_parallel_run(training_spec run, const parallel_spec& p) {
  if (run.framework == framework_kind::litgpt && run.framework_version >= litgpt_main && p.fsdp == fsdp_api::fsdp2 &&
      run.shard != sharding::none)
    run.litgpt_model_parallel = true;
  return run;
}

namespace detail {

// What ModelParallelStrategy under finetune/lora.py is modelled for; the rest is refused by name.
constexpr void check_litgpt_model_parallel(const training_spec& t) {
  if (!t.litgpt_model_parallel) return;
  constexpr auto unsupported = error_code::unsupported;
  require(t.framework == framework_kind::litgpt, unsupported, "run.litgpt_model_parallel",
          "is litgpt's finetune/lora.py under ModelParallelStrategy: needs run.framework litgpt", t.framework);
  require(t.shard == sharding::full && t.data_parallel > 1, unsupported, "run.data_parallel",
          "litgpt's ModelParallelStrategy is modelled as FSDP2 (run.shard full) over data_parallel_size = devices x "
          "num_nodes > 1 ranks (finetune/lora.py lines 152-162)",
          t.data_parallel);
  // ModelParallelStrategy came to finetune/lora.py in 0.5.11; the 2023 scripts and 0.4 ran
  // FSDPStrategy only.
  require(t.framework_version >= litgpt_main, unsupported, "run.framework_version",
          "must be litgpt main (0.5.13): ModelParallelStrategy is its finetune/lora.py's (from 0.5.11), never the "
          "2023 scripts' or 0.4's",
          t.framework_version);
  // finetune/full.py and adapter*.py keep FSDPStrategy (FSDP1) at 26857050.
  require(t.target == training_target::lora && t.lora_kind == lora_variant::lora, unsupported, "run.target",
          "must be lora: only litgpt's finetune/lora.py shards with ModelParallelStrategy (full.py and adapter*.py "
          "use FSDPStrategy; lora.py raises NotImplementedError for --quantize over several devices)",
          t.target);
  require(t.ckpt == checkpointing::full, unsupported, "run.ckpt",
          "must be full: parallelize_fn wraps every Block in checkpoint_wrapper (activation_checkpointing=True, "
          "which ModelParallelStrategy never overrides)",
          t.ckpt);
  require(t.prec == precision::pure_bf16, unsupported, "run.prec",
          "is modelled as pure_bf16 (precision bf16-true): parallelize_fn passes no MixedPrecisionPolicy, so shards, "
          "gathered parameters and the reduction are the model's dtype",
          t.prec);
  // fabric.no_backward_sync under ModelParallelStrategy turns FSDP2's gradient sync off for the
  // accumulating micro-batches (set_requires_gradient_sync): unsharded gradients kept between them.
  require(t.grad_accum == 1, unsupported, "run.grad_accum",
          "must be 1 for litgpt under ModelParallelStrategy: its accumulation without gradient sync (unsharded "
          "gradients kept between micro-batches) is not modelled",
          t.grad_accum);
  if (t.offload_optimizer || t.offload_parameters || t.offload_activations || t.optimizer_in_backward)
    fail(unsupported, "run.litgpt_model_parallel",
         "parallelize_fn passes no CPUOffloadPolicy and the script steps after backward: no offload or "
         "optimizer-in-backward");
}

}  // namespace detail
}  // namespace memscale
