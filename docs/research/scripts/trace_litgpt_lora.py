#!/usr/bin/python3
"""CPU traces of lit-gpt-style LoRA fine-tuning steps: peak live tensor bytes, as measure.py takes them.

A small plain-torch re-implementation of lit-gpt's model and LoRA layers (Lightning-AI/lit-gpt, 2023 code,
e.g. @ 8641822: lit_gpt/model.py, lit_gpt/lora.py, lit_gpt/rmsnorm.py, lit_gpt/utils.py, finetune/lora.py):
- GPT: wte -> Blocks -> ln_f -> lm_head applied per 128-token chunk (lm_head_chunk_size=128).
- Block: norm_1 -> attn; sequential (LLaMA) or parallel residual (GPT-NeoX: norm_2(x), not shared).
- CausalSelfAttention: fused qkv viewed (B,T,groups,q_per_kv+2,hs), permuted, split, reshaped; RoPE on the
  first rope_n_elem dims then torch.cat with the rest; attention by the math path (torch 1.13 has no
  F.scaled_dot_product_attention); y.transpose(1,2).reshape -> proj.
- RMSNorm (2023): x * rsqrt(mean(x*x) + eps) * weight, no fp32 upcast.
- LoRALinear: linear(x) + (dropout(x) @ A.T @ B.T) * scaling.  LoRAQKVLinear: F.linear(dropout(x), A) -> grouped
  conv1d with B -> zero_pad (transpose, new_zeros, index_copy of x.reshape; the result as it is when q, k and v
  are all adapted) -> * scaling; added to linear(x).
- Loop: logits = model(x, lm_head_chunk_size=128); logits[-1] = logits[-1][..., :-1, :];
  loss = chunked_cross_entropy(logits, targets[..., 1:]); backward; AdamW step; zero_grad. The logits list stays
  bound until the next step's forward returns (it is measured in the second step).
Run from the project root:  /usr/bin/python3 docs/research/scripts/trace_litgpt_lora.py --out /tmp/litgpt_lora.json
"""
import argparse, gc, json, math, os, sys, time, traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools", "trace"))
import tracer  # noqa: E402

torch.set_num_threads(1)
HARNESS = "docs/research/scripts/trace_litgpt_lora.py (Tracker from shared/ground-truth/measure.py)"


class LoRALinear(nn.Module):
    def __init__(self, inf, outf, bias, r, alpha, p):
        super().__init__()
        self.linear = nn.Linear(inf, outf, bias=bias)
        self.lora_A = nn.Parameter(torch.empty(r, inf))
        self.lora_B = nn.Parameter(torch.empty(outf, r))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        nn.init.normal_(self.lora_B, std=0.02)  # lit-gpt starts at zeros; non-zero keeps the same tensors
        self.scaling = alpha / r
        self.lora_dropout = nn.Dropout(p) if p > 0 else (lambda x: x)

    def forward(self, x):
        pretrained = self.linear(x)
        lora = (self.lora_dropout(x) @ self.lora_A.transpose(0, 1) @ self.lora_B.transpose(0, 1)) * self.scaling
        return pretrained + lora


