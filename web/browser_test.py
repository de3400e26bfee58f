#!/usr/bin/env python3
"""The web calculator in a real browser, against memscale-plan (docs/web.md).

    web/browser_test.py SITE_DIR MEMSCALE_PLAN [--screenshot FILE.png] [--screenshot-generate FILE.png]
                        [--screenshot-vision FILE.png] [--chromium PATH]

Serves SITE_DIR (web/build.sh's output) on 127.0.0.1 for the length of the test, drives
headless Chromium through the DevTools protocol (web/cdp.py), and for each run below sets
the page's controls as a user would, then checks that
  * the page's plan.json download is byte for byte memscale-plan --run run.json --json,
    where run.json is the page's own run.json download;
  * every figure shown (each element with data-path) holds the value at that path of
    memscale-plan's JSON, and shows it formatted from that value (GiB, counts, percents);
  * the OOM cliff drawn (training on a GPU, transformer or vision model) holds the points of
    memscale-plan --run run.json --svg-batch's micro-batch panel, value for value;
  * an invalid setting shows memscale-plan's own error line;
  * every slider move is answered; how fast (computed, redrawn, laid out) is printed beside
    the target of one frame, 16 ms, and not judged: a timing on a shared CI machine measures
    the machine, so speed is a measurement (docs/web.md), never a pass/fail.
Exit status 0 when everything holds; failures are listed on stderr.
"""

import argparse
import decimal
import functools
import http.server
import json
import os
import xml.etree.ElementTree as ET
import statistics
import subprocess
import sys
import tempfile
import threading

sys.dont_write_bytecode = True  # keep web/ free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cdp  # noqa: E402

FRAME_MS = 16.0
GIB = 1 << 30
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read_config(name):
    with open(os.path.join(REPO, "tests", "data", "hf_configs", name)) as f:
        return f.read()


# generate() on a GPU: the verdict, the phases' peaks, the allocator's band (docs/web.md).
GENERATE_RUN = {"task": "generate", "gen-loop": "hf", "model": "mistral-7b", "batch": 2, "context": 4096, "new-tokens": 256,
                "weights": "bnb-nf4", "kv-cache": "quantized", "kv-bits": "int2", "gen-attention": "flash",
                "gpu": "a100-40gb", "headroom": 0.15}

# A vision training step on a GPU: the plan, the peaks, the allocator section, the software (docs/web.md).
VISION_RUN = {"task": "train", "model": "resnet50", "image": "384", "channels-last": False, "batch": 64, "grad-accum": 1,
              "precision": "fp32", "optimizer": "adamw", "optimizer-impl": "foreach", "checkpointing": "none",
              "paged-optimizer": False, "sw-torch": "", "gpu": "rtx3060-12gb", "headroom": 0.15}

# The "Kernels and batches" and torchtitan controls as the page opens: a run that sets some of
# them starts from these, since the controls keep their values from one run to the next.
KERNEL_DEFAULTS = {"framework": "hf", "paged-optimizer": False, "sac-policy": "none", "data-parallel": 8, "tune-ranks": 1, "liger": False, "packing": "none",
                   "example-tokens": "", "padded": False, "sw-transformers": "", "sw-torch": "", "sw-bitsandbytes": "", "sw-cuda": "",
                   "use-reentrant": "", "alloc-conf": "", "context-memory": ""}


def kernels(**controls):
    """KERNEL_DEFAULTS, then `controls` (underscores for dashes) in the order given."""
    return {**KERNEL_DEFAULTS, **{k.replace("_", "-"): v for k, v in controls.items()}}


