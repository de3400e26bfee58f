#!/usr/bin/env python3
"""Which Python line of transformers makes each large block of generate()'s prefill (and first step).

Builds a case of measure_gpu.py with fewer layers, records the caching allocator's history with
Python stacks, runs generate() for two new tokens, and prints every alloc / free of at least
--min-mib with the innermost frame inside transformers (file:line:function) and the innermost frame
overall, as JSON lines on stdout (one object per event).

  python3 alloc_frames.py --case NAME [--layers 2] [--min-mib 1] [--out frames.jsonl]
"""
import argparse
import json
import sys

import torch

import measure_gpu

MIB = 1 << 20


def frame_of(frames, inside):
    for fr in frames or []:
        if inside in fr.get("filename", ""):
            return "%s:%s:%s" % (fr["filename"].split(inside)[-1], fr.get("line"), fr.get("name"))
    return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--new-tokens", type=int, default=2)
    ap.add_argument("--min-mib", type=float, default=1.0)
    ap.add_argument("--out", default="-", help="JSON lines here (- for stdout); a one-line summary then goes to stdout")
    a = ap.parse_args()
    case = dict(next(c for c in measure_gpu.CASES if c["name"] == a.case))
    cfg = dict(case["cfg"])
    for key in ("num_hidden_layers", "n_layer"):
        if key in cfg:
            cfg[key] = a.layers
    case["cfg"] = cfg
    case["new_tokens"] = a.new_tokens
    torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python", max_entries=2_000_000)
    measure_gpu.run_infer(case)
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    live = 0
    sink = sys.stdout if a.out == "-" else open(a.out, "w")
    written = 0
    for e in snap["device_traces"][0]:
        if e["action"] not in ("alloc", "free_completed"):
            continue
        live += e["size"] if e["action"] == "alloc" else -e["size"]
        if e["size"] < a.min_mib * MIB:
            continue
        frames = e.get("frames") or []
        print(json.dumps({"a": "+" if e["action"] == "alloc" else "-", "mib": round(e["size"] / MIB, 3),
                          "addr": e["addr"], "live_mib": round(live / MIB, 1),
                          "hf": frame_of(frames, "transformers/"), "torch": frame_of(frames, "torch/")}), file=sink)
        written += 1
    if a.out != "-":
        sink.close()
        print(json.dumps({"case": a.case, "layers": a.layers, "events": written,
                          "allocated": torch.cuda.max_memory_allocated()}))


if __name__ == "__main__":
    main()
