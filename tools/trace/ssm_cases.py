#!/usr/bin/python3
"""CPU traces of small state-space and hybrid models: mamba, falcon_mamba, mamba2, jamba, falcon_h1, nemotron_h.

Each model is a plain-torch re-implementation of the family's torch-only training path (the
path transformers takes when mamba-ssm / causal-conv1d are not installed or the model is not
on CUDA), written from the modeling file named in its class comment (huggingface/transformers,
file@commit as stored by the search tools; docs/research/ssm-multimodal-timm.md has the notes):

  mamba         models/mamba/modeling_mamba.py@1160c0f3          MambaMixer.slow_forward (sequential scan)
  falcon_mamba  models/falcon_mamba/modeling_falcon_mamba.py@11065c9b  + weightless RMS on B, C, dt
  mamba2        models/mamba2/modeling_mamba2.py@4711664e         Mamba2Mixer.torch_forward (chunked SSD)
  jamba         models/jamba/modeling_jamba.py@97bb61d0           JambaMambaMixer.slow_forward + eager attention + MoE
  falcon_h1     models/falcon_h1/modular_falcon_h1.py@3c0a5c70    parallel Mamba2 mixer + attention + SwiGLU, muP multipliers
  nemotron_h    models/nemotron_h/modeling_nemotron_h.py@897753a0 one mixer per block: Mamba2 (grouped gated norm),
                attention without positions, or a relu2 MLP, by hybrid_override_pattern

The harness is ../shared/ground-truth/measure.py (Tracker: peak live CPU tensor bytes of the
2nd training step, AdamW single-tensor). Records keep measure.py's schema with
"model": {"hf_config": {...}} so memscale reads them with its config reader once the family
has one.

Run from the project root (about 15 minutes on one core; the profiler slows the per-token Mamba-1 scan):
    /usr/bin/python3 tools/trace/ssm_cases.py --out docs/data/cpu_traced_ssm.json
    /usr/bin/python3 tools/trace/ssm_cases.py --only mamba2 --out /tmp/x.json
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

import tracer

torch.set_num_threads(1)


# ---------------------------------------------------------------------------------------
# shared pieces
# ---------------------------------------------------------------------------------------
class RMSNorm(nn.Module):  # MambaRMSNorm / Mamba2RMSNorm / JambaRMSNorm / FalconH1RMSNorm (= LlamaRMSNorm)
    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return self.weight * x.to(dt)


def rms_forward(x, eps=1e-6):  # modeling_falcon_mamba.py rms_forward: no weight
    dt = x.dtype
    x = x.to(torch.float32)
    var = x.pow(2).mean(-1, keepdim=True)
    x = x * torch.rsqrt(var + eps)
    return x.to(dt)


class FalconMambaRMSNorm(RMSNorm):  # weight * rms_forward(x)
    def forward(self, x):
        return self.weight * rms_forward(x, self.eps)


def shifted_loss(logits, labels):  # MambaForCausalLM / Mamba2ForCausalLM: logits.float(), shift, contiguous
    logits = logits.float()
    sl = logits[..., :-1, :].contiguous()
    lb = labels[..., 1:].contiguous()
    return F.cross_entropy(sl.view(-1, sl.size(-1)), lb.view(-1))


def causal_lm_loss(logits, labels):  # loss_utils.py ForCausalLMLoss (v4.46+): upcast, pad labels, no logits copy
    logits = logits.float()
    labels = F.pad(labels, (0, 1), value=-100)
    shift = labels[..., 1:].contiguous()
    return F.cross_entropy(logits.view(-1, logits.size(-1)), shift.view(-1), ignore_index=-100)


def repeat_kv(x, n):
    if n == 1:
        return x
    b, kv, s, d = x.shape
    return x[:, :, None, :, :].expand(b, kv, n, s, d).reshape(b, kv * n, s, d)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rope(head_dim, S, theta, dtype):  # LlamaRotaryEmbedding, once per forward
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    pos = torch.arange(S).unsqueeze(0)
    freqs = (inv[None, :, None].float().expand(1, -1, 1) @ pos[:, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


# ---------------------------------------------------------------------------------------
# Mamba-1 mixer: modeling_mamba.py MambaMixer.slow_forward (training, no cache)
# (also modeling_falcon_mamba.py FalconMambaMixer and modeling_jamba.py JambaMambaMixer)
# ---------------------------------------------------------------------------------------
class Mamba1Mixer(nn.Module):
    def __init__(self, H, D, N, K, R, use_bias, conv_bias, variant="mamba", eps=1e-6):
        super().__init__()
        self.D_, self.N, self.R, self.variant, self.eps = D, N, R, variant, eps
        self.conv1d = nn.Conv1d(D, D, K, groups=D, padding=K - 1, bias=conv_bias)
        self.in_proj = nn.Linear(H, 2 * D, bias=use_bias)
        self.x_proj = nn.Linear(D, R + 2 * N, bias=False)
        self.dt_proj = nn.Linear(R, D, bias=True)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, N + 1, dtype=torch.float32)[None, :].expand(D, -1).contiguous()))
        self.D = nn.Parameter(torch.ones(D))
        self.out_proj = nn.Linear(D, H, bias=use_bias)
        if variant == "jamba":  # JambaMambaMixer: weighted RMSNorms on dt, B, C
            self.dt_layernorm, self.b_layernorm, self.c_layernorm = RMSNorm(R, eps), RMSNorm(N, eps), RMSNorm(N, eps)

    def forward(self, x):
        Bsz, L, _ = x.shape
        dtype = x.dtype
        proj = self.in_proj(x).transpose(1, 2)  # [b, 2d, l]
        hs, gate = proj.chunk(2, dim=1)
        ssm_state = torch.zeros((Bsz, self.D_, self.N), dtype=dtype)
        hs = F.silu(self.conv1d(hs)[..., :L])  # [b, d, l]
        p = self.x_proj(hs.transpose(1, 2))
        ts, Bm, Cm = torch.split(p, [self.R, self.N, self.N], dim=-1)
        if self.variant == "falcon_mamba":
            Bm, Cm, ts = rms_forward(Bm, self.eps), rms_forward(Cm, self.eps), rms_forward(ts, self.eps)
        elif self.variant == "jamba":
            ts, Bm, Cm = self.dt_layernorm(ts), self.b_layernorm(Bm), self.c_layernorm(Cm)
        dts = self.dt_proj(ts)
        dts = F.softplus(dts).transpose(1, 2)  # [b, d, l]
        A = -torch.exp(self.A_log.float())
        dA = torch.exp(A[None, :, None, :] * dts[:, :, :, None])  # [b, d, l, n]
        dB = dts[:, :, :, None] * Bm[:, None, :, :].float()
        dBu = dB * hs[:, :, :, None].float()
        outs = []
        for i in range(L):  # the sequential scan: one (b, d, n) state per step
            ssm_state = dA[:, :, i, :] * ssm_state + dBu[:, :, i, :]
            so = torch.matmul(ssm_state.to(dtype), Cm[:, i, :].unsqueeze(-1))
            outs.append(so[:, :, 0])
        so = torch.stack(outs, dim=-1)
        so = so + (hs * self.D[None, :, None])
        so = so * F.silu(gate)
        return self.out_proj(so.transpose(1, 2))


class MambaBlock(nn.Module):  # MambaBlock / FalconMambaBlock
    def __init__(self, c, variant):
        super().__init__()
        H = c["hidden_size"]
        D = c.get("intermediate_size") or int(c.get("expand", 2) * H)  # config.json's key wins (PretrainedConfig kwargs)
        R = c.get("time_step_rank", "auto")
        R = math.ceil(H / 16) if R == "auto" else R
        default_bias = variant == "mamba"  # MambaConfig use_bias=True, FalconMambaConfig use_bias=False
        self.residual_in_fp32 = c.get("residual_in_fp32", True)
        eps = c.get("layer_norm_epsilon", 1e-5)
        self.norm = (FalconMambaRMSNorm if variant == "falcon_mamba" else RMSNorm)(H, eps)
        self.mixer = Mamba1Mixer(H, D, c.get("state_size", 16), c.get("conv_kernel", 4), R, c.get("use_bias", default_bias),
                                 c.get("use_conv_bias", True), variant, c.get("mixer_rms_eps", 1e-6))

    def forward(self, x):
        r = x
        x = self.norm(x.to(dtype=self.norm.weight.dtype))
        if self.residual_in_fp32:
            r = r.to(torch.float32)
        return r + self.mixer(x)


class MambaForCausalLM(nn.Module):  # MambaForCausalLM / FalconMambaForCausalLM
    def __init__(self, c):
        super().__init__()
        variant = c["model_type"]
        H, V = c["hidden_size"], c["vocab_size"]
        self.embeddings = nn.Embedding(V, H)
        self.layers = nn.ModuleList([MambaBlock(c, variant) for _ in range(c["num_hidden_layers"])])
        self.norm_f = (FalconMambaRMSNorm if variant == "falcon_mamba" else RMSNorm)(H, c.get("layer_norm_epsilon", 1e-5))
        self.lm_head = nn.Linear(H, V, bias=False)
        if c.get("tie_word_embeddings", True):
            self.lm_head.weight = self.embeddings.weight
        self.ckpt = False

    def forward(self, ids, labels):
        x = self.embeddings(ids)
        for layer in self.layers:
            x = torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=False) if self.ckpt else layer(x)
        x = self.norm_f(x)
        logits = self.lm_head(x.to(self.lm_head.weight.dtype))
        return shifted_loss(logits, labels)


# ---------------------------------------------------------------------------------------
# Mamba-2 mixer: modeling_mamba2.py Mamba2Mixer.torch_forward (training, no cache);
# falcon_h1 adds ssm_in_multiplier, the muP vector and an optional gated norm
# ---------------------------------------------------------------------------------------
def pad_by_size(t, pad):
    shape = (0, 0, 0, 0, 0, pad, 0, 0) if t.dim() == 4 else (0, 0, 0, pad, 0, 0)
    return F.pad(t, shape, mode="constant", value=0)


def reshape_into_chunks(t, pad, chunk):
    t = pad_by_size(t, pad)
    if t.dim() == 3:
        return t.reshape(t.shape[0], -1, chunk, t.shape[2])
    return t.reshape(t.shape[0], -1, chunk, t.shape[2], t.shape[3])


def segment_sum(x):
    chunk = x.size(-1)
    x = x[..., None].expand(*x.size(), chunk)
    mask = torch.tril(torch.ones(chunk, chunk, dtype=torch.bool), diagonal=-1)
    x = x.masked_fill(~mask, 0)
    seg = torch.cumsum(x, dim=-2)
    mask = torch.tril(torch.ones(chunk, chunk, dtype=torch.bool), diagonal=0)
    return seg.masked_fill(~mask, -torch.inf)


class GatedRMSNorm(nn.Module):  # MambaRMSNormGated (norm_before_gate=False)
    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x, gate):
        dt = x.dtype
        x = x.to(torch.float32)
        x = x * F.silu(gate.to(torch.float32))
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return self.weight * x.to(dt)


def ssd_naive(hs, dt, A, Bm, Cm, Dp, nheads, head_dim, N, chunk, dt_limit):
    """The 'ssd naive implementation without einsums' of Mamba2Mixer.torch_forward."""
    Bsz, L = hs.shape[0], hs.shape[1]
    dt = torch.clamp(dt, dt_limit[0], dt_limit[1])
    hs = hs.reshape(Bsz, L, -1, head_dim).float()
    Bm = Bm.reshape(Bsz, L, -1, N).float()
    Cm = Cm.reshape(Bsz, L, -1, N).float()
    Bm = Bm.repeat(1, 1, nheads // Bm.shape[2], 1)
    Cm = Cm.repeat(1, 1, nheads // Cm.shape[2], 1)
    pad = (chunk - L % chunk) % chunk
    D_residual = Dp[..., None] * pad_by_size(hs, pad)
    hs = hs * dt[..., None]
    A = A.to(hs.dtype) * dt
    hs, A, Bm, Cm = [reshape_into_chunks(t, pad, chunk) for t in (hs, A, Bm, Cm)]
    A = A.permute(0, 3, 1, 2)
    A_cumsum = torch.cumsum(A, dim=-1)
    Lm = torch.exp(segment_sum(A))
    G_intermediate = Cm[:, :, :, None, :, :] * Bm[:, :, None, :, :, :]  # (b, c, l, s, h, n)
    G = G_intermediate.sum(dim=-1)
    M_intermediate = G[..., None] * Lm.permute(0, 2, 3, 4, 1)[..., None]
    M = M_intermediate.sum(dim=-1)
    Y_diag = (M[..., None] * hs[:, :, None]).sum(dim=3)
    decay_states = torch.exp((A_cumsum[:, :, :, -1:] - A_cumsum))
    B_decay = Bm * decay_states.permute(0, -2, -1, 1)[..., None]
    states = (B_decay[..., None, :] * hs[..., None]).sum(dim=2)
    previous = torch.zeros_like(states[:, :1])
    states = torch.cat([previous, states], dim=1)
    decay_chunk = torch.exp(segment_sum(F.pad(A_cumsum[:, :, :, -1], (1, 0))))
    decay_chunk = decay_chunk.transpose(1, 3)
    new_states = (decay_chunk[..., None, None] * states[:, :, None, ...]).sum(dim=1)
    states = new_states[:, :-1]
    state_decay_out = torch.exp(A_cumsum)
    C_times_states = Cm[..., None, :] * states[:, :, None, ...]
    Y_off = C_times_states.sum(-1) * state_decay_out.permute(0, 2, 3, 1)[..., None]
    y = Y_diag + Y_off
    y = y.reshape(Bsz, -1, nheads, head_dim)
    y = y + D_residual
    if pad > 0:
        y = y[:, :L, :, :]
    return y.reshape(Bsz, L, -1)


class Mamba2Mixer(nn.Module):
    def __init__(self, H, D, nheads, head_dim, G, N, K, chunk, use_bias, conv_bias, eps, gated_norm=True,
                 out_bias=None, falcon=None):
        super().__init__()
        self.D_, self.nheads, self.head_dim, self.G, self.N, self.chunk = D, nheads, head_dim, G, N, chunk
        self.conv_dim = D + 2 * G * N
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, K, groups=self.conv_dim, padding=K - 1, bias=conv_bias)
        self.in_proj = nn.Linear(H, D + self.conv_dim + nheads, bias=use_bias)
        self.dt_bias = nn.Parameter(torch.ones(nheads))
        self.A_log = nn.Parameter(torch.log(torch.arange(1, nheads + 1, dtype=torch.float32)))
        self.norm = GatedRMSNorm(D, eps) if gated_norm else None
        self.D = nn.Parameter(torch.ones(nheads))
        self.out_proj = nn.Linear(D, H, bias=use_bias if out_bias is None else out_bias)
        self.falcon = falcon  # (ssm_in_multiplier, ssm_multipliers) for falcon_h1
        if falcon is not None:  # FalconH1Model.compute_mup_vector, a non-persistent buffer per layer
            mults = falcon[1]
            v = torch.ones(1, 1, 2 * D + 2 * G * N + nheads)
            v[:, :, :D] *= mults[0]
            v[:, :, D:2 * D] *= mults[1]
            v[:, :, 2 * D:2 * D + G * N] *= mults[2]
            v[:, :, 2 * D + G * N:2 * D + 2 * G * N] *= mults[3]
            v[:, :, 2 * D + 2 * G * N:] *= mults[4]
            self.register_buffer("mup_vector", v, persistent=False)

    def forward(self, x):
        Bsz, L, _ = x.shape
        dtype = x.dtype
        if self.falcon is not None:
            x = x * self.falcon[0]
        proj = self.in_proj(x)
        if self.falcon is not None:
            proj = proj * self.mup_vector
        gate, xBC, dt = proj.split([self.D_, self.conv_dim, self.nheads], dim=-1)
        xBC = F.silu(self.conv1d(xBC.transpose(1, 2))[..., :L].transpose(1, 2))
        hs, Bm, Cm = torch.split(xBC, [self.D_, self.G * self.N, self.G * self.N], dim=-1)
        A = -torch.exp(self.A_log.float())
        dt = F.softplus(dt + self.dt_bias)
        y = ssd_naive(hs, dt, A, Bm, Cm, self.D, self.nheads, self.head_dim, self.N, self.chunk, (0.0, float("inf")))
        if self.norm is not None:
            so = self.norm(y, gate)
        else:  # FalconH1Mixer with mamba_rms_norm=False
            so = y * F.silu(gate)
        return self.out_proj(so.to(dtype))


class Mamba2Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        H = c["hidden_size"]
        D = int(c.get("expand", 2) * H)
        eps = c.get("layer_norm_epsilon", 1e-5)
        self.residual_in_fp32 = c.get("residual_in_fp32", True)
        self.norm = RMSNorm(H, eps)
        self.mixer = Mamba2Mixer(H, D, c["num_heads"], c["head_dim"], c.get("n_groups", 8), c.get("state_size", 128),
                                 c.get("conv_kernel", 4), c.get("chunk_size", 256), c.get("use_bias", False),
                                 c.get("use_conv_bias", True), eps)

    def forward(self, x):
        r = x
        x = self.norm(x.to(dtype=self.norm.weight.dtype))
        if self.residual_in_fp32:
            r = r.to(torch.float32)
        return r + self.mixer(x)


class Mamba2ForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        H, V = c["hidden_size"], c["vocab_size"]
        self.embeddings = nn.Embedding(V, H)
        self.layers = nn.ModuleList([Mamba2Block(c) for _ in range(c["num_hidden_layers"])])
        self.norm_f = RMSNorm(H, c.get("layer_norm_epsilon", 1e-5))
        self.lm_head = nn.Linear(H, V, bias=False)
        if c.get("tie_word_embeddings", False):
            self.lm_head.weight = self.embeddings.weight
        self.ckpt = False

    def forward(self, ids, labels):
        x = self.embeddings(ids)
        for layer in self.layers:
            x = torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=False) if self.ckpt else layer(x)
        logits = self.lm_head(self.norm_f(x).to(self.lm_head.weight.dtype))
        return shifted_loss(logits, labels)


# ---------------------------------------------------------------------------------------
# Jamba (modeling_jamba.py): Mamba / attention layers, each followed by an MLP or a MoE
# ---------------------------------------------------------------------------------------
class GatedMLP(nn.Module):  # JambaMLP / LlamaMLP; FalconH1MLP with its two multipliers
    def __init__(self, h, f, mults=None):
        super().__init__()
        self.gate_proj = nn.Linear(h, f, bias=False)
        self.up_proj = nn.Linear(h, f, bias=False)
        self.down_proj = nn.Linear(f, h, bias=False)
        self.mults = mults

    def forward(self, x):
        if self.mults is not None:  # FalconH1MLP.forward
            y = self.up_proj(x) * F.silu(self.gate_proj(x) * self.mults[0])
            return self.down_proj(y) * self.mults[1]
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class JambaSparseMoe(nn.Module):  # JambaSparseMoeBlock: softmax, top-k (no renormalisation), loop over experts
    def __init__(self, c):
        super().__init__()
        h, f = c["hidden_size"], c["intermediate_size"]
        self.E, self.k = c["num_experts"], c["num_experts_per_tok"]
        self.router = nn.Linear(h, self.E, bias=False)
        self.experts = nn.ModuleList([GatedMLP(h, f) for _ in range(self.E)])

    def forward(self, x):
        B, S, H = x.shape
        x = x.view(-1, H)
        logits = self.router(x)
        rw = F.softmax(logits, dim=1, dtype=torch.float)
        rw, sel = torch.topk(rw, self.k, dim=-1)
        rw = rw.to(x.dtype)
        final = torch.zeros((B * S, H), dtype=x.dtype)
        mask = F.one_hot(sel, num_classes=self.E).permute(2, 1, 0)
        for e in range(self.E):
            idx, top_x = torch.where(mask[e])
            if top_x.shape[0] == 0:
                continue
            cur = x[None, top_x].reshape(-1, H)
            out = self.experts[e](cur) * rw[top_x, idx, None]
            final.index_add_(0, top_x, out.to(x.dtype))
        return final.reshape(B, S, H)


class JambaAttention(nn.Module):  # JambaAttention (eager): no positional encoding
    def __init__(self, c):
        super().__init__()
        h, self.nh, self.nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.hd = h // self.nh
        self.q_proj = nn.Linear(h, self.nh * self.hd, bias=False)
        self.k_proj = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, h, bias=False)
        self.p = c.get("attention_dropout", 0.0)

    def forward(self, x, mask):
        B, S, H = x.shape
        q = self.q_proj(x).view(B, S, self.nh, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, S, self.nkv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, S, self.nkv, self.hd).transpose(1, 2)
        k, v = repeat_kv(k, self.nh // self.nkv), repeat_kv(v, self.nh // self.nkv)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.hd)
        w = w + mask[:, :, :, : k.shape[-2]]
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        w = F.dropout(w, p=self.p, training=self.training)
        o = torch.matmul(w, v).transpose(1, 2).contiguous().reshape(B, S, H)
        return self.o_proj(o)


class JambaLayer(nn.Module):  # JambaAttentionDecoderLayer / JambaMambaDecoderLayer
    def __init__(self, c, i):
        super().__init__()
        h, eps = c["hidden_size"], c.get("rms_norm_eps", 1e-6)
        self.is_attn = i % c.get("attn_layer_period", 8) == c.get("attn_layer_offset", 4)
        if self.is_attn:
            self.self_attn = JambaAttention(c)
        else:
            D = c.get("mamba_expand", 2) * h
            R = c.get("mamba_dt_rank", "auto")
            R = math.ceil(h / 16) if R == "auto" else R
            self.mamba = Mamba1Mixer(h, D, c.get("mamba_d_state", 16), c.get("mamba_d_conv", 4), R,
                                     c.get("mamba_proj_bias", False), c.get("mamba_conv_bias", True), "jamba", eps)
        moe = i % c.get("expert_layer_period", 2) == c.get("expert_layer_offset", 1) and c.get("num_experts", 16) > 1
        self.feed_forward = JambaSparseMoe(c) if moe else GatedMLP(h, c["intermediate_size"])
        self.input_layernorm, self.pre_ff_layernorm = RMSNorm(h, eps), RMSNorm(h, eps)

    def forward(self, x, mask):
        r = x
        x = self.input_layernorm(x)
        x = self.self_attn(x, mask) if self.is_attn else self.mamba(x)
        x = r + x
        r = x
        return r + self.feed_forward(self.pre_ff_layernorm(x))


class JambaForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, V = c["hidden_size"], c["vocab_size"]
        self.embed_tokens = nn.Embedding(V, h, padding_idx=c.get("pad_token_id", 0))
        self.layers = nn.ModuleList([JambaLayer(c, i) for i in range(c["num_hidden_layers"])])
        self.final_layernorm = RMSNorm(h, c.get("rms_norm_eps", 1e-6))
        self.lm_head = nn.Linear(h, V, bias=False)
        if c.get("tie_word_embeddings", False):
            self.lm_head.weight = self.embed_tokens.weight
        self.ckpt = False

    def model(self, ids):  # JambaModel.forward: _update_causal_mask without an attention_mask
        B, S = ids.shape
        x = self.embed_tokens(ids)
        mn = torch.finfo(x.dtype).min
        cache_position = torch.arange(S)
        mask = torch.full((S, S), fill_value=mn, dtype=x.dtype)
        mask = torch.triu(mask, diagonal=1)
        mask *= torch.arange(S) > cache_position.reshape(-1, 1)
        mask = mask[None, None, :, :].expand(B, 1, -1, -1)
        for layer in self.layers:
            x = torch.utils.checkpoint.checkpoint(layer, x, mask, use_reentrant=False) if self.ckpt else layer(x, mask)
        return self.final_layernorm(x)

    def forward(self, ids, labels):
        return causal_lm_loss(self.lm_head(self.model(ids)), labels)


# ---------------------------------------------------------------------------------------
# Falcon-H1 (modular_falcon_h1.py): every layer runs a Mamba-2 mixer and attention side by
# side on the same normed input, then a SwiGLU MLP; muP multipliers on every branch
# ---------------------------------------------------------------------------------------
class FalconH1Attention(nn.Module):  # LlamaAttention with key_multiplier, eager_attention_forward
    def __init__(self, c):
        super().__init__()
        h, self.nh, self.nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.hd = c.get("head_dim") or h // self.nh
        self.q_proj = nn.Linear(h, self.nh * self.hd, bias=False)
        self.k_proj = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, h, bias=False)
        self.key_multiplier = c.get("key_multiplier", 1.0)

    def forward(self, x, cos, sin, mask):
        B, S, _ = x.shape
        shape = (B, S, -1, self.hd)
        q = self.q_proj(x).view(shape).transpose(1, 2)
        k = self.k_proj(x).view(shape).transpose(1, 2) * self.key_multiplier
        v = self.v_proj(x).view(shape).transpose(1, 2)
        cu, su = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = (q * cu) + (rotate_half(q) * su), (k * cu) + (rotate_half(k) * su)
        n = self.nh // self.nkv
        k, v = repeat_kv(k, n), repeat_kv(v, n)
        w = torch.matmul(q, k.transpose(2, 3)) * self.hd ** -0.5
        w = w + mask[:, :, :, : k.shape[-2]]
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        o = torch.matmul(w, v).transpose(1, 2).contiguous()
        return self.o_proj(o.reshape(B, S, -1).contiguous())


class FalconH1Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, eps = c["hidden_size"], c.get("rms_norm_eps", 1e-5)
        d_ssm = c.get("mamba_d_ssm") or c.get("mamba_expand", 2) * h
        nh = c.get("mamba_n_heads", 128)
        dh = c.get("mamba_d_head", "auto")
        dh = d_ssm // nh if dh == "auto" else dh
        self.feed_forward = GatedMLP(h, c["intermediate_size"], c.get("mlp_multipliers", [1.0, 1.0]))
        self.mamba = Mamba2Mixer(h, d_ssm, nh, dh, c.get("mamba_n_groups", 1), c.get("mamba_d_state", 256),
                                 c.get("mamba_d_conv", 4), c.get("mamba_chunk_size", 256), c.get("mamba_proj_bias", False),
                                 c.get("mamba_conv_bias", True), eps, gated_norm=c.get("mamba_rms_norm", False),
                                 out_bias=c.get("projectors_bias", False),
                                 falcon=(c.get("ssm_in_multiplier", 1.0), c.get("ssm_multipliers", [1.0] * 5)))
        self.self_attn = FalconH1Attention(c)
        self.attention_in_multiplier = c.get("attention_in_multiplier", 1.0)
        self.ssm_out_multiplier = c.get("ssm_out_multiplier", 1.0)
        self.attn_out_multiplier = c.get("attention_out_multiplier", 1.0)
        self.input_layernorm, self.pre_ff_layernorm = RMSNorm(h, eps), RMSNorm(h, eps)

    def forward(self, x, cos, sin, mask):
        r = x
        x = self.input_layernorm(x)
        m = self.mamba(x) * self.ssm_out_multiplier
        a = self.self_attn(x * self.attention_in_multiplier, cos, sin, mask) * self.attn_out_multiplier
        x = r + (m + a)
        r = x
        return r + self.feed_forward(self.pre_ff_layernorm(x))


class FalconH1ForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, V = c["hidden_size"], c["vocab_size"]
        self.c = c
        self.embed_tokens = nn.Embedding(V, h, padding_idx=c.get("pad_token_id", 0))
        self.layers = nn.ModuleList([FalconH1Layer(c) for _ in range(c["num_hidden_layers"])])
        self.final_layernorm = RMSNorm(h, c.get("rms_norm_eps", 1e-5))
        self.lm_head = nn.Linear(h, V, bias=False)
        if c.get("tie_word_embeddings", False):
            self.lm_head.weight = self.embed_tokens.weight
        self.hd = c.get("head_dim") or h // c["num_attention_heads"]
        self.ckpt = False

    def model(self, ids):  # FalconH1Model.forward, eager: (s, s + 1) causal mask expanded over the batch
        c = self.c
        B, S = ids.shape
        x = self.embed_tokens(ids) * c.get("embedding_multiplier", 1.0)
        mn = torch.finfo(x.dtype).min
        T = S + 1  # target_length = past_seen_tokens + sequence_length + 1 without a 2-D mask
        cache_position = torch.arange(S)
        mask = torch.full((S, T), fill_value=mn, dtype=x.dtype)
        mask = torch.triu(mask, diagonal=1)
        mask *= torch.arange(T) > cache_position.reshape(-1, 1)
        mask = mask[None, None, :, :].expand(B, 1, -1, -1)
        cos, sin = rope(self.hd, S, c.get("rope_theta", 1e11), x.dtype)
        for layer in self.layers:
            if self.ckpt:
                x = torch.utils.checkpoint.checkpoint(layer, x, cos, sin, mask, use_reentrant=False)
            else:
                x = layer(x, cos, sin, mask)
        return self.final_layernorm(x)

    def forward(self, ids, labels):
        logits = self.lm_head(self.model(ids)) * self.c.get("lm_head_multiplier", 1.0)
        return causal_lm_loss(logits, labels)



# ---------------------------------------------------------------------------------------
# Nemotron-H (modeling_nemotron_h.py@897753a0): norm -> one mixer -> residual add per layer
# ---------------------------------------------------------------------------------------
class GroupedGatedRMSNorm(GatedRMSNorm):  # Zamba2RMSNormGated(group_size = intermediate // n_groups)
    def __init__(self, h, group_size, eps=1e-6):
        super().__init__(h, eps)
        self.group_size = group_size

    def forward(self, x, gate):
        dt = x.dtype
        x = x.to(torch.float32)
        x = x * F.silu(gate.to(torch.float32))
        *prefix, last = x.shape
        g = x.view(*prefix, last // self.group_size, self.group_size)
        var = g.pow(2).mean(-1, keepdim=True)
        g = g * torch.rsqrt(var + self.eps)
        x = g.view(*prefix, last)
        return self.weight * x.to(dt)


class NemotronHMLP(nn.Module):  # down_proj(relu2(up_proj(x))); ReLUSquaredActivation: square(relu(x))
    def __init__(self, c):
        super().__init__()
        h, f, b = c["hidden_size"], c["intermediate_size"], c.get("mlp_bias", False)
        self.up_proj = nn.Linear(h, f, bias=b)
        self.down_proj = nn.Linear(f, h, bias=b)

    def forward(self, x):
        return self.down_proj(torch.square(F.relu(self.up_proj(x))))


class NemotronHAttention(nn.Module):  # no positional encoding, eager_attention_forward
    def __init__(self, c):
        super().__init__()
        h, self.nh, self.nkv, self.hd = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.q_proj = nn.Linear(h, self.nh * self.hd, bias=False)
        self.k_proj = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, h, bias=False)
        self.p = c.get("attention_dropout", 0.0)

    def forward(self, x, mask):
        B, S, _ = x.shape
        q = self.q_proj(x).view(B, S, -1, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, S, -1, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, S, -1, self.hd).transpose(1, 2)
        k, v = repeat_kv(k, self.nh // self.nkv), repeat_kv(v, self.nh // self.nkv)
        w = torch.matmul(q, k.transpose(2, 3)) * self.hd ** -0.5
        w = w + mask
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        w = F.dropout(w, p=self.p, training=self.training)
        o = torch.matmul(w, v).transpose(1, 2).contiguous()
        return self.o_proj(o.reshape(B, S, -1).contiguous())


class NemotronHMoE(nn.Module):
    """NemotronHMoE (modeling_nemotron_h.py@897753a0) with NemotronHExperts' own loop (the eager experts
    implementation, as transformers 4.x runs every MoE): NemotronHTopkRouter's F.linear of fp32 copies, the
    sigmoid and group-limited top-k of route_tokens_to_experts (with grad: it has no no_grad), relu2 experts
    without a gate, the routing weights' product added into an fp32 zeros_like, then the shared NemotronHMLP."""

    def __init__(self, c):
        super().__init__()
        h, E, F_e = c["hidden_size"], c["n_routed_experts"], c["moe_intermediate_size"]
        self.E, self.k, self.groups = E, c["num_experts_per_tok"], c.get("n_group", 1)
        self.topk_group, self.scale = c.get("topk_group", 1), c.get("routed_scaling_factor", 1.0)
        self.gate_weight = nn.Parameter(torch.randn(E, h) * 0.02)
        self.register_buffer("e_score_correction_bias", torch.zeros(E))
        self.up_proj = nn.Parameter(torch.randn(E, F_e, h) * 0.02)
        self.down_proj = nn.Parameter(torch.randn(E, h, F_e) * 0.02)
        self.shared_experts = NemotronHMLP(dict(c, intermediate_size=c["moe_shared_expert_intermediate_size"]))

    def route(self, logits):
        logits = logits.sigmoid()
        choice = logits + self.e_score_correction_bias
        group_scores = choice.view(-1, self.groups, self.E // self.groups).topk(2, dim=-1)[0].sum(dim=-1)
        group_idx = torch.topk(group_scores, k=self.topk_group, dim=-1, sorted=False)[1]
        group_mask = torch.zeros_like(group_scores)
        group_mask.scatter_(1, group_idx, 1)
        score_mask = group_mask.unsqueeze(-1).expand(-1, self.groups, self.E // self.groups).reshape(-1, self.E)
        scores = choice.masked_fill(~score_mask.bool(), 0.0)
        idx = torch.topk(scores, k=self.k, dim=-1, sorted=False)[1]
        w = logits.gather(1, idx)
        w /= w.sum(dim=-1, keepdim=True) + 1e-20
        return idx, w * self.scale

    def forward(self, x):
        residuals, shape = x, x.shape
        logits = F.linear(x.view(-1, shape[-1]).type(torch.float32), self.gate_weight.type(torch.float32))
        idx, w = self.route(logits)
        x = x.view(-1, shape[-1])
        out = torch.zeros_like(x, dtype=w.dtype)
        with torch.no_grad():
            mask = F.one_hot(idx, num_classes=self.E).permute(2, 1, 0)
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero().squeeze(-1)
        for e in hit:
            e = e.item()
            pos, tok = torch.where(mask[e])
            y = F.linear(x[tok], self.up_proj[e])
            y = F.linear(torch.square(F.relu(y)), self.down_proj[e])
            out.index_add_(0, tok, (y * w[tok, pos, None]).to(out.dtype))
        return out.to(x.dtype).view(*shape) + self.shared_experts(residuals)


class NemotronHBlock(nn.Module):
    def __init__(self, c, kind):
        super().__init__()
        h, eps = c["hidden_size"], c.get("layer_norm_epsilon", 1e-5)
        self.kind = kind
        self.norm = RMSNorm(h, eps)
        if kind == "M":
            D = c["mamba_num_heads"] * c["mamba_head_dim"]
            G = c.get("n_groups", 8)
            self.mixer = Mamba2Mixer(h, D, c["mamba_num_heads"], c["mamba_head_dim"], G, c.get("ssm_state_size", 128),
                                     c.get("conv_kernel", 4), c.get("chunk_size", 128), c.get("use_bias", False),
                                     c.get("use_conv_bias", True), eps)
            self.mixer.norm = GroupedGatedRMSNorm(D, D // G, eps)
        elif kind == "*":
            self.mixer = NemotronHAttention(c)
        elif kind == "E":
            self.mixer = NemotronHMoE(c)
        else:
            self.mixer = NemotronHMLP(c)

    def forward(self, x, mask):
        r = x
        x = self.norm(x.to(dtype=self.norm.weight.dtype))
        x = self.mixer(x, mask) if self.kind == "*" else self.mixer(x)
        return r + x


class NemotronHForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, V = c["hidden_size"], c["vocab_size"]
        self.embeddings = nn.Embedding(V, h)
        self.layers = nn.ModuleList([NemotronHBlock(c, k) for k in c["hybrid_override_pattern"]])
        self.norm_f = RMSNorm(h, c.get("layer_norm_epsilon", 1e-5))
        self.lm_head = nn.Linear(h, V, bias=False)
        if c.get("tie_word_embeddings", False):
            self.lm_head.weight = self.embeddings.weight
        self.ckpt = False

    def model(self, ids):  # NemotronHModel.forward: create_causal_mask (eager: where(bool mask, 0, min)), no mamba mask
        B, S = ids.shape
        x = self.embeddings(ids)
        allowed = torch.ones(S, S, dtype=torch.bool).tril()[None, None].expand(B, 1, S, S)
        mask = torch.where(allowed, torch.tensor(0.0, dtype=x.dtype), torch.finfo(x.dtype).min)
        for layer in self.layers:
            x = torch.utils.checkpoint.checkpoint(layer, x, mask, use_reentrant=False) if self.ckpt else layer(x, mask)
        return self.norm_f(x)

    def forward(self, ids, labels):  # lm_head(...).float(), loss_function
        return causal_lm_loss(self.lm_head(self.model(ids)).float(), labels)


# ---------------------------------------------------------------------------------------
# small configs (config.json dicts of small models of each family)
# ---------------------------------------------------------------------------------------
CONFIGS = {
    "mamba": {"architectures": ["MambaForCausalLM"], "model_type": "mamba", "hidden_size": 64, "num_hidden_layers": 4,
              "state_size": 16, "expand": 2, "intermediate_size": 128, "conv_kernel": 4, "time_step_rank": 4,
              "use_bias": False, "use_conv_bias": True, "vocab_size": 1024, "residual_in_fp32": True,
              "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True, "hidden_act": "silu"},
    "falcon_mamba": {"architectures": ["FalconMambaForCausalLM"], "model_type": "falcon_mamba", "hidden_size": 64,
                     "num_hidden_layers": 4, "state_size": 16, "expand": 2, "intermediate_size": 128, "conv_kernel": 4,
                     "time_step_rank": 4, "use_bias": False, "use_conv_bias": True, "vocab_size": 1024,
                     "residual_in_fp32": True, "layer_norm_epsilon": 1e-5, "mixer_rms_eps": 1e-6,
                     "tie_word_embeddings": False, "hidden_act": "silu"},
    "mamba2": {"architectures": ["Mamba2ForCausalLM"], "model_type": "mamba2", "hidden_size": 256, "num_hidden_layers": 4,
               "expand": 2, "num_heads": 8, "head_dim": 64, "n_groups": 2, "state_size": 32, "conv_kernel": 4,
               "chunk_size": 64, "use_bias": False, "use_conv_bias": True, "vocab_size": 4096, "residual_in_fp32": True,
               "layer_norm_epsilon": 1e-5, "rms_norm": True, "tie_word_embeddings": False, "hidden_act": "silu"},
    "jamba": {"architectures": ["JambaForCausalLM"], "model_type": "jamba", "hidden_size": 64, "num_hidden_layers": 8,
              "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "num_experts": 4,
              "num_experts_per_tok": 2, "expert_layer_period": 2, "expert_layer_offset": 1, "attn_layer_period": 4,
              "attn_layer_offset": 2, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_dt_rank": 4,
              "mamba_conv_bias": True, "mamba_proj_bias": False, "use_mamba_kernels": False, "vocab_size": 1024,
              "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "attention_dropout": 0.0, "hidden_act": "silu",
              "pad_token_id": 0},
    "falcon_h1": {"architectures": ["FalconH1ForCausalLM"], "model_type": "falcon_h1", "hidden_size": 256,
                  "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32,
                  "intermediate_size": 512, "mamba_d_ssm": 512, "mamba_n_heads": 8, "mamba_d_head": 64,
                  "mamba_n_groups": 1, "mamba_d_state": 32, "mamba_d_conv": 4, "mamba_chunk_size": 64,
                  "mamba_conv_bias": True, "mamba_proj_bias": False, "mamba_rms_norm": False,
                  "mamba_norm_before_gate": False, "projectors_bias": False, "vocab_size": 4096, "rms_norm_eps": 1e-5,
                  "rope_theta": 1e11, "tie_word_embeddings": False, "attention_dropout": 0.0, "hidden_act": "silu",
                  "embedding_multiplier": 5.656854249492381, "lm_head_multiplier": 0.0390625,
                  "attention_in_multiplier": 1.0, "attention_out_multiplier": 0.9375, "key_multiplier": 0.390625,
                  "ssm_in_multiplier": 1.25, "ssm_out_multiplier": 0.23570226039551587,
                  "ssm_multipliers": [0.3535533905932738, 0.25, 0.3535533905932738, 0.5, 0.3535533905932738],
                  "mlp_multipliers": [0.8838834764831844, 0.5859375], "pad_token_id": 0},
    "nemotron_h": {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hidden_size": 256,
                   "num_hidden_layers": 7, "hybrid_override_pattern": "M-M*-M-", "num_attention_heads": 8,
                   "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 512, "mlp_hidden_act": "relu2",
                   "mamba_num_heads": 8, "mamba_head_dim": 64, "n_groups": 2, "ssm_state_size": 32, "conv_kernel": 4,
                   "chunk_size": 64, "use_conv_bias": True, "use_bias": False, "mlp_bias": False, "vocab_size": 4096,
                   "layer_norm_epsilon": 1e-5, "tie_word_embeddings": False, "attention_dropout": 0.0,
                   "mamba_hidden_act": "silu", "residual_in_fp32": False},
    # Nemotron 3 Nano's kinds (Mamba-2, MoE, attention), small: 8 relu2 experts, top 2, a shared expert.
    "nemotron_h_moe": {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hidden_size": 256,
                       "num_hidden_layers": 6, "hybrid_override_pattern": "MEM*EM", "num_attention_heads": 8,
                       "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 512, "mlp_hidden_act": "relu2",
                       "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 384,
                       "moe_shared_expert_intermediate_size": 512, "n_group": 1, "topk_group": 1,
                       "norm_topk_prob": True, "routed_scaling_factor": 2.5,
                       "mamba_num_heads": 8, "mamba_head_dim": 64, "n_groups": 2, "ssm_state_size": 32,
                       "conv_kernel": 4, "chunk_size": 64, "use_conv_bias": True, "use_bias": False, "mlp_bias": False,
                       "vocab_size": 4096, "layer_norm_epsilon": 1e-5, "tie_word_embeddings": False,
                       "attention_dropout": 0.0, "mamba_hidden_act": "silu", "residual_in_fp32": False},
}

# (batch, seq, checkpointing, precision) per family. The sequential Mamba-1 scan is one Python
# step per token and each step's backward of `dA[:, :, i, :]` materialises a gradient of the
# whole (b, d, l, n) tensor, so its time grows as b*d*l^2*n: its models are narrow and short.
CASES = {
    "mamba": ((2, 128, False, "fp32"), (4, 128, False, "fp32"), (2, 192, False, "fp32"), (4, 128, True, "fp32"),
              (2, 64, False, "pure_bf16")),
    "falcon_mamba": ((2, 128, False, "fp32"), (4, 128, False, "fp32")),
    "mamba2": ((2, 256, False, "fp32"), (4, 512, False, "fp32"), (2, 200, False, "fp32"), (4, 512, True, "fp32"),
               (2, 256, False, "pure_bf16")),
    "jamba": ((2, 128, False, "fp32"), (4, 128, False, "fp32")),
    "falcon_h1": ((2, 256, False, "fp32"), (4, 512, False, "fp32")),
    "nemotron_h": ((2, 256, False, "fp32"),),
    "nemotron_h_moe": ((2, 256, False, "fp32"), (4, 256, False, "fp32")),
}


def build(c):
    t = c["model_type"]
    if t in ("mamba", "falcon_mamba"):
        return MambaForCausalLM(c)
    if t == "mamba2":
        return Mamba2ForCausalLM(c)
    if t == "jamba":
        return JambaForCausalLM(c)
    if t == "falcon_h1":
        return FalconH1ForCausalLM(c)
    if t == "nemotron_h":
        return NemotronHForCausalLM(c)
    raise ValueError(t)


def run_case(c, B, S, ckpt, prec):
    tracer.reset_seed()
    with tracer.Tracker() as tr:
        model = build(c)
        if prec == "pure_bf16":
            model = model.to(torch.bfloat16)
        model.train()
        model.ckpt = ckpt
        tr.mark("built")
        opt = tracer.make_opt("adamw", model.parameters(), None)
        x = torch.randint(0, c["vocab_size"], (B, S))
        y = x.clone()
        tr.mark("inputs")
        seconds, _ = tracer.train_two_steps(tr, lambda: model(x, y), opt)
        times = [round(t, 2) for t in seconds]
        nparams = tracer.parameter_count(model)
        params_enum = tracer.tensor_bytes(list(model.parameters()))
        buffers_enum = tracer.tensor_bytes(list(model.buffers()))
        opt_enum = tracer.optimizer_state_bytes([opt])
        del model, opt, x, y
    d = dict(nparams=nparams, params_enum=params_enum, buffers_enum=buffers_enum, opt_enum=opt_enum,
             built=tr.live("built"), inputs_live=tr.live("inputs"), step_seconds=times, end_live=tr.live("__end__"))
    d.update(tracer.step_readings(tr))
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs/data/cpu_traced_ssm.json")
    ap.add_argument("--only", default=None)
    a = ap.parse_args()
    out = []
    for name, c in CONFIGS.items():
        if a.only and name not in a.only.split(","):
            continue
        for B, S, ckpt, prec in CASES[name]:
            t0 = time.time()
            d = run_case(c, B, S, ckpt, prec)
            rec = {
                "id": f"cpu-{name}-small-b{B}-s{S}-adamw" + ("" if prec == "fp32" else "-" + prec) + ("-ckpt" if ckpt else ""),
                "source": "tools/trace/ssm_cases.py (harness: shared/ground-truth/measure.py)",
                "measure": "cpu-tensor-peak",
                "device": "cpu",
                # The code is transformers' own torch path, re-implemented: the record reader takes the
                # model from hf_config alone (the notes say which path ran).
                "model": {"hf_config": c, "params": d["nparams"]},
                "train": dict(batch=B, seq=S, precision=prec, optimizer="adamw",
                              optimizer_impl="single_tensor (torch 1.13 CPU default)",
                              checkpointing="full" if ckpt else "none", attention="eager", grad_accum=1,
                              ssm_path="torch"),
                **tracer.peak_fields(d),
                "components": tracer.components(d),
                "detail": d,
                "torch": torch.__version__,
                "notes": "peak live CPU tensor bytes of training step 2 (absolute); a torch-only re-implementation of the "
                         "transformers torch path (slow_forward / torch_forward); the SSM layers run the torch-only "
                         "path, which saves far more than the fused mamba-ssm kernels (see docs/research/ssm-multimodal-timm.md)",
            }
            out.append(rec)
            print(f"{rec['id']}: params={d['nparams']} peak={d['s2_peak']} act={d['s2_fwd'] - d['s2_start']} "
                  f"end_live={d['end_live']} ({time.time() - t0:.1f}s)", flush=True)
            tracer.write_records(a.out, out)


if __name__ == "__main__":
    main()
