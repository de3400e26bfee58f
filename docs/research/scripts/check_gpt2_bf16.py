import json, os
D = {r["id"]: r for r in json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../tests/data/ground-truth/cpu_traced_dev.json")))}
L, h, a, f, V, P = 12, 768, 12, 3072, 50257, 124439808
Vh = V * h
def act_amp(b, s):
    c = 1 if b > 1 else 0
    blk = 24*b*s*h + 10*b*s*f + 6*b*a*s*s + 16*b*s + 26 + 2*(4*h*h + 2*h*f)
    return L*blk + 8*s + 8*b*s*h + 8*b*s + 2*b*s*h + 2*Vh + 4*b*(s-1)*V + c*8*b*(s-1) + 8
def act_pure(b, s):
    c = 1 if b > 1 else 0
    blk = 20*b*s*h + 10*b*s*f + 6*b*a*s*s + 8*b*s + 26
    return L*blk + 8*s + 6*b*s*h + 4*b*s + 2*b*(s-1)*V + c*8*b*(s-1) + 6
def x(v, m): return f"{v - m:>10}"
for cid, r in D.items():
    if not cid.startswith("cpu-gpt2-b") or "bf16" not in cid: continue
    dd = r["detail"]; b, s = r["train"]["batch"], r["train"]["seq"]; c = 1 if b > 1 else 0
    st = dd["s2_start"]
    if "amp" in cid:
        A = act_amp(b, s)
        pf = st + A + 2*b*s*V + c*2*b*(s-1)*V + 4*b*(s-1)*V + 4*b*s*h + L*2*(5*h+f)
        p1 = st + A + 8*b*(s-1)*V - c*8*b*(s-1)
        p2 = st + A - 4*b*(s-1)*V - c*8*b*(s-1) + 2*b*s*V + 2*Vh + 2*b*s*h
        p3 = st + A - 4*b*(s-1)*V - c*8*b*(s-1) + 4*Vh + 2*b*s*h
        p4 = st + 4*(P - Vh) + 12*Vh + 8
    else:
        A = act_pure(b, s)
        pf = st + A + 2*b*s*V + c*2*b*(s-1)*V
        p1 = st + A + 4*b*(s-1)*V - c*8*b*(s-1)
        p2 = st + A - 2*b*(s-1)*V - c*8*b*(s-1) + 2*b*s*V + 2*Vh + 2*b*s*h
        p3 = 0
        p4 = st + 2*(P - Vh) + 6*Vh + 4
    ps = [p1, p2, p3, p4]; pb = max(ps)
    print(f"{cid:<40} act {x(dd['s2_fwd']-st, A)} fwd {x(dd['s2_peak_fwd'], pf)} bwd {x(dd['s2_peak_bwd'], pb)} (p{ps.index(pb)+1}) ", " ".join(f"{(p-pb)/1e6:.1f}" for p in ps))
