#!/usr/bin/python3
"""List every tensor autograd saves for backward in one Mamba-1 and one Mamba-2 block of the
torch-only training path (tools/trace/ssm_cases.py re-implementations), fp32 and bf16.

torch.autograd.graph.saved_tensors_hooks sees each tensor an op saves; the listing groups
them by storage (a saved view keeps its whole storage) and names the op that saved it first.
Run from the project root (seconds):
    /usr/bin/python3 tools/trace/ssm_saved_tensors.py > docs/research/ssm-saved-tensors.txt
"""
import os
import sys
from collections import OrderedDict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ssm_cases  # noqa: E402

import torch  # noqa: E402
import tracer  # noqa: E402

torch.set_num_threads(1)


def listing(block, x):
    seen = OrderedDict()

    def pack(t):
        key, nbytes = tracer.storage_key(t)
        if key not in seen:
            seen[key] = (tuple(t.shape), str(t.dtype).replace("torch.", ""), nbytes, t.grad_fn is None)
        return t

    with tracer.saving_tensors(pack):
        out = block(x)
    params = {tracer.storage_key(p)[0] for p in block.parameters()}
    rows, total = [], 0
    for key, (shape, dtype, nbytes, leaf) in seen.items():
        if key in params or key == tracer.storage_key(x)[0]:
            continue
        rows.append((shape, dtype, nbytes))
        total += nbytes
    return out, rows, total


def main():
    B, L = 2, 64
    cases = [("mamba", ssm_cases.CONFIGS["mamba"]), ("mamba2", ssm_cases.CONFIGS["mamba2"])]
    for name, c in cases:
        for dtype in (torch.float32, torch.bfloat16):
            tracer.reset_seed()
            block = (ssm_cases.MambaBlock(c, "mamba") if name == "mamba" else ssm_cases.Mamba2Block(c)).to(dtype)
            x = torch.randn(B, L, c["hidden_size"], dtype=dtype, requires_grad=True)
            _, rows, total = listing(block, x)
            H = c["hidden_size"]
            print(f"== {name} block, {str(dtype).replace('torch.', '')}, B={B} L={L} hidden={H} "
                  f"(intermediate {c.get('intermediate_size') or 2 * H}, state {c['state_size']}"
                  + (f", heads {c['num_heads']}x{c['head_dim']}, groups {c['n_groups']}, chunk {c['chunk_size']}" if name == "mamba2" else "")
                  + f"): {len(rows)} storages, {total:,} bytes (block input and parameters excluded)")
            agg = OrderedDict()
            for shape, dt, nb in rows:
                k = (shape, dt)
                n, b = agg.get(k, (0, 0))
                agg[k] = (n + 1, b + nb)
            for (shape, dt), (n, b) in agg.items():
                print(f"  {n:4d} x {str(shape):<28} {dt:<9} {b:>12,} bytes")
            print()


if __name__ == "__main__":
    main()
