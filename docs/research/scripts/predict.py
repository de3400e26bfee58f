"""Closed-form phase peaks for the CPU-traced transformer cases (torch 1.13, measure.py models).
Static part (params+buffers+optimizer state+inputs) is taken as st = s2_start (= enumerated sum, checked);
everything else is formula.  Prints per-case error of s2_peak_fwd/bwd/opt, measured_bytes, first_step_peak_bytes."""
import json, os, statistics
D = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../tests/data/ground-truth/cpu_traced_dev.json")))
CFG = {"gpt2": dict(L=12, h=768, a=12, f=3072, V=50257, P=124439808, tied=True, first=50257*768, prev=0, d=64),
       "llama-small": dict(L=8, h=1024, a=16, f=2816, V=32000, P=155730944, tied=False, first=32000*1024, prev=1024, d=64),
       "bert-base-uncased": dict(L=12, h=768, a=12, f=3072, V=30522, P=109514298, tied=True, first=30522*768, prev=30522, d=64)}

def phases(m, b, s, prec, ckpt, opt, foreach, st, G, state):
    C = CFG[m]; L, h, a, f, V, P, d = C["L"], C["h"], C["a"], C["f"], C["V"], C["P"], C["d"]
    Vh = V * h; c = 1 if b > 1 else 0; bs, bsh, bsf, bas2 = b*s, b*s*h, b*s*f, b*a*s*s
    T = b*(s-1)*V          # shifted-logit elements (causal LMs)
    if m == "gpt2":
        if prec == "fp32":
            blk = 40*bsh + 20*bsf + 12*bas2 + 16*bs + 28
            if ckpt: blk = 4*bsh + 5056
            A = L*blk + 8*s + 12*bsh + 8*bs + 4*T + c*8*b*(s-1) + 8
            fwd = A + 4*bs*V + c*4*T
            p1 = A + 8*T - c*8*b*(s-1)
            p2 = A - 4*T - c*8*b*(s-1) + 4*bs*V + 4*Vh + 4*bsh
            p4 = 4*(P - Vh) + 12*Vh + 8
            bwd = [p1, p2, p4]
            if ckpt:   # recompute + backward of block 0 (last block processed)
                Gblk = 4*(12*h*h + 13*h)
                Bfull = 40*bsh + 20*bsf + 12*bas2 + 16*bs + 28
                bwd.append((G - 4*1024*h - Gblk) + (8*bsh + 5056 + 8*s) + Bfull + 4*f*h + 4*h + 8*bsf - 4*bsh + 8)
        elif prec == "amp_bf16":
            blk = 24*bsh + 10*bsf + 6*bas2 + 16*bs + 26 + 2*(4*h*h + 2*h*f)
            A = L*blk + 8*s + 10*bsh + 8*bs + 2*Vh + 4*T + c*8*b*(s-1) + 8
            fwd = A + 2*bs*V + c*2*T + 4*T + 4*bsh + L*2*(5*h + f)
            bwd = [A + 8*T - c*8*b*(s-1), A - 4*T - c*8*b*(s-1) + 4*Vh + 2*bsh, 4*(P - Vh) + 12*Vh + 8]
        else:  # pure_bf16
            blk = 20*bsh + 10*bsf + 6*bas2 + 8*bs + 26
            A = L*blk + 8*s + 6*bsh + 4*bs + 2*T + c*8*b*(s-1) + 4
            fwd = A + 2*bs*V + c*2*T
            bwd = [A + 4*T - c*8*b*(s-1), A - 2*T - c*8*b*(s-1) + 2*bs*V + 2*Vh + 2*bsh, 2*(P - Vh) + 6*Vh + 4]
    elif m == "llama-small":
        blk = 48*bsh + 16*bsf + 4*bas2 + 8*bs + 8
        extra = 0
        if ckpt: blk = 4*bsh + 5056; extra = 4*s*s
        A = L*blk + 8*s*d + 16*bsh + 4*bs + 4*T + c*8*b*(s-1) + 8 + extra
        fwd = A + 4*bs*V + c*4*T + 4*s*s - extra + 6*s*d + 8*s
        bwd = [A + 8*T - c*8*b*(s-1), A - c*8*b*(s-1) - 4*T + 4*bs*V + 4*Vh + 4*bsh, G + 4*bsh + 8]
    else:  # bert
        A = L*(40*bsh + 8*bsf + 12*bas2 + 16*bs + 8) + 24*bsh + 16*bs + 4*bs*V + 8
        fwd = A + 4*bs*V + 8*bs
        bwd = [A + 8*bs*V, A + 4*Vh + 4*bsh, 4*(P - Vh) + 12*Vh + 8]
    bpe = 2 if prec == "pure_bf16" else 4
    lossb = 2 if prec == "pure_bf16" else 4
    if foreach: tmp = 2*G + 12
    elif opt in ("adamw", "adam"): tmp = bpe*(2*C["first"] + C["prev"]) + (10 if bpe == 2 else 12)
    else: tmp = 292
    return A, fwd, max(bwd), G + lossb, tmp

rows = []
for r in D:
    m = [k for k in CFG if (r["model"]["name"] or "llama-small").startswith(k.split("-")[0])]
    if not m: continue
    m = m[0]; t = r["train"]; dd = r["detail"]
    b, s, prec, ckpt, opt, fe = t["batch"], t["seq"], t["precision"], t["checkpointing"] == "full", t["optimizer"], "foreach" in r["id"]
    G = dd["grads_enum"]; state = dd["opt_enum"]
    st2 = dd["params_enum"] + dd["buffers_enum"] + state + dd["inputs_bytes"]; assert st2 == dd["s2_start"]
    st1 = st2 - state
    A, fwd, bwd, after_bwd, tmp = phases(m, b, s, prec, ckpt, opt, fe, st2, G, state)
    pf2, pb2, po2 = st2 + fwd, st2 + bwd, st2 + after_bwd + tmp
    pf1, pb1 = st1 + fwd, st1 + bwd
    po1 = st1 + after_bwd + state + (tmp if opt != "sgd_momentum" else 0)
    meas2, meas1 = r["measured_bytes"], r["first_step_peak_bytes"]
    pred2, pred1 = max(pf2, pb2, po2), max(pf1, pb1, po1)
    ph = ["fwd", "bwd", "opt"][[pf2, pb2, po2].index(pred2)]
    e = lambda p, q: (p - q)
    rows.append((r["id"], e(st2 + A, dd["s2_fwd"]), e(pf2, dd["s2_peak_fwd"]), e(pb2, dd["s2_peak_bwd"]), e(po2, dd["s2_peak_opt"]),
                 meas2, e(pred2, meas2), ph, meas1, e(pred1, meas1)))
print(f"| case | after_fwd err (B) | s2_peak_fwd err (B) | s2_peak_bwd err (B) | s2_peak_opt err (B) | measured_bytes | err (B) | peak phase | first_step_peak | err (B) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for x in rows:
    print(f"| {x[0]} | {x[1]} | {x[2]} | {x[3]} | {x[4]} | {x[5]:,} | {x[6]} | {x[7]} | {x[8]:,} | {x[9]} |")
rel = [abs(x[6]) / x[5] for x in rows] + [abs(x[9]) / x[8] for x in rows]
print(f"\n{len(rows)} cases; max |rel err| measured/first_step = {max(rel):.2e}; max abs err = {max(abs(x[6]) for x in rows)} / {max(abs(x[9]) for x in rows)} B")
