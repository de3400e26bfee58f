#!/usr/bin/env python3
"""Which aten op holds memory only while it runs (workspaces, temporaries freed before it returns).

For a case of measure_gpu.py, runs the measured step (the second training step, or generate()) under a
TorchDispatchMode that, around every aten op, resets the peak and reads torch.cuda.memory_allocated():
an op's transient is its peak inside minus the larger of the allocated bytes before and after it. The
mode stays active in the autograd engine's threads, so backward ops are seen too. Ops whose transient is
at least --min-mib are listed (phase, op, argument shapes and dtypes, transient, output bytes), with a
summary per op name. Peaks are reset around every op, so this run's own peaks are not measurements.

  python3 op_transients.py --only NAME[,NAME] --out transients.json [--min-mib 8]
"""
import argparse
import collections
import json

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import measure_gpu

MIB = 1 << 20


def describe_args(args):
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append("%s%s" % (str(a.dtype).replace("torch.", ""), list(a.shape)))
        elif isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor):
            out.append("[%d tensors]" % len(a))
    return out[:4]


class Transients(TorchDispatchMode):
    def __init__(self, min_bytes):
        super().__init__()
        self.min_bytes = min_bytes
        self.phase = "forward"
        self.rows = []
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        out = func(*args, **kwargs)
        peak = torch.cuda.max_memory_allocated()
        after = torch.cuda.memory_allocated()
        self.ops += 1
        transient = peak - max(before, after)
        if transient >= self.min_bytes:
            self.rows.append({"phase": self.phase, "op": str(func.overloadpacket.__name__),
                              "overload": str(func), "args": describe_args(args),
                              "transient_bytes": transient, "output_bytes": after - before})
        return out


def run(case, min_bytes):
    torch.manual_seed(0)
    mode = Transients(min_bytes)
    if case["kind"] == "infer":
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[case["dtype"]]
        model, config = measure_gpu.build_hf(case, dtype)
        model.eval()
        x = torch.randint(0, config.vocab_size, (case["batch"], case["context"]), device="cuda")
        mode.phase = "generate"
        with torch.no_grad(), mode:
            model.generate(x, max_new_tokens=case["new_tokens"], min_new_tokens=case["new_tokens"], do_sample=False,
                           pad_token_id=0)
        return mode
    if case["kind"] == "vision":
        import torch.nn.functional as F
        import torchvision
        with torch.device("cuda"):
            model = getattr(torchvision.models, case["arch"])()
        x = torch.randn(case["batch"], 3, case["image"], case["image"], device="cuda")
        y = torch.randint(0, 1000, (case["batch"],), device="cuda")
        forward = lambda: F.cross_entropy(model(x), y)  # noqa: E731
    else:
        pure = case["precision"].startswith("pure_")
        model, config = measure_gpu.build_hf(case, torch.bfloat16 if pure else torch.float32)
        if case["ckpt"] == "full":
            model.gradient_checkpointing_enable()
        x = torch.randint(0, config.vocab_size, (case["batch"], case["seq"]), device="cuda")
        forward = lambda: model(input_ids=x, labels=x).loss  # noqa: E731
    model.train()
    opt = measure_gpu.make_optimizer(model.parameters(), case["optimizer"])
    amp = case["precision"] == "amp_bf16"
    for record in (False, True):
        if record:
            torch.cuda.synchronize()
            mode.__enter__()
        mode.phase = "forward"
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            loss = forward()
        mode.phase = "backward"
        loss.backward()
        mode.phase = "optimizer"
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss
        if record:
            mode.__exit__(None, None, None)
    return mode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--min-mib", type=float, default=8)
    a = ap.parse_args()
    by_name = {c["name"]: c for c in measure_gpu.CASES}
    result = {}
    for name in a.only.split(","):
        mode = run(by_name[name], int(a.min_mib * MIB))
        summary = collections.defaultdict(lambda: {"count": 0, "max_transient_bytes": 0})
        for r in mode.rows:
            s = summary[r["phase"] + " " + r["op"]]
            s["count"] += 1
            s["max_transient_bytes"] = max(s["max_transient_bytes"], r["transient_bytes"])
        result[name] = {"ops_seen": mode.ops, "min_bytes": int(a.min_mib * MIB), "summary": summary,
                        "rows": mode.rows[:400], "rows_total": len(mode.rows)}
        print(name, mode.ops, "ops,", len(mode.rows), "with transients", flush=True)
        for k, s in sorted(summary.items(), key=lambda kv: -kv[1]["max_transient_bytes"])[:8]:
            print("   %-50s x%-4d max %.1f MiB" % (k, s["count"], s["max_transient_bytes"] / MIB), flush=True)
        del mode
        torch.cuda.empty_cache()
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
