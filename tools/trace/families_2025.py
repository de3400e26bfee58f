#!/usr/bin/python3
"""CPU traces of small models of the 2025 Hugging Face families (MLA + DeepSeek MoE, gpt-oss,
Llama 4 text, Granite, GraniteMoE, PhiMoE, Cohere / Cohere 2, GPTBigCode, InternLM2, OLMoE, EXAONE 4).

Each model is a plain-torch re-implementation of the family's forward in training mode, eager
attention, written from the modeling file cited in its class comment (file@commit as read with
the search tools; docs/research/families-2025.md has the line-by-line notes). The harness is
../shared/ground-truth/measure.py (Tracker: peak live CPU tensor bytes of the 2nd training
step, fp32, AdamW single-tensor). Records keep measure.py's schema, with
"model": {"hf_config": {...}} so memscale reads them with its config reader once the family
has one.

torch 1.13 (Debian python3-torch) stands in for the torch 2.x the files target: no
F.scaled_dot_product_attention is needed (eager path only); torch.polar / view_as_complex
(DeepSeek-V2 and Llama 4 rotary) exist in 1.13 with autograd.

Run from the project root:
    /usr/bin/python3 tools/trace/families_2025.py --out docs/data/cpu_traced_families_2025.json
    /usr/bin/python3 tools/trace/families_2025.py --only gpt_oss --out /tmp/x.json
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracer

torch.set_num_threads(1)


# ---------------------------------------------------------------------------------------
# shared pieces, as the modeling files write them
# ---------------------------------------------------------------------------------------
class RMSNorm(nn.Module):  # LlamaRMSNorm / DeepseekV3RMSNorm / InternLM2RMSNorm / GraniteRMSNorm
    def __init__(self, h, eps=1e-6, cast_after_weight=False):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps
        self.cast_after_weight = cast_after_weight  # GptOssRMSNorm: (weight * x).to(dtype)

    def forward(self, x):
        dt = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        if self.cast_after_weight:
            return (self.weight * x).to(dt)
        return self.weight * x.to(dt)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, n):  # modeling_llama.py repeat_kv
    if n == 1:
        return x
    b, kv, s, d = x.shape
    return x[:, :, None, :, :].expand(b, kv, n, s, d).reshape(b, kv * n, s, d)


def rope_cos_sin(dim, S, theta, dtype, cat=True, scaling=1.0):  # LlamaRotaryEmbedding.forward, once per model forward
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    pos = torch.arange(S).unsqueeze(0)
    freqs = (inv[None, :, None].float().expand(1, -1, 1) @ pos[:, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1) if cat else freqs
    return (emb.cos() * scaling).to(dtype), (emb.sin() * scaling).to(dtype)


def rope_polar(dim, S, theta):  # DeepseekV2RotaryEmbedding / Llama4TextRotaryEmbedding: complex freqs_cis
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    pos = torch.arange(S).unsqueeze(0)
    freqs = (inv[None, :, None].float().expand(1, -1, 1) @ pos[:, None, :].float()).transpose(1, 2)
    return torch.polar(torch.ones_like(freqs), freqs)


def causal_mask(S, dtype, window=None, chunk=None, batch=None):
    """The eager (1, 1, S, S) additive mask of create_causal_mask / create_sliding_window_causal_mask
    / create_chunked_causal_mask: 0 where the key is visible, finfo.min elsewhere. With `batch`, the
    (batch, 1, S, S) tensor masking_utils.py@2ccc6cae eager_mask materialises (torch.where over
    sdpa_mask's batch-expanded bool mask)."""
    i = torch.arange(S)[:, None]
    j = torch.arange(S)[None, :]
    ok = j <= i
    if window is not None:
        ok = ok & (i - j < window)
    if chunk is not None:
        ok = ok & (i // chunk == j // chunk)
    if batch is not None:
        return torch.where(ok[None, None].expand(batch, -1, -1, -1), torch.tensor(0.0, dtype=dtype),
                           torch.finfo(dtype).min)
    m = torch.zeros((S, S), dtype=dtype).masked_fill(~ok, torch.finfo(dtype).min)
    return m[None, None]


def eager_attention(q, k, v, mask, scaling, dropout, training, softmax_fp32=True):
    """modeling_llama.py eager_attention_forward (llama4: softmax in the input dtype)."""
    n = q.shape[1] // k.shape[1]
    k, v = repeat_kv(k, n), repeat_kv(v, n)
    w = torch.matmul(q, k.transpose(2, 3)) * scaling
    if mask is not None:
        w = w + mask[:, :, :, : k.shape[-2]]
    if softmax_fp32:
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
    else:
        w = F.softmax(w, dim=-1)
    w = F.dropout(w, p=dropout, training=training)
    o = torch.matmul(w, v)
    return o.transpose(1, 2).contiguous()


class GatedMLP(nn.Module):  # LlamaMLP / DeepseekV3MLP / InternLM2MLP (w1, w3, w2) / Llama4TextMLP
    def __init__(self, h, f, bias=False):
        super().__init__()
        self.gate_proj = nn.Linear(h, f, bias=bias)
        self.up_proj = nn.Linear(h, f, bias=bias)
        self.down_proj = nn.Linear(f, h, bias=bias)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def causal_lm_loss(logits, labels):
    """loss/loss_utils.py ForCausalLMLoss (transformers >= 4.48): upcast, pad and shift the labels."""
    logits = logits.float()
    labels = F.pad(labels, (0, 1), value=-100)
    shift = labels[..., 1:].contiguous()
    return F.cross_entropy(logits.view(-1, logits.size(-1)), shift.view(-1), ignore_index=-100)


def shifted_logits_loss(logits, labels):
    """The pre-4.48 loss inside XForCausalLM.forward: a shifted contiguous copy of the logits."""
    sl = logits[..., :-1, :].contiguous()
    lb = labels[..., 1:].contiguous()
    return F.cross_entropy(sl.view(-1, sl.size(-1)), lb.view(-1))


# ---------------------------------------------------------------------------------------
# DeepSeek V2 / V3: multi-head latent attention and the DeepSeek MoE
# transformers models/deepseek_v3/modeling_deepseek_v3.py@00b676f8 (v4.5x: ModuleList experts),
# models/deepseek_v2/modeling_deepseek_v2.py@0233e509 (complex rotary, softmax greedy routing;
# its experts are 3-D parameters, traced as the "fused3d" variant)
# ---------------------------------------------------------------------------------------
def yarn_get_mscale(scale=1, mscale=1):
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


class MLAttention(nn.Module):  # DeepseekV3Attention / DeepseekV2Attention
    def __init__(self, c, version):
        super().__init__()
        h = c["hidden_size"]
        self.version = version
        self.nh = c["num_attention_heads"]
        self.q_rank = c.get("q_lora_rank")
        self.kv_rank = c["kv_lora_rank"]
        self.nope, self.rope, self.v = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        self.qk = self.nope + self.rope
        bias = c.get("attention_bias", False)
        if self.q_rank is None:
            self.q_proj = nn.Linear(h, self.nh * self.qk, bias=False)
        else:
            self.q_a_proj = nn.Linear(h, self.q_rank, bias=bias)
            self.q_a_layernorm = RMSNorm(self.q_rank)
            self.q_b_proj = nn.Linear(self.q_rank, self.nh * self.qk, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(h, self.kv_rank + self.rope, bias=bias)
        self.kv_a_layernorm = RMSNorm(self.kv_rank)
        self.kv_b_proj = nn.Linear(self.kv_rank, self.nh * (self.nope + self.v), bias=False)
        self.o_proj = nn.Linear(self.nh * self.v, h, bias=bias)
        self.scaling = self.qk ** -0.5
        rs = c.get("rope_scaling")
        if version == 3 and rs and rs.get("mscale_all_dim"):
            m = yarn_get_mscale(rs["factor"], rs["mscale_all_dim"])
            self.scaling = self.scaling * m * m
        self.dropout = c.get("attention_dropout", 0.0)

    def forward(self, x, pos, mask):
        B, S, _ = x.shape
        if self.q_rank is None:
            q = self.q_proj(x)
        else:
            q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        q = q.view(B, S, -1, self.qk).transpose(1, 2)
        q_pass, q_rot = torch.split(q, [self.nope, self.rope], dim=-1)
        ckv = self.kv_a_proj_with_mqa(x)
        k_pass, k_rot = torch.split(ckv, [self.kv_rank, self.rope], dim=-1)
        k_pass = self.kv_b_proj(self.kv_a_layernorm(k_pass)).view(B, S, -1, self.nope + self.v).transpose(1, 2)
        k_pass, value = torch.split(k_pass, [self.nope, self.v], dim=-1)
        k_rot = k_rot.view(B, 1, S, self.rope)
        if self.version == 2:  # apply_rotary_emb with complex freqs_cis
            xq = torch.view_as_complex(q_rot.float().reshape(*q_rot.shape[:-1], -1, 2))
            xk = torch.view_as_complex(k_rot.float().reshape(*k_rot.shape[:-1], -1, 2))
            fc = pos.unsqueeze(1)
            q_rot = torch.view_as_real(xq * fc).flatten(3).type_as(q_rot)
            k_rot = torch.view_as_real(xk * fc).flatten(3).type_as(k_rot)
        else:  # apply_rotary_pos_emb_interleave (rope_interleave=True)
            cos, sin = pos
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
            b, hh, s, d = q_rot.shape
            qr = q_rot.view(b, hh, s, d // 2, 2).transpose(4, 3).reshape(b, hh, s, d)
            b, hh, s, d = k_rot.shape
            kr = k_rot.view(b, hh, s, d // 2, 2).transpose(4, 3).reshape(b, hh, s, d)
            q_rot = (qr * cos) + (rotate_half(qr) * sin)
            k_rot = (kr * cos) + (rotate_half(kr) * sin)
        k_rot = k_rot.expand(*k_pass.shape[:-1], -1)
        q = torch.cat((q_pass, q_rot), dim=-1)
        k = torch.cat((k_pass, k_rot), dim=-1)
        o = eager_attention(q, k, value, mask, self.scaling, self.dropout, self.training)
        return self.o_proj(o.reshape(B, S, -1).contiguous())


class DeepseekV3TopkRouter(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.k = c["num_experts_per_tok"]
        self.E = c["n_routed_experts"]
        self.scale = c.get("routed_scaling_factor", 2.5)
        self.n_group, self.topk_group = c.get("n_group", 8), c.get("topk_group", 4)
        self.norm = c.get("norm_topk_prob", True)
        self.weight = nn.Parameter(torch.empty((self.E, c["hidden_size"])).normal_(0, 0.02))
        self.register_buffer("e_score_correction_bias", torch.zeros(self.E))

    @torch.no_grad()
    def get_topk_indices(self, scores):
        s = scores.view(-1, self.E) + self.e_score_correction_bias.unsqueeze(0)
        gs = s.view(-1, self.n_group, self.E // self.n_group).topk(2, dim=-1)[0].sum(dim=-1)
        gi = torch.topk(gs, k=self.topk_group, dim=-1, sorted=False)[1]
        gm = torch.zeros_like(gs)
        gm.scatter_(1, gi, 1)
        sm = gm.unsqueeze(-1).expand(-1, self.n_group, self.E // self.n_group).reshape(-1, self.E)
        s = s.masked_fill(~sm.bool(), 0.0)
        return torch.topk(s, k=self.k, dim=-1, sorted=False)[1]

    def forward(self, x):
        x = x.view(-1, x.shape[-1])
        logits = F.linear(x.type(torch.float32), self.weight.type(torch.float32))
        scores = logits.sigmoid()
        idx = self.get_topk_indices(scores)
        w = scores.gather(1, idx)
        if self.norm:
            den = w.sum(dim=-1, keepdim=True) + 1e-20
            w /= den
        return idx, w * self.scale


class DeepseekV2Gate(nn.Module):  # DeepseekV2Moe.gate + route_tokens_to_experts (greedy)
    def __init__(self, c):
        super().__init__()
        self.k = c["num_experts_per_tok"]
        self.scale = c.get("routed_scaling_factor", 1.0)
        self.weight = nn.Parameter(torch.empty((c["n_routed_experts"], c["hidden_size"])).normal_(0, 0.02))

    def forward(self, x):
        logits = F.linear(x.type(torch.float32), self.weight.type(torch.float32))
        logits = logits.view(-1, logits.shape[-1]).softmax(dim=-1, dtype=torch.float32)
        w, idx = torch.topk(logits, k=self.k, dim=-1, sorted=False)
        return idx, w * self.scale


class Fused3DExperts(nn.Module):  # DeepseekV2Experts (@use_experts_implementation, eager loop)
    def __init__(self, E, h, f):
        super().__init__()
        self.E = E
        self.gate_up_proj = nn.Parameter(torch.empty(E, 2 * f, h).normal_(0, 0.02))
        self.down_proj = nn.Parameter(torch.empty(E, h, f).normal_(0, 0.02))

    def forward(self, x, idx, w):
        out = torch.zeros_like(x)
        with torch.no_grad():
            m = F.one_hot(idx, num_classes=self.E).permute(2, 1, 0)
            hit = torch.greater(m.sum(dim=(-1, -2)), 0).nonzero()
        for e in hit:
            e = e[0]
            pos, tok = torch.where(m[e])
            cur = x[tok]
            gate, up = F.linear(cur, self.gate_up_proj[e]).chunk(2, dim=-1)
            cur = F.silu(gate) * up
            cur = F.linear(cur, self.down_proj[e])
            cur = cur * w[tok, pos, None]
            out.index_add_(0, tok, cur.to(out.dtype))
        return out


class DeepseekMoE(nn.Module):  # DeepseekV3MoE (ModuleList experts, moe() loop) / DeepseekV2Moe
    def __init__(self, c, version, experts_impl):
        super().__init__()
        h, f = c["hidden_size"], c["moe_intermediate_size"]
        self.E = c["n_routed_experts"]
        self.impl = experts_impl
        if experts_impl == "fused3d":
            self.experts = Fused3DExperts(self.E, h, f)
        else:
            self.experts = nn.ModuleList([GatedMLP(h, f) for _ in range(self.E)])
        self.gate = DeepseekV3TopkRouter(c) if version == 3 else DeepseekV2Gate(c)
        self.shared_experts = GatedMLP(h, f * c["n_shared_experts"])

    def moe(self, x, idx, w):  # DeepseekV3MoE.moe
        final = torch.zeros_like(x, dtype=w.dtype)
        mask = F.one_hot(idx, num_classes=self.E).permute(2, 0, 1)
        for e in range(self.E):
            tok, slot = torch.where(mask[e])
            if tok.numel() > 0:
                ew = w[tok, slot]
                out = self.experts[e](x[tok])
                final.index_add_(0, tok, out * ew.unsqueeze(-1))
        return final.type(x.dtype)

    def forward(self, x):
        res, shape = x, x.shape
        idx, w = self.gate(x)
        x = x.view(-1, x.shape[-1])
        if self.impl == "fused3d":
            x = self.experts(x, idx, w).view(*shape)
        else:
            x = self.moe(x, idx, w).view(*shape)
        return x + self.shared_experts(res)


class DeepseekLayer(nn.Module):
    def __init__(self, c, i, version, experts_impl):
        super().__init__()
        h, eps = c["hidden_size"], c.get("rms_norm_eps", 1e-6)
        self.self_attn = MLAttention(c, version)
        if i >= c.get("first_k_dense_replace", 0):
            self.mlp = DeepseekMoE(c, version, experts_impl)
        else:
            self.mlp = GatedMLP(h, c["intermediate_size"])
        self.input_layernorm = RMSNorm(h, eps)
        self.post_attention_layernorm = RMSNorm(h, eps)

    def forward(self, x, pos, mask):
        x = x + self.self_attn(self.input_layernorm(x), pos, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class DeepseekForCausalLM(nn.Module):
    def __init__(self, c, version, experts_impl="modulelist"):
        super().__init__()
        self.c, self.version = c, version
        h, V = c["hidden_size"], c["vocab_size"]
        self.embed_tokens = nn.Embedding(V, h)
        self.layers = nn.ModuleList([DeepseekLayer(c, i, version, experts_impl) for i in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(h, c.get("rms_norm_eps", 1e-6))
        self.lm_head = nn.Linear(h, V, bias=False)

    def model(self, ids):
        c = self.c
        B, S = ids.shape
        x = self.embed_tokens(ids)
        mask = causal_mask(S, x.dtype)
        theta = c.get("rope_theta", 10000.0)
        if self.version == 2:
            pos = rope_polar(c["qk_rope_head_dim"], S, theta)
        else:
            pos = rope_cos_sin(c["qk_rope_head_dim"], S, theta, x.dtype)
        for layer in self.layers:
            x = layer(x, pos, mask)
        return self.norm(x)

    def forward(self, ids, labels):
        return causal_lm_loss(self.lm_head(self.model(ids)), labels)


# ---------------------------------------------------------------------------------------
# gpt-oss: attention sinks, alternating sliding window, MoE with 3-D expert parameters
# transformers models/gpt_oss/modeling_gpt_oss.py@00d4b3d2 (training path of GptOssExperts)
# ---------------------------------------------------------------------------------------
def gpt_oss_eager_attention(module, q, k, v, mask, scaling, dropout, training):
    n = q.shape[1] // k.shape[1]
    k, v = repeat_kv(k, n), repeat_kv(v, n)
    w = torch.matmul(q, k.transpose(2, 3)) * scaling
    w = w + mask[:, :, :, : k.shape[-2]]
    sinks = module.sinks.reshape(1, -1, 1, 1).expand(q.shape[0], -1, q.shape[-2], -1)
    combined = torch.cat([w, sinks], dim=-1)
    combined = combined - combined.max(dim=-1, keepdim=True).values
    probs = F.softmax(combined, dim=-1, dtype=combined.dtype)
    scores = probs[..., :-1]
    w = F.dropout(scores, p=dropout, training=training)
    o = torch.matmul(w, v)
    return o.transpose(1, 2).contiguous()


def gpt_oss_rotary(x, cos, sin):  # _apply_rotary_emb
    a, b = torch.chunk(x, 2, dim=-1)
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)


class GptOssAttention(nn.Module):
    def __init__(self, c, i):
        super().__init__()
        h = c["hidden_size"]
        self.nh, self.nkv, self.hd = c["num_attention_heads"], c["num_key_value_heads"], c.get("head_dim", 64)
        b = c.get("attention_bias", True)
        self.q_proj = nn.Linear(h, self.nh * self.hd, bias=b)
        self.k_proj = nn.Linear(h, self.nkv * self.hd, bias=b)
        self.v_proj = nn.Linear(h, self.nkv * self.hd, bias=b)
        self.o_proj = nn.Linear(self.nh * self.hd, h, bias=b)
        self.sinks = nn.Parameter(torch.empty(self.nh).normal_(0, 0.02))
        self.scaling = self.hd ** -0.5
        self.dropout = c.get("attention_dropout", 0.0)

    def forward(self, x, cos, sin, mask):
        B, S, _ = x.shape
        shape = (B, S, -1, self.hd)
        q = self.q_proj(x).view(shape).transpose(1, 2)
        k = self.k_proj(x).view(shape).transpose(1, 2)
        v = self.v_proj(x).view(shape).transpose(1, 2)
        c, s = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = gpt_oss_rotary(q, c, s), gpt_oss_rotary(k, c, s)
        o = gpt_oss_eager_attention(self, q, k, v, mask, self.scaling, self.dropout, self.training)
        return self.o_proj(o.reshape(B, S, -1).contiguous())


class GptOssExperts(nn.Module):
    def __init__(self, c):
        super().__init__()
        E, h, f = c["num_local_experts"], c["hidden_size"], c["intermediate_size"]
        self.E, self.h = E, h
        self.gate_up_proj = nn.Parameter(torch.empty(E, h, 2 * f).normal_(0, 0.02))
        self.gate_up_proj_bias = nn.Parameter(torch.zeros(E, 2 * f))
        self.down_proj = nn.Parameter(torch.empty(E, f, h).normal_(0, 0.02))
        self.down_proj_bias = nn.Parameter(torch.zeros(E, h))
        self.alpha = 1.702
        self.limit = c.get("swiglu_limit", 7.0)

    def forward(self, x, router_indices, routing_weights):
        B = x.shape[0]
        x = x.reshape(-1, self.h)
        num_experts = routing_weights.shape[1]
        nxt = torch.zeros_like(x, dtype=x.dtype)
        with torch.no_grad():
            m = F.one_hot(router_indices, num_classes=num_experts).permute(2, 1, 0)
            hit = torch.greater(m.sum(dim=(-1, -2)), 0).nonzero()
        for e in hit[:]:
            with torch.no_grad():
                _, tok = torch.where(m[e[0]])
            cur = x[tok]
            gate_up = cur @ self.gate_up_proj[e] + self.gate_up_proj_bias[e]
            gate, up = gate_up[..., ::2], gate_up[..., 1::2]
            gate = gate.clamp(min=None, max=self.limit)
            up = up.clamp(min=-self.limit, max=self.limit)
            glu = gate * torch.sigmoid(gate * self.alpha)
            out = ((up + 1) * glu) @ self.down_proj[e] + self.down_proj_bias[e]
            weighted = out[0] * routing_weights[tok, e, None]
            nxt.index_add_(0, tok, weighted.to(x.dtype))
        return nxt.view(B, -1, self.h)


class GptOssRouter(nn.Module):  # GptOssTopKRouter
    def __init__(self, c):
        super().__init__()
        self.k, self.h = c["num_experts_per_tok"], c["hidden_size"]
        self.weight = nn.Parameter(torch.empty(c["num_local_experts"], self.h).normal_(0, 0.02))
        self.bias = nn.Parameter(torch.zeros(c["num_local_experts"]))

    def forward(self, x):
        x = x.reshape(-1, self.h)
        logits = F.linear(x, self.weight, self.bias)
        top, idx = torch.topk(logits, self.k, dim=-1)
        top = F.softmax(top, dim=1, dtype=top.dtype)
        scores = torch.zeros_like(logits).scatter_(1, idx, top)
        return scores, idx


class GptOssLayer(nn.Module):
    def __init__(self, c, i):
        super().__init__()
        h, eps = c["hidden_size"], c.get("rms_norm_eps", 1e-5)
        self.kind = c["layer_types"][i]
        self.self_attn = GptOssAttention(c, i)
        self.router = GptOssRouter(c)
        self.experts = GptOssExperts(c)
        self.input_layernorm = RMSNorm(h, eps, cast_after_weight=True)
        self.post_attention_layernorm = RMSNorm(h, eps, cast_after_weight=True)

    def forward(self, x, cos, sin, masks):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, masks[self.kind])
        r = x
        y = self.post_attention_layernorm(x)
        scores, idx = self.router(y)
        return r + self.experts(y, idx, scores)


class GptOssForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        h, V = c["hidden_size"], c["vocab_size"]
        self.embed_tokens = nn.Embedding(V, h)
        self.layers = nn.ModuleList([GptOssLayer(c, i) for i in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(h, c.get("rms_norm_eps", 1e-5), cast_after_weight=True)
        self.lm_head = nn.Linear(h, V, bias=False)

    def model(self, ids):
        c = self.c
        B, S = ids.shape
        x = self.embed_tokens(ids)
        masks = {"full_attention": causal_mask(S, x.dtype),
                 "sliding_attention": causal_mask(S, x.dtype, window=c["sliding_window"])}
        # GptOssRotaryEmbedding: emb = freqs (head_dim / 2 wide), cos/sin * attention_scaling (YaRN)
        cos, sin = rope_cos_sin(c.get("head_dim", 64), S, c.get("rope_theta", 150000.0), x.dtype, cat=False)
        for layer in self.layers:
            x = layer(x, cos, sin, masks)
        return self.norm(x)

    def forward(self, ids, labels):
        return causal_lm_loss(self.lm_head(self.model(ids)), labels)


# ---------------------------------------------------------------------------------------
# Llama 4 text: every expert runs on every token (router scores weight the inputs), shared
# expert, chunked attention on RoPE layers, NoPE layers with temperature tuning, L2 qk-norm
# transformers models/llama4/modeling_llama4.py@000c33fd
# ---------------------------------------------------------------------------------------
class Llama4L2Norm(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        y = x.float()
        return (y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x)


class Llama4RMSNorm(nn.Module):  # Llama4TextRMSNorm: cast before the weight
    def __init__(self, h, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(h))

    def forward(self, x):
        y = x.float()
        return (y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


class Llama4Attention(nn.Module):
    def __init__(self, c, i):
        super().__init__()
        h = c["hidden_size"]
        self.nh, self.nkv, self.hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.q_proj = nn.Linear(h, self.nh * self.hd, bias=False)
        self.k_proj = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, h, bias=False)
        self.use_rope = c["no_rope_layers"][i]
        self.qk_norm = Llama4L2Norm(c.get("rms_norm_eps", 1e-5)) if c.get("use_qk_norm", True) and self.use_rope else None
        self.temp = c.get("attn_temperature_tuning", True)
        self.floor_scale, self.attn_scale = c.get("floor_scale", 8192), c.get("attn_scale", 0.1)
        self.scaling = self.hd ** -0.5
        self.dropout = c.get("attention_dropout", 0.0)

    def forward(self, x, freqs_cis, mask, cache_position):
        B, S, _ = x.shape
        q = self.q_proj(x).view(B, S, -1, self.hd)
        k = self.k_proj(x).view(B, S, -1, self.hd)
        v = self.v_proj(x).view(B, S, -1, self.hd).transpose(1, 2)
        if self.use_rope:  # apply_rotary_emb
            xq = torch.view_as_complex(q.float().reshape(*q.shape[:-1], -1, 2))
            xk = torch.view_as_complex(k.float().reshape(*k.shape[:-1], -1, 2))
            q = torch.view_as_real(xq * freqs_cis[:, :, None, :]).flatten(3).type_as(q)
            k = torch.view_as_real(xk * freqs_cis[:, :, None, :]).flatten(3).type_as(k)
        if self.qk_norm is not None:
            q, k = self.qk_norm(q), self.qk_norm(k)
        if self.temp and not self.use_rope:
            s = torch.log1p(torch.floor((cache_position.float() + 1.0) / self.floor_scale)) * self.attn_scale + 1.0
            s = s.view((1, S, 1, 1)).expand((B, S, 1, 1))
            q = (q * s).to(q.dtype)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        o = eager_attention(q, k, v, mask, self.scaling, self.dropout, self.training, softmax_fp32=False)
        return self.o_proj(o.reshape(B, S, -1).contiguous())


class Llama4Moe(nn.Module):  # Llama4TextMoe, Llama4TextExperts, Llama4Router
    def __init__(self, c):
        super().__init__()
        h, f, E = c["hidden_size"], c["intermediate_size"], c["num_local_experts"]
        self.h, self.E, self.k = h, E, c["num_experts_per_tok"]
        self.gate_up_proj = nn.Parameter(torch.empty(E, h, 2 * f).normal_(0, 0.02))
        self.down_proj = nn.Parameter(torch.empty(E, f, h).normal_(0, 0.02))
        self.router = nn.Linear(h, E, bias=False)
        self.shared_expert = GatedMLP(h, f)

    def forward(self, x):
        x = x.reshape(-1, self.h)
        logits = self.router(x)
        top, idx = torch.topk(logits, self.k, dim=1)
        scores = torch.full_like(logits, float("-inf")).scatter_(1, idx, top)
        scores = torch.sigmoid(scores.float()).to(scores.dtype)
        routed_in = x.repeat(scores.shape[1], 1)
        routed_in = routed_in * scores.transpose(0, 1).reshape(-1, 1)
        hs = routed_in.view(self.E, -1, self.h)
        gate_up = torch.bmm(hs, self.gate_up_proj)
        gate, up = gate_up.chunk(2, dim=-1)
        routed_out = torch.bmm(up * F.silu(gate), self.down_proj).view(-1, self.h)
        out = self.shared_expert(x)
        out.add_(routed_out.reshape(self.E, -1, self.h).sum(dim=0))
        return out


class Llama4Layer(nn.Module):
    def __init__(self, c, i):
        super().__init__()
        h, eps = c["hidden_size"], c.get("rms_norm_eps", 1e-5)
        self.kind = c["layer_types"][i]
        self.self_attn = Llama4Attention(c, i)
        self.is_moe = i in c["moe_layers"]
        self.feed_forward = Llama4Moe(c) if self.is_moe else GatedMLP(h, c["intermediate_size_mlp"])
        self.input_layernorm = Llama4RMSNorm(h, eps)
        self.post_attention_layernorm = Llama4RMSNorm(h, eps)

    def forward(self, x, freqs_cis, masks, cache_position):
        x = x + self.self_attn(self.input_layernorm(x), freqs_cis, masks[self.kind], cache_position)
        r = x
        return r + self.feed_forward(self.post_attention_layernorm(x)).view(r.shape)


def llama4_text_config(c):
    """Llama4TextConfig.__post_init__ defaults: no_rope_layers, moe_layers, layer_types."""
    c = dict(c)
    L = c["num_hidden_layers"]
    if not c.get("no_rope_layers"):
        c["no_rope_layers"] = [int((i + 1) % c.get("no_rope_layer_interval", 4) != 0) for i in range(L)]
    if c.get("moe_layers") is None:
        step = c.get("interleave_moe_layer_step", 1)
        c["moe_layers"] = list(range(step - 1, L, step))
    if c.get("layer_types") is None:
        c["layer_types"] = ["chunked_attention" if r else "full_attention" for r in c["no_rope_layers"]]
    return c


class Llama4ForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c = llama4_text_config(c)
        h, V = c["hidden_size"], c["vocab_size"]
        self.embed_tokens = nn.Embedding(V, h)
        self.layers = nn.ModuleList([Llama4Layer(c, i) for i in range(c["num_hidden_layers"])])
        self.norm = Llama4RMSNorm(h, c.get("rms_norm_eps", 1e-5))
        self.lm_head = nn.Linear(h, V, bias=False)

    def model(self, ids):
        c = self.c
        B, S = ids.shape
        x = self.embed_tokens(ids)
        cache_position = torch.arange(S)
        masks = {"full_attention": causal_mask(S, x.dtype),
                 "chunked_attention": causal_mask(S, x.dtype, chunk=c.get("attention_chunk_size", 8192))}
        freqs_cis = rope_polar(c["head_dim"], S, c.get("rope_theta", 500000.0))
        for layer in self.layers:
            x = layer(x, freqs_cis, masks, cache_position)
        return self.norm(x)

    def forward(self, ids, labels):
        return causal_lm_loss(self.lm_head(self.model(ids)), labels)


# ---------------------------------------------------------------------------------------
# Granite: LLaMA with four float multipliers
# transformers models/granite/modular_granite.py@023633dd
# ---------------------------------------------------------------------------------------
class LlamaAttention(nn.Module):
    def __init__(self, c, scaling=None, qkv_bias=False):
        super().__init__()
        h = c["hidden_size"]
        self.nh = c["num_attention_heads"]
        self.nkv = c.get("num_key_value_heads") or self.nh
        self.hd = c.get("head_dim") or h // self.nh
        self.q_proj = nn.Linear(h, self.nh * self.hd, bias=qkv_bias)
        self.k_proj = nn.Linear(h, self.nkv * self.hd, bias=qkv_bias)
        self.v_proj = nn.Linear(h, self.nkv * self.hd, bias=qkv_bias)
        self.o_proj = nn.Linear(self.nh * self.hd, h, bias=qkv_bias)
        self.scaling = self.hd ** -0.5 if scaling is None else scaling
        self.dropout = c.get("attention_dropout", 0.0)

    def forward(self, x, cos, sin, mask):
        B, S, _ = x.shape
        shape = (B, S, -1, self.hd)
        q = self.q_proj(x).view(shape).transpose(1, 2)
        k = self.k_proj(x).view(shape).transpose(1, 2)
        v = self.v_proj(x).view(shape).transpose(1, 2)
        c, s = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = (q * c) + (rotate_half(q) * s), (k * c) + (rotate_half(k) * s)
        o = eager_attention(q, k, v, mask, self.scaling, self.dropout, self.training)
        return self.o_proj(o.reshape(B, S, -1).contiguous())


class GraniteLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, eps = c["hidden_size"], c.get("rms_norm_eps", 1e-6)
        self.rm = c.get("residual_multiplier", 1.0)
        self.self_attn = LlamaAttention(c, scaling=c.get("attention_multiplier", 1.0))
        self.mlp = GatedMLP(h, c["intermediate_size"])
        self.input_layernorm = RMSNorm(h, eps)
        self.post_attention_layernorm = RMSNorm(h, eps)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask) * self.rm
        return x + self.mlp(self.post_attention_layernorm(x)) * self.rm


class GraniteForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        h, V = c["hidden_size"], c["vocab_size"]
        self.embed_tokens = nn.Embedding(V, h)
        self.layers = nn.ModuleList([GraniteLayer(c) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(h, c.get("rms_norm_eps", 1e-6))
        self.lm_head = nn.Linear(h, V, bias=False)
        if c.get("tie_word_embeddings", False):
            self.lm_head.weight = self.embed_tokens.weight

    def model(self, ids):
        c = self.c
        B, S = ids.shape
        x = self.embed_tokens(ids)
        x = x * c.get("embedding_multiplier", 1.0)
        mask = causal_mask(S, x.dtype)
        cos, sin = rope_cos_sin(c["hidden_size"] // c["num_attention_heads"], S, c.get("rope_theta", 10000.0), x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.norm(x)

    def forward(self, ids, labels):
        logits = self.lm_head(self.model(ids))
        logits = logits / self.c.get("logits_scaling", 1.0)
        return causal_lm_loss(logits, labels)


# ---------------------------------------------------------------------------------------
# GraniteMoE: Granite's multipliers around JetMoE's parallel experts (3-D weights, one F.linear per
# expert on its split of the sorted rows, each weight a select view of the parameter)
# transformers models/granitemoe/modeling_granitemoe.py@023633dd
# ---------------------------------------------------------------------------------------
class GraniteMoeParallelExperts(nn.Module):
    def __init__(self, E, n_in, n_out):
        super().__init__()
        self.E = E
        self.weight = nn.Parameter(torch.randn(E, n_out, n_in) * 0.02)

    def forward(self, x, expert_size):
        parts = x.split(expert_size, dim=0)
        return torch.cat([F.linear(parts[i], self.weight[i]) for i in range(self.E)], dim=0)


class GraniteMoeMoE(nn.Module):  # GraniteMoeMoE + GraniteMoeTopKGating
    def __init__(self, c):
        super().__init__()
        h, f = c["hidden_size"], c["intermediate_size"]
        self.E, self.k = c["num_local_experts"], c["num_experts_per_tok"]
        self.input_linear = GraniteMoeParallelExperts(self.E, h, 2 * f)
        self.output_linear = GraniteMoeParallelExperts(self.E, f, h)
        self.layer = nn.Linear(h, self.E, bias=False)  # router.layer

    def forward(self, x):
        B, S, H = x.shape
        x = x.reshape(-1, H)
        logits = self.layer(x).float()
        top_logits, top_idx = logits.topk(self.k, dim=1)
        top_gates = torch.softmax(top_logits, dim=1).type_as(x)
        gates = torch.zeros([top_gates.size(0), self.E], dtype=top_gates.dtype).scatter(1, top_idx, 1)
        expert_size = gates.long().sum(0).tolist()
        _, sorted_idx = top_idx.flatten().sort(0)
        batch_index = sorted_idx.div(self.k, rounding_mode="trunc")
        batch_gates = top_gates.flatten()[sorted_idx]
        h = self.input_linear(x[batch_index], expert_size)
        a, b = h.chunk(2, dim=-1)
        out = self.output_linear(F.silu(a) * b, expert_size) * batch_gates[:, None]
        return torch.zeros((B * S, H), dtype=out.dtype).index_add(0, batch_index, out).view(B, S, H)


class GraniteMoeLayer(GraniteLayer):
    def __init__(self, c):
        super().__init__(c)
        self.mlp = GraniteMoeMoE(c)


class GraniteMoeForCausalLM(GraniteForCausalLM):
    def __init__(self, c):
        super().__init__(c)
        self.layers = nn.ModuleList([GraniteMoeLayer(c) for _ in range(c["num_hidden_layers"])])


# ---------------------------------------------------------------------------------------
# PhiMoE: Mixtral blocks with nn.LayerNorm, q/k/v/o and lm_head biases, the input jitter (an in-place
# mul by a uniform noise tensor) and the sparsemixer router (two Gumbel-sampled picks, each through
# MultiplierProcessor); rotary cos/sin gathered by position_ids in every layer; the eager mask is
# (S, S + 1) (target_length past_seen + S + 1 without an attention mask)
# transformers models/phimoe/modeling_phimoe.py@008f5c8c
# ---------------------------------------------------------------------------------------
class MultiplierProcessor(torch.autograd.Function):  # saves the pick's weight, index and softmax
    @staticmethod
    def forward(ctx, scores, weight, picked, probs, midpoint):
        ctx.save_for_backward(weight, picked, probs)
        return weight * midpoint

    @staticmethod
    def backward(ctx, grad):
        weight, picked, probs = ctx.saved_tensors
        grad = grad * weight
        grad_scores = probs * grad.mul(-1)
        grad_scores.scatter_add_(dim=-1, index=picked, src=grad)
        return grad_scores, None, None, None, None


def sparsemixer_pick(scores, candidates, jitter_eps):  # one of sparsemixer's two picks (training)
    with torch.no_grad():  # the sparsity mask: scores too far below the best candidate
        best, _ = candidates.max(dim=-1, keepdim=True)
        far = ((best - scores) / scores.abs().clamp(min=best)) > (2 * jitter_eps)
    logits = candidates.masked_fill(far, float("-inf"))
    picked = (logits - torch.empty_like(logits).exponential_().log()).max(dim=-1)[1].unsqueeze(-1)  # Gumbel
    probs = torch.softmax(logits, dim=-1)
    weight = probs.gather(dim=-1, index=picked)
    _, argmax = probs.max(dim=-1, keepdim=True)
    midpoint = torch.logical_or(picked == argmax, torch.rand_like(weight) > 0.75)  # Heun's third-order step
    midpoint = torch.add(0.3333, midpoint, alpha=0.6667).type_as(probs)
    return MultiplierProcessor.apply(scores, weight, picked, probs, midpoint), picked


def sparsemixer(scores, jitter_eps):
    multiplier, selected = sparsemixer_pick(scores, scores, jitter_eps)
    masked_scores = torch.scatter(scores, -1, selected, float("-inf"))
    multiplier2, selected2 = sparsemixer_pick(scores, masked_scores, jitter_eps)
    return torch.concat((multiplier, multiplier2), dim=-1), torch.concat((selected, selected2), dim=-1)


class PhimoeMoe(nn.Module):  # PhimoeSparseMoeBlock
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.E = c["num_local_experts"]
        self.input_jitter, self.router_jitter = c["input_jitter_noise"], c["router_jitter_noise"]
        self.gate = nn.Linear(h, self.E, bias=False)
        self.experts = nn.ModuleList([GatedMLP(h, c["intermediate_size"]) for _ in range(self.E)])

    def forward(self, x):
        B, S, H = x.shape
        if self.training and self.input_jitter > 0:
            x *= torch.empty_like(x).uniform_(1.0 - self.input_jitter, 1.0 + self.input_jitter)
        x = x.view(-1, H)
        weights, selected = sparsemixer(self.gate(x), self.router_jitter)
        final = torch.zeros((B * S, H), dtype=x.dtype)
        mask = F.one_hot(selected, num_classes=self.E).permute(2, 1, 0)
        for e in range(self.E):
            idx, top_x = torch.where(mask[e])
            if top_x.shape[0] == 0:
                continue
            cur = self.experts[e](x[None, top_x].reshape(-1, H)) * weights[top_x, idx, None]
            final.index_add_(0, top_x, cur.to(x.dtype))
        return final.reshape(B, S, H)


class PhimoeLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, eps = c["hidden_size"], c["rms_norm_eps"]
        self.self_attn = LlamaAttention(c, qkv_bias=c["attention_bias"])
        self.block_sparse_moe = PhimoeMoe(c)
        self.input_layernorm = nn.LayerNorm(h, eps=eps)
        self.post_attention_layernorm = nn.LayerNorm(h, eps=eps)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.block_sparse_moe(self.post_attention_layernorm(x))


class PhimoeForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        h, V = c["hidden_size"], c["vocab_size"]
        self.embed_tokens = nn.Embedding(V, h)
        self.layers = nn.ModuleList([PhimoeLayer(c) for _ in range(c["num_hidden_layers"])])
        self.norm = nn.LayerNorm(h, eps=c["rms_norm_eps"])
        self.lm_head = nn.Linear(h, V, bias=c["lm_head_bias"])

    def model(self, ids):
        c = self.c
        B, S = ids.shape
        x = self.embed_tokens(ids)
        mask = torch.full((S, S + 1), fill_value=torch.finfo(x.dtype).min, dtype=x.dtype)
        mask *= torch.arange(S + 1) > torch.arange(S).reshape(-1, 1)
        mask = mask[None, None, :, :].expand(B, 1, -1, -1)
        cos, sin = rope_cos_sin(c["hidden_size"] // c["num_attention_heads"], S, c["rope_theta"], x.dtype)
        position_ids = torch.arange(S).unsqueeze(0)
        for layer in self.layers:
            # apply_rotary_pos_emb: cos[position_ids] and sin[position_ids], gathered in each layer
            x = layer(x, cos[0][position_ids], sin[0][position_ids], mask)
        return self.norm(x)

    def forward(self, ids, labels):
        return causal_lm_loss(self.lm_head(self.model(ids)), labels)


# ---------------------------------------------------------------------------------------
# Cohere / Cohere 2: parallel block on one LayerNorm without bias (written out in Python, fp32),
# interleaved rotary on fp32 copies, logit_scale; Cohere 2: sliding layers with RoPE, every
# sliding_window_pattern-th layer full attention without positions
# transformers models/cohere/modular_cohere.py@03ea97ae, models/cohere2/modular_cohere2.py@008e5743
# ---------------------------------------------------------------------------------------
class CohereLayerNorm(nn.Module):
    def __init__(self, shape, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(shape))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        x = x.to(torch.float32)
        mean = x.mean(-1, keepdim=True)
        var = (x - mean).pow(2).mean(-1, keepdim=True)
        x = (x - mean) * torch.rsqrt(var + self.eps)
        x = self.weight.to(torch.float32) * x
        return x.to(dt)


def cohere_rotate_half(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack([-x2, x1], dim=-1).flatten(-2)


def cohere_rotary(q, k, cos, sin):
    dt = q.dtype
    q, k = q.float(), k.float()
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return ((q * cos) + (cohere_rotate_half(q) * sin)).to(dt), ((k * cos) + (cohere_rotate_half(k) * sin)).to(dt)


def cohere_cos_sin(dim, S, theta, dtype):  # CohereRotaryEmbedding: repeat_interleave instead of cat
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    pos = torch.arange(S).unsqueeze(0)
    freqs = (inv[None, :, None].float().expand(1, -1, 1) @ pos[:, None, :].float()).transpose(1, 2)
    emb = torch.repeat_interleave(freqs, 2, dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


class CohereAttention(nn.Module):
    def __init__(self, c, i, version):
        super().__init__()
        h = c["hidden_size"]
        self.nh = c["num_attention_heads"]
        self.nkv = c.get("num_key_value_heads") or self.nh
        self.hd = c.get("head_dim") or h // self.nh
        self.q_proj = nn.Linear(h, self.nh * self.hd, bias=False)
        self.k_proj = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, h, bias=False)
        self.qk_norm = version == 1 and c.get("use_qk_norm", False)
        if self.qk_norm:
            self.q_norm = CohereLayerNorm((self.nh, self.hd), c.get("layer_norm_eps", 1e-5))
            self.k_norm = CohereLayerNorm((self.nkv, self.hd), c.get("layer_norm_eps", 1e-5))
        self.kind = c["layer_types"][i] if version == 2 else "full_attention"
        self.rope = version == 1 or self.kind == "sliding_attention"
        self.scaling = self.hd ** -0.5
        self.dropout = c.get("attention_dropout", 0.0)

    def forward(self, x, cos, sin, masks):
        B, S, _ = x.shape
        shape = (B, S, -1, self.hd)
        q, k, v = self.q_proj(x).view(shape), self.k_proj(x).view(shape), self.v_proj(x).view(shape)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if self.rope:
            q, k = cohere_rotary(q, k, cos, sin)
        o = eager_attention(q, k, v, masks[self.kind], self.scaling, self.dropout, self.training)
        return self.o_proj(o.reshape(B, S, -1).contiguous())


class CohereLayer(nn.Module):
    def __init__(self, c, i, version):
        super().__init__()
        self.self_attn = CohereAttention(c, i, version)
        self.mlp = GatedMLP(c["hidden_size"], c["intermediate_size"])
        self.input_layernorm = CohereLayerNorm(c["hidden_size"], c.get("layer_norm_eps", 1e-5))

    def forward(self, x, cos, sin, masks):
        y = self.input_layernorm(x)
        return x + self.self_attn(y, cos, sin, masks) + self.mlp(y)


class CohereForCausalLM(nn.Module):
    def __init__(self, c, version):
        super().__init__()
        if version == 2 and c.get("layer_types") is None:
            p = c.get("sliding_window_pattern", 4)
            c = dict(c, layer_types=["sliding_attention" if (i + 1) % p else "full_attention"
                                     for i in range(c["num_hidden_layers"])])
        self.c, self.version = c, version
        h, V = c["hidden_size"], c["vocab_size"]
        self.embed_tokens = nn.Embedding(V, h)
        self.layers = nn.ModuleList([CohereLayer(c, i, version) for i in range(c["num_hidden_layers"])])
        self.norm = CohereLayerNorm(h, c.get("layer_norm_eps", 1e-5))
        self.lm_head = nn.Linear(h, V, bias=False)
        if c.get("tie_word_embeddings", True):
            self.lm_head.weight = self.embed_tokens.weight

    def model(self, ids):
        c = self.c
        B, S = ids.shape
        x = self.embed_tokens(ids)
        masks = {"full_attention": causal_mask(S, x.dtype)}
        if self.version == 2:
            masks["sliding_attention"] = causal_mask(S, x.dtype, window=c["sliding_window"])
        hd = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        cos, sin = cohere_cos_sin(hd, S, c.get("rope_theta", 10000.0), x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin, masks)
        return self.norm(x)

    def forward(self, ids, labels):
        logits = self.lm_head(self.model(ids))
        logits = logits * self.c.get("logit_scale", 0.0625)
        return causal_lm_loss(logits, labels)


# ---------------------------------------------------------------------------------------
# GPTBigCode (StarCoder, SantaCoder): multi-query attention out of one fused c_attn
# transformers models/gpt_bigcode/modeling_gpt_bigcode.py@00574544 (eager _attn; pre-4.48 loss)
# ---------------------------------------------------------------------------------------
def gelu_fast(x):  # activations.py FastGELUActivation
    return 0.5 * x * (1.0 + torch.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)))


class BigCodeBlock(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx
        self.softmax_fp32 = c.get("attention_softmax_in_fp32", True)
        self.scale_softmax_fp32 = c.get("scale_attention_softmax_in_fp32", True) and self.softmax_fp32
        h = c["n_embd"]
        self.nh = c["n_head"]
        self.hd = h // self.nh
        self.mq = c.get("multi_query", True)
        self.kv_dim = self.hd if self.mq else h
        eps = c.get("layer_norm_epsilon", 1e-5)
        f = c.get("n_inner") or 4 * h
        self.ln_1 = nn.LayerNorm(h, eps=eps)
        self.c_attn = nn.Linear(h, h + 2 * self.kv_dim)
        self.attn_c_proj = nn.Linear(h, h)
        self.ln_2 = nn.LayerNorm(h, eps=eps)
        self.c_fc = nn.Linear(h, f)
        self.mlp_c_proj = nn.Linear(f, h)
        act = c.get("activation_function", "gelu_pytorch_tanh")
        self.act = gelu_fast if act == "gelu_fast" else (lambda t: F.gelu(t, approximate="tanh"))
        self.attn_pdrop, self.resid_pdrop = c.get("attn_pdrop", 0.1), c.get("resid_pdrop", 0.1)
        self.scale = self.hd ** -0.5 if c.get("scale_attn_weights", True) else 1.0

    def attn(self, x, mask):
        B, S, h = x.shape
        if self.mq:
            query, key_value = self.c_attn(x).split((h, 2 * self.kv_dim), dim=2)
        else:
            query, key_value = (self.c_attn(x).view(B, S, self.nh, 3 * self.hd).transpose(1, 2)
                                .split((self.hd, 2 * self.hd), dim=3))
        key, value = key_value.split((self.hd, self.hd), dim=-1)
        key = key.transpose(-1, -2)
        # _attn, fp32 (no upcast); MQA: (B, S, heads, S) scores; CPU path baddbmm on zeros
        qshape = query.shape
        if self.mq:
            attn_shape, attn_view = (B, S, self.nh, S), (B, S * self.nh, S)
            q = query.reshape(B, S * self.nh, self.hd)
        else:
            attn_shape, attn_view = (B, self.nh, S, S), (B * self.nh, S, S)
            q = query.reshape(B * self.nh, S, self.hd)
            key = key.reshape(B * self.nh, self.hd, S)
        upcast = self.softmax_fp32 and q.dtype != torch.float32
        unscale = self.layer_idx + 1 if self.scale_softmax_fp32 and upcast else 1
        zeros = torch.zeros(attn_view, dtype=q.dtype)
        w = torch.baddbmm(zeros, q, key, beta=1, alpha=self.scale / unscale).view(attn_shape)
        if upcast:  # upcast_masked_softmax (torch.jit.script): fp32 scores, softmax, cast back
            mask_value = torch.full([], torch.finfo(torch.float32).min, dtype=torch.float32)
            w = torch.where(mask, w.to(torch.float32) * unscale, mask_value)
            w = F.softmax(w, dim=-1).to(q.dtype)
        else:
            mask_value = torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype)
            w = torch.where(mask, w, mask_value)
            w = F.softmax(w, dim=-1)
        w = F.dropout(w, p=self.attn_pdrop, training=self.training)
        if self.mq:
            o = torch.bmm(w.view(attn_view), value).view(qshape)
        else:
            o = torch.matmul(w, value).transpose(1, 2).reshape(x.shape)
        return F.dropout(self.attn_c_proj(o), p=self.resid_pdrop, training=self.training)

    def forward(self, x, mask):
        x = self.attn(self.ln_1(x), mask) + x
        y = self.mlp_c_proj(self.act(self.c_fc(self.ln_2(x))))
        return x + F.dropout(y, p=self.resid_pdrop, training=self.training)


class GPTBigCodeForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        h, V, P = c["n_embd"], c["vocab_size"], c["n_positions"]
        self.wte, self.wpe = nn.Embedding(V, h), nn.Embedding(P, h)
        self.h = nn.ModuleList([BigCodeBlock(c, i) for i in range(c["n_layer"])])
        self.ln_f = nn.LayerNorm(h, eps=c.get("layer_norm_epsilon", 1e-5))
        self.lm_head = nn.Linear(h, V, bias=False)
        self.lm_head.weight = self.wte.weight
        # GPTBigCodeModel: one (n_positions, n_positions) bool causal buffer for the model
        self.register_buffer("bias", torch.tril(torch.ones((P, P), dtype=torch.bool)), persistent=False)

    def transformer(self, ids):
        c = self.c
        B, S = ids.shape
        pos = torch.arange(0, S, dtype=torch.long).unsqueeze(0).view(-1, S)
        mask = self.bias[None, 0:S, :S].unsqueeze(2 if c.get("multi_query", True) else 1)
        x = self.wte(ids) + self.wpe(pos)
        x = F.dropout(x, p=c.get("embd_pdrop", 0.1), training=self.training)
        for block in self.h:
            x = block(x, mask)
        return self.ln_f(x)

    def forward(self, ids, labels):
        return shifted_logits_loss(self.lm_head(self.transformer(ids)), labels)


# ---------------------------------------------------------------------------------------
# InternLM2 (Hub remote code modeling_internlm2.py, NanSang2000/S1mpleAgent@0143463e copy):
# fused wqkv in (kv, groups + 2, head_dim) order, per-layer rotary cos/sin cache buffers,
# a (b, 1, s, s) mask built from an all-ones attention_mask, pre-4.48 loss on fp32 logits
# ---------------------------------------------------------------------------------------
class InternLM2Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.nh = c["num_attention_heads"]
        self.nkv = c.get("num_key_value_heads") or self.nh
        self.hd = h // self.nh
        self.groups = self.nh // self.nkv
        b = c.get("bias", True)
        self.wqkv = nn.Linear(h, (self.nh + 2 * self.nkv) * self.hd, bias=b)
        self.wo = nn.Linear(self.nh * self.hd, h, bias=b)
        # InternLM2RotaryEmbedding._set_cos_sin_cache: (max_position_embeddings, head_dim) buffers
        P = c["max_position_embeddings"]
        inv = 1.0 / (c.get("rope_theta", 10000) ** (torch.arange(0, self.hd, 2).float() / self.hd))
        t = torch.arange(P, dtype=inv.dtype)
        freqs = torch.einsum("i,j->ij", t, inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos().to(torch.get_default_dtype()), persistent=False)
        self.register_buffer("sin_cached", emb.sin().to(torch.get_default_dtype()), persistent=False)

    def forward(self, x, mask, position_ids):
        B, S, _ = x.shape
        qkv = self.wqkv(x).view(B, S, self.nkv, 2 + self.groups, self.hd)  # rearrange "b q (h gs d) -> b q h gs d"
        q = qkv[..., : self.groups, :].reshape(B, S, self.nh, self.hd)  # "b q h gs d -> b q (h gs) d"
        k, v = qkv[..., -2, :], qkv[..., -1, :]
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        cos, sin = self.cos_cached[:S].to(dtype=v.dtype), self.sin_cached[:S].to(dtype=v.dtype)
        cos, sin = cos[position_ids].unsqueeze(1), sin[position_ids].unsqueeze(1)
        q, k = (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)
        k, v = repeat_kv(k, self.groups), repeat_kv(v, self.groups)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.hd)
        w = w + mask
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        o = torch.matmul(w, v).transpose(1, 2).contiguous().reshape(B, S, -1)
        return self.wo(o)


class InternLM2Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, eps = c["hidden_size"], c.get("rms_norm_eps", 1e-6)
        self.attention = InternLM2Attention(c)
        self.feed_forward = GatedMLP(h, c["intermediate_size"])
        self.attention_norm = RMSNorm(h, eps)
        self.ffn_norm = RMSNorm(h, eps)

    def forward(self, x, mask, position_ids):
        x = x + self.attention(self.attention_norm(x), mask, position_ids)
        return x + self.feed_forward(self.ffn_norm(x))


class InternLM2ForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        h, V = c["hidden_size"], c["vocab_size"]
        self.tok_embeddings = nn.Embedding(V, h)
        self.layers = nn.ModuleList([InternLM2Layer(c) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(h, c.get("rms_norm_eps", 1e-6))
        self.output = nn.Linear(h, V, bias=False)

    def model(self, ids):
        B, S = ids.shape
        position_ids = torch.arange(0, S, dtype=torch.long).unsqueeze(0)
        x = self.tok_embeddings(ids)
        dt = x.dtype
        am = torch.ones((B, S), dtype=torch.bool)
        # _prepare_decoder_attention_mask: _make_causal_mask + _expand_mask
        m = torch.full((S, S), torch.tensor(torch.finfo(dt).min))
        cond = torch.arange(m.size(-1))
        m.masked_fill_(cond < (cond + 1).view(m.size(-1), 1), 0)
        m = m.to(dt)[None, None, :, :].expand(B, 1, S, S)
        e = am[:, None, None, :].expand(B, 1, S, S).to(dt)
        inv = 1.0 - e
        e = inv.masked_fill(inv.to(torch.bool), torch.finfo(dt).min)
        mask = e + m
        del m, e, inv, am
        for layer in self.layers:
            x = layer(x, mask, position_ids)
        return self.norm(x)

    def forward(self, ids, labels):
        logits = self.output(self.model(ids)).float()
        return shifted_logits_loss(logits, labels)


# ---------------------------------------------------------------------------------------
# OLMoE: OLMo-2-style full-width q/k RMSNorm, pre-norm blocks, 64 experts top-8, no shared expert
# transformers models/olmoe/modular_olmoe.py@052b1dcd (MixtralExperts loop)
# ---------------------------------------------------------------------------------------
class OlmoeAttention(LlamaAttention):
    def __init__(self, c):
        super().__init__(c)
        eps = c.get("rms_norm_eps", 1e-5)
        self.q_norm = RMSNorm(c["hidden_size"], eps)
        self.k_norm = RMSNorm(self.nkv * self.hd, eps)

    def forward(self, x, cos, sin, mask):
        B, S, _ = x.shape
        shape = (B, S, -1, self.hd)
        q = self.q_norm(self.q_proj(x)).view(shape).transpose(1, 2)
        k = self.k_norm(self.k_proj(x)).view(shape).transpose(1, 2)
        v = self.v_proj(x).view(shape).transpose(1, 2)
        c, s = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = (q * c) + (rotate_half(q) * s), (k * c) + (rotate_half(k) * s)
        o = eager_attention(q, k, v, mask, self.scaling, self.dropout, self.training)
        return self.o_proj(o.reshape(B, S, -1).contiguous())


class OlmoeMoe(nn.Module):  # OlmoeSparseMoeBlock + MixtralExperts.forward
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.E, self.k, self.norm = c["num_experts"], c["num_experts_per_tok"], c.get("norm_topk_prob", False)
        self.gate = nn.Linear(h, self.E, bias=False)
        self.experts = nn.ModuleList([GatedMLP(h, c["intermediate_size"]) for _ in range(self.E)])

    def forward(self, x):
        B, S, H = x.shape
        x = x.view(-1, H)
        rw = F.softmax(self.gate(x).float(), dim=-1)
        w, idx = torch.topk(rw, self.k, dim=-1)
        if self.norm:
            w /= w.sum(dim=-1, keepdim=True)
        w = w.to(x.dtype)
        final = torch.zeros_like(x)
        with torch.no_grad():
            m = F.one_hot(idx, num_classes=self.E).permute(2, 1, 0)
            hit = torch.greater(m.sum(dim=(-1, -2)), 0).nonzero()
        for e in hit:
            e = e[0]
            slot, tok = torch.where(m[e])
            cur = self.experts[e](x[tok]) * w[tok, slot, None]
            final.index_add_(0, tok, cur.to(final.dtype))
        return final.reshape(B, S, H)


class OlmoeLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, eps = c["hidden_size"], c.get("rms_norm_eps", 1e-5)
        self.self_attn = OlmoeAttention(c)
        self.mlp = OlmoeMoe(c)
        self.input_layernorm = RMSNorm(h, eps)
        self.post_attention_layernorm = RMSNorm(h, eps)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class OlmoeForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        h, V = c["hidden_size"], c["vocab_size"]
        self.embed_tokens = nn.Embedding(V, h)
        self.layers = nn.ModuleList([OlmoeLayer(c) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(h, c.get("rms_norm_eps", 1e-5))
        self.lm_head = nn.Linear(h, V, bias=False)

    def model(self, ids):
        c = self.c
        B, S = ids.shape
        x = self.embed_tokens(ids)
        mask = causal_mask(S, x.dtype)
        cos, sin = rope_cos_sin(c["hidden_size"] // c["num_attention_heads"], S, c.get("rope_theta", 10000.0), x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.norm(x)

    def forward(self, ids, labels):
        return causal_lm_loss(self.lm_head(self.model(ids)), labels)


# ---------------------------------------------------------------------------------------
# small configs (config.json dicts of small models of each family)
# ---------------------------------------------------------------------------------------
# ---------------------------------------------------------------------------------------
# EXAONE 4.0: LLaMA projections without biases, RMSNorm after each branch (no input norm), q_norm and
# k_norm per head on the (b, heads, s, head_dim) views; with a sliding window every
# sliding_window_pattern-th layer is full attention without RoPE, the others slide with RoPE, and the
# model makes both masks (create_causal_mask, create_sliding_window_causal_mask)
# transformers models/exaone4/modeling_exaone4.py@0205eec1, configuration_exaone4.py@008e5743
# ---------------------------------------------------------------------------------------
class Exaone4Attention(LlamaAttention):
    def __init__(self, c, sliding):
        super().__init__(c)
        self.q_norm, self.k_norm = RMSNorm(self.hd, c.get("rms_norm_eps", 1e-5)), RMSNorm(self.hd, c.get("rms_norm_eps", 1e-5))
        self.rotates = c.get("sliding_window") is None or sliding

    def forward(self, x, cos, sin, mask):
        B, S, _ = x.shape
        shape = (B, S, -1, self.hd)
        q = self.q_norm(self.q_proj(x).view(shape).transpose(1, 2))
        k = self.k_norm(self.k_proj(x).view(shape).transpose(1, 2))
        v = self.v_proj(x).view(shape).transpose(1, 2)
        if self.rotates:
            c, s = cos.unsqueeze(1), sin.unsqueeze(1)
            q, k = (q * c) + (rotate_half(q) * s), (k * c) + (rotate_half(k) * s)
        o = eager_attention(q, k, v, mask, self.scaling, self.dropout, self.training)
        return self.o_proj(o.reshape(B, S, -1).contiguous())


def exaone4_layer_types(c):  # Exaone4Config.__post_init__
    if c.get("layer_types"):
        return c["layer_types"]
    period = c.get("sliding_window_pattern", 4) if c.get("sliding_window") is not None else 0
    return ["sliding_attention" if period and (i + 1) % period != 0 else "full_attention"
            for i in range(c["num_hidden_layers"])]


class Exaone4Layer(nn.Module):
    def __init__(self, c, sliding):
        super().__init__()
        h, eps = c["hidden_size"], c.get("rms_norm_eps", 1e-5)
        self.self_attn = Exaone4Attention(c, sliding)
        self.mlp = GatedMLP(h, c["intermediate_size"])
        self.post_attention_layernorm = RMSNorm(h, eps)
        self.post_feedforward_layernorm = RMSNorm(h, eps)
        self.sliding = sliding

    def forward(self, x, cos, sin, masks):
        x = x + self.post_attention_layernorm(self.self_attn(x, cos, sin, masks[self.sliding]))
        return x + self.post_feedforward_layernorm(self.mlp(x))


class Exaone4ForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        h, V = c["hidden_size"], c["vocab_size"]
        self.types = exaone4_layer_types(c)
        self.embed_tokens = nn.Embedding(V, h)
        self.layers = nn.ModuleList([Exaone4Layer(c, t == "sliding_attention") for t in self.types])
        self.norm = RMSNorm(h, c.get("rms_norm_eps", 1e-5))
        self.lm_head = nn.Linear(h, V, bias=False)

    def model(self, ids):
        c = self.c
        B, S = ids.shape
        x = self.embed_tokens(ids)
        masks = {False: causal_mask(S, x.dtype)}
        if "sliding_attention" in self.types:
            masks[True] = causal_mask(S, x.dtype, window=c["sliding_window"])
        hd = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        cos, sin = rope_cos_sin(hd, S, c.get("rope_theta", 10000.0), x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin, masks)
        return self.norm(x)

    def forward(self, ids, labels):
        return causal_lm_loss(self.lm_head(self.model(ids)), labels)


def small(model_type, arch, **kw):
    c = {"architectures": [arch], "model_type": model_type, "hidden_size": 256, "num_hidden_layers": 4,
         "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 688, "vocab_size": 4096,
         "max_position_embeddings": 2048, "hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
         "tie_word_embeddings": False, "attention_dropout": 0.0}
    c.update(kw)
    return c


MLA = dict(num_key_value_heads=8, kv_lora_rank=64, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32,
           moe_intermediate_size=96, intermediate_size=512, n_routed_experts=8, num_experts_per_tok=2,
           first_k_dense_replace=1)

CONFIGS = {
    "deepseek_v2": small("deepseek_v2", "DeepseekV2ForCausalLM", q_lora_rank=None, n_shared_experts=2,
                         n_group=1, topk_group=1, topk_method="greedy", routed_scaling_factor=1.0,
                         norm_topk_prob=False, **MLA),
    "deepseek_v3": small("deepseek_v3", "DeepseekV3ForCausalLM", q_lora_rank=96, n_shared_experts=1, n_group=4,
                         topk_group=2, topk_method="noaux_tc", routed_scaling_factor=2.5, norm_topk_prob=True,
                         num_nextn_predict_layers=0,
                         rope_scaling={"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
                                       "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
                                       "type": "yarn"}, **MLA),
    "gpt_oss": small("gpt_oss", "GptOssForCausalLM", head_dim=32, num_attention_heads=8, num_key_value_heads=2,
                     intermediate_size=256, num_local_experts=8, num_experts_per_tok=2, sliding_window=128,
                     layer_types=["sliding_attention", "full_attention"] * 2, attention_bias=True,
                     swiglu_limit=7.0, rms_norm_eps=1e-5, rope_theta=150000.0),
    "llama4_text": small("llama4_text", "Llama4ForCausalLM", head_dim=32, intermediate_size=256,
                         intermediate_size_mlp=512, num_local_experts=4, num_experts_per_tok=1,
                         interleave_moe_layer_step=2, no_rope_layer_interval=4, attention_chunk_size=128,
                         use_qk_norm=True, attn_temperature_tuning=True, floor_scale=128, attn_scale=0.1,
                         rms_norm_eps=1e-5, rope_theta=500000.0),
    "granite": small("granite", "GraniteForCausalLM", embedding_multiplier=12.0, residual_multiplier=0.22,
                     attention_multiplier=0.0078125, logits_scaling=8.0, attention_dropout=0.1,
                     tie_word_embeddings=True),
    "granitemoe": small("granitemoe", "GraniteMoeForCausalLM", embedding_multiplier=12.0, residual_multiplier=0.22,
                        attention_multiplier=0.0078125, logits_scaling=8.0, attention_dropout=0.1,
                        tie_word_embeddings=True, intermediate_size=128, num_local_experts=8, num_experts_per_tok=2),
    "phimoe": small("phimoe", "PhimoeForCausalLM", intermediate_size=128, num_local_experts=8, num_experts_per_tok=2,
                    attention_bias=True, lm_head_bias=True, input_jitter_noise=0.01, router_jitter_noise=0.01,
                    sliding_window=None, rms_norm_eps=1e-5),
    "cohere": small("cohere", "CohereForCausalLM", num_key_value_heads=8, use_qk_norm=True, logit_scale=0.0625,
                    layer_norm_eps=1e-5, tie_word_embeddings=True),
    "cohere2": small("cohere2", "Cohere2ForCausalLM", head_dim=32, logit_scale=0.25, layer_norm_eps=1e-5,
                     sliding_window=128, sliding_window_pattern=4, tie_word_embeddings=True),
    "gpt_bigcode": {"architectures": ["GPTBigCodeForCausalLM"], "model_type": "gpt_bigcode", "n_embd": 256,
                    "n_layer": 4, "n_head": 8, "n_inner": 1024, "n_positions": 2048, "vocab_size": 4096,
                    "multi_query": True, "activation_function": "gelu_pytorch_tanh", "attn_pdrop": 0.1,
                    "embd_pdrop": 0.1, "resid_pdrop": 0.1, "layer_norm_epsilon": 1e-5,
                    "attention_softmax_in_fp32": True, "scale_attention_softmax_in_fp32": True,
                    "scale_attn_weights": True},
    "internlm2": small("internlm2", "InternLM2ForCausalLM", bias=False, max_position_embeddings=2048),
    "olmoe": small("olmoe", "OlmoeForCausalLM", num_key_value_heads=8, intermediate_size=128, num_experts=16,
                   num_experts_per_tok=4, norm_topk_prob=False, clip_qkv=None, rms_norm_eps=1e-5),
    "exaone4": small("exaone4", "Exaone4ForCausalLM", head_dim=32, sliding_window=128, sliding_window_pattern=4,
                     rms_norm_eps=1e-5, rope_theta=1000000.0),
    # every other layer full attention without RoPE: the NoPE layers' share doubled
    "exaone4-nope2": small("exaone4", "Exaone4ForCausalLM", head_dim=32, sliding_window=128,
                           sliding_window_pattern=2, rms_norm_eps=1e-5, rope_theta=1000000.0),
}

# Variants traced once (at the larger size) beside the main cases.
VARIANTS = {
    # the v5 DeepseekV2Experts: 3-D gate_up_proj / down_proj indexed per hit expert
    "deepseek_v2-fused3d": ("deepseek_v2", dict(experts_impl="fused3d")),
}

OLD_LOSS = ("gpt_bigcode", "internlm2")  # files whose forward shifts a copy of the logits


def build(c, **kw):
    t = c["model_type"]
    if t == "deepseek_v2":
        return DeepseekForCausalLM(c, 2, **kw)
    if t == "deepseek_v3":
        return DeepseekForCausalLM(c, 3, **kw)
    return {"gpt_oss": GptOssForCausalLM, "llama4_text": Llama4ForCausalLM, "granite": GraniteForCausalLM,
            "granitemoe": GraniteMoeForCausalLM, "phimoe": PhimoeForCausalLM, "cohere": lambda c: CohereForCausalLM(c, 1), "cohere2": lambda c: CohereForCausalLM(c, 2),
            "gpt_bigcode": GPTBigCodeForCausalLM, "internlm2": InternLM2ForCausalLM,
            "olmoe": OlmoeForCausalLM, "exaone4": Exaone4ForCausalLM}[t](c)


def run_case(c, B, S, **kw):
    tracer.reset_seed()
    with tracer.Tracker() as tr:
        model = build(c, **kw)
        model.train()
        tr.mark("built")
        opt = tracer.make_opt("adamw", model.parameters(), None)
        x = torch.randint(0, c["vocab_size"], (B, S))
        y = x.clone()
        tr.mark("inputs")
        tracer.train_two_steps(tr, lambda: model(x, y), opt)
        nparams = tracer.parameter_count(model)
        params_enum = tracer.tensor_bytes(list(model.parameters()))
        buffers = tracer.tensor_bytes(list(model.buffers()))
        opt_enum = tracer.optimizer_state_bytes([opt])
        del model, opt, x, y
    r = dict(nparams=nparams, params_enum=params_enum, buffers=buffers, opt_enum=opt_enum, built=tr.live("built"),
             end_live=tr.live("__end__"))
    r.update(tracer.step_readings(tr))
    return r


def record(name, c, B, S, r, variant=None):
    software = {"torch": torch.__version__}
    if c["model_type"] not in OLD_LOSS:
        software["transformers"] = "4.56.0"  # the >= 4.48 ForCausalLMLoss this script reproduces
    rec = {
        **tracer.record_head(f"cpu-{name}-small-b{B}-s{S}-adamw",
                             "tools/trace/families_2025.py (harness: shared/ground-truth/measure.py)"),
        "model": {"hf_config": c, "params": r["nparams"]},
        "train": dict(batch=B, seq=S, precision="fp32", optimizer="adamw",
                      optimizer_impl="single_tensor (torch 1.13 CPU default)", checkpointing="none",
                      attention="eager", grad_accum=1),
        **tracer.peak_fields(r),
        "components": tracer.components(r),
        "detail": {k: r[k] for k in ("buffers", "built", "s2_start", "s2_peak_fwd", "s2_peak_bwd", "s2_peak_opt",
                                     "end_live")},
        "software": software,
    }
    if variant:
        rec["notes"] = f"variant {variant}: not readable from the config alone (the implementation differs)"
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs/data/cpu_traced_families_2025.json")
    ap.add_argument("--only", default=None)
    a = ap.parse_args()
    only = a.only.split(",") if a.only else None
    out = []
    for name, c in CONFIGS.items():
        if only and name not in only:
            continue
        for B, S in ((2, 256), (4, 512)):
            t0 = time.time()
            r = run_case(c, B, S)
            out.append(record(name, c, B, S, r))
            print(f"{out[-1]['id']}: params={r['nparams']} peak={r['s2_peak']} act={r['s2_fwd'] - r['s2_start']} "
                  f"bwd_peak={r['s2_peak_bwd']} end={r['end_live']} ({time.time() - t0:.1f}s)", flush=True)
    for name, (base, kw) in VARIANTS.items():
        if only and name not in only:
            continue
        c = CONFIGS[base]
        B, S = 4, 512
        r = run_case(c, B, S, **kw)
        out.append(record(name, c, B, S, r, variant=name))
        print(f"{out[-1]['id']}: params={r['nparams']} peak={r['s2_peak']} act={r['s2_fwd'] - r['s2_start']} "
              f"bwd_peak={r['s2_peak_bwd']} end={r['end_live']}", flush=True)
    tracer.write_records(a.out, out, final_newline=True)


if __name__ == "__main__":
    main()
