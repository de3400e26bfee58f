#!/usr/bin/env python3
"""Audit: does every memscale-plan input change the answer, or is it refused, on every path?

    tools/audit/ignored_inputs.py PATH/TO/memscale-plan [--table]

For each path (a base command line: single-GPU training, with a plan, a cluster layout, the
cluster planner, --emit, torchtitan, torchtune and litgpt distributed runs, --inference, a
vision model, a generic checkpoint) and each option (with a value chosen so that a path reading
it must answer differently), runs the base line with and without the option and compares the
figures of --json (every number outside the echo of the input: "run", "software", "framework",
...) and the text report; then each field of a --run document the same way. An input is
  used     the figures or the text differ,
  refused  exit 2 with one line (the message is printed with --table),
  n/a      the options the probe needs are refused on the path already, or
  ignored  neither: the guide's "never an input silently ignored" broken, unless NO_EFFECT
           (DOC_NO_EFFECT) below lists the pair with the reason it cannot matter there.
Exits 1 when an ignored pair is not listed, or a listed reason no pair needs any more; --table
prints every pair's verdict.
"""
import json
import os
import subprocess
import sys
import tempfile

# The base command line of each path; the probes' values differ from its (--batch 16 over 8, ...).
GPT2 = ["--model", "gpt2", "--batch", "8", "--seq", "512"]
LLAMA = ["--model", "llama-2-7b", "--batch", "2", "--seq", "512"]
PATHS = {
    "train": GPT2,
    "train+gpu": GPT2 + ["--gpu", "a100-80gb"],
    "train-llama": LLAMA + ["--precision", "pure_bf16"],
    "cluster": GPT2 + ["--gpus", "8", "--strategy", "zero3"],
    "planner": GPT2 + ["--gpus", "8", "--gpu", "a100-80gb"],
    "emit": GPT2 + ["--gpus", "8", "--strategy", "zero2", "--emit", "deepspeed"],
    "torchtitan": LLAMA + ["--framework", "torchtitan", "--gpus", "8"],
    "torchtune": LLAMA + ["--framework", "torchtune", "--gpus", "8"],
    "litgpt-lora": LLAMA + ["--framework", "litgpt@main", "--gpus", "4", "--lora", "8"],
    "inference": ["--model", "gpt2", "--batch", "8", "--inference"],
    "inference+gpu": ["--model", "gpt2", "--batch", "8", "--inference", "--gpu", "a100-80gb"],
    "vision": ["--model", "resnet50", "--batch", "8"],
    "vision+gpu": ["--model", "resnet50", "--batch", "8", "--gpu", "a100-80gb"],
}  # and "generic": --config of a checkpoint whose model_type no reader knows (written by main)

