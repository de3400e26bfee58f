#!/usr/bin/python3
"""memscale-plan --svg / --svg-batch: the files are well-formed XML and carry the
expected bars, series, reference lines and markers.

    svg_checks.py MEMSCALE_PLAN WORK_DIR
"""
import json, os, re, subprocess, sys
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

# Layout: in every chart the legend keeps clear of the VRAM / budget labels that share the
# column right of the plot, a title fits the chart, and a marker's label stays inside the plot
# (rough widths: 0.56 em per character, 0.62 em in bold, as svg.hpp estimates them).
CHART_WIDTH, PLOT_LEFT, PLOT_RIGHT = 560, 64, 410


def font_px(t, default):
    m = re.search(r"font-size:([\d.]+)px", t.get("style") or "")
    return float(m.group(1)) if m else default


def check_layout(path):
    root = load(path)
    for chart in (g for g in root.iter(NS + "g") if g.get("class") == "chart"):
        legend = [float(t.get("y")) for t in chart.iter(NS + "text") if t.get("class") == "legend"]
        labels = [float(t.get("y")) for g in chart.iter(NS + "g") if g.get("class") == "reference"
                  for t in g.iter(NS + "text")]
        for ly in legend:
            for ry in labels:
                check(abs(ly - ry) >= 12, f"{path}: a legend entry at y {ly} overlaps a reference label at y {ry}")
        for t in chart.iter(NS + "text"):
            if t.get("class") == "title":
                width = len(t.text or "") * 0.62 * font_px(t, 15)
                check(float(t.get("x")) + width <= CHART_WIDTH - 8, f"{path}: title {t.text!r} is wider than the chart")
        for g in (g for g in chart.iter(NS + "g") if g.get("class") == "marker"):
            for t in g.iter(NS + "text"):
                x, width = float(t.get("x")), len(t.text or "") * 0.56 * 11
                lo, hi = (x, x + width) if t.get("text-anchor") == "start" else (x - width, x)
                check(PLOT_LEFT <= lo and hi <= PLOT_RIGHT, f"{path}: marker label {t.text!r} leaves the plot ({lo}-{hi})")


def plan_of(*args):
    r = run(*args, "--json")
    check(r.returncode == 0, f"{args} --json exits 0 ({r.stderr})")
    return json.loads(r.stdout)["plan"] if r.returncode == 0 else {}


for args in (["--model", "gpt2-xl", "--batch", "2", "--seq", "1024", "--gpu", "rtx3060-12gb"],
             ["--model", "gpt2-xl", "--batch", "2", "--seq", "1024", "--gpu", "rtx3090"],
             ["--model", "gpt2", "--batch", "8", "--seq", "1024", "--gpu", "a100-80gb"]):
    bars, cliff = os.path.join(work, "layout-plan.svg"), os.path.join(work, "layout-cliff.svg")
    r = run(*args, "--svg", bars, "--svg-batch", cliff)
    check(r.returncode == 0, f"{args} with pictures exits 0 ({r.stderr})")
    check_layout(bars)
    check_layout(cliff)
    # The pictures say what the plan says: the chosen mode, the largest micro-batch and its mode.
    answer = plan_of(*args)
    caption = [t.text for t in load(bars).iter(NS + "text") if t.text and "chosen:" in t.text]
    check(len(caption) == 1 and caption[0].split("chosen: ")[1].startswith(answer.get("mode") or "nothing"),
          f"{args}: --svg caption {caption} vs the plan's mode {answer.get('mode')}")
    if answer.get("max_micro_batch", 0) == 0:
        check("OOM cliff: not drawn" in r.stdout, f"{args}: no micro-batch fits and the text cliff says so")
        continue
    want = f"max micro-batch {answer.get('max_micro_batch')} ({answer.get('max_micro_batch_mode')})"
    check(want in labels(load(cliff), "marker"), f"{args}: --svg-batch markers {labels(load(cliff), 'marker')}, plan {want}")
    cliff_line = re.search(r"largest micro-batch that fits \((\w+)\): (\d+)", r.stdout)
    check(cliff_line is not None and
          cliff_line.groups() == (answer.get("max_micro_batch_mode"), str(answer.get("max_micro_batch"))),
          f"{args}: text cliff {cliff_line and cliff_line.group(0)} vs {want}")
inf = os.path.join(work, "layout-inference.svg")
r = run("--model", "llama-2-7b", "--inference", "--batch", "4", "--context", "1024", "--new-tokens", "64",
        "--gpu", "rtx3090", "--svg", inf)
