import json, os
D = {r["id"]: r for r in json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../tests/data/ground-truth/cpu_traced_dev.json")))}
L, h, a, f, V, d = 8, 1024, 16, 2816, 32000, 64
P = 155730944; Vh = V * h
def act(b, s):
    c = 1 if b > 1 else 0
    blk = 48*b*s*h + 16*b*s*f + 4*b*a*s*s + 8*b*s + 8
    head = 8*s*d + 16*b*s*h + 4*b*s + 4*b*(s-1)*V + c*8*b*(s-1) + 8
    return L*blk + head
for cid, r in D.items():
    if not cid.startswith("cpu-llama-small-b") or "bf16" in cid or "ckpt" in cid: continue
    dd = r["detail"]; b, s = r["train"]["batch"], r["train"]["seq"]; c = 1 if b > 1 else 0
    st = dd["s2_start"]; A = act(b, s)
    pf = st + A + 4*b*s*V + c*4*b*(s-1)*V + 4*s*s + 6*s*d + 8*s
    p1 = st + A + 8*b*(s-1)*V - c*8*b*(s-1)
    p2 = st + A - c*8*b*(s-1) - 4*b*(s-1)*V + 4*b*s*V + 4*Vh + 4*b*s*h
    p4 = st + 4*P + 8
    pb = max(p1, p2, p4)
    print(f"{cid:<40} act {dd['s2_fwd']-st - A:>8} fwd {dd['s2_peak_fwd']-pf:>8} bwd {dd['s2_peak_bwd']-pb:>10} ({['p1','p2','p4'][[p1,p2,p4].index(pb)]}) p1-p2 {(p1-p2)/1e6:8.1f}MB")