# Each run: the controls in the order a user sets them (id -> value).
RUNS = [
    ("the page as it opens", {}),
    ("gpt2-large full fine-tune on an RTX 3090 (does not fit as asked)",
     {"model": "gpt2-large", "batch": 32, "seq": 1024, "precision": "fp32", "optimizer": "adamw", "gpu": "rtx3090"}),
    ("llama-2-7b QLoRA on all linear layers, 24 GiB typed in, headroom 0.12",
     {"model": "llama-2-7b", "target": "qlora", "lora-rank": 16, "lora-targets": "all-linear", "double-quant": True,
      "precision": "amp_bf16", "checkpointing": "full", "batch": 8, "seq": 1024, "gpu": "__custom",
      "gpu-memory": 24, "headroom": 0.12}),
    ("Qwen2.5-0.5B config.json pasted, LoRA on an A100 80GB, eager attention",
     {"config": read_config("Qwen--Qwen2.5-0.5B.json"), "target": "lora", "lora-rank": 8, "lora-targets": "q,k,v,o_proj",
      "precision": "pure_bf16", "attention": "eager", "optimizer": "adamw_8bit", "batch": 16, "seq": 2048,
      "gpu": "a100-80gb", "headroom": 0.1}),
    ("llama-2-7b LoRA under torchtune 0.6.1 (chunked loss, adapters in bf16) on an RTX 4090",
     {"model": "llama-2-7b", "framework": "torchtune", "target": "lora", "lora-rank": 8, "lora-targets": "q,v",
      "precision": "pure_bf16", "checkpointing": "full", "batch": 2, "seq": 2048, "gpu": "rtx4090"}),
    ("mistral-7b without a GPU (estimate only), SGD, selective checkpointing, dropout off",
     {"model": "mistral-7b", "target": "full", "gpu": "", "optimizer": "sgd_momentum", "checkpointing": "selective", "dropout": False,
      "batch": 2, "seq": 4096, "grad-accum": 8}),
    ("llama-3-8b under torchtitan: FSDP2 over 8 ranks, the per-op checkpointing policy, on an H100",
     kernels(model="llama-3-8b", target="full", grad_accum=1, framework="torchtitan", data_parallel=8, precision="pure_bf16",
             sac_policy="op", batch=1, seq=4096, gpu="h100-80gb")),
    ("llama-3-8b under torchtune's full_finetune_distributed: FSDP2 over 4 GPUs, bf16 shards, on an H100",
     kernels(model="llama-3-8b", target="full", grad_accum=1, framework="torchtune", tune_ranks=4, precision="pure_bf16",
             checkpointing="full", batch=2, seq=4096, gpu="h100-80gb")),
    ("llama-2-7b LoRA with Liger's kernels (use_liger_kernel) on an A100 80GB",
     kernels(model="llama-2-7b", target="lora", lora_targets="q,v", precision="amp_bf16", checkpointing="none",
             liger=True, batch=4, seq=2048, gpu="a100-80gb")),
    ("mistral-7b LoRA, padding-free rows of 8 examples of 700 tokens, flash attention",
     kernels(model="mistral-7b", target="lora", precision="pure_bf16", attention="flash", packing="padding_free",
             example_tokens=700, batch=8, seq=2048, gpu="a100-40gb")),
    ("llama-2-7b LoRA under transformers 4.46 and torch 2.3, SDPA, on an RTX 4090",
     kernels(model="llama-2-7b", target="lora", attention="sdpa", sw_transformers="4.46", sw_torch="2.3",
             batch=4, seq=1024, gpu="rtx4090")),
    ("llama-2-7b LoRA under transformers 4.46 with reentrant checkpointing chosen, on an RTX 4090",
     kernels(model="llama-2-7b", target="lora", checkpointing="full", use_reentrant="true", sw_transformers="4.46",
             batch=4, seq=1024, gpu="rtx4090")),
    ("llama-2-7b full fine-tune with bitsandbytes' paged AdamW 8-bit on an H100",
     kernels(model="llama-2-7b", target="full", optimizer="adamw_8bit", paged_optimizer=True, precision="pure_bf16",
             checkpointing="full", attention="flash", batch=2, seq=2048, gpu="h100-80gb")),
    # Without a GPU: the plan's aggressive mode switches to flash attention, which a padded batch refuses.
    ("llama-2-7b LoRA, a padded batch under SDPA, without a GPU",
     kernels(model="llama-2-7b", target="lora", attention="sdpa", padded=True, batch=4, seq=1024, gpu="")),
    # generate(): the page's run.json is an "infer" document, its plan.json memscale-plan --inference's report.
    ("generate(): mistral-7b, nf4 weights, an int2 quantized cache, on an A100 40GB",
     GENERATE_RUN),
    # The software stack applies to generate() too: transformers 4.32's tuple cache.
    ("generate(): llama-2-13b in fp16 under transformers 4.32 (tuple caches), batch 16, on an A100 80GB",
     {"task": "generate", "gen-loop": "hf", "model": "llama-2-13b", "weights": "fp16", "kv-cache": "dynamic", "kv-dtype": "",
      "gen-attention": "sdpa", "sw-transformers": "4.32", "batch": 16, "context": 512, "new-tokens": 256,
      "gpu": "a100-80gb", "headroom": 0.15}),
    ("generate(): llama-2-7b under gpt-fast's generate.py, int4 weights in groups of 64, on an RTX 4090",
     {"task": "generate", "model": "llama-2-7b", "gen-loop": "gpt-fast", "sw-transformers": "", "weights": "gptfast-int4", "group-size": 64,
      "kv-dtype": "", "gen-attention": "sdpa", "batch": 2, "context": 1024, "new-tokens": 128, "gpu": "rtx4090",
      "headroom": 0.15}),
    # A vision model: the page's run.json is a vision document (model, run.image), its plan.json the vision report.
    ("vision: resnet50 at 384x384, batch 64, on an RTX 3060 12GB",
     VISION_RUN),
    ("vision: timm eva02_base_patch14_448 (its own 448 input), amp_bf16, checkpointed stages, on an A100 40GB",
     {"task": "train", "model": "timm/eva02_base_patch14_448", "batch": 16, "grad-accum": 1, "precision": "amp_bf16",
      "optimizer": "adamw", "checkpointing": "full", "gpu": "a100-40gb", "headroom": 0.12}),
    # The software stack's torch applies to a vision run (SDPA's kernels, the optimizer's defaults, the cuBLAS workspace).
    ("vision: vit_b_16 under torch 2.1, amp_bf16, on an RTX 4090",
     {"task": "train", "model": "vit_b_16", "image": "224", "channels-last": False, "batch": 32, "precision": "amp_bf16",
      "optimizer": "adamw", "checkpointing": "none", "sw-torch": "2.1", "gpu": "rtx4090", "headroom": 0.15}),
    ("vision: convnext_tiny channels_last at 256x320 without a GPU, 8-bit AdamW",
     {"task": "train", "model": "convnext_tiny", "image": "256x320", "channels-last": True, "batch": 32,
      "precision": "amp_fp16", "optimizer": "adamw_8bit", "checkpointing": "none", "sw-torch": "", "gpu": ""}),
    # The allocator's options, a measured context and the whole stack (bitsandbytes, CUDA) reach the
    # replay and are echoed: the allocator section names PYTORCH_CUDA_ALLOC_CONF and the context's source.
    ("llama-3-8b LoRA r16 all-linear, pure bf16, 1 x 2048 on an RTX 4090: expandable segments, a 700 MiB context, CUDA 11.6",
     kernels(task="train", model="llama-3-8b", target="lora", lora_rank=16, lora_targets="all-linear", precision="pure_bf16",
             checkpointing="none", attention="flash", batch=1, seq=2048, grad_accum=1, sw_bitsandbytes="0.43.2", sw_cuda="11.6",
             alloc_conf="expandable_segments:True", context_memory=700, gpu="rtx4090", headroom=0.15)),
    ("generate(): llama-2-7b with max_split_size_mb:256 and a 650 MiB context, on an RTX 4090",
     {"task": "generate", "gen-loop": "hf", "model": "llama-2-7b", "weights": "bf16", "kv-cache": "dynamic", "kv-dtype": "",
      "gen-attention": "sdpa", "sw-transformers": "", "sw-torch": "", "sw-cuda": "", "alloc-conf": "max_split_size_mb:256",
      "context-memory": 650, "batch": 4, "context": 1024, "new-tokens": 128, "gpu": "rtx4090", "headroom": 0.15}),
]

