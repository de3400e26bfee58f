"""LLaMA-style building blocks shared by the torchtune, torchtitan and Liger traces.

Each framework writes the same architecture with its own ops; the variants here follow the
source each trace names (a `style` argument picks the framework's way). Only what changes
the saved tensors is modelled; weights start from PyTorch defaults.
"""
import math

import torch
import torch.nn.functional as F


def rms_norm_fp32(x, weight, eps):
    """torch >= 2.4 F.rms_norm (aten/src/ATen/native/layer_norm.cpp rms_norm_symint, composite):
    upcast, x * rsqrt(mean(x^2) + eps), type_as(input), then * weight. torch 1.13 has no F.rms_norm,
    so its composite is written out here (its mean.dim keeps x^2 on 1.13, not on >= 2.2)."""
    xf = x.float()
    r = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf * r).type_as(xf) * weight


def causal_attention(q, k, v):
    """Stand-in for F.scaled_dot_product_attention(q, k, v, is_causal=True) on torch 1.13: the math
    path (scores, softmax, probs @ v), which is what SDPA runs on CPU without a fused kernel."""
    s = q.size(-2)
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
    mask = torch.ones(s, s, dtype=torch.bool).triu(1)
    probs = F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
    return probs @ v


class FlashEmulation(torch.autograd.Function):
    """Saves what aten::_scaled_dot_product_flash_attention saves (query, key, value, output, fp32
    logsumexp: tools/autograd/derivatives.yaml) and keeps the B*H*S*S scores out of the trace by
    computing one (batch, head) slice at a time under no_grad. Backward recomputes per slice."""

    @staticmethod
    def forward(ctx, q, k, v):
        out, lse = FlashEmulation.compute(q, k, v)
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def compute(q, k, v):
        b, h, s, d = q.shape
        out = torch.empty_like(q)
        lse = torch.empty(b, h, s, dtype=torch.float32)
        mask = torch.ones(s, s, dtype=torch.bool).triu(1)
        with torch.no_grad():
            for i in range(b):
                for j in range(h):
                    sc = (q[i, j].float() @ k[i, j].float().t()) / math.sqrt(d)
                    sc.masked_fill_(mask, float("-inf"))
                    lse[i, j] = torch.logsumexp(sc, dim=-1)
                    out[i, j] = (torch.exp(sc - lse[i, j, :, None]) @ v[i, j].float()).to(q.dtype)
                    del sc
        return out, lse

    @staticmethod
    def backward(ctx, g):
        q, k, v, out, lse = ctx.saved_tensors
        b, h, s, d = q.shape
        gq, gk, gv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        mask = torch.ones(s, s, dtype=torch.bool).triu(1)
        for i in range(b):
            for j in range(h):
                qf, kf, vf, gf = q[i, j].float(), k[i, j].float(), v[i, j].float(), g[i, j].float()
                p = torch.exp(((qf @ kf.t()) / math.sqrt(d)).masked_fill(mask, float("-inf")) - lse[i, j, :, None])
                gv[i, j] = (p.t() @ gf).to(v.dtype)
                dp = gf @ vf.t()
                ds = p * (dp - (gf * out[i, j].float()).sum(-1, keepdim=True)) / math.sqrt(d)
                gq[i, j] = (ds @ kf).to(q.dtype)
                gk[i, j] = (ds.t() @ qf).to(k.dtype)
                del p, dp, ds
        return gq, gk, gv


LLAMA = dict(family="llama", layers=2, hidden=256, heads=4, kv_heads=2, ffn=688, vocab=16000, norm="rmsnorm",
             activation="swiglu", tied_embeddings=False)


def model_fields(m, impl, nparams):
    out = {k: m[k] for k in ("family", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "norm", "activation",
                             "tied_embeddings")}
    out.update(params=nparams, impl=impl)
    return out
