#!/usr/bin/env python3
"""Measure real GPU memory peaks of runs memscale models, as ground-truth records.

Each case runs in its own process (so the CUDA context, the caching allocator and
nvidia-smi's per-process figure start from nothing). A training case builds the model
from a config with random weights, runs two steps (forward, backward, optimizer.step(),
zero_grad(set_to_none=True)) and measures the second; an inference case runs generate().
Per case three records come out, one per measure: max_memory_allocated,
max_memory_reserved and nvidia-smi (this process's used memory, read while it is alive).

  python3 measure_gpu.py --list
  python3 measure_gpu.py --out records.json [--only name,name] [--budget-s 540] [--history DIR]

--history records the caching allocator's every event (torch.cuda.memory._record_memory_history,
no stack frames) and its final segments per case into DIR/NAME.json.gz, to check the replay's
event order against the allocator's own.
"""
import argparse
import json
import os
import subprocess
import sys
import time

GPT2 = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024,
        "vocab_size": 50257, "tie_word_embeddings": True}
GPT2_MEDIUM = dict(GPT2, n_embd=1024, n_layer=24, n_head=16)
# The LLaMA-style model of shared/ground-truth/measure.py (155,730,944 params).
LLAMA_SMALL = {"model_type": "llama", "hidden_size": 1024, "num_hidden_layers": 8, "num_attention_heads": 16,
               "num_key_value_heads": 4, "intermediate_size": 2816, "vocab_size": 32000,
               "max_position_embeddings": 4096, "hidden_act": "silu", "rms_norm_eps": 1e-5,
               "tie_word_embeddings": False}
# TinyLlama-1.1B (config.json of TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T).
TINYLLAMA = dict(LLAMA_SMALL, hidden_size=2048, num_hidden_layers=22, num_attention_heads=32,
                 num_key_value_heads=4, intermediate_size=5632, max_position_embeddings=2048)
# Llama-2-7b (config.json of meta-llama/Llama-2-7b-hf).
LLAMA2_7B = dict(LLAMA_SMALL, hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                 num_key_value_heads=32, intermediate_size=11008, max_position_embeddings=4096)
# Qwen2-0.5B (config.json of Qwen/Qwen2-0.5B).
QWEN2_05B = {"model_type": "qwen2", "hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14,
             "num_key_value_heads": 2, "intermediate_size": 4864, "vocab_size": 151936,
             "max_position_embeddings": 32768, "hidden_act": "silu", "rms_norm_eps": 1e-6,
             "tie_word_embeddings": True, "use_sliding_window": False}
# Mistral-style small (config of docs/data/cpu_traced_families.json, widened).
MISTRAL_SMALL = {"model_type": "mistral", "hidden_size": 1024, "num_hidden_layers": 8, "num_attention_heads": 16,
                 "num_key_value_heads": 4, "intermediate_size": 3584, "vocab_size": 32000,
                 "max_position_embeddings": 4096, "hidden_act": "silu", "rms_norm_eps": 1e-5,
                 "tie_word_embeddings": False, "sliding_window": 4096}
# Qwen2-1.5B (config.json of Qwen/Qwen2-1.5B).
QWEN2_15B = dict(QWEN2_05B, hidden_size=1536, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
                 intermediate_size=8960)
GPT2_LARGE = dict(GPT2, n_embd=1280, n_layer=36, n_head=20)
# state-spaces/mamba-130m-hf (tests/data/hf_configs/ssm-multimodal); no cache in training. Without the
# mamba-ssm / causal-conv1d packages MambaMixer runs its torch path (slow_forward).
MAMBA_130M = {"model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 24, "intermediate_size": 1536,
              "state_size": 16, "conv_kernel": 4, "time_step_rank": 48, "vocab_size": 50280, "use_bias": False,
              "use_conv_bias": True, "residual_in_fp32": True, "layer_norm_epsilon": 1e-5, "use_cache": False}
BERT_LARGE = {"model_type": "bert", "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
              "intermediate_size": 4096, "vocab_size": 30522, "max_position_embeddings": 512, "type_vocab_size": 2}
BERT_BASE = {"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
             "intermediate_size": 3072, "vocab_size": 30522, "max_position_embeddings": 512,
             "type_vocab_size": 2}


HF_CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "hf_configs")
# Keys of a Hub config.json that from_config would act on beyond the architecture: the dtype to build in
# (PreTrainedModel._from_config reads config.torch_dtype) and the checkpoint's quantization.
NOT_ARCHITECTURE = ("torch_dtype", "dtype", "quantization_config", "auto_map", "architectures", "transformers_version")