# Each option: (the options it is probed with, those it needs on every path first). A value
# differs from the default so that a path that reads it answers differently.
OPTIONS = [
    (["--batch", "16"], []),
    (["--seq", "1000"], []),
    (["--target-len", "64"], []),
    (["--precision", "amp_bf16"], []),
    (["--optimizer", "sgd"], []),
    (["--optimizer-impl", "for_loop"], []),
    (["--grad-accum", "4"], []),
    (["--checkpointing", "full"], []),
    (["--use-reentrant", "true"], ["--checkpointing", "full"]),
    (["--sac-policy", "layer:2", "--checkpointing", "selective"], []),
    (["--attention", "eager"], []),
    (["--ssm-kernels", "torch"], []),
    (["--no-dropout"], []),
    (["--use-cache", "on"], []),
    (["--packing", "padding_free"], ["--attention", "flash_attention_2"]),
    (["--padded"], ["--attention", "sdpa"]),
    (["--example-tokens", "64"], ["--attention", "flash_attention_2", "--packing", "padding_free"]),
    (["--framework", "litgpt"], []),
    (["--loss", "chunked"], []),
    (["--liger"], []),
    (["--loss-chunk", "64"], ["--loss", "chunked"]),
    (["--loss-chunks", "4"], ["--loss", "chunked"]),
    (["--paged-optimizer"], []),
    (["--custom-sharded-layers", "tok_embeddings,output"], []),
    (["--optimizer-in-backward"], []),
    (["--offload", "optimizer"], []),
    (["--lora", "8"], []),
    (["--qlora", "8"], []),
    (["--lora-targets", "all-linear"], ["--lora", "8"]),
    (["--lora-alpha", "32"], ["--lora", "8"]),
    (["--qlora-double-quant"], ["--qlora", "8"]),
    (["--lora-dropout", "0"], ["--lora", "8"]),
    (["--lora-variant", "dora"], ["--lora", "8"]),
    (["--adapter-dtype", "base"], ["--precision", "pure_bf16", "--lora", "8"]),
    (["--gpu", "rtx3090"], []),
    (["--gpu-memory", "24GiB"], []),
    (["--headroom", "0.10"], ["--gpu-memory", "24GiB"]),
    (["--alloc-conf", "expandable_segments:True"], []),
    (["--context-memory", "2GiB"], []),
    (["--stack", "torch=2.1"], []),
    (["--stack", "transformers=4.40"], []),
    (["--stack", "bitsandbytes=0.43.1"], []),
    (["--stack", "cuda=11.6"], []),
    (["--stack", "cuda=12.4"], []),
    (["--gpus", "2"], []),
    (["--nodes", "2"], []),
    (["--host-memory", "64GiB"], []),
    (["--strategy", "zero1"], []),
    (["--tp", "2"], []),
    (["--pp", "2"], []),
    (["--cp", "2"], []),
    (["--sp"], ["--tp", "2"]),
    (["--no-sync"], ["--grad-accum", "4"]),
    (["--global-batch", "48"], []),
    (["--ds-precision", "bf16"], ["--precision", "pure_bf16"]),
    (["--emit", "accelerate-fsdp"], []),
    (["--image", "128"], []),
    (["--images", "1"], []),
    (["--image-size", "448"], []),
    (["--frozen-tower"], []),
    (["--channels-last"], []),
    (["--inference"], []),
    (["--context", "256"], []),
    (["--new-tokens", "64"], []),
    (["--weights", "bf16"], []),
    (["--group-size", "64"], ["--model", "llama-2-7b", "--weights", "gptfast-int4", "--framework", "gpt-fast"]),
    (["--kv-dtype", "fp32"], []),
    (["--kv-quant-backend", "quanto"], ["--kv-cache", "quantized"]),
    (["--kv-group-size", "32"], ["--kv-cache", "quantized"]),
    (["--kv-residual-length", "64"], ["--kv-cache", "quantized"]),
    (["--kv-cache", "static"], []),
    (["--svg", "FILE"], []),
    (["--svg-batch", "FILE"], []),
    (["--units", "mib"], []),
]