class LoRAQKVLinear(nn.Module):
    def __init__(self, inf, n_head, n_groups, hs, bias, r, alpha, p, enable):
        super().__init__()
        q_out, kv_out = n_head * hs, n_groups * hs
        self.out = q_out + 2 * kv_out
        self.linear = nn.Linear(inf, self.out, bias=bias)
        self.enable = enable
        self.n_head, self.n_groups = n_head, n_groups
        self.qkv_shapes = [s for s, e in zip((q_out, kv_out, kv_out), enable) if e]
        self.lora_A = nn.Parameter(torch.empty(r * sum(enable), inf))
        self.lora_B = nn.Parameter(torch.empty(sum(self.qkv_shapes), r))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        nn.init.normal_(self.lora_B, std=0.02)
        self.scaling = alpha / r
        self.lora_dropout = nn.Dropout(p) if p > 0 else (lambda x: x)
        ind, off = [], 0
        for s, e in zip((q_out, kv_out, kv_out), enable):
            if e:
                ind.extend(range(off, off + s))
            off += s
        self.lora_ind = ind

    def zero_pad(self, x):
        if all(self.enable):  # lit_gpt/lora.py zero_pad line 277 @ 8641822: nothing to pad
            return x
        x = x.transpose(0, 1)
        result = x.new_zeros((*x.shape[:-1], self.out))
        result = result.view(-1, self.out)
        result = result.index_copy(1, torch.tensor(self.lora_ind), x.reshape(-1, sum(self.qkv_shapes)))
        return result.view((*x.shape[:-1], self.out)).transpose(0, 1)

    def conv1d(self, inp, weight):
        if self.n_head == self.n_groups:
            return F.conv1d(inp, weight, groups=sum(self.enable))
        a = inp.chunk(sum(self.enable), dim=1)
        b = weight.split(self.qkv_shapes)
        return torch.cat([F.conv1d(x, w) for x, w in zip(a, b)], dim=1)

    def forward(self, x):
        pretrained = self.linear(x)
        after_A = F.linear(self.lora_dropout(x), self.lora_A)
        after_B = self.conv1d(after_A.transpose(-2, -1), self.lora_B.unsqueeze(-1)).transpose(-2, -1)
        lora = self.zero_pad(after_B) * self.scaling
        return pretrained + lora


class RMSNorm(nn.Module):  # lit_gpt/rmsnorm.py (2023): no upcast
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))

    def forward(self, x):
        norm_x = torch.mean(x * x, dim=-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(norm_x + 1e-5))


def lin(c, name, inf, outf, bias):
    if name in c["targets"]:
        return LoRALinear(inf, outf, bias, c["r"], c["alpha"], c["dropout"])
    return nn.Linear(inf, outf, bias=bias)


def apply_rope(x, cos, sin):
    hs = x.size(-1)
    x1, x2 = x[..., : hs // 2], x[..., hs // 2:]
    rotated = torch.cat((-x2, x1), dim=-1)
    return ((x * cos) + (rotated * sin)).type_as(x)


class Attn(nn.Module):
    def __init__(self, c, m):
        super().__init__()
        H, nh, ng = m["hidden"], m["heads"], m["kv_heads"]
        self.hs, self.nh, self.ng = H // nh, nh, ng
        en = tuple(t in c["targets"] for t in ("q", "k", "v"))
        bias = m["bias"]
        if any(en):
            self.attn = LoRAQKVLinear(H, nh, ng, self.hs, bias, c["r"], c["alpha"], c["dropout"], en)
        else:
            self.attn = nn.Linear(H, (nh + 2 * ng) * self.hs, bias=bias)
        self.proj = lin(c, "proj", H, H, bias)
        self.rope_n = int(m["rotary_pct"] * self.hs)

    def forward(self, x, cos, sin, mask):
        B, T, C = x.shape
        qkv = self.attn(x)
        q_per_kv = self.nh // self.ng
        qkv = qkv.view(B, T, self.ng, q_per_kv + 2, self.hs).permute(0, 2, 3, 1, 4)
        q, k, v = qkv.split((q_per_kv, 1, 1), dim=2)
        q = q.reshape(B, -1, T, self.hs)
        k = k.reshape(B, -1, T, self.hs)
        v = v.reshape(B, -1, T, self.hs)
        n = self.rope_n
        q = torch.cat((apply_rope(q[..., :n], cos, sin), q[..., n:]), dim=-1)
        k = torch.cat((apply_rope(k[..., :n], cos, sin), k[..., n:]), dim=-1)
        if self.ng != self.nh:  # F.scaled_dot_product_attention needs matching heads; lit-gpt expands k, v
            k = k.repeat_interleave(q_per_kv, dim=1)
            v = v.repeat_interleave(q_per_kv, dim=1)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hs))
        att = att.masked_fill(mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, c, m):
        super().__init__()
        H = m["hidden"]
        Norm = (lambda: RMSNorm(H)) if m["norm"] == "rmsnorm" else (lambda: nn.LayerNorm(H))
        self.norm_1, self.norm_2 = Norm(), Norm()
        self.attn = Attn(c, m)
        self.parallel = m["parallel"]
        if m["activation"] == "swiglu":
            self.fc_1 = lin(c, "mlp", H, m["ffn"], m["bias"])
            self.fc_2 = lin(c, "mlp", H, m["ffn"], m["bias"])
        else:
            self.fc = lin(c, "mlp", H, m["ffn"], m["bias"])
        self.mproj = lin(c, "mlp", m["ffn"], H, m["bias"])
        self.act = m["activation"]

    def mlp(self, x):
        if self.act == "swiglu":
            return self.mproj(F.silu(self.fc_1(x)) * self.fc_2(x))
        return self.mproj(F.gelu(self.fc(x)))

    def forward(self, x, cos, sin, mask):
        n_1 = self.norm_1(x)
        h = self.attn(n_1, cos, sin, mask)
        if self.parallel:
            return x + h + self.mlp(self.norm_2(x))
        x = x + h
        return x + self.mlp(self.norm_2(x))