def hub_config(file, **overrides):
    """A config.json of tests/data/hf_configs with fewer layers (or experts), as from_config takes it."""
    with open(os.path.join(HF_CONFIGS, file + ".json")) as f:
        cfg = {k: v for k, v in json.load(f).items() if k not in NOT_ARCHITECTURE}
    cfg.update(overrides)
    # Mamba2Config's time_step_limit is (0.0, inf) when absent; JSON has no inf, and a record must parse.
    if cfg.get("time_step_limit") == [0.0, float("inf")]:
        del cfg["time_step_limit"]
    layers = cfg.get("num_hidden_layers")
    if layers is not None and isinstance(cfg.get("layer_types"), list):
        cfg["layer_types"] = cfg["layer_types"][:layers]
    return cfg


def train(name, cfg, batch, seq, precision="fp32", optimizer="adamw", attention="sdpa", ckpt="none",
          lora=None, head="causal_lm", padded=False):
    # padded: right padding as DataCollatorWithPadding makes it: row i ends in i * seq / (2 * batch) pad
    # tokens, masked in attention_mask and -100 in the labels.
    return {"kind": "train", "name": name, "cfg": cfg, "batch": batch, "seq": seq, "precision": precision,
            "optimizer": optimizer, "attention": attention, "ckpt": ckpt, "lora": lora, "head": head,
            "padded": padded}


def infer(name, cfg, batch, context, new_tokens, dtype="bf16", attention="sdpa", cache="dynamic", padded=None):
    # padded: None keeps the first sessions' prompts (uniform token ids, where id 0, the pad token, may occur
    # by chance); False draws ids from 1 (no padding); True left-pads row i by i * context / (2 * batch) tokens.
    return {"kind": "infer", "name": name, "cfg": cfg, "batch": batch, "context": context,
            "new_tokens": new_tokens, "dtype": dtype, "attention": attention, "cache": cache, "padded": padded}


def vision(name, arch, batch, precision="fp32", optimizer="adamw", image=224):
    return {"kind": "vision", "name": name, "arch": arch, "batch": batch, "precision": precision,
            "optimizer": optimizer, "image": image}


