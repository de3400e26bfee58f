#!/usr/bin/env python3
"""One device session's measurements, run side by side on one GPU (each case in its own process).

Jobs: allocator histories, the context probe, runs capped with set_per_process_memory_fraction,
runs under PYTORCH_CUDA_ALLOC_CONF options and the 2025-26 families of measure_gpu.py. Each job
declares the GPU memory it may use; jobs start while the declared sums stay under --gpu-gib, so the
processes never compete for memory (every job is capped at what it declares, and a job whose
allocator had to retry says so in num_alloc_retries). Results are appended to OUT/results.jsonl as
they come; histories are packed into OUT/histories.tar.

  python3 batch.py --out DIR [--set first|diagnosis] [--budget-s 360] [--gpu-gib 74] [--dry]
"""
import argparse
import json
import os
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MEASURE = os.path.join(HERE, "measure_gpu.py")
PROBE = os.path.join(HERE, "context_probe.py")
DATA = os.path.join(HERE, "..", "..", "docs", "data")
GIB = 1 << 30


def measured(case, measure):
    """A measured figure of an earlier H100 run (docs/data), in bytes."""
    suffix = {"allocated": "-allocated", "reserved": "-reserved"}[measure]
    for f in ("gpu_measured_h100.json", "gpu_heldout_h100.json"):
        for r in json.load(open(os.path.join(DATA, f))):
            if r["id"] == "h100-" + case + suffix:
                return r["measured_bytes"]
    raise KeyError(case)


def jobs():
    out = []
    known = lambda case: measured(case, "reserved") / GIB + 1.5  # noqa: E731
    # Allocator histories of the runs the replay misses most (docs/allocator.md).
    out.append({"id": "history-heldout-llama-small-b2-s2048-fp32-sdpa", "case": "heldout-llama-small-b2-s2048-fp32-sdpa",
                "history": True, "frames": True, "gib": known("heldout-llama-small-b2-s2048-fp32-sdpa")})
    out.append({"id": "history-gpt2-b8-s1024-fp32-sdpa-ckpt", "case": "gpt2-b8-s1024-fp32-sdpa-ckpt", "history": True,
                "gib": known("gpt2-b8-s1024-fp32-sdpa-ckpt")})
    out.append({"id": "history-resnet50-b64-224-amp_bf16-adamw", "case": "resnet50-b64-224-amp_bf16-adamw",
                "history": True, "gib": known("resnet50-b64-224-amp_bf16-adamw")})
    out.append({"id": "history-infer-llama2-7b-bf16-b8-c2048-n128", "case": "infer-llama2-7b-bf16-b8-c2048-n128",
                "history": True, "gib": known("infer-llama2-7b-bf16-b8-c2048-n128")})
    for loading in ("LAZY", "EAGER"):
        out.append({"id": "context-" + loading.lower(), "probe": loading, "gib": 2})
    # Caps between the allocated and the reserved peak: where does the real run stop fitting?
    for case in ("llama-small-b8-s1024-fp32-sdpa", "heldout-qwen2-0.5b-b8-s1024-pure_bf16-sdpa-sgd_momentum",
                 "resnet50-b64-224-fp32-sgd_momentum", "qwen2-0.5b-b4-s1024-amp_bf16-sdpa"):
        a, r = measured(case, "allocated"), measured(case, "reserved")
        for share in (0.1, 0.3, 0.5, 0.7, 0.9):
            cap = int(a + share * (r - a))
            out.append({"id": "cap%02d-%s" % (share * 100, case), "case": case, "cap_bytes": cap,
                        "gib": cap / GIB + 1.5})
    # Allocator options people set.
    for case, conf in (("llama-small-b8-s1024-fp32-sdpa", "expandable_segments:True"),
                       ("heldout-qwen2-0.5b-b8-s1024-pure_bf16-sdpa-sgd_momentum", "expandable_segments:True"),
                       ("infer-llama2-7b-bf16-b8-c2048-n128", "expandable_segments:True"),
                       ("heldout-qwen2-0.5b-b8-s1024-pure_bf16-sdpa-sgd_momentum", "max_split_size_mb:256"),
                       ("qwen2-0.5b-b4-s1024-amp_bf16-sdpa", "roundup_power2_divisions:4")):
        out.append({"id": "conf-" + conf.split(":")[0] + "-" + case, "case": case, "alloc_conf": conf,
                    "gib": known(case)})
    # New families: declared memory is a generous guess, enforced as a cap (a run that reaches it retries
    # or fails and says so).
    family_gib = {"qwen3-": 30, "gemma3-": 24, "llama3.2-": 40, "qwen3moe-": 26, "olmoe-": 28, "gpt_oss-": 32,
                  "phi3-": 32, "granite-": 30, "gpt_bigcode-": 32, "cohere2-": 30, "starcoder2-": 28, "glm4-": 28,
                  "olmo2-": 24, "phimoe-": 16, "qwen2moe-": 22}
    names = subprocess.run([sys.executable, MEASURE, "--list"], capture_output=True, text=True, check=True).stdout
    for name in names.split():
        if name.startswith("family-"):
            gib = next((g for prefix, g in family_gib.items() if name.startswith("family-" + prefix)), 30)
            out.append({"id": name, "case": name, "cap_bytes": int((gib - 1) * GIB), "safety_cap": True, "gib": gib})
    return out


