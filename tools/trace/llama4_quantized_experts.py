"""Llama 4's expert bytes under a bitsandbytes 4-bit load before transformers 5.0, on the module tree.

Scout's text MoE layer is built on the meta device at tests/data/hf_configs'
meta-llama--Llama-4-Scout-17B-16E sizes, in the two shapes transformers 4.5x loads:
- quantised at load (BitsAndBytesConfig over the bf16 checkpoint): Llama4TextExperts holds
  gate_up_proj (E, H, 2F) and down_proj (E, F, H) as nn.Parameters (modeling_llama4.py@000c33fd);
- pre-quantised (the checkpoint's config has a quantization_config): the quantizer first swaps it for
  SequentialLlama4TextExperts, one Llama4TextMLP (gate_proj, up_proj, down_proj nn.Linear) per expert
  (quantizers/base.py@302dcb5e _convert_model_for_quantization, pre_quantized only).
The walk is bitsandbytes' replacement (integrations/bitsandbytes.py@f6cf875a _replace_with_bnb_linear:
nn.Linear modules only): a replaced Linear stores NF4 codes out*in/2, one fp32 absmax per 64 weights and
its 16-entry fp32 quant_map;
any other parameter stays bf16. Prints the experts' stored bytes over the 48 MoE layers in both shapes
(what tests/runtime/quantized_experts_test.cpp checks).

/usr/bin/python3 tools/trace/llama4_quantized_experts.py > docs/data/cpu_traced_llama4_quantized_experts.json
"""
import json
import sys

import torch
from torch import nn


class Llama4TextExperts(nn.Module):
    def __init__(self, c):
        super().__init__()
        e, h, f = c["num_local_experts"], c["hidden_size"], c["intermediate_size"]
        self.gate_up_proj = nn.Parameter(torch.empty(e, h, 2 * f, device="meta"))
        self.down_proj = nn.Parameter(torch.empty(e, f, h, device="meta"))


class Llama4TextMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, f = c["hidden_size"], c["intermediate_size"]
        self.gate_proj = nn.Linear(h, f, bias=False, device="meta")
        self.up_proj = nn.Linear(h, f, bias=False, device="meta")
        self.down_proj = nn.Linear(f, h, bias=False, device="meta")


def sequential_experts(c):
    return nn.ModuleList([Llama4TextMLP(c) for _ in range(c["num_local_experts"])])


def nf4_bytes(o, i):
    # codes, fp32 absmax per 64, the 16-entry fp32 quant_map (bitsandbytes functional.py@95f9af30 quantize_4bit)
    return o * i // 2 + 4 * (o * i // 64) + 16 * 4


def stored_bytes(module):
    total = 0
    for child in module.modules():
        if isinstance(child, nn.Linear):
            total += nf4_bytes(child.out_features, child.in_features)
        else:
            total += sum(p.numel() * 2 for p in child.parameters(recurse=False))
    return total


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "tests/data/hf_configs"
    c = json.load(open(f"{root}/meta-llama--Llama-4-Scout-17B-16E.json"))["text_config"]
    step = c.get("interleave_moe_layer_step", 1)
    moe_layers = c["num_hidden_layers"] // step
    results = []
    shapes = (("quantised_at_load", "Llama4TextExperts", Llama4TextExperts(c)),
              ("pre_quantised", "SequentialLlama4TextExperts", sequential_experts(c)))
    for load, module, experts in shapes:
        results.append({"config": "meta-llama--Llama-4-Scout-17B-16E", "format": "bnb-nf4", "transformers": "4.51",
                        "load": load, "experts_module": module, "moe_layers": moe_layers,
                        "expert_bytes": stored_bytes(experts) * moe_layers})
    json.dump(results, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()