CASES = [
    train("gpt2-b4-s512-fp32-eager", GPT2, 4, 512, attention="eager"),
    train("gpt2-b4-s512-fp32-sdpa", GPT2, 4, 512),
    train("gpt2-b8-s1024-amp_bf16-sdpa", GPT2, 8, 1024, precision="amp_bf16"),
    train("gpt2-b8-s1024-fp32-sdpa-ckpt", GPT2, 8, 1024, ckpt="full"),
    train("gpt2-medium-b8-s1024-pure_bf16-sdpa", GPT2_MEDIUM, 8, 1024, precision="pure_bf16"),
    train("llama-small-b4-s512-fp32-eager", LLAMA_SMALL, 4, 512, attention="eager"),
    train("llama-small-b8-s1024-fp32-sdpa", LLAMA_SMALL, 8, 1024),
    train("llama-small-b8-s1024-amp_bf16-sdpa", LLAMA_SMALL, 8, 1024, precision="amp_bf16"),
    train("llama-small-b8-s2048-pure_bf16-sdpa-sgd", LLAMA_SMALL, 8, 2048, precision="pure_bf16", optimizer="sgd"),
    train("mistral-small-b4-s2048-amp_bf16-sdpa", MISTRAL_SMALL, 4, 2048, precision="amp_bf16"),
    train("tinyllama-b4-s2048-amp_bf16-sdpa", TINYLLAMA, 4, 2048, precision="amp_bf16"),
    train("tinyllama-b8-s2048-pure_bf16-sdpa-ckpt", TINYLLAMA, 8, 2048, precision="pure_bf16", ckpt="full"),
    train("qwen2-0.5b-b4-s1024-amp_bf16-sdpa", QWEN2_05B, 4, 1024, precision="amp_bf16"),
    train("qwen2-0.5b-b8-s2048-pure_bf16-sdpa-ckpt", QWEN2_05B, 8, 2048, precision="pure_bf16", ckpt="full"),
    train("bert-base-mlm-b16-s512-fp32-sdpa", BERT_BASE, 16, 512, head="masked_lm"),
    train("bert-base-mlm-b16-s512-amp_bf16-eager", BERT_BASE, 16, 512, precision="amp_bf16", attention="eager",
          head="masked_lm"),
    train("llama2-7b-lora-qv-r8-b4-s1024-bf16", LLAMA2_7B, 4, 1024, precision="pure_bf16",
          lora={"r": 8, "alpha": 16, "targets": ["q_proj", "v_proj"]}),
    train("llama2-7b-lora-all-r16-b2-s2048-bf16-ckpt", LLAMA2_7B, 2, 2048, precision="pure_bf16", ckpt="full",
          lora={"r": 16, "alpha": 32, "targets": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                   "down_proj"]}),
    infer("infer-llama2-7b-bf16-b1-c1024-n64", LLAMA2_7B, 1, 1024, 64),
    infer("infer-llama2-7b-bf16-b8-c2048-n128", LLAMA2_7B, 8, 2048, 128),
    infer("infer-tinyllama-bf16-b16-c1024-n256", TINYLLAMA, 16, 1024, 256),
    infer("infer-gpt2-fp32-b4-c512-n64", GPT2, 4, 512, 64, dtype="fp32"),
    # Held out: measured after the model changes of docs/gpu-measurements.md, never used to make them.
    train("heldout-qwen2-1.5b-b4-s2048-amp_bf16-sdpa", QWEN2_15B, 4, 2048, precision="amp_bf16"),
    train("heldout-mistral-small-b4-s1024-fp32-sdpa", MISTRAL_SMALL, 4, 1024),
    train("heldout-llama-small-b2-s2048-fp32-sdpa", LLAMA_SMALL, 2, 2048),
    train("heldout-gpt2-large-b4-s1024-amp_bf16-sdpa", GPT2_LARGE, 4, 1024, precision="amp_bf16"),
    train("heldout-gpt2-b16-s512-amp_bf16-eager", GPT2, 16, 512, precision="amp_bf16", attention="eager"),
    train("heldout-tinyllama-b2-s4096-pure_bf16-sdpa", dict(TINYLLAMA, max_position_embeddings=4096), 2, 4096,
          precision="pure_bf16"),
    train("heldout-bert-large-mlm-b8-s512-fp32-sdpa", BERT_LARGE, 8, 512, head="masked_lm"),
    train("heldout-qwen2-0.5b-b8-s1024-pure_bf16-sdpa-sgd_momentum", QWEN2_05B, 8, 1024, precision="pure_bf16",
          optimizer="sgd_momentum"),
    vision("resnet50-b64-224-fp32-sgd_momentum", "resnet50", 64, optimizer="sgd_momentum"),
    train("mamba-130m-b2-s512-fp32-torchpath", MAMBA_130M, 2, 512, attention="eager"),
    train("mamba-130m-b2-s1024-amp_bf16-torchpath", MAMBA_130M, 2, 1024, precision="amp_bf16", attention="eager"),
    vision("resnet50-b64-224-amp_bf16-adamw", "resnet50", 64, precision="amp_bf16"),
    vision("vit_b_16-b32-224-amp_bf16-adamw", "vit_b_16", 32, precision="amp_bf16"),
    # 2025-26 families (docs/gpu-measurements.md, issue of new families): the Hub configs, some with fewer
    # layers or experts so that a step fits a shared card; the records carry the config that ran.
    train("family-qwen3-0.6b-b4-s1024-amp_bf16-sdpa", hub_config("Qwen--Qwen3-0.6B"), 4, 1024, precision="amp_bf16"),
    train("family-gemma3-1b-b2-s1024-pure_bf16-sdpa", hub_config("google--gemma-3-1b-pt"), 2, 1024,
          precision="pure_bf16"),
    train("family-llama3.2-1b-b2-s2048-amp_bf16-sdpa", hub_config("meta-llama--Llama-3.2-1B"), 2, 2048,
          precision="amp_bf16"),
    train("family-qwen3moe-l4-e32-b2-s1024-pure_bf16-sdpa",
          hub_config("Qwen--Qwen3-30B-A3B", num_hidden_layers=4, num_experts=32), 2, 1024, precision="pure_bf16"),
    train("family-olmoe-l4-b2-s1024-pure_bf16-sdpa", hub_config("allenai--OLMoE-1B-7B-0924", num_hidden_layers=4),
          2, 1024, precision="pure_bf16"),
    train("family-gpt_oss-l4-e8-b2-s1024-pure_bf16-eager",
          hub_config("openai--gpt-oss-20b", num_hidden_layers=4, num_local_experts=8), 2, 1024,
          precision="pure_bf16", attention="eager"),
    train("family-phi3-l8-b2-s2048-amp_bf16-sdpa", hub_config("microsoft--Phi-3-mini-4k-instruct", num_hidden_layers=8),
          2, 2048, precision="amp_bf16"),
    train("family-granite-l4-b2-s2048-amp_bf16-sdpa",
          hub_config("ibm-granite--granite-3.1-8b-instruct", num_hidden_layers=4), 2, 2048, precision="amp_bf16"),
    train("family-gpt_bigcode-santacoder-b2-s1024-amp_bf16-sdpa", hub_config("bigcode--gpt_bigcode-santacoder"), 2,
          1024, precision="amp_bf16"),
    train("family-cohere2-l4-b2-s1024-pure_bf16-sdpa",
          hub_config("CohereForAI--c4ai-command-r7b-12-2024", num_hidden_layers=4), 2, 1024, precision="pure_bf16"),
    train("family-starcoder2-l8-b2-s2048-amp_bf16-sdpa", hub_config("bigcode--starcoder2-3b", num_hidden_layers=8), 2,
          2048, precision="amp_bf16"),
    train("family-glm4-l4-b2-s1024-pure_bf16-sdpa", hub_config("THUDM--GLM-4-9B-0414", num_hidden_layers=4), 2, 1024,
          precision="pure_bf16"),
    train("family-olmo2-l4-b2-s1024-pure_bf16-sdpa", hub_config("allenai--OLMo-2-1124-7B", num_hidden_layers=4), 2,
          1024, precision="pure_bf16"),
    train("family-phimoe-l2-e4-b2-s1024-pure_bf16-sdpa",
          hub_config("microsoft--Phi-3.5-MoE-instruct", num_hidden_layers=2, num_local_experts=4), 2, 1024,
          precision="pure_bf16"),
    train("family-qwen2moe-l4-e16-b2-s1024-pure_bf16-sdpa",
          hub_config("Qwen--Qwen1.5-MoE-A2.7B", num_hidden_layers=4, num_experts=16), 2, 1024, precision="pure_bf16"),
    # Layer kinds first modelled from CPU traces (latent attention, Llama 4's MoE, state-space and hybrid
    # stacks), measured on the GPU for the first time; narrower or shallower than the Hub models so that a
    # step fits a shared card (the records carry the config that ran). No mamba-ssm on the device: the
    # state-space layers run the torch path.
    train("family-deepseek_v2-lite-l4-e16-b2-s1024-pure_bf16-sdpa",
          hub_config("deepseek-ai--DeepSeek-V2-Lite", num_hidden_layers=4, n_routed_experts=16), 2, 1024,
          precision="pure_bf16"),
    train("family-deepseek_v3-h1024-l4-e16-b2-s1024-amp_bf16-sdpa",
          hub_config("deepseek-ai--DeepSeek-V3", num_hidden_layers=4, first_k_dense_replace=1, n_routed_experts=16,
                     hidden_size=1024, intermediate_size=4096, moe_intermediate_size=512, num_attention_heads=16,
                     num_key_value_heads=16), 2, 1024, precision="amp_bf16"),
    train("family-llama4_text-h1024-l4-e4-b2-s2048-pure_bf16-sdpa",
          dict(hub_config("meta-llama--Llama-4-Scout-17B-16E")["text_config"], hidden_size=1024, num_hidden_layers=4,
               intermediate_size=2048, intermediate_size_mlp=4096, num_local_experts=4, num_attention_heads=8,
               num_key_value_heads=2, moe_layers=None, no_rope_layers=[1, 1, 1, 0], eos_token_id=200001,
               attn_temperature_tuning=True), 2, 2048,
          precision="pure_bf16"),
    train("family-jamba-h1024-l8-e4-b2-s1024-amp_bf16-sdpa-torchpath",
          hub_config("ssm-multimodal/ai21labs--AI21-Jamba-1.5-Mini", hidden_size=1024, intermediate_size=2816,
                     num_experts=4, num_hidden_layers=8, mamba_dt_rank=64, use_mamba_kernels=False), 2, 1024,
          precision="amp_bf16"),
    train("family-falcon_h1-0.5b-b2-s1024-amp_bf16-sdpa-torchpath",
          hub_config("ssm-multimodal/tiiuae--Falcon-H1-0.5B-Base"), 2, 1024, precision="amp_bf16"),
    train("family-mamba2-2.7b-l8-b1-s512-amp_bf16-torchpath",
          hub_config("ssm-multimodal/state-spaces--mamba2-2.7b", num_hidden_layers=8), 1, 512, precision="amp_bf16",
          attention="eager"),
    # DeepSeek's latent attention under PEFT LoRA, and generate() with its cache (first measured here).
    train("family-deepseek_v2-lite-l4-e16-lora-attn-r16-b2-s1024-bf16",
          hub_config("deepseek-ai--DeepSeek-V2-Lite", num_hidden_layers=4, n_routed_experts=16), 2, 1024,
          precision="pure_bf16", lora={"r": 16, "alpha": 32,
                                       "targets": ["q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"]}),
    infer("infer-deepseek_v2-lite-l4-e16-bf16-b4-c1024-n64",
          hub_config("deepseek-ai--DeepSeek-V2-Lite", num_hidden_layers=4, n_routed_experts=16), 4, 1024, 64),
    # Caches other than DynamicCache, and generate() of families first modelled from CPU traces: StaticCache
    # (cache_implementation="static", without generate()'s automatic torch.compile: disable_compile=True),
    # gemma3's sliding layers under DynamicCache, gpt-oss's sinks and sliding layers (eager attention).
    infer("infer-llama2-7b-bf16-b8-c2048-n128-static", LLAMA2_7B, 8, 2048, 128, cache="static"),
    infer("infer-tinyllama-bf16-b16-c1024-n256-static", TINYLLAMA, 16, 1024, 256, cache="static"),
    infer("infer-gemma3-1b-bf16-b4-c2048-n64", hub_config("google--gemma-3-1b-pt"), 4, 2048, 64),
    infer("infer-gpt_oss-l4-e8-bf16-b4-c1024-n64",
          hub_config("openai--gpt-oss-20b", num_hidden_layers=4, num_local_experts=8), 4, 1024, 64, attention="eager"),
    # Padded prompts (an attention mask with zeros: batched generation of prompts of unequal length), and
    # generate() of the MoE families whose experts run through transformers 5's experts interface.
    infer("infer-tinyllama-bf16-b16-c1024-n256-padded", TINYLLAMA, 16, 1024, 256, padded=True),
    infer("infer-tinyllama-bf16-b16-c1024-n256-unpadded", TINYLLAMA, 16, 1024, 256, padded=False),
    infer("infer-gpt2-fp32-b4-c512-n64-padded", GPT2, 4, 512, 64, dtype="fp32", padded=True),
    infer("infer-llama2-7b-bf16-b4-c2048-n64-padded", LLAMA2_7B, 4, 2048, 64, padded=True),
    infer("infer-llama2-7b-bf16-b8-c2048-n128-unpadded", LLAMA2_7B, 8, 2048, 128, padded=False),
    infer("infer-olmoe-l4-bf16-b4-c1024-n64", hub_config("allenai--OLMoE-1B-7B-0924", num_hidden_layers=4), 4, 1024,
          64, padded=False),
    infer("infer-qwen2moe-l4-e16-bf16-b4-c1024-n64",
          hub_config("Qwen--Qwen1.5-MoE-A2.7B", num_hidden_layers=4, num_experts=16), 4, 1024, 64, padded=False),
    infer("infer-mixtral-l2-bf16-b4-c1024-n64", hub_config("mistralai--Mixtral-8x7B-v0.1", num_hidden_layers=2), 4,
          1024, 64, padded=False),
    # Held out for padded prompts and batches: other families' generate(), and training steps whose
    # attention_mask has zeros (right padding).
    infer("infer-qwen2-0.5b-bf16-b8-c1024-n64-padded", QWEN2_05B, 8, 1024, 64, padded=True),
    infer("infer-qwen2-0.5b-bf16-b8-c1024-n64-unpadded", QWEN2_05B, 8, 1024, 64, padded=False),
    infer("infer-llama3.2-1b-bf16-b8-c2048-n64-padded", hub_config("meta-llama--Llama-3.2-1B"), 8, 2048, 64,
          padded=True),
    infer("infer-phi3-mini-bf16-b4-c2048-n64-padded", hub_config("microsoft--Phi-3-mini-4k-instruct"), 4, 2048, 64,
          padded=True),
    # Held out for the generate() band: other families' generate() under 5.x.
    infer("infer-qwen3-0.6b-bf16-b8-c2048-n64", hub_config("Qwen--Qwen3-0.6B"), 8, 2048, 64, padded=False),
    infer("infer-qwen3-0.6b-fp16-b16-c1024-n128-padded", hub_config("Qwen--Qwen3-0.6B"), 16, 1024, 128, dtype="fp16",
          padded=True),
    infer("infer-olmo2-l8-bf16-b4-c2048-n64", hub_config("allenai--OLMo-2-1124-7B", num_hidden_layers=8), 4, 2048, 64,
          padded=False),
    infer("infer-glm4-l8-bf16-b4-c2048-n64", hub_config("THUDM--GLM-4-9B-0414", num_hidden_layers=8), 4, 2048, 64,
          padded=False),
    infer("infer-gemma2-2b-bf16-b4-c2048-n64", hub_config("google--gemma-2-2b"), 4, 2048, 64, padded=False),
    infer("infer-starcoder2-3b-bf16-b4-c2048-n64", hub_config("bigcode--starcoder2-3b"), 4, 2048, 64, padded=False),
    train("padded-qwen2-0.5b-b4-s1024-amp_bf16-sdpa", QWEN2_05B, 4, 1024, precision="amp_bf16", padded=True),
    train("padded-llama3.2-1b-b2-s2048-pure_bf16-sdpa", hub_config("meta-llama--Llama-3.2-1B"), 2, 2048,
          precision="pure_bf16", padded=True),
    train("padded-llama3.2-1b-b2-s2048-pure_bf16-eager", hub_config("meta-llama--Llama-3.2-1B"), 2, 2048,
          precision="pure_bf16", attention="eager", padded=True),
    train("family-falcon_mamba-7b-l4-b1-s512-pure_bf16-torchpath",
          hub_config("ssm-multimodal/tiiuae--falcon-mamba-7b", num_hidden_layers=4), 1, 512, precision="pure_bf16",
          attention="eager"),
]

