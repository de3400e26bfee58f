"""Measure one fwd+bwd(+opt) with the harness method and attribute peaks to ops.
/usr/bin/python3 meas.py MODEL LAYERS B S [prec] [ckpt|none] [opt|none] [steps]
"""
import sys, gc, bisect, collections
import os, torch, torch.nn.functional as F
from saved import build  # puts tools/trace on sys.path
import tracer

class Trace(tracer.Tracker):
    """The tracker plus the ops running at each instant, to name what holds a peak."""
    def read(self, results):
        super().read(results)
        self.ops = [(e.start_us(), e.start_us() + e.duration_us(), e.name()) for e in results.events() if e.name() != "[memory]"]
    def argpeak(self, a, b):
        i0, i1 = self.pos[a], self.pos[b]
        seg = self.cum[i0:i1 + 1]
        k = max(range(len(seg)), key=lambda j: seg[j]) + i0
        return k
    def ops_at(self, k):
        t = self.at_us[k]
        c = [(e - s, n) for s, e, n in self.ops if s <= t <= e]
        c.sort()
        return [n for _, n in c[:4]]

def main(name, L, B, S, prec="fp32", ckpt="none", optn="none", steps=1, verbose=True):
    V = int(os.environ.get("VOCAB", "0")) or {"gpt2": 50257, "bert": 30522, "llama": 32000}[name]
    res = {}
    with Trace() as tr:
        model = build(name, L)
        if prec == "pure_bf16": model = model.to(torch.bfloat16)
        model.train(); model.ckpt = ckpt == "ckpt"
        opt = tracer.make_opt(optn, model.parameters()) if optn != "none" else None
        tracer.reset_seed(1)
        x = torch.randint(0, V, (B, S)); y = x.clone()
        if name == "bert":
            y = torch.full((B, S), -100, dtype=torch.long); m = torch.rand(B, S) < 0.15; m[:, 0] = True; y[m] = x[m]; del m
        tr.mark("inputs")
        for st in range(1, steps + 1):
            tr.mark(f"s{st}_start")
            if prec == "amp_bf16":
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = model(x, y)
            else:
                loss = model(x, y)
            tr.mark(f"s{st}_fwd")
            loss.backward()
            tr.mark(f"s{st}_bwd")
            if opt is not None:
                opt.step()
            tr.mark(f"s{st}_opt")
            if opt is not None: opt.zero_grad(set_to_none=True)
            else: model.zero_grad(set_to_none=True)
            del loss
            tr.mark(f"s{st}_end")
        P = sum(p.numel() * p.element_size() for p in model.parameters())
        del model, opt, x, y
    st = steps
    s0 = tr.live(f"s{st}_start")
    res = dict(params=P, start=s0, act=tr.live(f"s{st}_fwd") - s0,
               peak_fwd=tr.peak(f"s{st}_start", f"s{st}_fwd") - s0,
               peak_bwd=tr.peak(f"s{st}_fwd", f"s{st}_bwd") - s0,
               after_bwd=tr.live(f"s{st}_bwd") - s0,
               peak_opt=tr.peak(f"s{st}_bwd", f"s{st}_opt") - s0)
    for ph, (a, b) in dict(fwd=(f"s{st}_start", f"s{st}_fwd"), bwd=(f"s{st}_fwd", f"s{st}_bwd"), opt=(f"s{st}_bwd", f"s{st}_opt")).items():
        k = tr.argpeak(a, b)
        res[f"at_{ph}"] = tr.ops_at(k)
        res[f"ev_{ph}"] = tr.deltas[max(0, k - 3):k + 3]
    res["tr"] = tr
    if verbose:
        for k, v in res.items():
            if k != "tr": print(k, v)
    return res

if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], int(a[1]), int(a[2]), int(a[3]), *(a[4:7]), *( [int(a[7])] if len(a) > 7 else []))
