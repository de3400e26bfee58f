// memscale/switch_on.hpp: how each memory-saving technique a mode uses is switched on in a
// training script, in the stacks the estimators model (Hugging Face transformers and its
// Trainer, plain PyTorch, DeepSpeed). One line per technique, so a plan can say what to do.
//
// Names as the projects spell them: transformers TrainingArguments(gradient_checkpointing,
// bf16, optim="adamw_bnb_8bit"), PreTrainedModel.gradient_checkpointing_enable() and
// from_pretrained(torch_dtype=..., attn_implementation=...) (transformers 4.4x);
// torch.utils.checkpoint.checkpoint and torch.autograd.graph.save_on_cpu (PyTorch >= 1.10);
// bitsandbytes.optim.AdamW8bit; DeepSpeed's zero_optimization.offload_optimizer / offload_param
// and activation_checkpointing.cpu_checkpointing (deepspeed/runtime/zero/offload_config.py,
// activation_checkpointing/config.py, v0.16.5). The levers a plan weighs before streaming
// parameters: transformers' TrainingArguments(use_liger_kernel=True) (4.45+),
// BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4") and peft's
// prepare_model_for_kbit_training, per_device_train_batch_size / gradient_accumulation_steps.
#pragma once

#include <string_view>

#include "memscale/lever_options.hpp"
#include "memscale/modes.hpp"

namespace memscale {

constexpr std::string_view how_to_switch_on(technique t) noexcept {
  switch (t) {
    case technique::checkpointing:
      return "model.gradient_checkpointing_enable() or TrainingArguments(gradient_checkpointing=True); plain "
             "PyTorch: torch.utils.checkpoint.checkpoint around each block";
    case technique::offload_optimizer:
      return "DeepSpeed ZeRO-Offload: \"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": "
             "\"cpu\"}} with \"optimizer\": {\"type\": \"AdamW\"} (the engine's CPU Adam)";
    case technique::offload_activations:
      return "run forward and backward inside torch.autograd.graph.save_on_cpu(pin_memory=True) (the checkpointed "
             "inputs wait on the host); DeepSpeed: \"activation_checkpointing\": {\"cpu_checkpointing\": true}";
    case technique::tiled_attention:
      return "from_pretrained(..., attn_implementation=\"sdpa\") or \"flash_attention_2\" (no s x s scores kept)";
    case technique::half_precision:
      return "from_pretrained(..., torch_dtype=torch.bfloat16) (torch.float16 without BF16): 16-bit weights, no fp32 "
             "copy; TrainingArguments(bf16=True) alone is autocast and keeps fp32 weights";
    case technique::mixed_precision:
      return "TrainingArguments(bf16=True) (fp16=True without BF16), or torch.autocast(\"cuda\", dtype=torch.bfloat16) "
             "around the forward with fp32 weights (plus torch.cuda.amp.GradScaler for fp16)";
    case technique::optimizer_8bit:
      return "TrainingArguments(optim=\"adamw_bnb_8bit\"), or bitsandbytes.optim.AdamW8bit(model.parameters())";
    case technique::offload_parameters:
      return "DeepSpeed ZeRO-3: \"offload_param\": {\"device\": \"cpu\"} (Accelerate FSDP: fsdp_offload_params: true)";
  }
  return "";
}

// The levers that are not a mode's technique; checkpointing and the 8-bit optimizer are.
constexpr std::string_view how_to_switch_on(lever l) noexcept {
  switch (l) {
    case lever::checkpointing: return how_to_switch_on(technique::checkpointing);
    case lever::chunked_loss:
      return "TrainingArguments(use_liger_kernel=True) (Liger's fused linear cross-entropy keeps even less); lit-gpt: "
             "chunked_cross_entropy; torchtune: loss CEWithChunkedOutputLoss";
    case lever::optimizer_8bit: return how_to_switch_on(technique::optimizer_8bit);
    case lever::qlora:
      return "from_pretrained(..., quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=\"nf4\", "
             "bnb_4bit_compute_dtype=torch.bfloat16)), then peft.prepare_model_for_kbit_training before get_peft_model";
    case lever::smaller_micro_batch:
      return "TrainingArguments(per_device_train_batch_size=1, gradient_accumulation_steps=<the old micro-batch x its "
             "accumulation>)";
    case lever::shorter_sequence: return "truncate or pack the data to the planned sequence length (max_length / max_seq_length)";
  }
  return "";
}

}  // namespace memscale