MEASURES = ("max_memory_allocated", "max_memory_reserved", "nvidia-smi")


def smi_used_bytes():
    """This process's used GPU memory as nvidia-smi reports it (MiB granularity)."""
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0] == str(os.getpid()):
            return int(parts[1]) * (1 << 20)
    return None


def software():
    import torch
    sw = {"torch": torch.__version__.split("+")[0], "cuda": torch.version.cuda}
    for mod in ("transformers", "peft", "torchvision", "accelerate"):
        try:
            sw[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - absent packages are simply not recorded
            pass
    return sw


def make_optimizer(params, name):
    import torch
    params = [p for p in params if p.requires_grad]
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-4)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3)
    if name == "sgd_momentum":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9)
    raise ValueError(name)


def build_hf(case, dtype):
    import torch
    import transformers
    cfg = dict(case["cfg"])
    model_type = cfg.pop("model_type")
    config = transformers.AutoConfig.for_model(model_type, **cfg)
    auto = transformers.AutoModelForMaskedLM if case.get("head") == "masked_lm" else transformers.AutoModelForCausalLM
    torch.set_default_dtype(dtype)
    try:
        with torch.device("cuda"):
            model = auto.from_config(config, attn_implementation=case["attention"])
    finally:
        torch.set_default_dtype(torch.float32)
    return model, config