def diagnosis_jobs():
    """The second pass: where the first pass's families and caps were off, what made the blocks."""
    out = []
    for name, gib in (("family-gpt_bigcode-santacoder-b2-s1024-amp_bf16-sdpa", 32),
                      ("family-qwen2moe-l4-e16-b2-s1024-pure_bf16-sdpa", 22),
                      ("family-olmoe-l4-b2-s1024-pure_bf16-sdpa", 28),
                      ("family-qwen3moe-l4-e32-b2-s1024-pure_bf16-sdpa", 26),
                      ("family-gemma3-1b-b2-s1024-pure_bf16-sdpa", 24),
                      ("family-phi3-l8-b2-s2048-amp_bf16-sdpa", 32)):
        out.append({"id": "history-" + name, "case": name, "history": True, "frames": True,
                    "cap_bytes": int((gib - 1) * GIB), "safety_cap": True, "gib": gib})
    out.append({"id": "saved-tensors", "saved": ["family-gemma3-1b-b2-s1024-pure_bf16-sdpa",
                                                 "family-gpt_oss-l4-e8-b2-s1024-pure_bf16-eager",
                                                 "family-qwen3moe-l4-e32-b2-s1024-pure_bf16-sdpa",
                                                 "family-qwen3-0.6b-b4-s1024-amp_bf16-sdpa"], "gib": 34})
    for case in ("llama-small-b8-s1024-fp32-sdpa", "qwen2-0.5b-b4-s1024-amp_bf16-sdpa"):
        r = measured(case, "reserved")
        for share in (1.0, 1.02, 1.05):
            cap = int(r * share)
            out.append({"id": "capR%03d-%s" % (share * 100, case), "case": case, "cap_bytes": cap,
                        "gib": cap / GIB + 1.5})
    return out


def layer_kinds_jobs():
    """The third pass: the layer kinds first modelled from CPU traces, and which ops hold workspaces."""
    out = []
    family_gib = {"deepseek_v2": 24, "deepseek_v3": 22, "llama4_text": 30, "jamba": 30, "falcon_h1": 48,
                  "mamba2": 40, "falcon_mamba": 24}
    names = subprocess.run([sys.executable, MEASURE, "--list"], capture_output=True, text=True, check=True).stdout
    for name in names.split():
        gib = next((g for prefix, g in family_gib.items() if name.startswith("family-" + prefix + "-")), 0)
        if gib:
            out.append({"id": name, "case": name, "history": True, "cap_bytes": int((gib - 1) * GIB),
                        "safety_cap": True, "gib": gib})
    # Runs under their measured reserved peak by more than 5% (docs/allocator.md): which ops hold memory
    # only while they run.
    for case in ("heldout-llama-small-b2-s2048-fp32-sdpa", "resnet50-b64-224-amp_bf16-adamw",
                 "resnet50-b64-224-fp32-sgd_momentum", "family-starcoder2-l8-b2-s2048-amp_bf16-sdpa",
                 "infer-tinyllama-bf16-b16-c1024-n256", "vit_b_16-b32-224-amp_bf16-adamw"):
        out.append({"id": "transients-" + case, "transients": case, "gib": 30 if "starcoder2" in case else 16})
    return out


