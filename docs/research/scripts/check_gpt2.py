import json, os
D = {r["id"]: r for r in json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../tests/data/ground-truth/cpu_traced_dev.json")))}
L, h, a, f, V, P = 12, 768, 12, 3072, 50257, 124439808
Vh = V * h
def act(b, s):
    blk = 40*b*s*h + 20*b*s*f + 12*b*a*s*s + 16*b*s + 28
    head = 8*s + 12*b*s*h + 8*b*s + 4*b*(s-1)*V + 8*b*(s-1) + 8
    return L*blk + head
for cid, r in D.items():
    if not cid.startswith("cpu-gpt2-b") or "bf16" in cid or "ckpt" in cid: continue
    d = r["detail"]; b, s = r["train"]["batch"], r["train"]["seq"]
    st = d["s2_start"]; A = act(b, s)
    pf = st + A + 4*b*s*V + 4*b*(s-1)*V
    p1 = st + A + 8*b*(s-1)*V - 8*b*(s-1)
    p2 = st + A - 4*b*(s-1)*V + 4*b*s*V + 4*Vh + 4*b*s*h
    p4 = st + 4*(P - Vh) + 12*Vh + 8
    pb = max(p1, p2, p4)
    print(f"{cid:<34} act {d['s2_fwd']-st - A:>8} fwd {d['s2_peak_fwd']-pf:>8} bwd {d['s2_peak_bwd']-pb:>10} ({['p1','p2','p4'][[p1,p2,p4].index(pb)]}) p1-p2 {(p1-p2)/1e6:8.1f}MB")
print("--- ckpt")
for cid, r in D.items():
    if not cid.startswith("cpu-gpt2-b") or "ckpt" not in cid: continue
    d = r["detail"]; b, s = r["train"]["batch"], r["train"]["seq"]; c = 1 if b > 1 else 0
    st = d["s2_start"]
    A = L*(4*b*s*h + 5056) + 8*s + 12*b*s*h + 8*b*s + 4*b*(s-1)*V + c*8*b*(s-1) + 8
    pf = st + A + 4*b*s*V + c*4*b*(s-1)*V
    p1 = st + A + 8*b*(s-1)*V - c*8*b*(s-1)
    p2 = st + A - 4*b*(s-1)*V - c*8*b*(s-1) + 4*b*s*V + 4*Vh + 4*b*s*h
    p4 = st + 4*(P - Vh) + 12*Vh + 8
    ps = [p1, p2, p4]; pb = max(ps)
    print(f"{cid:<34} act {d['s2_fwd']-st - A:>8} fwd {d['s2_peak_fwd']-pf:>8} bwd {d['s2_peak_bwd']-pb:>10} (p{ps.index(pb)+1})", " ".join(f"{(p-pb)/1e6:.1f}" for p in ps), "peak", r["measured_bytes"], max(d["s2_peak_fwd"], d["s2_peak_bwd"], d["s2_peak_opt"]))
