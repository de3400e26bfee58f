#!/usr/bin/python3
"""CPU trace of one FSDP1 unit's backward when its weights are views of a flat parameter.

A plain-torch re-implementation of what FullyShardedDataParallel (torch 2.1) hands autograd in a
unit's forward: FlatParamHandle._use_unsharded_views(as_params=False) replaces every original
parameter by a Tensor view of the unsharded flat parameter (torch/distributed/fsdp/_flat_param.py:
_get_unflat_views_aligned = torch.split(flat, numels) then .view(shape)). With use_orig_params the
flat parameter requires grad as soon as one of its tensors does, so the frozen views require grad
too. No collective runs inside a no_sync() micro-step, so one process is the whole mechanism.

The unit is a LoRA block in miniature: frozen q/k/v, projection and MLP weights, trainable rank-8
LoRA A/B on q and v (lit-gpt's default targets). Two backward passes run (micro-steps 1 and 2 of
an accumulation under no_sync: the second adds into the kept flat gradient). The same block with
ordinary frozen parameters is the reference. Figures: the most bytes live in micro-step 2 above
those live when its forward starts (the kept flat gradient is already there).

Run from the repository root:
  /usr/bin/python3 tools/trace/fsdp1_flat_views.py --out docs/data/cpu_traced_fsdp1_flat_views.json
"""
import argparse
import json
import math

import tracer
import torch
import torch.nn.functional as F

H, FFN, RANK, TOKENS = 256, 1024, 8, 64
SHAPES = {  # name: (shape, trainable)
    "attn_qkv": ((3 * H, H), False),
    "attn_proj": ((H, H), False),
    "fc": ((FFN, H), False),
    "proj": ((H, FFN), False),
    "lora_a_q": ((RANK, H), True),
    "lora_b_q": ((H, RANK), True),
    "lora_a_v": ((RANK, H), True),
    "lora_b_v": ((H, RANK), True),
}


def block(w, x):
    qkv = F.linear(x, w["attn_qkv"])
    q, k, v = qkv.split(H, dim=-1)
    q = q + F.linear(F.linear(x, w["lora_a_q"]), w["lora_b_q"])
    v = v + F.linear(F.linear(x, w["lora_a_v"]), w["lora_b_v"])
    att = torch.softmax(q @ k.transpose(-1, -2) / H ** 0.5, dim=-1) @ v
    x = x + F.linear(att, w["attn_proj"])
    return x + F.linear(F.gelu(F.linear(x, w["fc"])), w["proj"])


def split_views(flat):
    """FlatParamHandle._get_unflat_views_aligned without padding: torch.split, then .view per tensor."""
    pieces = torch.split(flat, [math.prod(shape) for shape, _ in SHAPES.values()])
    return {n: p.view(SHAPES[n][0]) for n, p in zip(SHAPES, pieces)}


def weights(flat_views):
    """The unit's weights (ordinary parameters) or its flat parameter (requires grad: LoRA trains)."""
    tracer.reset_seed()
    tensors = {n: torch.randn(shape) * 0.02 for n, (shape, _) in SHAPES.items()}
    if flat_views:
        return None, torch.nn.Parameter(torch.cat([t.reshape(-1) for t in tensors.values()]))
    return {n: t.requires_grad_(SHAPES[n][1]) for n, t in tensors.items()}, None


def run_case(flat_views):
    with tracer.Tracker() as tr:
        x = torch.randn(1, TOKENS, H)
        w, flat = weights(flat_views)
        for step in (1, 2):
            if flat_views:  # FSDP makes the views again in every forward (_use_unsharded_views)
                w = split_views(flat)
            tr.mark(f"s{step}_fwd_start")
            out = block(w, x)
            out.sum().backward()
            tr.mark(f"s{step}_bwd_end")
            del out
        flat_bytes = flat.numel() * flat.element_size() if flat_views else 0
        kept_grad = flat.grad.numel() * flat.grad.element_size() if flat_views else 0
        del w, flat, x
    return {
        "step_peak_over_start": tr.peak("s2_fwd_start", "s2_bwd_end") - tr.live("s2_fwd_start"),
        "flat_parameter_bytes": flat_bytes,
        "kept_flat_gradient_bytes": kept_grad,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    views = run_case(True)
    plain = run_case(False)
    record = {
        "id": "cpu-fsdp1-flat-views-lora-block",
        "source": "tools/trace/fsdp1_flat_views.py (Tracker of shared/ground-truth/measure.py)",
        "torch": torch.__version__,
        "unit": {"hidden": H, "ffn": FFN, "lora_rank": RANK, "tokens": TOKENS, "dtype": "fp32"},
        "flat_views": views,
        "plain_frozen": {"step_peak_over_start": plain["step_peak_over_start"]},
        # The split's backward: every weight gradient beside their concatenation, activations freed.
        "flat_views_peak_in_flat_parameters": views["step_peak_over_start"] / views["flat_parameter_bytes"],
    }
    with open(a.out, "w") as f:
        json.dump([record], f, indent=1)
        f.write("\n")
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
