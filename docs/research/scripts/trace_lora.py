#!/usr/bin/python3
"""CPU traces of LoRA fine-tuning steps: peak live tensor bytes, as measure.py takes them.

Faithful small re-implementations of the adapter layers, wrapped around the GPT-2 and LLaMA-style
models that shared/ground-truth/measure.py builds (its copy in tests/data/ground-truth):
- PEFT LoRA (huggingface/peft v0.13.0 @ 8f074d75, src/peft/tuners/lora/layer.py Linear.forward):
  result = base_layer(x); x = x.to(lora_A.weight.dtype); result = result + lora_B(lora_A(dropout(x))) * scaling;
  dropout is nn.Identity when lora_dropout == 0 (LoraLayer.update_layer).
- PEFT DoRA (same commit, src/peft/tuners/lora/dora.py DoraLinearLayer.forward): lora_weight = lora_B(lora_A(eye)).T,
  weight_norm = ||W + scaling * lora_weight.detach()|| (detached), mag_norm_scale = magnitude / weight_norm,
  (mag_norm_scale - 1) * F.linear(x, W) + mag_norm_scale * lora_B(lora_A(x)) * scaling.
- all-linear: every Linear/Conv1D except the output embedding (peft tuners_utils.py _maybe_include_all_linear_layers).
Everything but the adapters is frozen; AdamW over the adapters; two steps, the second is measured.

Run from the project root:  /usr/bin/python3 docs/research/scripts/trace_lora.py --out docs/data/cpu_traced_lora.json
"""
import argparse, gc, json, os, sys, time, traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools", "trace"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests", "data", "ground-truth"))
import measure as M  # noqa: E402  (the harness's models only; the tracing is tracer's)
import tracer  # noqa: E402

torch.set_num_threads(1)
HARNESS = "docs/research/scripts/trace_lora.py (Tracker from shared/ground-truth/measure.py)"


class LoraLinear(nn.Module):
    """PEFT lora.Linear around an nn.Linear or HF Conv1D (fan_in_fan_out)."""

    def __init__(self, base, r, alpha, p, dora):
        super().__init__()
        self.base_layer = base
        self.conv1d = isinstance(base, M.Conv1D)
        w = base.weight
        in_f, out_f = (w.shape[0], w.shape[1]) if self.conv1d else (w.shape[1], w.shape[0])
        self.lora_A = nn.Linear(in_f, r, bias=False)
        self.lora_B = nn.Linear(r, out_f, bias=False)
        nn.init.normal_(self.lora_B.weight, std=0.02)  # PEFT starts at 0; non-zero keeps the same tensors
        self.lora_dropout = nn.Dropout(p) if p > 0 else nn.Identity()
        self.scaling = alpha / r
        self.dora = dora
        if dora:
            with torch.no_grad():
                self.magnitude = nn.Parameter(torch.linalg.norm(self.weight_oi(), dim=1))

    def weight_oi(self):
        return self.base_layer.weight.T if self.conv1d else self.base_layer.weight

    def forward(self, x):
        result = self.base_layer(x)
        dt = result.dtype
        x = x.to(self.lora_A.weight.dtype)
        if not self.dora:
            result = result + self.lora_B(self.lora_A(self.lora_dropout(x))) * self.scaling
        else:
            x = self.lora_dropout(x)
            lora_result = self.lora_B(self.lora_A(x))
            x_eye = torch.eye(self.lora_A.weight.shape[1], dtype=x.dtype)
            lora_weight = self.lora_B(self.lora_A(x_eye)).T
            weight = self.weight_oi().to(x.dtype)
            wn = torch.linalg.norm(weight + self.scaling * lora_weight.detach(), dim=1).to(weight.dtype).detach()
            mns = (self.magnitude / wn).view(1, -1)
            result = result + ((mns - 1) * F.linear(x, weight) + mns * lora_result * self.scaling)
        return result.to(dt)


