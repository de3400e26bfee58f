#!/usr/bin/python3
"""CPU traces of Liger-Kernel's memory mechanisms (linkedin/Liger-Kernel v0.5.10 @ 44a8f2fb) on an HF-LLaMA step.

Baseline: a Hugging Face LlamaForCausalLM step as transformers ~4.51 writes it (modeling_llama.py eager path;
loss_utils.py ForCausalLMLoss: logits.float(), labels padded with ignore_index and shifted, no logits copy;
LlamaRMSNorm upcasts to fp32; LlamaMLP down(act(gate(x)) * up(x)); repeat_kv; softmax in fp32), model in bf16.
Liger pieces, written from the source (the Triton kernels become torch code with the same buffers):
- fused linear cross-entropy (ops/fused_linear_cross_entropy.py fused_linear_cross_entropy_forward): the loss
  and both gradients are computed in forward, chunk by chunk: chunk_size = next_power_of_2(ceil(BT / ceil(V/H)));
  per chunk logits_chunk = x_chunk @ W.T (chunk x V, input dtype), its CE gradient written in place,
  grad_input[chunk] = logits_chunk @ W, grad_weight += logits_chunk.T @ x_chunk (grad_weight = zeros_like(W) when
  the head trains), loss_1d fp32 (BT). LigerFusedLinearCrossEntropyFunction saves grad_input and grad_weight;
  backward only scales them. The logits never exist whole. (transformers/model/loss_utils.py
  LigerForCausalLMLoss pads the labels, no hidden-state copy.)
- LigerRMSNorm (ops/rms_norm.py, casting_mode "llama", in_place=True): Y in the input dtype, RSTD fp32 per row;
  saves X, W, RSTD; backward writes dX into dY and reduces an fp32 (sm_count x H) partial dW.
- LigerSwiGLUMLP (ops/swiglu.py LigerSiLUMulFunction): c = silu(a) * b; saves a and b only; backward writes
  da, db into a and b.
Attention is eager (torch 1.13). Run from the repository root:
  /usr/bin/python3 tools/trace/liger_cases.py --out docs/data/cpu_traced_frameworks.json
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import llama_blocks as LB
import step_trace as T
import tracer

SOURCE = "tools/trace/liger_cases.py (Tracker of shared/ground-truth/measure.py)"
IGNORE = -100


class HFRMSNorm(nn.Module):  # modeling_llama.py LlamaRMSNorm
    def __init__(self, n, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dtype)


class LigerRMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, eps):
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        with torch.no_grad():
            xf = x2.float()  # the kernel works in registers; this temporary stands in for them
            rstd = torch.rsqrt(xf.pow(2).mean(-1) + eps)
            y = ((xf * rstd[:, None]).to(x.dtype) * w)
            del xf
        ctx.save_for_backward(x2, w, rstd)
        ctx.eps = eps
        return y.view(shape)

    @staticmethod
    def backward(ctx, dy):
        x, w, rstd = ctx.saved_tensors
        shape = dy.shape
        dy2 = dy.reshape(-1, shape[-1])
        with torch.no_grad():
            xf = x.float()
            xn = xf * rstd[:, None]
            g = dy2.float() * w.float()
            dx = rstd[:, None] * (g - xn * (g * xn).mean(-1, keepdim=True))
            dw = (dy2.float() * xn).sum(0).to(w.dtype)
            dy2.copy_(dx)  # in_place=True: dX is stored in dY
            del xf, xn, g, dx
        return dy2.view(shape), dw, None


class LigerRMSNorm(nn.Module):
    def __init__(self, n, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return LigerRMSNormFunction.apply(x, self.weight, self.eps)


class LigerSiLUMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        with torch.no_grad():
            c = F.silu(a) * b
        ctx.save_for_backward(a, b)
        return c

    @staticmethod
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        with torch.no_grad():
            s = torch.sigmoid(a.float())
            silu = a.float() * s
            db = dc.float() * silu
            da = dc.float() * b.float() * (s + silu * (1 - s))
            a.copy_(da)  # the kernel writes the gradients into the saved inputs
            b.copy_(db)
            del s, silu, da, db
        return a, b


class LigerFusedLinearCE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, target):
        bt, h = x.shape
        v = w.shape[0]
        chunk = 2 ** math.ceil(math.log2(math.ceil(bt / math.ceil(v / h))))
        grad_w = torch.zeros_like(w) if w.requires_grad else None
        grad_x = torch.zeros_like(x)
        loss_1d = torch.zeros(bt, dtype=torch.float32)
        n_valid = (target != IGNORE).sum().clamp(min=1)
        with torch.no_grad():
            for s in range(0, bt, chunk):
                xc, tc = x[s: s + chunk], target[s: s + chunk]
                logits = xc @ w.t()  # chunk x V in the input dtype
                lf = logits.float()  # the Triton kernel upcasts in registers; this temporary stands in
                lse = torch.logsumexp(lf, -1)
                valid = tc != IGNORE
                loss_1d[s: s + chunk] = torch.where(valid, lse - lf.gather(1, tc.clamp(min=0)[:, None])[:, 0], 0.0)
                p = torch.exp(lf - lse[:, None])
                p[torch.arange(p.size(0)), tc.clamp(min=0)] -= 1.0
                p[~valid] = 0.0
                logits.copy_(p / n_valid)  # gradient written in place (liger_cross_entropy_kernel)
                del lf, p, lse
                grad_x[s: s + chunk] = logits @ w
                if grad_w is not None:
                    torch.addmm(grad_w, logits.t().to(xc.dtype), xc, out=grad_w)
                del logits
        ctx.save_for_backward(grad_x.detach(), grad_w.detach() if grad_w is not None else None)
        return loss_1d.sum() / n_valid

    @staticmethod
    def backward(ctx, g):
        grad_x, grad_w = ctx.saved_tensors
        # fused_linear_cross_entropy_backward: element_mul by grad_output (1.0 here: nothing new is allocated)
        return grad_x, grad_w, None


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Layer(nn.Module):
    def __init__(self, m, liger):
        super().__init__()
        h, nh, kv, f = m["hidden"], m["heads"], m["kv_heads"], m["ffn"]
        self.nh, self.kv, self.hd = nh, kv, h // nh
        self.q_proj, self.o_proj = nn.Linear(h, h, bias=False), nn.Linear(h, h, bias=False)
        self.k_proj, self.v_proj = nn.Linear(h, kv * self.hd, bias=False), nn.Linear(h, kv * self.hd, bias=False)
        self.gate_proj, self.up_proj = nn.Linear(h, f, bias=False), nn.Linear(h, f, bias=False)
        self.down_proj = nn.Linear(f, h, bias=False)
        norm = LigerRMSNorm if liger.get("rms_norm") else HFRMSNorm
        self.input_layernorm, self.post_attention_layernorm = norm(h), norm(h)
        self.liger = liger

    def attn(self, x, cos, sin):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, -1, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, s, -1, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, s, -1, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.nh // self.kv
        k = k[:, :, None].expand(b, self.kv, rep, s, self.hd).reshape(b, self.nh, s, self.hd)
        v = v[:, :, None].expand(b, self.kv, rep, s, self.hd).reshape(b, self.nh, s, self.hd)
        w = (q @ k.transpose(2, 3)) / math.sqrt(self.hd)
        w = w + torch.full((s, s), float("-inf")).triu(1).to(w.dtype)
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        return self.o_proj((w @ v).transpose(1, 2).contiguous().reshape(b, s, -1))

    def mlp(self, x):
        if self.liger.get("swiglu"):
            return self.down_proj(LigerSiLUMul.apply(self.gate_proj(x), self.up_proj(x)))
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    def forward(self, x, cos, sin):
        h = x + self.attn(self.input_layernorm(x), cos, sin)
        return h + self.mlp(self.post_attention_layernorm(h))


class CausalLM(nn.Module):
    def __init__(self, m, liger):
        super().__init__()
        self.embed_tokens = nn.Embedding(m["vocab"], m["hidden"])
        self.layers = nn.ModuleList([Layer(m, liger) for _ in range(m["layers"])])
        self.norm = (LigerRMSNorm if liger.get("rms_norm") else HFRMSNorm)(m["hidden"])
        self.lm_head = nn.Linear(m["hidden"], m["vocab"], bias=False)
        hd = m["hidden"] // m["heads"]
        self.register_buffer("inv_freq", 1.0 / (500000 ** (torch.arange(0, hd, 2).float() / hd)), persistent=False)
        self.liger, self.vocab = liger, m["vocab"]

    def forward(self, ids, labels):
        x = self.embed_tokens(ids)
        s = ids.size(1)
        freqs = torch.outer(torch.arange(s).float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)  # LlamaRotaryEmbedding, cast to the model dtype
        for layer in self.layers:
            x = layer(x, cos, sin)
        x = self.norm(x)
        padded = F.pad(labels, (0, 1), value=IGNORE)[..., 1:].contiguous()
        if self.liger.get("flce"):  # lce_forward -> LigerForCausalLMLoss
            return LigerFusedLinearCE.apply(x.view(-1, x.size(-1)), self.lm_head.weight, padded.view(-1))
        logits = self.lm_head(x)  # ForCausalLMLoss: upcast, pad-shifted labels, mean over labelled tokens
        return F.cross_entropy(logits.float().view(-1, self.vocab), padded.view(-1), ignore_index=IGNORE)


def run_case(c):
    m = dict(LB.LLAMA, **c.get("geometry", {}))
    B, S = c["batch"], c["seq"]

    def build():
        model = CausalLM(m, c["liger"]).to(torch.bfloat16)
        model.inv_freq.data = model.inv_freq.data.float()
        trainable = list(model.parameters())
        opt = torch.optim.AdamW(trainable, lr=1e-5)
        return dict(model=model, optimizers=[opt], trainable=trainable,
                    make_inputs=lambda: (torch.randint(0, m["vocab"], (B, S)), torch.randint(0, m["vocab"], (B, S))))

    def step(ctx, tr, n):
        ids, labels = ctx["inputs"]

        def grads_of_step2(n):
            if n == 2:
                ctx["grads_step2"] = tracer.tensor_bytes([p.grad for p in ctx["trainable"]])

        return tracer.train_step(tr, n, lambda: ctx["model"](ids, labels), ctx["optimizers"][0], grads_of_step2)

    r = T.run_two_steps(build, step)
    lg = c["liger"]
    train = dict(batch=B, seq=S, precision="pure_bf16", optimizer="adamw", optimizer_impl="for_loop",
                 checkpointing="none", attention="eager", grad_accum=1, lora_rank=0, frozen="none", zero_stage=0,
                 dp=1, tp=1, loss_impl="fused_linear_ce" if lg.get("flce") else "standard",
                 fused_rmsnorm=bool(lg.get("rms_norm")), fused_swiglu=bool(lg.get("swiglu")))
    framework = dict(name="hf", version="4.51 (re-implemented)",
                     kernels={"liger": "0.5.10" if lg else None, "source": "linkedin/Liger-Kernel@44a8f2fb"})
    notes = ("measured_bytes = max live CPU tensor bytes in training step 2; HF-LLaMA step re-implemented in plain "
             "torch, Liger's Triton kernels replaced by torch code with the same saved and temporary buffers "
             "(kernel-internal fp32 upcasts appear as per-chunk / per-op temporaries).")
    model = LB.model_fields(m, "hf-transformers", r["nparams"])
    return T.record(c["id"], SOURCE, model, train, framework, r, notes, software={"transformers": "4.51 (emulated)"})


def cases():
    L = []
    for name, liger in (("hf", {}), ("liger-flce", {"flce": True}),
                        ("liger-flce-rmsnorm-swiglu", {"flce": True, "rms_norm": True, "swiglu": True}),
                        ("liger-rmsnorm-swiglu", {"rms_norm": True, "swiglu": True})):
        L.append(dict(id=f"cpu-{name}-llama-b2-s256", liger=liger, batch=2, seq=256))
    # A short step over a wide MLP: step 1 peaks inside the for-loop AdamW, at up_proj's temporaries
    # beside gate_proj's denom (model.parameters() order; the embedding, first, is smaller).
    L.append(dict(id="cpu-hf-llama-wide-v1k-b1-s64", liger={}, batch=1, seq=64, geometry=dict(ffn=2048, vocab=1000)))
    return L


if __name__ == "__main__":
    T.main_loop(cases, run_case, "/tmp/liger_cases.json")