# The run of the screenshot (docs/pictures/web-calculator.png): a mode is needed, and chosen.
SCREENSHOT_RUN = {"model": "gpt2-xl", "precision": "amp_bf16", "batch": 8, "seq": 1024, "gpu": "rtx4090"}

# Settings memscale-plan refuses: the page shows the same line.
INVALID = [
    ("LoRA on a module gpt2 does not have",
     kernels(task="train", model="gpt2", target="lora", lora_rank=8, lora_targets="q,vv", gpu="rtx4090")),
    ("an allocator option PyTorch does not accept",
     kernels(task="train", model="gpt2", target="full", gpu="rtx4090", alloc_conf="expandable_segments:maybe")),
    ("Liger on gpt2 (a family Liger does not patch)",
     kernels(task="train", model="gpt2", target="full", liger=True, gpu="rtx4090")),
    ("torchtitan with gradient accumulation (not modelled under its FSDP2)",
     kernels(task="train", model="llama-3-8b", target="full", grad_accum=4, framework="torchtitan", data_parallel=2,
             precision="pure_bf16", gpu="h100-80gb")),
    ("torchtitan on one rank (its FSDP2 needs more than one)",
     kernels(task="train", model="llama-3-8b", target="full", grad_accum=1, framework="torchtitan", data_parallel=1,
             precision="pure_bf16", gpu="h100-80gb")),
    ("a vision image under 32 pixels",
     {"task": "train", "model": "resnet50", "image": "16", "gpu": "rtx4090"}),
    ("a CUDA vision run under torch 1.13 (cuDNN's v7 API, not modelled)",
     {"task": "train", "model": "resnet50", "image": "224", "sw-torch": "1.13", "gpu": "rtx4090"}),
]