def wrap(model, names, r, alpha, p, dora):
    for prm in model.parameters():
        prm.requires_grad_(False)
    out_emb = getattr(model, "lm_head", None)
    targets = []
    for full, mod in model.named_modules():
        for cname, child in list(mod.named_children()):
            if not isinstance(child, (nn.Linear, M.Conv1D)):
                continue
            if names == "all-linear":
                hit = child is not out_emb
            else:
                hit = cname in names
            if hit:
                targets.append((mod, cname, child))
    for mod, cname, child in targets:
        setattr(mod, cname, LoraLinear(child, r, alpha, p, dora))
    return len(targets)


MODELS = {
    "gpt2": dict(family="gpt2", name="gpt2", layers=12, hidden=768, heads=12, kv_heads=12, ffn=3072, vocab=50257, max_pos=1024,
                 tied_embeddings=True, activation="gelu", norm="layernorm", ctor=lambda: M.GPT2LMHead(12, 768, 12)),
    "llama-small": dict(family="llama", name=None, layers=8, hidden=1024, heads=16, kv_heads=4, ffn=2816, vocab=32000, max_pos=None,
                        tied_embeddings=False, activation="swiglu", norm="rmsnorm", ctor=lambda: M.LlamaForCausalLM()),
}


def run_case(c):
    tracer.reset_seed()
    B, S, prec = c["batch"], c["seq"], c["prec"]
    with tracer.Tracker() as tr:
        model = MODELS[c["model"]]["ctor"]()
        model.ckpt = c["ckpt"] == "full"
        n_adapted = wrap(model, c["targets"], c["r"], c["alpha"], c["dropout"], c["variant"] == "dora")
        # A model loaded in bf16 whose adapters stay bf16 (PEFT autocast_adapter_dtype=False), then
        # trained under autocast (TRL SFTTrainer with bf16=True): the same cast as pure_bf16.
        if prec == "pure_bf16" or c["bf16_adapters"]:
            model = model.to(torch.bfloat16)
        model.train()
        tr.mark("built")
        trainable = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(trainable, lr=1e-4)
        V = MODELS[c["model"]]["vocab"]
        x = torch.randint(0, V, (B, S))
        y = x.clone()
        tr.mark("inputs")
        forward = tracer.in_precision(prec, lambda: model(x, y))
        grads = tracer.GradientBytes(lambda: trainable)
        times, lossv = tracer.train_two_steps(tr, forward, opt, grads)
        grads_enum = grads.bytes
        params_enum = tracer.tensor_bytes(list(model.parameters()))
        opt_enum = tracer.optimizer_state_bytes([opt])
        nparams = sum(p.numel() for p in model.parameters() if not isinstance(p, nn.Parameter) or True)
        ntrain = sum(p.numel() for p in trainable)
        del model, opt, x, y, trainable
    r = {k: tr.live(k) for k in ("built", "inputs")}
    r.update(tracer.step_readings(tr))
    r.update(nparams=nparams, trainable=ntrain, adapted_layers=n_adapted, params_enum=params_enum, grads_enum=grads_enum,
             opt_enum=opt_enum, step_seconds=times, loss=lossv)
    return r


def to_record(c, r):
    m = {k: v for k, v in MODELS[c["model"]].items() if k != "ctor"}
    base_params = r["nparams"] - r["trainable"]
    m["params"] = base_params
    m["impl"] = "hf-transformers+peft"
    tname = "all-linear" if c["targets"] == "all-linear" else "-".join(c["targets"])
    cid = (f"cpu-lora-{c['model']}-b{c['batch']}-s{c['seq']}-r{c['r']}-{tname}" + ("" if c["variant"] == "lora" else "-" + c["variant"]) +
           ("" if c["dropout"] > 0 else "-nodrop") + ("" if c["prec"] == "fp32" else "-" + c["prec"]) +
           ("-bf16-base-adapters" if c["bf16_adapters"] else "") + ("-ckpt" if c["ckpt"] == "full" else ""))
    train = dict(batch=c["batch"], seq=c["seq"], precision=c["prec"], optimizer="adamw", optimizer_impl="for_loop",
                 checkpointing=c["ckpt"], attention="eager", grad_accum=1, lora_rank=c["r"], lora_alpha=c["alpha"],
                 lora_dropout=c["dropout"], lora_variant=c["variant"],
                 lora_targets=c["targets"] if c["targets"] == "all-linear" else list(c["targets"]),
                 trainable_params=r["trainable"], frozen="base", zero_stage=0, dp=1, tp=1,
                 # model.to(bfloat16) after wrapping casts the adapters too: they are not upcast
                 # as get_peft_model(autocast_adapter_dtype=True) would leave them.
                 trainable_dtype="bf16" if c["prec"] == "pure_bf16" or c["bf16_adapters"] else "fp32")
    return {
        **tracer.record_head(cid, HARNESS), "model": m, "train": train,
        **tracer.peak_fields(r),
        "components": tracer.components(r),
        "detail": r, "software": {"torch": torch.__version__},
        "notes": "measured_bytes = max live CPU tensor bytes during the 2nd step (forward+backward+AdamW step+zero_grad(set_to_none)); "
                 "model.params counts the base model only (adapters in train.trainable_params). PEFT-style adapters re-implemented in plain torch.",
    }


