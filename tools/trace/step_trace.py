"""Shared pieces of the framework traces (tools/trace/*_cases.py).

Two training steps run inside one tracer.Tracker (the harness's method); a case's own
`step` function places all the phase marks (s{n}_start, _fwd, _bwd, _opt, _end) where its
framework's loop has them, so a framework that keeps tensors across steps (lit-gpt's
`logits`) is traced as it runs. Records follow tests/data/ground-truth/SCHEMA.md; the
`framework` object and the train knobs the framework traces add are documented there.
"""
import gc
import time
import traceback

import torch

import tracer

torch.set_num_threads(1)


def run_two_steps(build, step, windows=()):
    """build() -> dict with model, optimizers (list), inputs (list), trainable (list);
    step(ctx, tracker, n) runs training step n and marks its phases (tracer.train_step where the
    framework's step has the harness's shape); returns the loss. windows: (name, start mark, end
    mark) of other moments step() marks; the reading's `name` is their peak."""
    tracer.reset_seed()
    times = []
    with tracer.Tracker() as tr:
        ctx = build()
        tr.mark("built")
        ctx["inputs"] = [t for t in ctx["make_inputs"]()]
        tr.mark("inputs")
        for n in (1, 2):
            t0 = time.time()
            loss = step(ctx, tr, n)
            times.append(time.time() - t0)
        model = ctx["model"]
        param_tensors = ctx.get("param_tensors") or list(model.parameters())
        params = tracer.tensor_bytes(param_tensors)
        buffers = tracer.tensor_bytes(list(model.buffers()))
        opt = tracer.optimizer_state_bytes(ctx["optimizers"])
        grads = ctx.get("grads_step2", 0)
        nparams = ctx.get("param_count") or tracer.parameter_count(model)
        ntrain = sum(p.numel() for p in ctx["trainable"])
        inputs = tracer.tensor_bytes(ctx["inputs"])
        if "cleanup" in ctx:
            ctx["cleanup"]()
        ctx.clear()
        del model, param_tensors
        gc.collect()
    r = dict(built=tr.live("built"), inputs_live=tr.live("inputs"))
    r.update(tracer.step_readings(tr))
    r.update({name: tr.peak(a, b) for name, a, b in windows})
    r.update(params_enum=params, buffers_enum=buffers, opt_enum=opt, grads_enum=grads, inputs_bytes=inputs,
             nparams=nparams, trainable=ntrain, end_live=tr.live("__end__"), n_events=tr.n_events,
             step_seconds=times, loss=float(loss))
    return r


def record(case_id, source, model, train, framework, r, notes, software=None):
    sw = {"torch": torch.__version__}
    sw.update(software or {})
    return {
        **tracer.record_head(case_id, source),
        "model": model, "train": train, "framework": framework, "software": sw,
        **tracer.peak_fields(r),
        "components": tracer.components(r),
        "detail": r, "notes": notes,
    }


def main_loop(cases, run_case, default_out):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=default_out)
    ap.add_argument("--only", default=None, help="run the cases whose id contains this text")
    a = ap.parse_args()
    out = tracer.read_records(a.out)
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
        tracer.write_records(a.out, out)
        d = rec["detail"]
        print(f"{rec['id']}: peak2 {d['s2_peak']:,} fwd2 {d['s2_fwd']:,} ({time.time() - t0:.0f}s)", flush=True)
        gc.collect()