# Sets controls in order, each followed by the event a user's change fires.
SET_CONTROLS = r"""
(async (controls) => {
  for (const [id, value] of controls) {
    const el = document.getElementById(id);
    if (!el) throw new Error('no control #' + id);
    if (el.type === 'checkbox') el.checked = value; else el.value = String(value);
    const kind = (el.tagName === 'SELECT' || el.type === 'checkbox' || el.tagName === 'TEXTAREA') ? 'change' : 'input';
    el.dispatchEvent(new Event(kind, {bubbles: true}));
  }
  return true;
})
"""

# What the page shows: its downloads (fetched from the links), its figures, its error line.
READ_PAGE = r"""
(async () => {
  await new Promise((resolve) => setTimeout(resolve, 0));  // the links are refreshed after the answer
  const text = async (id) => { const a = document.getElementById(id); return (await fetch(a.href)).text(); };
  const error = document.getElementById('error');
  return {
    run: await text('download-run'),
    plan: error.hidden ? await text('download-plan') : null,
    error: error.hidden ? null : error.textContent,
    figures: [...document.querySelectorAll('[data-path]')].map((e) => [e.dataset.path, e.dataset.value, e.textContent]),
    cliff: document.getElementById('cliff').hidden ? null : JSON.parse(document.getElementById('cliff').dataset.cliff),
  };
})()
"""

# Moves a slider through `values`, one move per animation frame; the page's timings of them.
MOVE_SLIDER = r"""
(async (id, values) => {
  const el = document.getElementById(id);
  const before = window.memscaleTimings.length;
  for (const v of values) {
    await new Promise((resolve) => requestAnimationFrame(resolve));
    el.value = String(v);
    el.dispatchEvent(new Event('input', {bubbles: true}));
  }
  return window.memscaleTimings.slice(before);
})
"""


class Failures(list):
    def check(self, ok, message):
        if not ok:
            self.append(message)
        return ok


def at_path(document, path):
    node = document
    for part in path.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def half_up(value, places):
    # JavaScript's toFixed rounds the exact binary value half up (ECMA-262 Number.prototype.toFixed).
    q = decimal.Decimal(1).scaleb(-places)
    return str(decimal.Decimal(value).quantize(q, rounding=decimal.ROUND_HALF_UP))


def shown_as(path, value):
    """How the page writes a report value (app.js: gib, count, percent), or None (shown as is)."""
    last = path.split(".")[-1]
    if path == "run.use_reentrant":
        return "reentrant" if value else "non-reentrant"
    if isinstance(value, bool) or value is None:
        return None
    if last in ("parameters", "trainable_parameters", "max_micro_batch", "parameter_count", "kv_bytes_per_token",
                "max_batch", "max_context", "classes"):
        return f"{value:,}"
    if last in ("low", "high") and ".band." in path:
        return ("+" if value >= 0 else "") + half_up(value * 100, 1) + "%"
    if last == "pressure":
        return half_up(value, 2)
    if last == "transfer_seconds_per_step":
        return half_up(value, 2) + " s"
    if isinstance(value, int):
        return half_up(decimal.Decimal(value) / GIB, 2) + " GiB"
    return None


def check_run(failures, label, page, plan_binary, workdir):
    run_path = os.path.join(workdir, "run.json")
    with open(run_path, "w") as f:
        f.write(page["run"])
    cli = subprocess.run([plan_binary, "--run", run_path, "--json"], capture_output=True, text=True)
    if not failures.check(cli.returncode == 0, f"{label}: memscale-plan refused the page's run.json: {cli.stderr.strip()}"):
        return 0
    if not failures.check(page["error"] is None, f"{label}: the page shows an error: {page['error']}"):
        return 0
    failures.check(page["plan"] == cli.stdout,
                   f"{label}: the page's plan.json differs from memscale-plan --run run.json --json")
    report = json.loads(cli.stdout)
    checked = 0
    for path, value_text, text in page["figures"]:
        value = json.loads(value_text)
        try:
            expected = at_path(report, path)
        except (KeyError, IndexError, TypeError):
            failures.append(f"{label}: the page shows {path}, which memscale-plan's JSON does not have")
            continue
        # JSON.stringify writes 0.0 as 0: numbers compare as numbers, booleans and strings as such.
        same_kind = isinstance(value, bool) == isinstance(expected, bool)
        if not failures.check(value == expected and same_kind,
                              f"{label}: {path} is {value!r} on the page, {expected!r} in memscale-plan's JSON"):
            continue
        shown = shown_as(path, expected)
        want = shown if shown is not None else ("nothing" if expected is None else str(expected))
        failures.check(text == want, f"{label}: {path} reads {text!r} on the page, expected {want!r}")
        checked += 1
    return checked