def caches_jobs():
    """The fourth pass: generate() with other caches and families, and the replay's largest generate() misses."""
    out = []
    for name, gib in (("infer-gpt2-fp32-b4-c512-n64", 12), ("infer-tinyllama-bf16-b16-c1024-n256", 16),
                      ("infer-llama2-7b-bf16-b8-c2048-n128-static", 40),
                      ("infer-tinyllama-bf16-b16-c1024-n256-static", 16), ("infer-gemma3-1b-bf16-b4-c2048-n64", 16),
                      ("infer-gpt_oss-l4-e8-bf16-b4-c1024-n64", 20)):
        out.append({"id": "history-" + name, "case": name, "history": True, "frames": True,
                    "cap_bytes": int((gib - 1) * GIB), "safety_cap": True, "gib": gib})
    for name in GPT_FAST_CASES:
        out.append({"id": "history-" + name, "gpt_fast": name, "gib": 24})
    out.append({"id": "transients-family-falcon_h1-0.5b-b2-s1024-amp_bf16-sdpa-torchpath",
                "transients": "family-falcon_h1-0.5b-b2-s1024-amp_bf16-sdpa-torchpath", "gib": 48})
    return out


def padded_jobs():
    """The fifth pass: padded prompts, the experts interface's MoE families, and the first runs' prompts re-checked."""
    out = []
    for name, gib in (("infer-tinyllama-bf16-b16-c1024-n256-padded", 16), ("infer-gpt2-fp32-b4-c512-n64-padded", 12),
                      ("infer-llama2-7b-bf16-b4-c2048-n64-padded", 24), ("infer-olmoe-l4-bf16-b4-c1024-n64", 12),
                      ("infer-qwen2moe-l4-e16-bf16-b4-c1024-n64", 12), ("infer-mixtral-l2-bf16-b4-c1024-n64", 16)):
        out.append({"id": "history-" + name, "case": name, "history": True, "frames": True,
                    "cap_bytes": int((gib - 1) * GIB), "safety_cap": True, "gib": gib})
    for name, gib in (("infer-tinyllama-bf16-b16-c1024-n256-unpadded", 16),
                      ("infer-llama2-7b-bf16-b8-c2048-n128-unpadded", 40)):
        out.append({"id": name, "case": name, "gib": gib})
    # The first sessions' prompts drew token 0 (the pad token) by chance: which of them were padded?
    for name, gib in (("infer-gpt2-fp32-b4-c512-n64", 8), ("infer-tinyllama-bf16-b16-c1024-n256", 12),
                      ("infer-llama2-7b-bf16-b1-c1024-n64", 16), ("infer-llama2-7b-bf16-b8-c2048-n128", 40),
                      ("infer-deepseek_v2-lite-l4-e16-bf16-b4-c1024-n64", 16), ("infer-gemma3-1b-bf16-b4-c2048-n64", 12),
                      ("infer-gpt_oss-l4-e8-bf16-b4-c1024-n64", 16)):
        out.append({"id": "recheck-" + name, "case": name, "gib": gib})
    for name, layers in (("infer-llama2-7b-bf16-b4-c2048-n64-padded", 2), ("infer-tinyllama-bf16-b16-c1024-n256-unpadded", 2),
                         ("infer-gpt2-fp32-b4-c512-n64-padded", 2), ("infer-olmoe-l4-bf16-b4-c1024-n64", 2)):
        out.append({"id": "frames-" + name, "frames_of": name, "layers": layers, "gib": 16})
    return out