# Run documents (--run FILE): each field of "run" (and the document's own) over a base document.
DOC_BASE = {"model": "llama-2-7b", "run": {"micro_batch": 2, "seq_len": 512, "precision": "pure_bf16"}}
DOC_PATHS = {"doc": [], "doc+gpu": ["--gpu", "a100-80gb"]}
LORA = {"target": "lora", "lora_rank": 8}
DOC_FIELDS = [
    ({"micro_batch": 4}, {}), ({"seq_len": 1024}, {}), ({"grad_accum": 4}, {}), ({"precision": "amp_bf16"}, {}),
    ({"optimizer": "sgd"}, {}), ({"optimizer_impl": "for_loop"}, {}), ({"checkpointing": "full"}, {}),
    ({"attention": "eager"}, {}), (LORA, {}), ({"lora_targets": "all-linear"}, LORA), ({"lora_alpha": 32}, LORA),
    ({"lora_variant": "dora"}, LORA), ({"lora_dropout": 0}, LORA), ({"adapter_dtype": "base"}, LORA),
    ({"quant": "nf4_double_quant"}, {"target": "qlora", "lora_rank": 8}), ({"dropout": False}, {}),
    ({"device": "cpu"}, {}), ({"offload": ["optimizer"]}, {}), ({"no_sync": True}, {"grad_accum": 4}),
    ({"output_cast": "fp32"}, {}), ({"loss": "chunked"}, {}), ({"loss_chunk": 64}, {"loss": "chunked"}),
    ({"loss_chunks": 4}, {"loss": "chunked"}), ({"optimizer_in_backward": True}, {}), ({"ssm_kernels": "torch"}, {}),
    ({"liger": True}, {}), ({"fused_rmsnorm": True}, {}), ({"fused_swiglu": True}, {}), ({"fused_rope": True}, {}),
    ({"fused_geglu": True}, {}), ({"fused_layernorm": True}, {}), ({"liger_patching": "class"}, {"fused_rmsnorm": True}),
    ({"data_parallel": 2}, {}), ({"sac_policy": "op"}, {"checkpointing": "selective"}), ({"compile": True}, {}),
    ({"float8": True}, {}), ({"use_cache": True}, {}), ({"packing": "padding_free"}, {"attention": "flash_attention_2"}),
    ({"example_tokens": 64}, {"attention": "flash_attention_2", "packing": "padding_free"}), ({"padded": True}, {"attention": "sdpa"}),
    ({"paged_optimizer": True}, {}), ({"tensor_parallel": 2}, {}), ({"context_parallel": 2}, {}),
    ({"custom_sharded_layers": "tok_embeddings,output"}, {}), ({"use_reentrant": True}, {"checkpointing": "full"}),
]
# Document-level fields, as (the document's key, value).
DOC_TOP = [("gpu", "rtx3090"), ("headroom", 0.10), ("alloc_conf", "expandable_segments:True"),
           ("context_memory", 2147483648), ("software", {"torch": "2.1"}), ("software", {"transformers": "4.40"}),
           ("software", {"bitsandbytes": "0.43.1"}), ("software", {"cuda": "11.6"}), ("software", {"cuda": "12.4"}),
           ("framework", "litgpt")]

# Pairs (the probe as typed or its option, the path or "*") whose figures cannot change, with
# why; each was read in the code. The others must be used or refused.
PEAK_ONLY = ("the per-GPU layout reports the peak, which this probe leaves as it is: the setting reaches the same "
             "graph (the single-GPU columns show it read)")
EMIT = ("the engine config holds micro-batch, accumulation, stage, offload and 16-bit engine only; the run's other "
        "settings reach --emit through the fit check with --gpu")
FSDP2_NODES = "FSDP2 over every rank: one rank's memory does not depend on how the ranks spread over nodes"
NO_EFFECT = {
    ("--lora-alpha", "*"): "alpha / rank scales the adapter output: no tensor of its own (echoed in the JSON run)",
    ("--units", "emit"): "sets the sizes of a text report; the engine config has none",
    ("--kv-quant-backend", "*"): "quanto is the default backend (hqq is refused by name)",
    ("--svg", "*"): "writes the picture to FILE; the report is unchanged",
    ("--svg-batch", "*"): "writes the picture to FILE; the report is unchanged",
    ("--inference", "inference"): "given twice",
    ("--inference", "inference+gpu"): "given twice",
    ("--optimizer-impl", "cluster"): "DeepSpeed ZeRO steps its optimizer over one flat fp32 partition per group",
    ("--use-reentrant", "cluster"): PEAK_ONLY,
    ("--use-reentrant", "planner"): PEAK_ONLY,
    ("--use-cache", "cluster"): PEAK_ONLY,
    ("--use-cache", "planner"): PEAK_ONLY,
    ("--optimizer-impl", "planner"): PEAK_ONLY,
    ("--stack", "cluster"): PEAK_ONLY + "; the layout report prints no software line",
    ("--stack", "planner"): PEAK_ONLY + "; the layout report prints no software line",
    ("--stack cuda=12.4", "*"): "CUDA >= 11.7 is the stack assumed (lazy module loading); the version is echoed",
    ("--sp", "planner"): "the planner pairs every tensor-parallel degree with sequence parallelism (cluster_planner.hpp)",
    ("--no-sync", "planner"): "read per candidate (cluster_planner.hpp r.no_sync); the chosen layouts accumulate no "
                              "micro-steps at this global batch",
    ("--nodes", "torchtitan"): FSDP2_NODES,
    ("--nodes", "torchtune"): FSDP2_NODES,
    ("--nodes", "litgpt-lora"): FSDP2_NODES,
    ("--loss chunked", "torchtune"): "the recipe's loss is chunked already (CEWithChunkedOutputLoss)",
    ("--loss chunked", "litgpt-lora"): "lora.py's loss is chunked already",
    ("--qlora-double-quant", "torchtune"): "torchao's to_nf4 quantises the scales too: the only 4-bit base torchtune builds",
    ("--adapter-dtype", "torchtune"): "torchtune builds its adapters in the base dtype already",
    ("--adapter-dtype", "litgpt-lora"): "lit-gpt builds its adapters in the base dtype already",
    ("--checkpointing full", "litgpt-lora"): "lora.py's parallelize_fn checkpoints every Block (other values are refused)",
    ("--lora 8", "litgpt-lora"): "given twice",
    ("--stack bitsandbytes=0.43.1", "generic"): "bitsandbytes holds a QLoRA run's 4-bit base only; the generic report "
                                                "prints no software line",
}
# Document fields as labelled in the table, and the path or "*", with why they cannot matter.
DOC_NO_EFFECT = {
    ("run.lora_alpha=32", "*"): "alpha / rank scales the adapter output: no tensor of its own",
    ('gpu="rtx3090"', "doc+gpu"): "--gpu after --run replaces the document's (options after it override it)",
}
for option in ["--seq", "--optimizer", "--optimizer-impl", "--use-reentrant", "--attention", "--no-dropout", "--use-cache",
               "--loss", "--loss-chunk", "--lora", "--qlora", "--lora-targets", "--qlora-double-quant", "--lora-dropout",
               "--lora-variant", "--adapter-dtype", "--gpu", "--gpu-memory", "--headroom", "--stack", "--nodes",
               "--host-memory", "--ds-precision"]:
    NO_EFFECT[(option, "emit")] = EMIT


