#!/usr/bin/env python3
"""Time llm-analysis's training() in-process on the inputs of memscale's estimate benchmark.

memscale's benchmarks/estimate_bench.cpp (estimate_llama_2_7b) times one
memscale::estimate(presets::llama_2_7b, {micro_batch 4, seq_len 2048, amp_bf16}) call.
This script times the closest llm-analysis call (https://github.com/cli99/llm-analysis):
`LLMAnalysis(model, gpu, dtype).training(...)` with the configuration objects built
directly (no JSON files, no Hugging Face look-up), so that docs/performance.md can give a
ratio measured on the same inputs. See docs/research/llm-analysis-timing.md.

Usage:
    G=$(path of a git directory of cli99/llm-analysis)
    mkdir -p /tmp/llm-analysis && git --git-dir=$G archive <commit> | tar -x -C /tmp/llm-analysis
    /usr/bin/python3 tools/llm_analysis_timing.py /tmp/llm-analysis --commit <commit> \
        --json docs/research/llm-analysis-timing.json

The first argument is the directory that holds the `llm_analysis` package (the root of
the extracted repository). Nothing of llm-analysis is copied into memscale.
"""

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
import types


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def import_llm_analysis(path):
    sys.path.insert(0, os.path.abspath(path))
    fire_stub = False
    try:
        import fire  # noqa: F401  (llm-analysis imports it at module level)
    except ImportError:
        # llm-analysis uses `fire` only for its command line (fire.Fire under
        # `if __name__ == "__main__"` in analysis.py and config.py); the library calls timed
        # here never touch it. Debian's python3-fire provides the real module; without it an
        # empty stand-in lets the package import.
        sys.modules["fire"] = types.ModuleType("fire")
        fire_stub = True
    from llm_analysis import analysis, config
    from llm_analysis.logger import logger
    return analysis, config, logger, fire_stub


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("llm_analysis_root", help="directory holding the llm_analysis package")
    ap.add_argument("--commit", default="unknown", help="llm-analysis commit, recorded in the JSON")
    ap.add_argument("--calls", type=int, default=2000, help="calls per repetition")
    ap.add_argument("--reps", type=int, default=7, help="repetitions per logging mode")
    ap.add_argument("--warmup", type=int, default=500, help="untimed calls before each mode")
    ap.add_argument("--json", help="write the results here (default: stdout only)")
    args = ap.parse_args()

    analysis, config, logger, fire_stub = import_llm_analysis(args.llm_analysis_root)
    LLMAnalysis = analysis.LLMAnalysis

    # memscale presets::llama_2_7b: 32 layers, hidden 4096, 32 heads, 32 kv heads,
    # intermediate 11008 (SwiGLU: three MLP matrices), vocab 32000; max positions 4096.
    model = config.ModelConfig(
        name="llama-2-7b",
        num_layers=32,
        n_head=32,
        hidden_dim=4096,
        vocab_size=32000,
        max_seq_len=4096,
        num_key_value_heads=32,
        ffn_embed_dim=11008,
        model_type="llama",
        mlp_gated_linear_units=True,
    )
    # The values of llm-analysis's gpu_configs/a100-sxm-80gb.json, built directly.
    gpu = config.GPUConfig(
        name="a100-sxm-80gb",
        mem_per_GPU_in_GB=80,
        hbm_bandwidth_in_GB_per_sec=2039,
        intra_node_bandwidth_in_GB_per_sec=300,
        intra_node_min_message_latency=8e-06,
        peak_fp16_TFLOPS=312,
        peak_i8_TFLOPS=624,
        peak_i4_TFLOPS=1248,
        inter_node_bandwidth_in_GB_per_sec=200,
    )
    # bf16 mixed precision: 16-bit weights, activations and embeddings; the fp32 master
    # weights and Adam(W) moments come from training()'s master_weights_dtype_bytes=4 and
    # other_op_bytes=None ("assumes Adam": 4 + 2 * 4 bytes per parameter).
    dtype = config.DtypeConfig(name="w16a16e16", weight_bits=16, activation_bits=16, embedding_bits=16)
    parallel = config.ParallelismConfig(tp_size=1, pp_size=1, dp_size=1, rdp_size=1, ep_size=1)
    training_kwargs = dict(
        batch_size_per_gpu=4,
        gradient_accumulation_steps=1,
        seq_len=2048,
        activation_recomputation=analysis.ActivationRecomputation.NONE,
        ds_zero=analysis.DSZeRO.NONE,
        master_weights_dtype_bytes=4,
        other_op_bytes=None,
        flash_attn=True,
        output_dir=None,  # no summary files
    )

    def one_call():
        return LLMAnalysis(model, gpu, dtype, parallel).training(**training_kwargs)

    # llm-analysis's logger writes to a StreamHandler bound to stderr at import time. Point it
    # at /dev/null so that the "warnings on" mode pays for formatting and writing each record
    # but not for a terminal.
    devnull = open(os.devnull, "w")
    for h in logger.handlers:
        if isinstance(h, logging.StreamHandler):
            h.setStream(devnull)

    # Count what one call logs at WARNING level (untimed).
    class Count(logging.Handler):
        def __init__(self):
            super().__init__()
            self.n = 0
            self.messages = []

        def emit(self, record):
            self.n += 1
            self.messages.append(record.getMessage())

    counter = Count()
    logger.addHandler(counter)
    logger.setLevel(logging.WARNING)
    summary = one_call()
    logger.removeHandler(counter)

    cwd = os.getcwd()
    modes = {}
    with tempfile.TemporaryDirectory() as scratch:
        os.chdir(scratch)  # anything written to the current directory would show up here
        for mode, level in (("logging_error", logging.ERROR), ("logging_warning", logging.WARNING)):
            logger.setLevel(level)
            for _ in range(args.warmup):
                one_call()
            per_call_us = []
            for _ in range(args.reps):
                t0 = time.perf_counter_ns()
                for _ in range(args.calls):
                    one_call()
                t1 = time.perf_counter_ns()
                per_call_us.append((t1 - t0) / args.calls / 1000.0)
            modes[mode] = {
                "logger_level": logging.getLevelName(level),
                "per_repetition_us": [round(x, 2) for x in per_call_us],
                "median_us": round(statistics.median(per_call_us), 2),
                "min_us": round(min(per_call_us), 2),
            }
        written = os.listdir(scratch)
        os.chdir(cwd)
    devnull.close()
    if written:
        sys.exit(f"llm-analysis wrote files during timing: {written}")

    gib = 1024.0 ** 3
    keys = ["num_params_total", "weight_memory_per_gpu", "optimizer_state_memory_per_gpu",
            "gradient_memory_per_gpu", "activation_memory_per_gpu", "loss_bwd_memory",
            "estimated_bwd_prefetch_memory_per_gpu", "estimated_peak_memory_per_gpu",
            "max_batch_size_per_gpu"]
    outputs = {k: summary[k] for k in keys}
    outputs["estimated_peak_memory_per_gpu_GiB"] = round(summary["estimated_peak_memory_per_gpu"] / gib, 3)

    result = {
        "what": "llm-analysis LLMAnalysis(model, gpu, dtype, parallelism).training(...) per call, in-process",
        "llm_analysis": {
            "repository": "https://github.com/cli99/llm-analysis",
            "commit": args.commit,
            "fire_module": "stub (CLI only)" if fire_stub else "python3-fire",
        },
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "timed_call": "LLMAnalysis(model, gpu, dtype, parallel).training(**training) -- constructor included",
        "inputs": {
            "model": {k: getattr(model, k) for k in (
                "name", "num_layers", "n_head", "hidden_dim", "vocab_size", "max_seq_len",
                "num_key_value_heads", "ffn_embed_dim", "model_type", "mlp_gated_linear_units")},
            "gpu": {k: getattr(gpu, k) for k in (
                "name", "mem_per_GPU_in_GB", "hbm_bandwidth_in_GB_per_sec", "peak_fp16_TFLOPS")},
            "dtype": {k: getattr(dtype, k) for k in ("name", "weight_bits", "activation_bits", "embedding_bits")},
            "parallelism": {k: getattr(parallel, k) for k in ("tp_size", "pp_size", "dp_size", "rdp_size", "ep_size", "sp_size")},
            "training": {k: (v.name if hasattr(v, "name") else v) for k, v in training_kwargs.items()},
        },
        "method": {
            "clock": "time.perf_counter_ns around each repetition of `calls` calls",
            "calls_per_repetition": args.calls,
            "repetitions": args.reps,
            "warmup_calls": args.warmup,
            "logging_sink": "llm-analysis's StreamHandler re-pointed at /dev/null",
            "gc": "enabled (default)",
        },
        "warnings_per_call_at_warning_level": counter.n,
        "warning_messages": counter.messages,
        "results": modes,
        "llm_analysis_outputs": outputs,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