def padded_heldout_jobs():
    """The sixth pass: padded prompts of other families and padded training batches, held out."""
    out = []
    for name, gib in (("infer-qwen2-0.5b-bf16-b8-c1024-n64-padded", 12), ("infer-llama3.2-1b-bf16-b8-c2048-n64-padded", 16),
                      ("infer-phi3-mini-bf16-b4-c2048-n64-padded", 20)):
        out.append({"id": "history-" + name, "case": name, "history": True, "frames": True,
                    "cap_bytes": int((gib - 1) * GIB), "safety_cap": True, "gib": gib})
    for name, gib in (("infer-qwen2-0.5b-bf16-b8-c1024-n64-unpadded", 12), ("padded-qwen2-0.5b-b4-s1024-amp_bf16-sdpa", 24),
                      ("padded-llama3.2-1b-b2-s2048-pure_bf16-sdpa", 24), ("padded-llama3.2-1b-b2-s2048-pure_bf16-eager", 30)):
        out.append({"id": name, "case": name, "gib": gib})
    return out


def generate_heldout_jobs():
    """The seventh pass: generate() of families never measured in generate(), for the generate() band, held out."""
    names = (("infer-qwen3-0.6b-bf16-b8-c2048-n64", 12), ("infer-qwen3-0.6b-fp16-b16-c1024-n128-padded", 12),
             ("infer-olmo2-l8-bf16-b4-c2048-n64", 16), ("infer-glm4-l8-bf16-b4-c2048-n64", 16),
             ("infer-gemma2-2b-bf16-b4-c2048-n64", 16), ("infer-starcoder2-3b-bf16-b4-c2048-n64", 16))
    return [{"id": "history-" + n, "case": n, "history": True, "frames": True, "cap_bytes": int((g - 1) * GIB),
             "safety_cap": True, "gib": g} for n, g in names]


# gpt_fast_gpu.py's cases; gpt-fast's generate.py, model.py and tokenizer.py in GPT_FAST_DIR (not committed).
GPT_FAST_CASES = ("gptfast-llama-mha-l8-h2048-b8-c1024-n32-bf16", "gptfast-llama-gqa-l8-h2048-b8-c2048-n32-bf16",
                  "gptfast-llama-mha-l4-h1024-b4-c512-n32-fp32")
GPT_FAST_DIR = os.path.join(HERE, "..", "..", ".cache", "gpt-fast")


def command(job, hist_dir, dry):
    if dry:
        return [sys.executable, "-c", "import json,time,random;time.sleep(random.random()*0.3);"
                "print(json.dumps({'name':%r,'allocated':1,'reserved':2,'smi':3}))" % job["id"]], {}
    env = {}
    if job.get("alloc_conf"):
        env["PYTORCH_CUDA_ALLOC_CONF"] = job["alloc_conf"]
    if job.get("transients"):
        return [sys.executable, os.path.join(HERE, "op_transients.py"), "--only", job["transients"],
                "--out", os.path.join(job["out_dir"], "transients-%s.json" % job["transients"])], env
    if job.get("saved"):
        return [sys.executable, os.path.join(HERE, "saved_tensors.py"), "--only", ",".join(job["saved"]),
                "--out", os.path.join(job["out_dir"], "saved_tensors.json")], env
    if job.get("frames_of"):
        return [sys.executable, os.path.join(HERE, "alloc_frames.py"), "--case", job["frames_of"], "--layers",
                str(job["layers"]), "--out", os.path.join(job["out_dir"], "frames-%s.jsonl" % job["frames_of"])], env
    if job.get("gpt_fast"):
        return [sys.executable, os.path.join(HERE, "gpt_fast_gpu.py"), "--gpt-fast", GPT_FAST_DIR, "--out", "-",
                "--case", job["gpt_fast"], "--history", hist_dir], env
    if job.get("probe"):
        env["CUDA_MODULE_LOADING"] = job["probe"]
        return [sys.executable, PROBE], env
    cmd = [sys.executable, MEASURE, "--case", job["case"]]
    if job.get("history"):
        cmd += ["--history", hist_dir]
    if job.get("frames"):
        cmd += ["--frames"]
    if job.get("cap_bytes"):
        cmd += ["--cap-bytes", str(job["cap_bytes"])]
    return cmd, env