class GPT(nn.Module):
    def __init__(self, c, m):
        super().__init__()
        self.wte = nn.Embedding(m["vocab"], m["hidden"])
        self.h = nn.ModuleList([Block(c, m) for _ in range(m["layers"])])
        self.ln_f = RMSNorm(m["hidden"]) if m["norm"] == "rmsnorm" else nn.LayerNorm(m["hidden"])
        self.lm_head = lin(c, "head", m["hidden"], m["vocab"], False)
        hs = m["hidden"] // m["heads"]
        n = int(m["rotary_pct"] * hs)
        theta = 1.0 / (10000 ** (torch.arange(0, n, 2).float() / n))
        idx = torch.outer(torch.arange(c["seq"]).float(), theta).repeat(1, 2)
        self.register_buffer("cos", idx.cos(), persistent=False)
        self.register_buffer("sin", idx.sin(), persistent=False)
        self.register_buffer("mask", torch.ones(c["seq"], c["seq"], dtype=torch.bool).triu(1), persistent=False)

    def forward(self, idx, chunk=128):
        T = idx.size(1)
        cos, sin, mask = self.cos[:T], self.sin[:T], self.mask[:T, :T]
        x = self.wte(idx)
        for b in self.h:
            x = b(x, cos, sin, mask)
        x = self.ln_f(x)
        return [self.lm_head(xi) for xi in x.split(chunk, dim=1)]


def chunked_cross_entropy(logits, targets, chunk=128):
    logits = [l.reshape(-1, l.size(-1)) for l in logits]
    targets = [t.reshape(-1) for t in targets.split(chunk, dim=1)]
    loss_chunks = [F.cross_entropy(l, t, ignore_index=-1, reduction="none") for l, t in zip(logits, targets)]
    return torch.cat(loss_chunks).mean()


MODELS = {
    "llama": dict(family="llama", layers=4, hidden=256, heads=4, kv_heads=4, ffn=704, vocab=32000, norm="rmsnorm",
                  activation="swiglu", parallel=False, bias=False, rotary_pct=1.0, tied_embeddings=False),
    "neox": dict(family="gpt_neox", layers=4, hidden=256, heads=4, kv_heads=4, ffn=1024, vocab=50304, norm="layernorm",
                 activation="gelu", parallel=True, bias=True, rotary_pct=0.25, tied_embeddings=False),
}


