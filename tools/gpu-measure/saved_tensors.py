#!/usr/bin/env python3
"""List what autograd saves for backward, per module, in one training forward on the GPU.

For a case of measure_gpu.py, runs one forward under torch.autograd.graph.saved_tensors_hooks
and records each saved tensor's storage (counted once), shape, dtype and the innermost module
that was running when it was saved. Layers after the first are folded into layer 0's entries
(they are identical), so the output reads as: what one decoder layer saves, and what the
embedding, final norm, head and loss save. Also reports the live bytes after forward and the
peak of the backward, to place the loss and head temporaries.

  python3 saved_tensors.py --only NAME[,NAME] --out saved.json
"""
import argparse
import collections
import json
import re

import torch

import measure_gpu


def describe(case):
    torch.manual_seed(0)
    pure = case["precision"].startswith("pure_")
    model, config = measure_gpu.build_hf(case, torch.bfloat16 if pure else torch.float32)
    model.train()
    if case["ckpt"] == "full":
        model.gradient_checkpointing_enable()
    stack = []
    names = {m: n for n, m in model.named_modules()}

    def pre(mod, _args):
        stack.append(names.get(mod, "?"))

    def post(_mod, _args, _out):
        stack.pop()

    hooks = [m.register_forward_pre_hook(pre) for m in model.modules()]
    hooks += [m.register_forward_hook(post) for m in model.modules()]
    seen = set()
    entries = collections.Counter()
    by_module = collections.Counter()

    def pack(t):
        if isinstance(t, torch.Tensor) and t.device.type == "cuda":
            st = t.untyped_storage()
            key = st.data_ptr()
            if key not in seen:
                seen.add(key)
                where = stack[-1] if stack else "(outside modules: loss)"
                where = re.sub(r"\.layers\.\d+\.|\.h\.\d+\.|\.layer\.\d+\.", ".L.", where)
                where = re.sub(r"\.layers\.\d+$|\.h\.\d+$|\.layer\.\d+$", ".L", where)
                entries[(where, tuple(t.shape), str(t.dtype).replace("torch.", ""), st.nbytes())] += 1
                by_module[where] += st.nbytes()
        return t

    x = torch.randint(0, config.vocab_size, (case["batch"], case["seq"]), device="cuda")
    amp = case["precision"] == "amp_bf16"
    opt = measure_gpu.make_optimizer(model.parameters(), case["optimizer"])
    torch.cuda.synchronize()
    start = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            loss = model(input_ids=x, labels=x).loss
    after_forward = torch.cuda.memory_allocated()
    peak_forward = torch.cuda.max_memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    loss.backward()
    peak_backward = torch.cuda.max_memory_allocated()
    del loss, opt
    for h in hooks:
        h.remove()
    rows = [{"module": w, "shape": list(s), "dtype": d, "bytes": b, "count": c}
            for (w, s, d, b), c in sorted(entries.items(), key=lambda kv: -kv[0][3] * kv[1])]
    return {"name": case["name"], "start": start, "after_forward": after_forward, "peak_forward": peak_forward,
            "peak_backward": peak_backward, "by_module": dict(by_module.most_common()), "saved": rows,
            "attn_impl": getattr(config, "_attn_implementation", None)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    by_name = {c["name"]: c for c in measure_gpu.CASES}
    out = []
    for n in a.only.split(","):
        try:
            out.append(describe(by_name[n]))
        except Exception as e:  # noqa: BLE001 - record and go on to the next case
            out.append({"name": n, "error": repr(e)})
        torch.cuda.empty_cache()
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
