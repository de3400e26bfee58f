"""Qwen3-30B-A3B's expert bytes from pre-quantised checkpoints, per-expert (4.x) and merged (5.x), on the module tree.

The checkpoints store one tensor per expert and matrix (mlp.experts.N.{gate,up,down}_proj.*). The MoE
layer is built on the meta device at tests/data/hf_configs' Qwen--Qwen3-30B-A3B sizes in the two
shapes transformers loads them into:
- 4.x: Qwen3MoeSparseMoeBlock.experts, an nn.ModuleList of per-expert MLPs of nn.Linear modules, which
  the format's layer replaces: FP8Linear (integrations/finegrained_fp8.py@0095b976: float8 weight and one
  fp32 weight_scale_inv per weight_block_size tile), compressed-tensors' quantised Linear;
- 5.x: the experts interface's 3-D gate_up_proj (E, 2F, H) and down_proj (E, H, F), filled by the
  family's converters (conversion_mapping.py@000c33fd: MergeModulelist(dim=0) stacks the experts,
  Concatenate(dim=1) joins gate and up). Fine-grained FP8 swaps them for FP8Expert, whose weights and
  scale tiles take the merged checkpoint tensors (transformers PR #42654); compressed-tensors' DecompressExperts
  (integrations/compressed_tensors.py@039570ae) dequantises each expert to the checkpoint dtype before the
  merge.
float8 is stood in for by uint8 (one byte; torch 1.13 has no float8). The merges run on meta tensors, so
the shapes are the ones torch.stack and torch.cat give. Prints the experts' held bytes over the 48 layers
(what tests/runtime/prequantized_parameter_experts_test.cpp checks).

/usr/bin/python3 tools/trace/fused_quantized_experts.py > docs/data/cpu_traced_fused_quantized_experts.json
"""
import json
import sys

import torch
from torch import nn

FP8 = torch.uint8  # float8_e4m3fn's byte
BLOCK = (128, 128)  # FineGrainedFP8Config weight_block_size


def ceil_div(a, b):
    return -(-a // b)


def per_expert_mlps(c):
    h, f = c["hidden_size"], c["moe_intermediate_size"]
    return nn.ModuleList(
        nn.ModuleDict({"gate_proj": nn.Linear(h, f, bias=False, device="meta"),
                       "up_proj": nn.Linear(h, f, bias=False, device="meta"),
                       "down_proj": nn.Linear(f, h, bias=False, device="meta")})
        for _ in range(c["num_experts"]))


def fp8_linear_bytes(layer):
    o, i = layer.out_features, layer.in_features
    weight = torch.empty(o, i, dtype=FP8, device="meta")
    scale_inv = torch.empty(ceil_div(o, BLOCK[0]), ceil_div(i, BLOCK[1]), dtype=torch.float32, device="meta")
    return sum(t.numel() * t.element_size() for t in (weight, scale_inv))


def checkpoint_fp8(out, inp):
    """One expert matrix as an FP8 checkpoint stores it: weight and weight_scale_inv."""
    return (torch.empty(out, inp, dtype=FP8, device="meta"),
            torch.empty(ceil_div(out, BLOCK[0]), ceil_div(inp, BLOCK[1]), dtype=torch.float32, device="meta"))


def merged(per_expert_gate, per_expert_up=None):
    """MergeModulelist(dim=0), then Concatenate(dim=1) when gate and up are joined."""
    gate = torch.stack(per_expert_gate, dim=0)
    return gate if per_expert_up is None else torch.cat((gate, torch.stack(per_expert_up, dim=0)), dim=1)


def fp8_expert_bytes(c):
    e, h, f = c["num_experts"], c["hidden_size"], c["moe_intermediate_size"]
    gate = [checkpoint_fp8(f, h) for _ in range(e)]
    up = [checkpoint_fp8(f, h) for _ in range(e)]
    down = [checkpoint_fp8(h, f) for _ in range(e)]
    tensors = [merged([w for w, _ in gate], [w for w, _ in up]), merged([s for _, s in gate], [s for _, s in up]),
               merged([w for w, _ in down]), merged([s for _, s in down])]
    return sum(t.numel() * t.element_size() for t in tensors)


def decompressed_expert_bytes(c, dtype):
    e, h, f = c["num_experts"], c["hidden_size"], c["moe_intermediate_size"]
    dense = lambda out, inp: [torch.empty(out, inp, dtype=dtype, device="meta") for _ in range(e)]
    tensors = [merged(dense(f, h), dense(f, h)), merged(dense(h, f))]
    return sum(t.numel() * t.element_size() for t in tensors)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "tests/data/hf_configs"
    name = "Qwen--Qwen3-30B-A3B"
    c = json.load(open(f"{root}/{name}.json"))
    layers = c["num_hidden_layers"]
    dtype = getattr(torch, c["torch_dtype"])
    per_expert_fp8 = sum(fp8_linear_bytes(m) for mlp in per_expert_mlps(c) for m in mlp.values())
    rows = [("fp8-block", "4.51", "per-expert FP8Linear", per_expert_fp8),
            ("fp8-block", "5.x", "FP8Expert (merged float8 weights and scale tiles)", fp8_expert_bytes(c)),
            ("compressed-tensors-int", "5.x", "3-D parameters (DecompressExperts, then merged)",
             decompressed_expert_bytes(c, dtype))]
    results = [{"config": name, "format": fmt, "transformers": release, "experts_module": module, "moe_layers": layers,
                "expert_bytes": per_layer * layers,
                "source": "tools/trace/fused_quantized_experts.py (meta-device module tree and checkpoint merges)",
                "measure": "stored-bytes-of-expert-weights"} for fmt, release, module, per_layer in rows]
    json.dump(results, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()