def pack_histories(hist_dir, out_dir):
    names = sorted(n for n in os.listdir(hist_dir) if n.endswith(".json.gz")) if os.path.isdir(hist_dir) else []
    if names:
        with tarfile.open(os.path.join(out_dir, "histories.tar"), "w") as t:
            for n in names:
                t.add(os.path.join(hist_dir, n), arcname=n)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=360)
    ap.add_argument("--gpu-gib", type=float, default=74)
    ap.add_argument("--max-procs", type=int, default=6)
    ap.add_argument("--dry", action="store_true")
    ap.add_argument("--set", choices=("first", "diagnosis", "layer-kinds", "caches", "padded", "padded-heldout", "generate-heldout"), default="first")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    hist_dir = "/tmp/memscale-histories"
    pending = {"first": jobs, "diagnosis": diagnosis_jobs, "layer-kinds": layer_kinds_jobs, "caches": caches_jobs, "padded": padded_jobs, "padded-heldout": padded_heldout_jobs,
               "generate-heldout": generate_heldout_jobs}[a.set]()
    for job in pending:
        job["out_dir"] = a.out
    running = []  # (job, process, start)
    t0 = time.time()
    results = open(os.path.join(a.out, "results.jsonl"), "a")
    print("jobs:", len(pending), flush=True)
    while pending or running:
        for job, proc, start in list(running):
            if proc.poll() is None:
                if time.time() - start > 240:
                    proc.kill()
                continue
            running.remove((job, proc, start))
            logs = os.path.join("/tmp/memscale-batch-logs", job["id"])
            out, err = open(logs + ".out").read(), open(logs + ".err").read()
            line = {"job": job, "rc": proc.returncode, "seconds": round(time.time() - start, 1)}
            try:
                line["result"] = json.loads(out.strip().splitlines()[-1])
            except Exception:  # noqa: BLE001 - keep whatever the child said
                line["stderr"] = err[-2500:]
                line["stdout"] = out[-500:]
            results.write(json.dumps(line) + "\n")
            results.flush()
            r = line.get("result", {})
            if isinstance(r, list):  # gpt_fast_gpu.py prints its records
                r = {rec["id"].rsplit("-", 1)[1]: rec["measured_bytes"] for rec in r}
            print("%6.1f %-70s rc=%s %s" % (time.time() - t0, job["id"], proc.returncode,
                                             {k: r.get(k) for k in ("allocated", "reserved", "smi", "oom")}
                                             if r else line.get("stderr", "")[-300:]), flush=True)
            if job.get("history") or job.get("gpt_fast"):
                pack_histories(hist_dir, a.out)
        used = sum(job["gib"] for job, _, _ in running)
        left = a.budget_s - (time.time() - t0)
        started = False
        for job in list(pending):
            if len(running) >= a.max_procs:
                break
            if used + job["gib"] > a.gpu_gib:
                continue
            if left < 45:
                pending.remove(job)
                results.write(json.dumps({"job": job, "skipped": "time budget"}) + "\n")
                continue
            cmd, env = command(job, hist_dir, a.dry)
            logs = os.path.join("/tmp/memscale-batch-logs", job["id"])
            os.makedirs(os.path.dirname(logs), exist_ok=True)
            proc = subprocess.Popen(cmd, stdout=open(logs + ".out", "w"), stderr=open(logs + ".err", "w"),
                                    env={**os.environ, **env, "PYTHONUNBUFFERED": "1"})
            running.append((job, proc, time.time()))
            pending.remove(job)
            used += job["gib"]
            started = True
        if not started:
            time.sleep(0.5)
        if left < 0 and running:
            for job, proc, _ in running:
                proc.kill()
    results.close()
    print("done in %.0f s" % (time.time() - t0), flush=True)


if __name__ == "__main__":
    main()
