"""Which linears a quantised load leaves in 16 bits, and the bytes that stores, on the real module tree.

The module trees are transformers' names for Mixtral (model.layers.N.self_attn.{q,k,v,o}_proj,
block_sparse_moe.gate, block_sparse_moe.experts.M.{w1,w2,w3}) and Qwen2-MoE (mlp.gate,
mlp.experts.M.{gate,up,down}_proj, mlp.shared_expert.*, mlp.shared_expert_gate), built on the meta
device at the sizes of tests/data/hf_configs. The walk is the replacement's own:
- bitsandbytes (integrations/bitsandbytes.py@f6cf875a _replace_with_bnb_linear): a Linear is kept
  when its name is an entry, or an entry + "." is in its dotted path, or an entry is the path;
- AWQ (integrations/awq.py@027f76a8 replace_with_awq_linear): kept when its name is an entry or an
  entry is any substring of the path.
Stored bytes: AWQ GEMM qweight int32 (in, out/8), qzeros int32 (in/g, out/8), scales fp16 (in/g, out)
(AutoAWQ gemm.py WQLinear_GEMM); NF4 codes out*in/2 and one fp32 absmax per 64 weights; a kept
Linear out*in in bf16. Prints, per case, the linears kept and the stored bytes of the blocks'
linears, and the difference against a baseline list (what memscale's unquantized_modules_test checks).
"""
import json
import sys

import torch
from torch import nn


def linear(i, o):
    return nn.Linear(i, o, bias=False, device="meta")


class Attn(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, d = c["hidden_size"], c["hidden_size"] // c["num_attention_heads"]
        self.q_proj, self.k_proj = linear(h, c["num_attention_heads"] * d), linear(h, c["num_key_value_heads"] * d)
        self.v_proj, self.o_proj = linear(h, c["num_key_value_heads"] * d), linear(c["num_attention_heads"] * d, h)


class Mixtral(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, f = c["hidden_size"], c["intermediate_size"]
        self.self_attn = Attn(c)
        moe = nn.Module()
        moe.gate = linear(h, c["num_local_experts"])
        moe.experts = nn.ModuleList()
        for _ in range(c["num_local_experts"]):
            e = nn.Module()
            e.w1, e.w2, e.w3 = linear(h, f), linear(f, h), linear(h, f)
            moe.experts.append(e)
        self.block_sparse_moe = moe


class QwenMoe(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, f, s = c["hidden_size"], c["moe_intermediate_size"], c["shared_expert_intermediate_size"]
        self.self_attn = Attn(c)
        mlp = nn.Module()
        mlp.gate = linear(h, c["num_experts"])
        mlp.experts = nn.ModuleList()
        for _ in range(c["num_experts"]):
            e = nn.Module()
            e.gate_proj, e.up_proj, e.down_proj = linear(h, f), linear(h, f), linear(f, h)
            mlp.experts.append(e)
        shared = nn.Module()
        shared.gate_proj, shared.up_proj, shared.down_proj = linear(h, s), linear(h, s), linear(s, h)
        mlp.shared_expert = shared
        mlp.shared_expert_gate = linear(h, 1)
        self.mlp = mlp


def kept(rule, name, path, entries):
    if name in entries:
        return True
    if rule == "awq":
        return any(key in path for key in entries)
    return any(key + "." in path or key == path for key in entries)


def awq_bytes(o, i, g=128):
    return i * (o // 8) * 4 + (i // g) * (o // 8) * 4 + (i // g) * o * 2


def nf4_bytes(o, i):
    return o * i // 2 + 4 * (o * i // 64)


def walk(module, prefix, rule, entries, out):
    for name, child in module.named_children():
        path = f"{prefix}.{name}" if prefix else name
        if isinstance(child, nn.Linear):
            o, i = child.out_features, child.in_features
            if kept(rule, name, path, entries):
                short = path.split(".", 3)[-1] if path.startswith("model.layers.") else path
                out["kept"].add(".".join("*" if part.isdigit() else part for part in short.split(".")))
                out["bytes"] += o * i * 2
            else:
                out["bytes"] += awq_bytes(o, i) if rule == "awq" else nf4_bytes(o, i)
        walk(child, path, rule, entries, out)


def block_linears(layer, layers, rule, entries):
    # Every layer alike: one layer's walk under its real path, times the layers.
    out = {"kept": set(), "bytes": 0}
    holder = nn.Module()
    holder.layers = nn.ModuleList([layer])
    root = nn.Module()
    root.model = holder
    walk(root, "", rule, entries, out)
    return sorted(out["kept"]), out["bytes"] * layers


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "tests/data/hf_configs"
    # WQLinear_GEMM packs eight outputs an int32, so an AWQ checkpoint must keep Qwen-MoE's
    # 1-wide shared_expert_gate and 60-wide router: the AWQ baseline there lists them.
    cases = [
        ("mistralai--Mixtral-8x7B-v0.1", Mixtral, "awq", ["gate"], []),
        ("mistralai--Mixtral-8x7B-v0.1", Mixtral, "bnb", ["gate"], []),
        ("Qwen--Qwen1.5-MoE-A2.7B", QwenMoe, "awq", ["gate"], ["shared_expert_gate", "mlp.gate"]),
        ("Qwen--Qwen1.5-MoE-A2.7B", QwenMoe, "bnb", ["mlp.gate"], []),
    ]
    results = []
    for config, family, rule, entries, baseline in cases:
        c = json.load(open(f"{root}/{config}.json"))
        layer = family(c)
        _, base = block_linears(layer, c["num_hidden_layers"], rule, baseline)
        names, stored = block_linears(layer, c["num_hidden_layers"], rule, entries)
        results.append({"config": config, "format": rule, "modules_to_not_convert": entries, "kept": names,
                        "block_linear_bytes": stored, "baseline": baseline, "kept_minus_baseline_bytes": stored - base})
    json.dump(results, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()
