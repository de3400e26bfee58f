import json, os
D = {r["id"]: r for r in json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../tests/data/ground-truth/cpu_traced_dev.json")))}
L, h, a, f, V = 12, 768, 12, 3072, 30522
P = 109514298; Vh = V * h
def act(b, s):
    blk = 40*b*s*h + 8*b*s*f + 12*b*a*s*s + 16*b*s + 8
    return L*blk + 24*b*s*h + 16*b*s + 4*b*s*V + 8
for cid, r in D.items():
    if not cid.startswith("cpu-bert"): continue
    dd = r["detail"]; b, s = r["train"]["batch"], r["train"]["seq"]
    st = dd["s2_start"]; A = act(b, s)
    pf = st + A + 4*b*s*V
    p1 = st + A + 8*b*s*V
    p2 = st + A + 4*Vh + 4*b*s*h
    p4 = st + 4*(P - Vh) + 12*Vh + 8
    pb = max(p1, p2, p4)
    print(f"{cid:<40} act {dd['s2_fwd']-st - A:>8} fwd {dd['s2_peak_fwd']-pf:>8} bwd {dd['s2_peak_bwd']-pb:>10} ({['p1','p2','p4'][[p1,p2,p4].index(pb)]}) p1-p2 {(p1-p2)/1e6:8.1f}MB")
