#!/usr/bin/python3
"""memscale-plan --svg / --svg-batch (issue 12): the files are well-formed XML and carry the
expected bars, series, reference lines and markers.

    svg_checks.py MEMSCALE_PLAN WORK_DIR
"""
import os, subprocess, sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"
plan, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def run(*args):
    return subprocess.run([plan, *args], capture_output=True, text=True)


def labels(root, cls):
    return [g.get("data-label") for g in root.iter(NS + "g") if g.get("class") == cls]


def load(path):
    tree = ET.parse(path)  # raises on malformed XML
    root = tree.getroot()
    check(root.tag == NS + "svg", f"{path}: root is <svg>")
    return root


# Training plan: one stacked bar per mode with every component labelled.
bars_svg, cliff_svg = os.path.join(work, "plan.svg"), os.path.join(work, "cliff.svg")
r = run("--model", "gpt2-xl", "--batch", "2", "--seq", "1024", "--gpu", "rtx3090", "--svg", bars_svg,
        "--svg-batch", cliff_svg)
check(r.returncode == 0, f"plan with --svg exits 0 (got {r.returncode}: {r.stderr})")
check("OOM cliff" in r.stdout and "largest micro-batch that fits" in r.stdout, "text report has the OOM cliff")
root = load(bars_svg)
bars = labels(root, "bar")
check([b.split()[0] for b in bars] == ["none", "conservative", "balanced", "aggressive"], f"bars: {bars}")
for g in root.iter(NS + "g"):
    if g.get("class") == "bar":
        segs = [s.get("data-label") for s in g.iter(NS + "rect") if s.get("class") == "segment"]
        for want in ["parameters", "gradients", "optimizer", "activations", "workspace"]:
            check(want in segs, f"bar {g.get('data-label')!r} has a {want} segment")
check(labels(root, "reference") == ["VRAM", "budget"], f"references: {labels(root, 'reference')}")
texts = "".join(t.text or "" for t in root.iter(NS + "text"))
check("activations" in texts and "parameters" in texts, "segments are labelled in text")

# The OOM cliff: a series per mode in both panels, VRAM and budget lines, the largest micro-batch marked.
root = load(cliff_svg)
series = labels(root, "series")
check(series == ["none", "conservative", "balanced", "aggressive"] * 2, f"series: {series}")
check(labels(root, "reference") == ["VRAM", "budget"] * 2, "cliff has VRAM and budget in both panels")
markers = labels(root, "marker")
check(any(m.startswith("max micro-batch ") for m in markers), f"largest micro-batch marked: {markers}")
check(any(m.startswith("max seq ") for m in markers), f"largest sequence marked: {markers}")
for g in root.iter(NS + "g"):
    if g.get("class") == "series":
        check(len(list(g.iter(NS + "circle"))) >= 4, f"series {g.get('data-label')} has points")

# Inference: prefill and decode bars; the cliff against batch and context.
inf_svg, inf_cliff = os.path.join(work, "inference.svg"), os.path.join(work, "inference-cliff.svg")
r = run("--model", "llama-2-7b", "--inference", "--batch", "1", "--context", "4000", "--new-tokens", "96",
        "--gpu", "rtx3090", "--svg", inf_svg, "--svg-batch", inf_cliff)
check(r.returncode == 0, f"--inference with --svg exits 0 (got {r.returncode}: {r.stderr})")
root = load(inf_svg)
check(labels(root, "bar") == ["prefill", "decode"], f"inference bars: {labels(root, 'bar')}")
for g in root.iter(NS + "g"):
    if g.get("class") == "bar":
        segs = [s.get("data-label") for s in g.iter(NS + "rect") if s.get("class") == "segment"]
        check("KV cache" in segs and "weights" in segs, f"inference bar segments: {segs}")
root = load(inf_cliff)
check(any(m.startswith("max batch ") for m in labels(root, "marker")), "inference cliff marks the largest batch")
check(any(m.startswith("max context ") for m in labels(root, "marker")), "inference cliff marks the largest context")

# Usage errors: the cliff needs a GPU; an unwritable path is reported.
r = run("--svg-batch", os.path.join(work, "x.svg"))
check(r.returncode == 2 and "--svg-batch needs --gpu" in r.stderr, f"--svg-batch without --gpu: {r.stderr}")
r = run("--gpu", "rtx3090", "--svg", os.path.join(work, "no-such-dir", "x.svg"))
check(r.returncode == 2 and "--svg cannot write" in r.stderr, f"unwritable --svg: {r.stderr}")
r = run("--context", "100")
check(r.returncode == 2 and "--context needs --inference" in r.stderr, f"--context alone: {r.stderr}")

for f in failures:
    print("FAILED:", f)
print(f"{'ok' if not failures else 'FAILED'}: svg checks")
sys.exit(1 if failures else 0)