def run_train(case):
    import torch
    torch.manual_seed(0)
    pure = case["precision"].startswith("pure_")
    dtype = torch.bfloat16 if pure else torch.float32
    model, config = build_hf(case, dtype)
    model.train()
    trainable_dtype = None
    if case["ckpt"] == "full":
        model.gradient_checkpointing_enable()
    if case["lora"]:
        import peft
        lc = peft.LoraConfig(r=case["lora"]["r"], lora_alpha=case["lora"]["alpha"], lora_dropout=0.05,
                             target_modules=case["lora"]["targets"], task_type="CAUSAL_LM")
        if case["ckpt"] == "full":
            model.enable_input_require_grads()
        model = peft.get_peft_model(model, lc)
        trainable_dtype = str(next(p for p in model.parameters() if p.requires_grad).dtype).replace("torch.", "")
    params = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    opt = make_optimizer(model.parameters(), case["optimizer"])
    vocab = config.vocab_size
    x = torch.randint(0, vocab, (case["batch"], case["seq"]), device="cuda")
    inputs = {"input_ids": x, "labels": x}
    if case.get("padded"):
        attention = torch.ones_like(x)
        labels = x.clone()
        for row in range(case["batch"]):
            pads = row * case["seq"] // (2 * case["batch"])
            if pads:
                attention[row, -pads:] = 0
                labels[row, -pads:] = -100
        inputs = {"input_ids": x, "attention_mask": attention, "labels": labels}
    amp = case["precision"] == "amp_bf16"
    marks = {}

    def step(record):
        if record:
            torch.cuda.reset_peak_memory_stats()
            marks["start"] = torch.cuda.memory_allocated()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            loss = model(**inputs).loss
        if record:
            marks["after_forward"] = torch.cuda.memory_allocated()
            marks["peak_forward"] = torch.cuda.max_memory_allocated()
        loss.backward()
        if record:
            marks["after_backward"] = torch.cuda.memory_allocated()
            marks["peak_backward"] = torch.cuda.max_memory_allocated()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss

    step(False)
    torch.cuda.synchronize()
    step(True)
    torch.cuda.synchronize()
    info = {"params": params, "trainable": trainable, "trainable_dtype": trainable_dtype,
            "ckpt_kwargs": getattr(model, "_gradient_checkpointing_kwargs", None),
            "attn_implementation": getattr(model.config, "_attn_implementation", None),
            "experts_implementation": getattr(model.config, "_experts_implementation", None)}
    if case["cfg"]["model_type"] in ("mamba", "falcon_mamba", "mamba2", "jamba", "falcon_h1"):
        # The mixers take their cuda_kernels_forward only when mamba-ssm and causal-conv1d import.
        import importlib.util
        fused = all(importlib.util.find_spec(p) is not None for p in ("mamba_ssm", "causal_conv1d"))
        info["ssm_path"] = "fused" if fused else "torch"
    return info, marks


