import json, os
D = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../tests/data/ground-truth/cpu_traced_dev.json")))
MAXP = {"gpt2": 50257*768, "llama-small": 32000*1024, "bert-base-uncased": 30522*768}
for r in D:
    m = r["model"]["name"] or "llama-small"
    key = [k for k in MAXP if m.startswith(k.split("-")[0])]
    if not key: continue
    mp = MAXP[key[0]]; dd = r["detail"]; o = r["train"]["optimizer"]; fe = "foreach" in r["id"]
    bpe = 2 if "pure_bf16" in r["id"] else 4
    G = dd["grads_enum"]
    tmp = {"adamw": 2*bpe*mp, "adam": 2*bpe*mp, "sgd": 0, "sgd_momentum": 0}[o]
    if fe: tmp = 2*G
    pred2 = dd["s2_bwd"] + tmp
    # step1: state created inside step
    st_state = dd["opt_enum"]
    pred1 = dd["s1_bwd"] + st_state + tmp
    print(f"{r['id']:<44} s2_bwd-st-G {dd['s2_bwd']-dd['s2_start']-G:>4} opt2 {dd['s2_peak_opt']-pred2:>6} opt1 {dd['s1_peak_opt']-pred1:>6}  nparam_t {int((dd['opt_enum']-2*G)/4) if 'adam' in o else ''}")
