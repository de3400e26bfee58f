#!/usr/bin/python3
"""What autograd saves for backward in one block of each 2025 family, listed tensor by tensor.

Runs the models of tools/trace/families_2025.py (training mode, eager) once under
torch.autograd.graph.saved_tensors_hooks and prints, for the block given per family, every
distinct storage the graph keeps: the innermost module that saved it, shape, dtype and bytes
(a view keeps its whole storage, so storages are listed, not views). --dtype bfloat16 casts
the model first (pure bf16 on CPU: shows which tensors stay fp32). Parameters and buffers are
left out. docs/research/families-2025.md quotes these listings.

    /usr/bin/python3 tools/trace/saved_tensors_2025.py --only deepseek_v3 --dtype bfloat16
"""
import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families_2025 as fam  # noqa: E402
import torch  # noqa: E402
import tracer  # noqa: E402

# the block whose saved tensors are listed (a MoE block where the family has dense ones too)
BLOCK = {"deepseek_v2": "layers.1", "deepseek_v3": "layers.1", "gpt_oss": "layers.0", "llama4_text": "layers.1",
         "granite": "layers.0", "cohere": "layers.0", "cohere2": "layers.3", "gpt_bigcode": "h.0",
         "internlm2": "layers.0", "olmoe": "layers.0"}


def listing(name, c, B, S, dtype):
    tracer.reset_seed()
    model = fam.build(c)
    model.train()
    if dtype != torch.float32:
        model.to(dtype)
    exclude = {tracer.storage_key(p)[0] for p in model.parameters()} | {tracer.storage_key(b)[0] for b in model.buffers()}
    stack = tracer.track_module_path(model)
    saved = collections.OrderedDict()

    def pack(t):
        key, nbytes = tracer.storage_key(t)
        where = stack[-1] if stack else "(model)"
        if key not in exclude and key not in saved:
            saved[key] = (where, tuple(t.shape), str(t.dtype).replace("torch.", ""), nbytes)
        return t

    ids = torch.randint(0, c["vocab_size"], (B, S))
    with tracer.saving_tensors(pack):
        loss = model(ids, ids.clone())
    block = BLOCK[name]
    rows = [v for v in saved.values() if v[0] == block or v[0].startswith(block + ".")]
    print(f"== {name} {block} B={B} S={S} {str(dtype).replace('torch.', '')}: {len(rows)} storages, "
          f"{sum(r[3] for r in rows):,} bytes")
    for where, shape, dt, nbytes in rows:
        print(f"   {where[len(block) + 1:] or '(block)':40s} {str(list(shape)):24s} {dt:9s} {nbytes:>11,}")
    del loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=64)
    a = ap.parse_args()
    for name, c in fam.CONFIGS.items():
        if a.only and name not in a.only.split(","):
            continue
        listing(name, c, a.batch, a.seq, getattr(torch, a.dtype))


if __name__ == "__main__":
    main()