def run_infer(case):
    import torch
    torch.manual_seed(0)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[case["dtype"]]
    model, config = build_hf(case, dtype)
    model.eval()
    params = sum(p.numel() for p in model.parameters())
    padded = case.get("padded")
    x = torch.randint(0 if padded is None else 1, config.vocab_size, (case["batch"], case["context"]), device="cuda")
    mask = {}
    if padded:
        attention = torch.ones_like(x)
        for row in range(case["batch"]):
            pads = row * case["context"] // (2 * case["batch"])
            x[row, :pads] = 0
            attention[row, :pads] = 0
        mask = {"attention_mask": attention}
    prompt_pads = int((x == 0).sum())
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    marks = {"start": torch.cuda.memory_allocated()}
    extra = {}
    if case.get("cache", "dynamic") != "dynamic":
        extra = {"cache_implementation": case["cache"], "disable_compile": True}
    with torch.no_grad():
        out = model.generate(x, max_new_tokens=case["new_tokens"], min_new_tokens=case["new_tokens"],
                             do_sample=False, pad_token_id=0, **mask, **extra)
    torch.cuda.synchronize()
    marks["generated_tokens"] = int(out.shape[1] - x.shape[1])
    marks["prompt_pad_tokens"] = prompt_pads
    return {"params": params}, marks