def run_case(c):
    tracer.reset_seed()
    m = MODELS[c["model"]]
    B, S = c["batch"], c["seq"]
    with tracer.Tracker() as tr:
        model = GPT(c, m)
        for n, p in model.named_parameters():
            p.requires_grad_("lora_" in n)
        if c["prec"] == "pure_bf16":
            model = model.to(torch.bfloat16)
        model.train()
        tr.mark("built")
        trainable = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(trainable, lr=1e-4)
        x = torch.randint(0, m["vocab"], (B, S))
        y = torch.randint(0, m["vocab"], (B, S))
        tr.mark("inputs")
        logits = None

        def forward():  # the logits list stays bound until the next step's forward returns
            nonlocal logits
            logits = model(x)
            logits[-1] = logits[-1][..., :-1, :]
            return chunked_cross_entropy(logits, y[..., 1:])

        grads = tracer.GradientBytes(lambda: trainable)
        times, lossv = tracer.train_two_steps(tr, forward, opt, grads)
        grads_enum = grads.bytes
        params_enum = tracer.tensor_bytes(list(model.parameters()))
        opt_enum = tracer.optimizer_state_bytes([opt])
        nparams = tracer.parameter_count(model)
        ntrain = sum(p.numel() for p in trainable)
        del model, opt, x, y, trainable, logits
    r = {k: tr.live(k) for k in ("built", "inputs")}
    r.update(tracer.step_readings(tr, phase_peaks=False))
    r.update(nparams=nparams, trainable=ntrain, params_enum=params_enum, grads_enum=grads_enum, opt_enum=opt_enum,
             step_seconds=times, loss=lossv)
    return r


def to_record(c, r):
    mm = MODELS[c["model"]]
    m = {k: mm[k] for k in ("family", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "tied_embeddings", "norm")}
    m["activation"] = mm["activation"]
    m["params"] = r["nparams"] - r["trainable"]
    m["impl"] = "litgpt"
    tname = "-".join(c["targets"])
    cid = (f"cpu-litgpt-lora-{c['model']}-b{c['batch']}-s{c['seq']}-r{c['r']}-{tname}" +
           ("" if c["dropout"] > 0 else "-nodrop") + ("" if c["prec"] == "fp32" else "-" + c["prec"]))
    train = dict(batch=c["batch"], seq=c["seq"], precision=c["prec"], optimizer="adamw", optimizer_impl="for_loop",
                 checkpointing="none", attention="eager", grad_accum=1, lora_rank=c["r"], lora_alpha=c["alpha"],
                 lora_dropout=c["dropout"], lora_targets=",".join(c["targets"]),
                 trainable_params=r["trainable"], frozen="base", zero_stage=0, dp=1, tp=1,
                 output_cast="none")  # no Fabric wrapper here: the logits stay in the compute dtype
    return {
        **tracer.record_head(cid, HARNESS), "model": m, "train": train,
        **tracer.peak_fields(r),
        "components": tracer.components(r),
        "detail": r, "software": {"torch": torch.__version__},
        "notes": "measured_bytes = max live CPU tensor bytes during the 2nd step (forward+backward+AdamW+zero_grad(set_to_none)), "
                 "the 1st step's logits chunks still bound; lit-gpt-style model and LoRA layers re-implemented in plain torch.",
    }


def cases():
    L = []
    def add(model, targets, r=8, prec="fp32", batch=2, seq=256, dropout=0.05):
        L.append(dict(model=model, targets=targets, r=r, alpha=2 * r, prec=prec, batch=batch, seq=seq, dropout=dropout))
    for prec in ("fp32", "pure_bf16"):
        add("llama", ("q", "v"), prec=prec)
        add("llama", ("q", "k", "v", "proj", "mlp", "head"), r=16, prec=prec)
        add("neox", ("q", "v"), prec=prec)
        add("neox", ("q", "k", "v", "proj", "mlp", "head"), r=16, prec=prec)
    add("llama", ("q", "v"), dropout=0.0)
    add("llama", ("q", "k", "v", "proj", "mlp", "head"), r=16, batch=1, seq=512)
    add("neox", ("proj", "mlp"), r=8)
    return L


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/litgpt_lora.json")
    ap.add_argument("--only", default=None)
    a = ap.parse_args()
    out, t0 = [], time.time()
    L = cases()
    if a.only:
        L = [c for c in L if a.only in json.dumps(c)]
    for i, c in enumerate(L):
        try:
            r = run_case(c)
            rec = to_record(c, r)
            out.append(rec)
            tracer.write_records(a.out, out)
            print(f"[{i}] {rec['id']}: peak2={r['s2_peak']/1e6:.2f}MB elapsed={time.time()-t0:.0f}s", flush=True)
        except Exception as e:
            traceback.print_exc()
            print(f"[{i}] FAIL {c}: {e}", flush=True)
        gc.collect()
    print(f"DONE {len(out)} cases in {time.time()-t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