SVG = "{http://www.w3.org/2000/svg}"


def check_cliff(failures, label, page, plan_binary, workdir):
    """The page's cliff against memscale-plan --svg-batch's micro-batch panel: the same micro-batches
    and, per mode, the same device peaks (the SVG's data-y is GiB written to round-trip)."""
    run_path, svg_path = os.path.join(workdir, "run.json"), os.path.join(workdir, "cliff.svg")
    cli = subprocess.run([plan_binary, "--run", run_path, "--svg-batch", svg_path], capture_output=True, text=True)
    if not failures.check(cli.returncode == 0, f"{label}: memscale-plan --svg-batch failed: {cli.stderr.strip()}"):
        return 0
    charts = [g for g in ET.parse(svg_path).getroot().iter(SVG + "g") if g.get("class") == "chart"]
    panel = [c for c in charts if any((t.text or "").startswith("peak vs micro-batch") for t in c.iter(SVG + "text"))]
    if not failures.check(len(panel) == 1, f"{label}: --svg-batch has {len(panel)} micro-batch panels"):
        return 0
    cliff = page["cliff"]
    series = {g.get("data-label"): [(float(c.get("data-x")), float(c.get("data-y"))) for c in g.iter(SVG + "circle")]
              for g in panel[0].iter(SVG + "g") if g.get("class") == "series"}
    failures.check(sorted(series) == sorted(cliff["peak"]), f"{label}: the cliff's modes {sorted(cliff['peak'])} on the "
                                                           f"page, {sorted(series)} in --svg-batch")
    points = 0
    for mode, peaks in cliff["peak"].items():
        want = [(float(b), p / GIB) for b, p in zip(cliff["micro_batch"], peaks)]
        if failures.check(series.get(mode) == want, f"{label}: the {mode} cliff is {want} on the page, "
                                                    f"{series.get(mode)} in --svg-batch"):
            points += len(want)
    return points