def cases():
    L = []
    def add(model, targets, r=8, prec="fp32", ckpt="none", batch=1, seq=512, variant="lora", dropout=0.05,
            bf16_adapters=False):
        L.append(dict(model=model, targets=targets, r=r, alpha=2 * r, prec=prec, ckpt=ckpt, batch=batch, seq=seq, variant=variant, dropout=dropout,
                      bf16_adapters=bf16_adapters))
    for prec in ("fp32", "amp_bf16", "pure_bf16"):
        add("llama-small", ("q_proj", "v_proj"), prec=prec)
        add("llama-small", "all-linear", r=16, prec=prec)
        add("gpt2", ("c_attn",), prec=prec)
        add("gpt2", "all-linear", r=16, prec=prec)
    add("llama-small", ("q_proj", "v_proj"), batch=2)
    add("llama-small", ("q_proj", "v_proj"), batch=2, ckpt="full")
    add("llama-small", "all-linear", r=16, batch=2, ckpt="full")
    add("llama-small", ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head"), r=16)
    add("llama-small", ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head"), r=16, prec="pure_bf16")
    add("llama-small", ("q_proj", "v_proj"), dropout=0.0)
    add("llama-small", "all-linear", r=16, dropout=0.0, prec="pure_bf16")
    add("llama-small", ("q_proj", "v_proj"), variant="dora")
    add("llama-small", "all-linear", r=16, variant="dora", prec="amp_bf16")  # bf16 DoRA: torch 1.13 CPU has no bf16 eye
    add("gpt2", ("c_attn",), batch=2, ckpt="full")
    add("gpt2", "all-linear", r=16, batch=2, ckpt="full")
    add("gpt2", ("c_attn",), variant="dora")
    # autocast over a bf16 base with bf16 adapters
    add("llama-small", ("q_proj", "v_proj"), prec="amp_bf16", bf16_adapters=True)
    add("llama-small", "all-linear", r=16, prec="amp_bf16", bf16_adapters=True)
    add("gpt2", "all-linear", r=16, batch=2, prec="amp_bf16", bf16_adapters=True)
    return L


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/cpu_traced_lora.json")
    ap.add_argument("--only", default=None)
    a = ap.parse_args()
    out = []
    t_start = time.time()
    L = cases()
    if a.only:
        L = [c for c in L if a.only in json.dumps(c)]
    for i, c in enumerate(L):
        try:
            r = run_case(c)
            rec = to_record(c, r)
            out.append(rec)
            tracer.write_records(a.out, out)
            print(f"[{i}] {rec['id']}: peak2={r['s2_peak']/1e9:.4f}GB trainable={r['trainable']} steps={r['step_seconds']} "
                  f"elapsed={time.time()-t_start:.0f}s", flush=True)
        except Exception as e:
            traceback.print_exc()
            print(f"[{i}] FAIL {c}: {e}", flush=True)
        gc.collect()
    print(f"DONE {len(out)} cases in {time.time()-t_start:.0f}s", flush=True)


if __name__ == "__main__":
    main()