check(r.returncode == 0, f"inference --svg exits 0 ({r.stderr})")
check_layout(inf)

# Nothing fits even micro-batch 1: no empty charts; a note says why, and so does the text.
nothing = os.path.join(work, "nothing-cliff.svg")
r = run("--model", "llama-2-70b", "--batch", "1", "--seq", "512", "--gpu", "t4", "--svg-batch", nothing)
check(r.returncode == 0, f"llama-2-70b on a T4 exits 0 ({r.stderr})")
check("OOM cliff: not drawn; no mode fits even micro-batch 1" in r.stdout, "text cliff says why it is not drawn")
root = load(nothing)
check(labels(root, "series") == [], f"no curves where nothing fits: {labels(root, 'series')}")
notes = [g for g in root.iter(NS + "g") if g.get("class") == "note"]
check(len(notes) == 2, f"a note in each panel ({len(notes)})")
# A smallest peak under the budget is refused for its band's upper end, and the text says so
# rather than calling the point estimate "over the budget".
r = run("--model", "llama-3-8b", "--lora", "16", "--lora-targets", "all-linear", "--precision", "pure_bf16",
        "--batch", "1", "--seq", "2048", "--gpu", "rtx4090")
check(r.returncode == 0, f"llama-3-8b LoRA on an RTX 4090 exits 0 ({r.stderr})")
why = re.search(r"the smallest peak, ([0-9.]+) GiB \((\w+)\), (is over|could reach ([0-9.]+) GiB \(the upper end "
                r"of its class's band\), over) the budget of ([0-9.]+) GiB", r.stdout)
check(why is not None, f"the text says why the cliff is not drawn: {r.stdout[-400:]}")
if why:
    peak, budget = float(why.group(1)), float(why.group(5))
    over_by_point = why.group(3) == "is over"
    check(over_by_point == (peak > budget), f"'is over' only when the peak {peak} exceeds the budget {budget}")
    if not over_by_point:
        check(float(why.group(4)) > budget, f"the upper end {why.group(4)} exceeds the budget {budget}")
inf_nothing = os.path.join(work, "nothing-inference-cliff.svg")
r = run("--model", "llama-2-70b", "--inference", "--batch", "4", "--context", "1024", "--new-tokens", "64",
        "--gpu", "t4", "--svg-batch", inf_nothing)
check(r.returncode == 0, f"llama-2-70b inference on a T4 exits 0 ({r.stderr})")
check(labels(load(inf_nothing), "series") == [], "no inference curves where nothing fits")

# A vision run: the plan's bars, and its cliff against micro-batch only (an image, no sequence):
# the points are the vision planner's peaks, so at the run's micro-batch each mode's point is
# that mode's peak in the JSON report; the text report draws the same cliff.
vision_args = ["--model", "resnet50", "--image", "384", "--batch", "64", "--gpu", "rtx3060-12gb"]
vision_bars, vision_cliff = os.path.join(work, "vision-plan.svg"), os.path.join(work, "vision-cliff.svg")
r = run(*vision_args, "--svg", vision_bars, "--svg-batch", vision_cliff)
check(r.returncode == 0, f"vision --svg --svg-batch exits 0 ({r.stderr})")
check("OOM cliff: device peak vs micro-batch (image 384x384)" in r.stdout, "the vision text report draws the cliff")
check_layout(vision_bars)
check_layout(vision_cliff)
root = load(vision_cliff)
check(labels(root, "series") == ["none", "conservative", "balanced", "aggressive"], f"vision series: {labels(root, 'series')}")
check(labels(root, "reference") == ["VRAM", "budget"], f"vision cliff references: {labels(root, 'reference')}")
answer = plan_of(*vision_args)
want = f"max micro-batch {answer.get('max_micro_batch')} ({answer.get('max_micro_batch_mode')})"
check(labels(root, "marker") == [want], f"vision cliff markers {labels(root, 'marker')}, plan {want}")
for g in (g for g in root.iter(NS + "g") if g.get("class") == "series"):
    at_run = [float(c.get("data-y")) for c in g.iter(NS + "circle") if float(c.get("data-x")) == 64]
    peak = [m["peak"] for m in answer.get("modes", []) if m["mode"] == g.get("data-label")]
    check(len(at_run) == 1 and len(peak) == 1 and at_run[0] == peak[0] / (1 << 30),
          f"vision cliff {g.get('data-label')} at micro-batch 64: {at_run} GiB, the plan's {peak}")

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
