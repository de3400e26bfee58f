#!/usr/bin/env python3
"""gpt-fast's generate() on the GPU, eager (no torch.compile), random weights: records for memscale.

gpt-fast (pytorch-labs/gpt-fast@32971d3: generate.py, model.py, tokenizer.py) is not a package; put
its three files in a folder and pass it with --gpt-fast. Each case builds gpt-fast's Transformer in
the model dtype on the GPU, then runs generate.generate() with its default sampling (temperature 0.8,
top_k 200), and records the peaks from model construction on: max_memory_allocated,
max_memory_reserved and nvidia-smi.

  python3 gpt_fast_gpu.py --gpt-fast DIR --out records.json
"""
import argparse
import json
import subprocess
import sys

import torch

CASES = [
    # name, layers, dim, heads, kv heads, ffn, batch, prompt, new tokens, dtype
    ("gptfast-llama-mha-l8-h2048-b8-c1024-n32-bf16", 8, 2048, 16, 16, 5632, 8, 1024, 32, "bf16"),
    ("gptfast-llama-gqa-l8-h2048-b8-c2048-n32-bf16", 8, 2048, 16, 4, 5632, 8, 2048, 32, "bf16"),
    ("gptfast-llama-mha-l4-h1024-b4-c512-n32-fp32", 4, 1024, 16, 16, 2816, 4, 512, 32, "fp32"),
]


def smi_used_bytes():
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout
    import os
    for line in out.splitlines():
        pid, used = [x.strip() for x in line.split(",")]
        if int(pid) == os.getpid():
            return int(used) << 20
    return None


def run(case, gpt_fast_dir, history_dir=""):
    sys.path.insert(0, gpt_fast_dir)
    import generate as gf
    from model import ModelArgs, Transformer
    name, layers, dim, heads, kv, ffn, batch, prompt_len, new, dt = case
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[dt]
    if history_dir:  # every allocator event from model construction on (measure_gpu.write_history's format)
        torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python",
                                                 max_entries=4_000_000)
    torch.manual_seed(0)
    args = ModelArgs(block_size=4096, vocab_size=32000, n_layer=layers, n_head=heads, dim=dim, intermediate_size=ffn,
                     n_local_heads=kv)
    torch.set_default_dtype(dtype)
    with torch.device("cuda"):
        model = Transformer(args)
    torch.set_default_dtype(torch.float32)
    model.eval()
    params = sum(p.numel() for p in model.parameters())
    prompt = torch.randint(0, 32000, (prompt_len,), device="cuda", dtype=torch.int)
    with torch.no_grad():
        out = gf.generate(model, prompt, new, batch, interactive=False, draft_model=None, temperature=0.8, top_k=200)
    torch.cuda.synchronize()
    seq = out[0] if isinstance(out, tuple) else out
    if history_dir:
        import measure_gpu
        measure_gpu.write_history({"name": name}, history_dir, frames=True)
    hf_config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": dim,
                 "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv,
                 "intermediate_size": ffn, "vocab_size": 32000, "max_position_embeddings": 4096,
                 "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False, "hidden_act": "silu"}
    common = {"source": "tools/gpu-measure/gpt_fast_gpu.py", "device": "h100-80gb",
              "model": {"hf_config": hf_config, "params": params, "impl": "gpt-fast"},
              "infer": {"batch": batch, "context": prompt_len, "new_tokens": new, "dtype": dt, "kv_dtype": dt,
                        "kv_cache": "static", "attention": "sdpa", "weights": dt},
              "software": {"torch": torch.__version__.split("+")[0], "cuda": torch.version.cuda,
                           "gpt-fast": "32971d3"},
              "notes": "gpt-fast generate.generate() without torch.compile, sampling temperature 0.8 top_k 200, random "
                       "weights built in the model dtype on the GPU; peaks from model construction on (weights included); "
                       "generated %d tokens" % (seq.shape[-1] - prompt_len)}
    stats = torch.cuda.memory_stats()
    values = {"allocated": ("max_memory_allocated", torch.cuda.max_memory_allocated()),
              "reserved": ("max_memory_reserved", torch.cuda.max_memory_reserved()),
              "smi": ("nvidia-smi", smi_used_bytes())}
    return [dict(common, id="h100-%s-%s" % (name, k), measure=m, measured_bytes=v,
                 detail={"num_alloc_retries": stats.get("num_alloc_retries"),
                         "segments": stats.get("segment.all.peak")})
            for k, (m, v) in values.items() if v is not None]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpt-fast", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--case", default="")
    ap.add_argument("--history", default="", help="with --case: folder for the allocator history (.json.gz)")
    a = ap.parse_args()
    if a.case:
        print(json.dumps(run(next(c for c in CASES if c[0] == a.case), a.gpt_fast, a.history)))
        return
    records = []
    for c in CASES:
        p = subprocess.run([sys.executable, __file__, "--gpt-fast", a.gpt_fast, "--out", a.out, "--case", c[0]],
                           capture_output=True, text=True, timeout=240)
        if p.returncode != 0:
            print(c[0], "FAILED", p.stderr[-1500:], flush=True)
            continue
        recs = json.loads(p.stdout.strip().splitlines()[-1])
        records += recs
        print(c[0], [r["measured_bytes"] for r in recs], flush=True)
    with open(a.out, "w") as f:
        json.dump(records, f, indent=1)


if __name__ == "__main__":
    main()
