"""Shared pieces of the framework traces (tools/trace/*_cases.py).

Two training steps run inside one Tracker of shared/ground-truth/measure.py; a case's own
`step` function places the phase marks (s{n}_start, _fwd, _bwd, _opt, _end) where its
framework's loop has them, so a framework that keeps tensors across steps (lit-gpt's
`logits`) is traced as it runs. Records follow tests/data/ground-truth/SCHEMA.md; the
`framework` object and the train knobs the framework traces add are documented there.
"""
import gc
import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../shared/ground-truth"))
sys.path.insert(0, "/work/shared/ground-truth")
import measure  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

PHASES = ("start", "fwd", "bwd", "opt", "end")


def storage_bytes(tensors):
    return measure.tensor_bytes([t for t in tensors if t is not None])


def optimizer_state_bytes(opts):
    return storage_bytes([v for o in opts for s in o.state.values() for v in s.values() if torch.is_tensor(v)])


def run_two_steps(build, step):
    """build() -> dict with model, optimizers (list), inputs (list), trainable (list);
    step(ctx, tracker, n) runs training step n and marks its phases; returns the loss."""
    torch.manual_seed(0)
    times = []
    with measure.Tracker() as tr:
        ctx = build()
        tr.mark("built")
        ctx["inputs"] = [t for t in ctx["make_inputs"]()]
        tr.mark("inputs")
        for n in (1, 2):
            t0 = time.time()
            tr.mark(f"s{n}_start")
            loss = step(ctx, tr, n)
            times.append(time.time() - t0)
        model = ctx["model"]
        param_tensors = ctx.get("param_tensors") or list(model.parameters())
        params = storage_bytes(param_tensors)
        buffers = storage_bytes(list(model.buffers()))
        opt = optimizer_state_bytes(ctx["optimizers"])
        grads = ctx.get("grads_step2", 0)
        nparams = ctx.get("param_count") or sum(p.numel() for p in model.parameters())
        ntrain = sum(p.numel() for p in ctx["trainable"])
        inputs = storage_bytes(ctx["inputs"])
        if "cleanup" in ctx:
            ctx["cleanup"]()
        ctx.clear()
        del model, param_tensors
        gc.collect()
    r = dict(built=tr.live("built"), inputs_live=tr.live("inputs"))
    for n in (1, 2):
        for ph in PHASES:
            r[f"s{n}_{ph}"] = tr.live(f"s{n}_{ph}")
        r[f"s{n}_peak"] = tr.peak(f"s{n}_start", f"s{n}_end")
        r[f"s{n}_peak_fwd"] = tr.peak(f"s{n}_start", f"s{n}_fwd")
        r[f"s{n}_peak_bwd"] = tr.peak(f"s{n}_fwd", f"s{n}_bwd")
        r[f"s{n}_peak_opt"] = tr.peak(f"s{n}_bwd", f"s{n}_opt")
    r.update(params_enum=params, buffers_enum=buffers, opt_enum=opt, grads_enum=grads, inputs_bytes=inputs,
             nparams=nparams, trainable=ntrain, end_live=tr.live("__end__"), n_events=tr.n_events,
             step_seconds=times, loss=float(loss))
    return r


def record(case_id, source, model, train, framework, r, notes, software=None):
    sw = {"torch": torch.__version__}
    sw.update(software or {})
    return {
        "id": case_id, "source": source, "measure": "cpu-tensor-peak", "device": "cpu",
        "model": model, "train": train, "framework": framework, "software": sw,
        "measured_bytes": r["s2_peak"], "first_step_peak_bytes": r["s1_peak"], "after_forward_bytes": r["s2_fwd"],
        "components": dict(params=r["params_enum"], grads=r["grads_enum"], optimizer=r["opt_enum"],
                           activations=r["s2_fwd"] - r["s2_start"]),
        "detail": r, "notes": notes,
    }


def main_loop(cases, run_case, default_out):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=default_out)
    ap.add_argument("--only", default=None, help="run the cases whose id contains this text")
    a = ap.parse_args()
    out = json.load(open(a.out)) if os.path.exists(a.out) else []
    ids = {r["id"] for r in out}
    t0 = time.time()
    for c in cases():
        if a.only and a.only not in c["id"]:
            continue
        try:
            rec = run_case(c)
        except Exception:
            traceback.print_exc()
            print("FAIL", c["id"], flush=True)
            continue
        if rec["detail"]["end_live"] != 0:
            print("WARN end_live != 0 for", rec["id"], rec["detail"]["end_live"], flush=True)
        out = [x for x in out if x["id"] != rec["id"]] + [rec]
        ids.add(rec["id"])
        json.dump(out, open(a.out, "w"), indent=1)
        d = rec["detail"]
        print(f"{rec['id']}: peak2 {d['s2_peak']:,} fwd2 {d['s2_fwd']:,} ({time.time() - t0:.0f}s)", flush=True)
        gc.collect()