def run_vision(case):
    import torch
    import torch.nn.functional as F
    import torchvision
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = getattr(torchvision.models, case["arch"])()
    model.train()
    params = sum(p.numel() for p in model.parameters())
    opt = make_optimizer(model.parameters(), case["optimizer"])
    x = torch.randn(case["batch"], 3, case["image"], case["image"], device="cuda")
    y = torch.randint(0, 1000, (case["batch"],), device="cuda")
    amp = case["precision"] == "amp_bf16"
    marks = {}
    for record in (False, True):
        if record:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            marks["start"] = torch.cuda.memory_allocated()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss
    torch.cuda.synchronize()
    return {"params": params}, marks


# memory_stats() keys kept in each record (issue: what the caching allocator did, not only its peak).
ALLOCATOR_STATS = ["reserved_bytes.all.peak", "allocated_bytes.all.peak", "active_bytes.all.peak",
                   "inactive_split_bytes.all.peak", "inactive_split_bytes.all.current", "segment.all.peak",
                   "segment.large_pool.peak", "segment.small_pool.peak", "num_alloc_retries", "num_ooms",
                   "num_device_alloc", "num_device_free", "oversize_allocations.peak", "max_split_size"]


def short_frames(event):
    """The innermost Python frames of an allocation outside torch's own wrappers, as file:line:function."""
    out = []
    for fr in event.get("frames") or []:
        name = fr.get("filename", "")
        if "/torch/" in name and "/nn/modules/" not in name and "/nn/functional" not in name:
            continue
        out.append("%s:%s:%s" % (name.split("site-packages/")[-1], fr.get("line"), fr.get("name")))
        if len(out) == 3:
            break
    return ";".join(out)


def write_history(case, history_dir, frames=False):
    """The allocator's event history and final segments, compact, gzipped JSON (frames: each event's
    innermost Python frames outside torch, to name the op that made a block)."""
    import gzip
    import torch
    snap = torch.cuda.memory._snapshot()
    segments = [{"address": s["address"], "total_size": s["total_size"], "stream": s["stream"],
                 "pool": s.get("segment_type"),
                 "blocks": [[b["size"], b["state"]] for b in s["blocks"]]} for s in snap["segments"]]
    traces = snap["device_traces"][0] if snap["device_traces"] else []
    events = [[e["action"], e["addr"], e["size"], e.get("stream", 0)] + ([short_frames(e)] if frames else [])
              for e in traces]
    os.makedirs(history_dir, exist_ok=True)
    with gzip.open(os.path.join(history_dir, case["name"] + ".json.gz"), "wt") as f:
        json.dump({"case": case["name"], "memory_stats": torch.cuda.memory_stats(), "segments": segments,
                   "events_format": ["action", "addr", "size", "stream"] + (["frames"] if frames else []),
                   "events": events}, f)


def measure_one(case, history_dir="", frames=False, cap_bytes=0):
    import torch
    t0 = time.time()
    if cap_bytes:  # the allocator refuses past cap_bytes of segments (CUDACachingAllocator set_memory_fraction)
        total_memory = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(cap_bytes / total_memory)
    if history_dir:  # torch >= 2.1: every alloc/free/segment event from the start
        torch.cuda.memory._record_memory_history(enabled="all", context="alloc" if frames else None,
                                                 stacks="python", max_entries=4_000_000)
    runner = {"train": run_train, "infer": run_infer, "vision": run_vision}[case["kind"]]
    oom = None
    try:
        info, marks = runner(case)
    except torch.cuda.OutOfMemoryError as e:  # a capped run that did not fit: what the allocator did
        info, marks, oom = {}, {}, str(e).split("\n")[0][:300]
    free, total = torch.cuda.mem_get_info()
    stats = torch.cuda.memory_stats()
    if history_dir:
        write_history(case, history_dir, frames)
    return {"name": case["name"], "info": info, "marks": marks, "cap_bytes": cap_bytes, "oom": oom,
            "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
            "allocated": torch.cuda.max_memory_allocated(), "reserved": torch.cuda.max_memory_reserved(),
            "smi": smi_used_bytes(), "device_used": total - free,
            "alloc_retries": stats.get("num_alloc_retries"), "ooms": stats.get("num_ooms"),
            "allocator_stats": {k: stats.get(k) for k in ALLOCATOR_STATS},
            "gpu": torch.cuda.get_device_name(), "software": software(), "torch_git": torch.version.git_version,
            "cudnn": torch.backends.cudnn.version(), "seconds": round(time.time() - t0, 2)}


