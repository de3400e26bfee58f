"""Enumerate tensors saved for backward, attributed to (module, aten op), deduped by storage.
Usage: /usr/bin/python3 saved.py MODEL LAYERS B S [prec] [ckpt]
"""
import sys, math, collections, os
import torch, torch.nn as nn, torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tools", "trace"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "data", "ground-truth"))
import measure as M  # the harness's models only; the tracing is tracer's
import tracer

LAST = ["?"]
class OpSpy(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        LAST[0] = str(func).replace("aten.", "").replace(".default", "")
        return func(*args, **(kwargs or {}))

def build(name, layers):
    Vo = int(os.environ.get("VOCAB", "0"))
    tracer.reset_seed()
    if Vo and name == "gpt2": return M.GPT2LMHead(layers, 768, 12, vocab=Vo)
    if Vo and name == "llama": return M.LlamaForCausalLM(layers=layers, vocab=Vo)
    if name == "gpt2": return M.GPT2LMHead(layers, 768, 12)
    if name == "bert": return M.BertForMaskedLM(layers=layers)
    if name == "llama": return M.LlamaForCausalLM(layers=layers)

def run(name, layers, B, S, prec="fp32", ckpt=False, verbose=True):
    model = build(name, layers)
    if prec == "pure_bf16": model = model.to(torch.bfloat16)
    model.train(); model.ckpt = ckpt
    sptr = tracer.storage_key
    static = {sptr(p)[0] for p in model.parameters()} | {sptr(b)[0] for b in model.buffers()}
    V = int(os.environ.get("VOCAB", "0")) or {"gpt2": 50257, "bert": 30522, "llama": 32000}[name]
    tracer.reset_seed(1)
    x = torch.randint(0, V, (B, S)); y = x.clone()
    if name == "bert":
        y = torch.full((B, S), -100, dtype=torch.long); m = torch.rand(B, S) < 0.15; m[:, 0] = True; y[m] = x[m]
    static |= {sptr(x)[0], sptr(y)[0]}
    stack = tracer.track_module_path(model, keep=lambda n: n and (n.count(".") <= 1 or not ckpt), bottom="top")
    recs = []
    def pack(t):
        p, nb = sptr(t)
        recs.append(dict(mod=stack[-1], op=LAST[0], shape=tuple(t.shape), dtype=str(t.dtype).replace("torch.", ""), ptr=p, nb=nb,
                         static=p in static, base_numel=t.storage().size()))
        return t
    with tracer.saving_tensors(pack), OpSpy():
        if prec == "amp_bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(x, y)
        else:
            loss = model(x, y)
    cons = collections.defaultdict(list)
    todo = [loss.grad_fn]; vis = set()
    while todo:
        n = todo.pop()
        if n is None or n in vis: continue
        vis.add(n)
        for a in dir(n):
            if a.startswith("_saved_"):
                try: v = getattr(n, a)
                except Exception: continue
                vs = v if isinstance(v, (tuple, list)) else [v]
                for t in vs:
                    if torch.is_tensor(t): cons[sptr(t)[0]].append(n.name().replace("Backward0", "") + "." + a[7:])
        for nn_, _ in n.next_functions: todo.append(nn_)
    seen = set(); tot = collections.OrderedDict()
    for r in recs:
        new = (not r["static"]) and r["ptr"] not in seen
        if new: seen.add(r["ptr"])
        r["new"] = new
        key = r["mod"]
        tot[key] = tot.get(key, 0) + (r["nb"] if new else 0)
        if verbose and not r['static']:
            print(f"{r['mod']:<28} {r['op']:<28} {str(r['shape']):<22} {r['dtype']:<8} {'NEW' if new else ('static' if r['static'] else 'dup'):<6} {r['nb'] if new else '':<10} {','.join(sorted(set(cons.get(r['ptr'], ['-']))))[:90]}")
    total = sum(tot.values())
    return loss, recs, tot, total

if __name__ == "__main__":
    name, L, B, S = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    prec = sys.argv[5] if len(sys.argv) > 5 else "fp32"
    ckpt = len(sys.argv) > 6 and sys.argv[6] == "ckpt"
    loss, recs, tot, total = run(name, L, B, S, prec, ckpt)
    print("--- per module new bytes")
    for k, v in tot.items(): print(f"{k:<28} {v}")
    print("TOTAL saved non-static", total)