def figures(value, path=()):
    """Every number of a JSON report outside the echo of the input."""
    echo = {"run", "software", "framework", "model", "software_assumed", "inference", "input", "stack"}
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not path and k in echo:
                continue
            out.update(figures(v, path + (k,)))
        return out
    if isinstance(value, list):
        out = {}
        for i, v in enumerate(value):
            out.update(figures(v, path + (str(i),)))
        return out
    return {"/".join(path): value} if isinstance(value, (int, float)) and not isinstance(value, bool) else {}


def run(plan, args):
    p = subprocess.run([plan] + args, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr.strip()


def verdict(plan, base, probe, needs, scratch, after=None):
    probe = [os.path.join(scratch, "out.svg") if a == "FILE" else a for a in probe]
    before_args = base + needs
    after_args = after if after is not None else before_args + probe
    rc0, text0, err0 = run(plan, before_args)
    if rc0 != 0:
        return "n/a", err0  # what the probe needs is refused on this path already
    rc1, text1, err1 = run(plan, after_args)
    if rc1 != 0:
        return "refused", err1
    j0 = run(plan, before_args + ["--json"])
    j1 = run(plan, after_args + ["--json"])
    try:
        f0, f1 = figures(json.loads(j0[1])), figures(json.loads(j1[1]))
    except ValueError:  # --emit prints a config, not a report
        f0, f1 = text0, text1
    if f0 != f1 or text0 != text1:
        return "used", ""
    return "ignored", ""


def doc_verdict(plan, extra, probe_run, needs_run, probe_top, scratch):
    """The verdict of a document field: the base document with `needs_run` against it with the probe too."""
    def write(name, with_probe):
        doc = json.loads(json.dumps(DOC_BASE))
        doc["run"].update(needs_run)
        if with_probe:
            doc["run"].update(probe_run)
            for k, v in probe_top:
                doc[k] = v
        path = os.path.join(scratch, name)
        with open(path, "w") as f:
            json.dump(doc, f)
        return ["--run", path] + extra
    return verdict(plan, write("before.json", False), [], [], scratch, after=write("after.json", True))


def write_generic_checkpoint(folder):
    """A two-layer model of a model_type no reader knows, with its safetensors headers (the data a
    sparse hole), as tests/cli/checkpoint_checks.sh builds it: the generic checkpoint path."""
    import struct
    os.makedirs(folder)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"model_type": "newfamily", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                   "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000,
                   "tie_word_embeddings": False}, f)
    tensors = [("model.embed_tokens.weight", [1000, 64]), ("lm_head.weight", [1000, 64]), ("model.norm.weight", [64])]
    for layer in range(2):
        p = f"model.layers.{layer}."
        tensors += [(p + "self_attn.q_proj.weight", [64, 64]), (p + "self_attn.k_proj.weight", [32, 64]),
                    (p + "self_attn.v_proj.weight", [32, 64]), (p + "self_attn.o_proj.weight", [64, 64]),
                    (p + "mlp.gate_proj.weight", [128, 64]), (p + "mlp.up_proj.weight", [128, 64]),
                    (p + "mlp.down_proj.weight", [64, 128]), (p + "input_layernorm.weight", [64]),
                    (p + "post_attention_layernorm.weight", [64])]
    header, at = {}, 0
    for name, shape in tensors:
        size = 2
        for d in shape:
            size *= d
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [at, at + size]}
        at += size
    h = json.dumps(header).encode()
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        f.truncate(8 + len(h) + at)


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 64
    plan = sys.argv[1]
    table = "--table" in sys.argv[2:]
    unexplained = []
    matched = set()
    with tempfile.TemporaryDirectory() as scratch:
        write_generic_checkpoint(os.path.join(scratch, "generic"))
        PATHS["generic"] = ["--config", os.path.join(scratch, "generic"), "--batch", "8", "--seq", "512"]
        rows = []
        messages = []
        for probe, needs in OPTIONS:
            name = probe[0]
            row = [" ".join(probe)]
            for path, base in PATHS.items():
                v, why = verdict(plan, base, probe, needs, scratch)
                if v == "ignored":
                    text = " ".join(probe)
                    key = next((k for k in [(text, path), (name, path), (text, "*"), (name, "*")] if k in NO_EFFECT), None)
                    reason = NO_EFFECT[key] if key else None
                    matched.add(key)
                    if reason:
                        v = "no-effect"
                    else:
                        unexplained.append(f"{' '.join(probe)} on {path}: {' '.join(base + needs + probe)}")
                row.append(v)
                if why:
                    messages.append(f"{path:14} {' '.join(probe)}: {why}")
            rows.append(row)
        doc_rows = []
        for field, needs in [(f, n) for f, n in DOC_FIELDS] + [({}, {"__top": t}) for t in DOC_TOP]:
            top = [needs.pop("__top")] if "__top" in needs else []
            label = "run." + ",".join(f"{k}={json.dumps(v)}" for k, v in field.items()) if field else \
                ",".join(f"{k}={json.dumps(v)}" for k, v in top)
            row = [label]
            for path, extra in DOC_PATHS.items():
                v, why = doc_verdict(plan, extra, field, needs, top, scratch)
                if v == "ignored":
                    key = next((k for k in [(label, path), (label, "*")] if k in DOC_NO_EFFECT), None)
                    reason = DOC_NO_EFFECT[key] if key else None
                    matched.add(key)
                    if reason:
                        v = "no-effect"
                    else:
                        unexplained.append(f"{label} in a --run document on {path}")
                row.append(v)
                if why:
                    messages.append(f"{path:14} {label}: {why}")
            doc_rows.append(row)
    if table:
        print("option | " + " | ".join(PATHS))
        for row in rows:
            print(" | ".join(row))
        print()
        print("document field | " + " | ".join(DOC_PATHS))
        for row in doc_rows:
            print(" | ".join(row))
        print()
        print("\n".join(messages))
    for u in unexplained:
        print("IGNORED  " + u)
    for k in [k for k in list(NO_EFFECT) + list(DOC_NO_EFFECT) if k not in matched]:
        print(f"UNUSED   {k}: no pair needs this reason any more")
    print(f"{len(rows) * len(PATHS) + len(doc_rows) * len(DOC_PATHS)} pairs, {len(unexplained)} ignored without a reason")
    return 1 if unexplained or len(matched - {None}) < len(NO_EFFECT) + len(DOC_NO_EFFECT) else 0


if __name__ == "__main__":
    sys.exit(main())