def records_of(case, result):
    """Ground-truth records (shared/ground-truth/SCHEMA.md), one per measure."""
    source = "tools/gpu-measure/measure_gpu.py"
    sw = result["software"]
    common = {"source": source, "device": "h100-80gb", "software": sw}
    if case["kind"] == "vision":
        model = {"family": "resnet" if case["arch"].startswith("resnet") else "vit",
                 "name": "torchvision.models." + case["arch"], "params": result["info"]["params"],
                 "impl": "torchvision"}
        body = {"train": {"batch": case["batch"], "image": case["image"], "precision": case["precision"],
                          "optimizer": case["optimizer"], "optimizer_impl": "foreach", "checkpointing": "none",
                          "grad_accum": 1, "dropout": "train mode (HF/torchvision defaults)"}}
    else:
        model = {"hf_config": case["cfg"], "params": None, "impl": "hf-transformers"}
        if case["kind"] == "infer":
            model["params"] = result["info"]["params"]
            body = {"infer": {"batch": case["batch"], "context": case["context"], "new_tokens": case["new_tokens"],
                              "dtype": case["dtype"], "kv_dtype": case["dtype"], "kv_cache": case.get("cache", "dynamic"),
                              "attention": case["attention"], "weights": case["dtype"]}}
            # generate() masks every prompt token equal to pad_token_id (0 here): a prompt with one is padded.
            if result["marks"].get("prompt_pad_tokens"):
                body["infer"]["padded"] = True
        else:
            info = result["info"]
            t = {"batch": case["batch"], "seq": case["seq"], "precision": case["precision"],
                 "optimizer": case["optimizer"], "optimizer_impl": "foreach", "checkpointing": case["ckpt"],
                 "attention": case["attention"], "grad_accum": 1, "dropout": "train mode (HF/torchvision defaults)"}
            if case["lora"]:
                model["impl"] = "hf-transformers"  # PEFT adapters: train.lora_*, software.peft
                model["params"] = None
                t.update({"lora_rank": case["lora"]["r"], "lora_alpha": case["lora"]["alpha"], "lora_dropout": 0.05,
                          "lora_variant": "lora", "lora_targets": case["lora"]["targets"],
                          "trainable_params": info["trainable"], "frozen": "base",
                          "trainable_dtype": {"float32": "fp32", "bfloat16": "bf16"}.get(info["trainable_dtype"])})
            else:
                model["params"] = info["params"]
            if info.get("ssm_path"):
                t["ssm_path"] = info["ssm_path"]
            if case.get("padded"):
                t["padded"] = True
            body = {"train": t}
    values = {"max_memory_allocated": result["allocated"], "max_memory_reserved": result["reserved"],
              "nvidia-smi": result["smi"]}
    out = []
    for measure in MEASURES:
        if values[measure] is None:
            continue
        rec = {"id": "h100-" + case["name"] + "-" + {"max_memory_allocated": "allocated",
                                                    "max_memory_reserved": "reserved",
                                                    "nvidia-smi": "smi"}[measure],
               "measure": measure, "model": model, **body, "measured_bytes": values[measure], **common,
               "detail": {"marks": result["marks"], "info": result["info"], "device_used": result["device_used"],
                          "alloc_retries": result["alloc_retries"], "gpu": result["gpu"],
                          "allocator_stats": result.get("allocator_stats"),
                          "seconds": result["seconds"]},
               "notes": "Second training step (or the whole generate()) measured after torch.cuda."
                        "reset_peak_memory_stats(); absolute peak including weights, optimizer state and "
                        "inputs. nvidia-smi = this process's used_memory (MiB) read after the step."}
        out.append(rec)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default="gpu_measured.json")
    ap.add_argument("--case", default="")
    ap.add_argument("--budget-s", type=float, default=540)
    ap.add_argument("--history", default="", help="folder for each case's allocator history (.json.gz)")
    ap.add_argument("--frames", action="store_true", help="with --history: each event's innermost Python frames")
    ap.add_argument("--cap-bytes", type=int, default=0, help="set_per_process_memory_fraction to this many bytes")
    a = ap.parse_args()
    by_name = {c["name"]: c for c in CASES}
    if a.list:
        print("\n".join(by_name))
        return
    if a.case:  # child process: one case, result as JSON on the last stdout line
        print(json.dumps(measure_one(by_name[a.case], a.history, a.frames, a.cap_bytes)))
        return
    names = [n for n in a.only.split(",") if n] or list(by_name)
    t0 = time.time()
    records, log = [], []
    for n in names:
        left = a.budget_s - (time.time() - t0)
        if left < 20:
            log.append({"name": n, "skipped": "time budget"})
            continue
        try:
            p = subprocess.run([sys.executable, __file__, "--case", n] + (["--history", a.history] if a.history else []),
                               capture_output=True, text=True,
                               timeout=min(left, 240))
            if p.returncode != 0:
                log.append({"name": n, "error": p.stderr[-3000:]})
                print(n, "FAILED", p.stderr[-800:], flush=True)
                continue
            result = json.loads(p.stdout.strip().splitlines()[-1])
            records += records_of(by_name[n], result)
            log.append({"name": n, "ok": True, "seconds": result["seconds"]})
            print(n, result["allocated"], result["reserved"], result["smi"], result["seconds"], flush=True)
        except subprocess.TimeoutExpired:
            log.append({"name": n, "error": "timeout"})
            print(n, "TIMEOUT", flush=True)
        with open(a.out, "w") as f:
            json.dump(records, f, indent=1)
        with open(a.out + ".log.json", "w") as f:
            json.dump(log, f, indent=1)


if __name__ == "__main__":
    main()