def serve(directory):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".wasm": "application/wasm"}

        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=directory)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site")
    parser.add_argument("memscale_plan")
    parser.add_argument("--screenshot")
    parser.add_argument("--screenshot-generate", help="also a screenshot of the page in generate() mode")
    parser.add_argument("--screenshot-vision", help="also a screenshot of the page with a vision model")
    parser.add_argument("--chromium", default="chromium")
    parser.add_argument("--moves", type=int, default=40, help="slider moves timed per slider")
    args = parser.parse_args()

    failures = Failures()
    server = serve(args.site)
    browser = None
    try:
        browser = cdp.Browser(args.chromium)
        url = f"http://127.0.0.1:{server.server_address[1]}/index.html"
        browser.call("Page.enable")
        browser.call("Page.navigate", url=url)
        browser.wait_for("window.memscaleReady === true", "the page to load its WebAssembly module")
        with tempfile.TemporaryDirectory(prefix="memscale-web-test-") as workdir:
            for label, controls in RUNS:
                browser.evaluate(f"({SET_CONTROLS})({json.dumps(list(controls.items()))})")
                page = browser.evaluate(READ_PAGE)
                # A version typed into the software stack is the run document's, training or generate().
                for name in ("transformers", "torch", "bitsandbytes", "cuda"):
                    typed = controls.get("sw-" + name, "")
                    if typed:
                        written = json.loads(page["run"]).get("software", {}).get(name)
                        failures.check(written == typed, f"{label}: software.{name} is {written!r} in run.json, typed {typed!r}")
                n = check_run(failures, label, page, args.memscale_plan, workdir)
                print(f"ok    {label}: {n} figures equal memscale-plan's" if n else f"FAIL  {label}")
                # A vision run on a GPU draws its cliff as a transformer's does.
                if label.startswith("vision") and controls.get("gpu"):
                    failures.check(page["cliff"] is not None, f"{label}: no OOM cliff on the page")
                # The allocator settings typed are the run document's and are shown as the replay used them.
                for control, field in (("alloc-conf", "alloc_conf"), ("context-memory", "context_memory")):
                    typed = controls.get(control, "")
                    if typed != "":
                        written = json.loads(page["run"]).get(field)
                        want = typed if control == "alloc-conf" else typed * (1 << 20)
                        failures.check(written == want, f"{label}: {field} is {written!r} in run.json, typed {typed!r}")
                        shown = {path for path, _, _ in page["figures"]}
                        path = "allocator.alloc_conf" if control == "alloc-conf" else "allocator.context.source"
                        failures.check(path in shown, f"{label}: the page does not show {path}")
                if n and page["cliff"] is not None:
                    points = check_cliff(failures, label, page, args.memscale_plan, workdir)
                    print(f"ok    {label}: the OOM cliff's {points} points equal memscale-plan --svg-batch's"
                          if points else f"FAIL  {label}: the OOM cliff")

            # An invalid run: the page shows memscale-plan's error line (without its prefix).
            for label, controls in INVALID:
                browser.evaluate(f"({SET_CONTROLS})({json.dumps(list(controls.items()))})")
                page = browser.evaluate(READ_PAGE)
                run_path = os.path.join(workdir, "invalid.json")
                with open(run_path, "w") as f:
                    f.write(page["run"])
                cli = subprocess.run([args.memscale_plan, "--run", run_path, "--json"], capture_output=True, text=True)
                expected = cli.stderr.strip().split(": ", 2)[-1]
                if failures.check(cli.returncode == 2 and page["error"] == expected,
                                  f"invalid run ({label}): the page shows {page['error']!r}, "
                                  f"memscale-plan says {cli.stderr.strip()!r}"):
                    print(f"ok    invalid run ({label}): the page shows memscale-plan's line: {expected}")

            # Speed: the sliders, one move per frame, on a 7B run planned on a GPU.
            browser.evaluate(f"({SET_CONTROLS})({json.dumps([*KERNEL_DEFAULTS.items(), ['lora-targets', 'q,v'], ['model', 'llama-2-7b'], ['target', 'lora'], ['gpu', 'rtx4090'], ['seq', 1024]])})")
            timings = []
            moves = {"batch": [1 + (i * 7) % 64 for i in range(args.moves)],
                     "seq": [256 + 64 * ((i * 5) % 60) for i in range(args.moves)],
                     "headroom": [0.10 + 0.01 * (i % 6) for i in range(args.moves)]}
            for slider, values in moves.items():
                timings += browser.evaluate(f"({MOVE_SLIDER})({json.dumps(slider)}, {json.dumps(values)})")
            worst = max(timings)
            p95 = sorted(timings)[int(0.95 * (len(timings) - 1))]
            print(f"speed: {len(timings)} slider moves answered in median {statistics.median(timings):.2f} ms, "
                  f"p95 {p95:.2f} ms, max {worst:.2f} ms (target: p95 under one frame, {FRAME_MS} ms; measured, not judged)")
            failures.check(len(timings) == 3 * args.moves, f"speed: {len(timings)} answers to {3 * args.moves} moves")

            if args.screenshot:  # a fresh page, one run
                browser.call("Page.navigate", url=url)
                browser.wait_for("window.memscaleReady === true", "the page to load again")
                browser.evaluate(f"({SET_CONTROLS})({json.dumps(list(SCREENSHOT_RUN.items()))})")
                browser.screenshot(args.screenshot, 1400)
                print(f"screenshot: {args.screenshot}")
            if args.screenshot_generate:
                browser.call("Page.navigate", url=url)
                browser.wait_for("window.memscaleReady === true", "the page to load again")
                browser.evaluate(f"({SET_CONTROLS})({json.dumps(list(GENERATE_RUN.items()))})")
                browser.screenshot(args.screenshot_generate, 1400)
                print(f"screenshot: {args.screenshot_generate}")
            if args.screenshot_vision:
                browser.call("Page.navigate", url=url)
                browser.wait_for("window.memscaleReady === true", "the page to load again")
                browser.evaluate(f"({SET_CONTROLS})({json.dumps(list(VISION_RUN.items()))})")
                browser.screenshot(args.screenshot_vision, 1400)
                print(f"screenshot: {args.screenshot_vision}")
    finally:
        if browser is not None:
            browser.close()
        server.shutdown()
        server.server_close()

    for f in failures:
        print("FAIL  " + f, file=sys.stderr)
    print(f"browser test: {'FAILED (' + str(len(failures)) + ')' if failures else 'passed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
