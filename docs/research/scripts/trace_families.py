#!/usr/bin/python3
"""CPU traces of small models of the Hugging Face families memscale reads from config.json (decoders, DistilBERT
and RoBERTa MLM).

Each model is a plain-torch re-implementation of the family's modeling_<family>.py forward
(transformers v4.48-v4.51, eager attention, training mode), built from the small config.json
dict written below; the harness is tools/trace/tracer.py (the method of shared/ground-truth/measure.py:
peak live CPU tensor bytes of the 2nd training step, fp32, AdamW single-tensor). Records keep measure.py's
schema, with "model": {"hf_config": {...}} so memscale reads them with its config reader.

Run from the project root:
    /usr/bin/python3 docs/research/scripts/trace_families.py --out docs/data/cpu_traced_families.json
"""
import argparse, math, os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools", "trace"))
import tracer  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch.utils.checkpoint  # noqa: E402

torch.set_num_threads(1)


# ---------------------------------------------------------------------------------------
# shared pieces, each as the modeling files write them
# ---------------------------------------------------------------------------------------
class LlamaRMSNorm(nn.Module):  # modeling_llama.py LlamaRMSNorm (also Qwen2/3, Mistral, Mixtral, Phi3, OLMo2)
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


class GemmaRMSNorm(nn.Module):  # modeling_gemma2.py Gemma2RMSNorm / gemma3 Gemma3RMSNorm
    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(h))
        self.eps = eps

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        out = self._norm(x.float())
        out = out * (1.0 + self.weight.float())
        return out.type_as(x)


def checkpointed(layer, *args):
    # Non-reentrant torch.utils.checkpoint, as measure.py runs it and as
    # gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    # asks for (the no-kwargs default is use_reentrant=True, transformers v4.48
    # modeling_utils.py). The closure keeps the layer's inputs (hidden states, masks, alibi).
    return torch.utils.checkpoint.checkpoint(layer, *args, use_reentrant=False)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(q, k, cos, sin):  # modeling_llama.py apply_rotary_pos_emb (unsqueeze_dim=1)
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def repeat_kv(x, n):  # modeling_llama.py repeat_kv
    if n == 1:
        return x
    b, kv, s, d = x.shape
    return x[:, :, None, :, :].expand(b, kv, n, s, d).reshape(b, kv * n, s, d)


def eager_attention(q, k, v, mask, scaling, softcap=None):  # modeling_llama.py / gemma2 eager_attention_forward
    n = q.shape[1] // k.shape[1]
    k, v = repeat_kv(k, n), repeat_kv(v, n)
    w = torch.matmul(q, k.transpose(2, 3)) * scaling
    if softcap is not None:
        w = w / softcap
        w = torch.tanh(w)
        w = w * softcap
    w = w + mask
    w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
    o = torch.matmul(w, v)
    return o.transpose(1, 2).contiguous()


def rope(head_dim, S, theta, dtype, fraction=1.0):  # LlamaRotaryEmbedding, once per forward
    dim = int(head_dim * fraction)
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    pos = torch.arange(S).unsqueeze(0)
    freqs = (inv[None, :, None].float().expand(1, -1, 1) @ pos[:, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def gelu_new(x):  # NewGELUActivation
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def act_fn(name):
    return {"silu": F.silu, "gelu": F.gelu, "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
            "gelu_new": gelu_new}[name]


class GatedMLP(nn.Module):  # LlamaMLP / GemmaMLP / MixtralBlockSparseTop2MLP
    def __init__(self, h, f, act, bias=False):
        super().__init__()
        self.gate_proj = nn.Linear(h, f, bias=bias)
        self.up_proj = nn.Linear(h, f, bias=bias)
        self.down_proj = nn.Linear(f, h, bias=bias)
        self.act = act_fn(act)

    def forward(self, x):
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class SparseMoe(nn.Module):  # modeling_mixtral.py MixtralSparseMoeBlock / qwen2_moe / qwen3_moe
    def __init__(self, c, h, f, act):
        super().__init__()
        self.E = c.get("num_local_experts", c.get("num_experts"))
        self.k = c["num_experts_per_tok"]
        self.norm_topk = c.get("norm_topk_prob", True) if c["model_type"] != "qwen2_moe" else c.get("norm_topk_prob", False)
        self.gate = nn.Linear(h, self.E, bias=False)
        self.experts = nn.ModuleList([GatedMLP(h, f, act) for _ in range(self.E)])
        self.shared = None
        if c.get("shared_expert_intermediate_size"):
            self.shared = GatedMLP(h, c["shared_expert_intermediate_size"], act)
            self.shared_gate = nn.Linear(h, 1, bias=False)

    def forward(self, x):
        B, S, H = x.shape
        x = x.view(-1, H)
        logits = self.gate(x)
        rw = F.softmax(logits, dim=1, dtype=torch.float)
        rw, sel = torch.topk(rw, self.k, dim=-1)
        if self.norm_topk:
            rw /= rw.sum(dim=-1, keepdim=True)
        rw = rw.to(x.dtype)
        final = torch.zeros((B * S, H), dtype=x.dtype)
        mask = F.one_hot(sel, num_classes=self.E).permute(2, 1, 0)
        for e in range(self.E):
            idx, top_x = torch.where(mask[e])
            cur = x[None, top_x].reshape(-1, H)
            out = self.experts[e](cur) * rw[top_x, idx, None]
            final.index_add_(0, top_x, out.to(x.dtype))
        if self.shared is not None:
            so = self.shared(x)
            so = torch.sigmoid(self.shared_gate(x)) * so
            final = final + so
        return final.reshape(B, S, H)


# ---------------------------------------------------------------------------------------
# LLaMA-recipe decoders: llama, mistral, qwen2, qwen3, mixtral, qwen2_moe, qwen3_moe, phi3,
# gemma2, gemma3_text, olmo2 (the flags below follow each family's modeling file)
# ---------------------------------------------------------------------------------------
class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        t = c["model_type"]
        h, nh = c["hidden_size"], c["num_attention_heads"]
        nkv = c.get("num_key_value_heads") or nh
        hd = c.get("head_dim") or h // nh
        self.t, self.nh, self.nkv, self.hd = t, nh, nkv, hd
        qkv_bias = t in ("qwen2", "qwen2_moe") or c.get("attention_bias", False) or c.get("use_bias", False)
        o_bias = c.get("attention_bias", False) or c.get("use_bias", False)
        if t == "phi3":
            self.qkv_proj = nn.Linear(h, (nh + 2 * nkv) * hd, bias=False)
        else:
            self.q_proj = nn.Linear(h, nh * hd, bias=qkv_bias)
            self.k_proj = nn.Linear(h, nkv * hd, bias=qkv_bias)
            self.v_proj = nn.Linear(h, nkv * hd, bias=qkv_bias)
        self.o_proj = nn.Linear(nh * hd, h, bias=o_bias)
        if t in ("qwen3", "qwen3_moe"):
            self.q_norm, self.k_norm = LlamaRMSNorm(hd), LlamaRMSNorm(hd)
        elif t == "gemma3_text":
            self.q_norm, self.k_norm = GemmaRMSNorm(hd), GemmaRMSNorm(hd)
        elif t == "olmo2":
            self.q_norm, self.k_norm = LlamaRMSNorm(nh * hd), LlamaRMSNorm(nkv * hd)
        self.scaling = (c["query_pre_attn_scalar"] ** -0.5) if t in ("gemma2", "gemma3_text") else hd ** -0.5
        self.softcap = c.get("attn_logit_softcapping") if t == "gemma2" else None

    def forward(self, x, cos, sin, mask):
        B, S, _ = x.shape
        shape = (B, S, -1, self.hd)
        if self.t == "phi3":  # Phi3Attention: one qkv_proj, sliced
            qkv = self.qkv_proj(x)
            qp, kp = self.nh * self.hd, self.nkv * self.hd
            q, k, v = qkv[..., :qp], qkv[..., qp:qp + kp], qkv[..., qp + kp:]
            q, k, v = q.view(shape).transpose(1, 2), k.view(shape).transpose(1, 2), v.view(shape).transpose(1, 2)
        elif self.t == "olmo2":  # Olmo2Attention: norm over the whole projection, then split heads
            q = self.q_norm(self.q_proj(x)).view(shape).transpose(1, 2)
            k = self.k_norm(self.k_proj(x)).view(shape).transpose(1, 2)
            v = self.v_proj(x).view(shape).transpose(1, 2)
        elif hasattr(self, "q_norm"):  # Qwen3 / Gemma3: per-head norm on the view
            q = self.q_norm(self.q_proj(x).view(shape)).transpose(1, 2)
            k = self.k_norm(self.k_proj(x).view(shape)).transpose(1, 2)
            v = self.v_proj(x).view(shape).transpose(1, 2)
        else:
            q = self.q_proj(x).view(shape).transpose(1, 2)
            k = self.k_proj(x).view(shape).transpose(1, 2)
            v = self.v_proj(x).view(shape).transpose(1, 2)
        q, k = apply_rotary(q, k, cos, sin)
        o = eager_attention(q, k, v, mask, self.scaling, self.softcap)
        return self.o_proj(o.reshape(B, S, -1))


class Phi3MLP(nn.Module):  # modeling_phi3.py Phi3MLP: fused gate_up_proj
    def __init__(self, h, f):
        super().__init__()
        self.gate_up_proj = nn.Linear(h, 2 * f, bias=False)
        self.down_proj = nn.Linear(f, h, bias=False)

    def forward(self, x):
        up = self.gate_up_proj(x)
        gate, up = up.chunk(2, dim=-1)
        up = up * F.silu(gate)
        return self.down_proj(up)


class Starcoder2MLP(nn.Module):  # modeling_starcoder2.py: c_fc, act, c_proj (use_bias)
    def __init__(self, h, f, act, bias):
        super().__init__()
        self.c_fc = nn.Linear(h, f, bias=bias)
        self.c_proj = nn.Linear(f, h, bias=bias)
        self.act = act_fn(act)

    def forward(self, x):
        return self.c_proj(self.act(self.c_fc(x)))


def make_norm(c, h):
    t = c["model_type"]
    if t == "starcoder2":  # nn.LayerNorm(eps=norm_epsilon)
        return nn.LayerNorm(h, eps=c.get("norm_epsilon", 1e-5))
    return (GemmaRMSNorm if t.startswith("gemma") else LlamaRMSNorm)(h, c.get("rms_norm_eps", 1e-6))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        t = c["model_type"]
        self.t = t
        h = c["hidden_size"]
        eps = c.get("rms_norm_eps", 1e-6)
        Norm = GemmaRMSNorm if t.startswith("gemma") else LlamaRMSNorm
        act = c.get("hidden_activation") or c.get("hidden_act", "silu")
        self.self_attn = Attention(c)
        if t in ("mixtral", "qwen2_moe", "qwen3_moe"):
            self.mlp = SparseMoe(c, h, c.get("moe_intermediate_size") or c["intermediate_size"], act)
        elif t == "phi3":
            self.mlp = Phi3MLP(h, c["intermediate_size"])
        elif t == "starcoder2":
            self.mlp = Starcoder2MLP(h, c["intermediate_size"], act, c.get("use_bias", True))
        else:
            self.mlp = GatedMLP(h, c["intermediate_size"], act, bias=c.get("mlp_bias", False))
        if t != "olmo2":
            self.input_layernorm = make_norm(c, h)
        self.post_attention_layernorm = make_norm(c, h)
        if t in ("gemma2", "gemma3_text"):
            self.pre_feedforward_layernorm = make_norm(c, h)
        if t in ("gemma2", "gemma3_text", "olmo2"):
            self.post_feedforward_layernorm = make_norm(c, h)

    def forward(self, x, cos, sin, mask):
        t = self.t
        if t == "olmo2":  # Olmo2DecoderLayer: norms after each branch
            x = x + self.post_attention_layernorm(self.self_attn(x, cos, sin, mask))
            return x + self.post_feedforward_layernorm(self.mlp(x))
        if t in ("gemma2", "gemma3_text"):  # sandwich norms
            r = x
            x = self.post_attention_layernorm(self.self_attn(self.input_layernorm(x), cos, sin, mask))
            x = r + x
            r = x
            x = self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x)))
            return r + x
        r = x
        x = r + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        r = x
        return r + self.mlp(self.post_attention_layernorm(x))


class LlamaRecipeForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        t = c["model_type"]
        self.c, self.t = c, t
        h, V = c["hidden_size"], c["vocab_size"]
        self.embed_tokens = nn.Embedding(V, h)
        self.layers = nn.ModuleList([Layer(c) for _ in range(c["num_hidden_layers"])])
        self.norm = make_norm(c, h)
        self.lm_head = nn.Linear(h, V, bias=False)
        if c.get("tie_word_embeddings", t.startswith("gemma") or t == "starcoder2"):
            self.lm_head.weight = self.embed_tokens.weight
        self.hd = c.get("head_dim") or h // c["num_attention_heads"]

    def model(self, ids):  # LlamaModel.forward (GemmaModel, ...): mask and rotary tables die when it returns
        c, t = self.c, self.t
        B, S = ids.shape
        x = self.embed_tokens(ids)
        if t.startswith("gemma"):  # GemmaModel: hidden * normalizer
            x = x * torch.tensor(c["hidden_size"] ** 0.5, dtype=x.dtype)
        cos, sin = rope(self.hd, S, c.get("rope_theta", 10000.0), x.dtype, c.get("partial_rotary_factor", 1.0))
        mask = torch.full((S, S), torch.finfo(x.dtype).min, dtype=x.dtype).triu(1)[None, None]
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.norm(x)

    def forward(self, ids, labels):
        c = self.c
        logits = self.lm_head(self.model(ids))
        cap = c.get("final_logit_softcapping")
        if cap is not None:  # Gemma2ForCausalLM
            logits = logits / cap
            logits = torch.tanh(logits)
            logits = logits * cap
        logits = logits.float()  # ForCausalLMLoss upcast
        sl = logits[..., :-1, :].contiguous()
        lb = labels[..., 1:].contiguous()
        return F.cross_entropy(sl.view(-1, sl.size(-1)), lb.view(-1))


# ---------------------------------------------------------------------------------------
# parallel-block decoders: gpt_neox, phi (modeling_gpt_neox.py, modeling_phi.py)
# ---------------------------------------------------------------------------------------
class ParallelLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        t = c["model_type"]
        self.t = t
        h, nh = c["hidden_size"], c["num_attention_heads"]
        self.nh, self.hd = nh, h // nh
        frac = c.get("rotary_pct", 0.25) if t == "gpt_neox" else c.get("partial_rotary_factor", 0.5)
        self.rot = int(self.hd * frac)
        eps = c.get("layer_norm_eps", 1e-5)
        self.input_layernorm = nn.LayerNorm(h, eps=eps)
        if t == "gpt_neox":
            self.post_attention_layernorm = nn.LayerNorm(h, eps=eps)
            self.query_key_value = nn.Linear(h, 3 * h)
            self.dense = nn.Linear(h, h)
            self.fc_in = nn.Linear(h, c["intermediate_size"])
            self.fc_out = nn.Linear(c["intermediate_size"], h)
        else:
            self.q_proj, self.k_proj, self.v_proj = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
            self.dense = nn.Linear(h, h)
            self.fc_in = nn.Linear(h, c["intermediate_size"])
            self.fc_out = nn.Linear(c["intermediate_size"], h)
        self.act = act_fn(c.get("hidden_act", "gelu"))

    def attn(self, x, cos, sin, mask):
        B, S, H = x.shape
        if self.t == "gpt_neox":  # GPTNeoXAttention: fused qkv viewed per head, then split
            qkv = self.query_key_value(x).view(B, S, self.nh, 3 * self.hd).transpose(1, 2)
            q, k, v = qkv.chunk(3, dim=-1)
        else:
            shape = (B, S, -1, self.hd)
            q = self.q_proj(x).view(shape).transpose(1, 2)
            k = self.k_proj(x).view(shape).transpose(1, 2)
            v = self.v_proj(x).view(shape).transpose(1, 2)
        r = self.rot
        qr, qp = q[..., :r], q[..., r:]
        kr, kp = k[..., :r], k[..., r:]
        qr, kr = apply_rotary(qr, kr, cos, sin)
        q = torch.cat((qr, qp), dim=-1)
        k = torch.cat((kr, kp), dim=-1)
        o = eager_attention(q, k, v, mask, self.hd ** -0.5)
        return self.dense(o.reshape(B, S, -1))

    def forward(self, x, cos, sin, mask):
        if self.t == "gpt_neox":  # use_parallel_residual: x + attn(ln1(x)) + mlp(ln2(x))
            a = self.attn(self.input_layernorm(x), cos, sin, mask)
            m = self.fc_out(self.act(self.fc_in(self.post_attention_layernorm(x))))
            return m + a + x
        h = self.input_layernorm(x)  # PhiDecoderLayer: one norm feeds both
        a = self.attn(h, cos, sin, mask)
        m = self.fc_out(self.act(self.fc_in(h)))
        return a + m + x


class ParallelForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        h, V = c["hidden_size"], c["vocab_size"]
        self.embed = nn.Embedding(V, h)
        self.layers = nn.ModuleList([ParallelLayer(c) for _ in range(c["num_hidden_layers"])])
        self.final_norm = nn.LayerNorm(h, eps=c.get("layer_norm_eps", 1e-5))
        self.lm_head = nn.Linear(h, V, bias=c["model_type"] == "phi")
        self.rot = self.layers[0].rot

    def model(self, ids):  # GPTNeoXModel.forward / PhiModel.forward: mask and rotary tables die on return
        B, S = ids.shape
        x = self.embed(ids)
        cos, sin = rope(self.rot, S, self.c.get("rope_theta", 10000.0), x.dtype)
        mask = torch.full((S, S), torch.finfo(x.dtype).min, dtype=x.dtype).triu(1)[None, None]
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.final_norm(x)

    def forward(self, ids, labels):
        logits = self.lm_head(self.model(ids)).float()
        sl = logits[..., :-1, :].contiguous()
        lb = labels[..., 1:].contiguous()
        return F.cross_entropy(sl.view(-1, sl.size(-1)), lb.view(-1))


# ---------------------------------------------------------------------------------------
# GPT-J (transformers v4.46 models/gptj/modeling_gptj.py)
# ---------------------------------------------------------------------------------------
def create_sinusoidal_positions(num_pos, dim):
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.int64) / dim))
    sinusoid_inp = torch.einsum("i , j -> i j", torch.arange(num_pos, dtype=torch.int64).float(), inv_freq).float()
    return torch.cat((torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)), dim=1)


def rotate_every_two(x):
    x1 = x[:, :, :, ::2]
    x2 = x[:, :, :, 1::2]
    x = torch.stack((-x2, x1), dim=-1)
    return x.flatten(-2)


def gptj_rotary(t, sin, cos):
    sin = torch.repeat_interleave(sin[:, :, None, :], 2, 3)
    cos = torch.repeat_interleave(cos[:, :, None, :], 2, 3)
    return (t * cos) + (rotate_every_two(t) * sin)


class GPTJBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, nh = c["n_embd"], c["n_head"]
        self.nh, self.hd, self.rot = nh, h // nh, c["rotary_dim"]
        self.ln_1 = nn.LayerNorm(h, eps=c.get("layer_norm_epsilon", 1e-5))
        self.q_proj, self.k_proj = nn.Linear(h, h, bias=False), nn.Linear(h, h, bias=False)
        self.v_proj, self.out_proj = nn.Linear(h, h, bias=False), nn.Linear(h, h, bias=False)
        self.embed_positions = create_sinusoidal_positions(c["n_positions"], self.rot)  # a plain attribute
        self.scale_attn = torch.sqrt(torch.tensor(self.hd, dtype=torch.float32)).to(torch.get_default_dtype())
        inner = c.get("n_inner") or 4 * h
        self.fc_in, self.fc_out = nn.Linear(h, inner), nn.Linear(inner, h)

    def attn(self, x, pos, mask):
        B, S, H = x.shape
        q = self.q_proj(x).view(B, S, self.nh, self.hd)
        k = self.k_proj(x).view(B, S, self.nh, self.hd)
        v = self.v_proj(x).view(B, S, self.nh, self.hd).permute(0, 2, 1, 3)
        ep = self.embed_positions.repeat(pos.shape[0], 1, 1)
        rep_ids = pos.unsqueeze(-1).repeat(1, 1, ep.shape[-1])
        sincos = torch.gather(ep, 1, rep_ids)
        sin, cos = torch.split(sincos, sincos.shape[-1] // 2, dim=-1)
        r = self.rot
        k_rot, k_pass = k[:, :, :, :r], k[:, :, :, r:]
        q_rot, q_pass = q[:, :, :, :r], q[:, :, :, r:]
        k_rot = gptj_rotary(k_rot, sin, cos)
        q_rot = gptj_rotary(q_rot, sin, cos)
        k = torch.cat([k_rot, k_pass], dim=-1).permute(0, 2, 1, 3)
        q = torch.cat([q_rot, q_pass], dim=-1).permute(0, 2, 1, 3)
        q, k = q.to(torch.float32), k.to(torch.float32)  # GPTJAttention._attn
        w = torch.matmul(q, k.transpose(-1, -2))
        w = w / self.scale_attn
        w = w + mask
        w = F.softmax(w, dim=-1)
        w = w.to(v.dtype)
        o = torch.matmul(w, v)
        o = o.permute(0, 2, 1, 3).contiguous().view(B, S, H)
        return self.out_proj(o)

    def forward(self, x, pos, mask):
        r = x
        h = self.ln_1(x)
        a = self.attn(h, pos, mask)
        m = self.fc_out(gelu_new(self.fc_in(h)))
        return a + m + r


class GPTJForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, V = c["n_embd"], c["vocab_size"]
        self.wte = nn.Embedding(V, h)
        self.h = nn.ModuleList([GPTJBlock(c) for _ in range(c["n_layer"])])
        self.ln_f = nn.LayerNorm(h, eps=c.get("layer_norm_epsilon", 1e-5))
        self.lm_head = nn.Linear(h, V)

    def transformer(self, ids):  # GPTJModel.forward: mask and position ids die when it returns
        B, S = ids.shape
        x = self.wte(ids)
        pos = torch.arange(S).unsqueeze(0)
        mask = torch.full((S, S), torch.finfo(x.dtype).min, dtype=x.dtype).triu(1)[None, None]
        for block in self.h:
            x = block(x, pos, mask)
        return self.ln_f(x)

    def forward(self, ids, labels):
        logits = self.lm_head(self.transformer(ids)).to(torch.float32)
        sl = logits[..., :-1, :].contiguous()
        lb = labels[..., 1:].contiguous()
        return F.cross_entropy(sl.view(-1, sl.size(-1)), lb.view(-1))


# ---------------------------------------------------------------------------------------
# Falcon (transformers v4.46 models/falcon/modeling_falcon.py, eager attention)
# ---------------------------------------------------------------------------------------
class FalconLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, nh = c["hidden_size"], c["num_attention_heads"]
        self.nh, self.hd = nh, h // nh
        self.new_arch = c.get("new_decoder_architecture", False)
        self.mq = c.get("multi_query", True)
        self.kv = c.get("num_kv_heads", nh) if self.new_arch else (1 if self.mq else nh)
        bias = c.get("bias", False)
        self.query_key_value = nn.Linear(h, (nh + 2 * self.kv) * self.hd, bias=bias)
        self.dense = nn.Linear(h, h, bias=bias)
        f = c.get("ffn_hidden_size") or 4 * h
        self.dense_h_to_4h, self.dense_4h_to_h = nn.Linear(h, f, bias=bias), nn.Linear(f, h, bias=bias)
        eps = c.get("layer_norm_epsilon", 1e-5)
        if self.new_arch:
            self.ln_attn, self.ln_mlp = nn.LayerNorm(h, eps=eps), nn.LayerNorm(h, eps=eps)
        else:
            self.input_layernorm = nn.LayerNorm(h, eps=eps)

    def split_heads(self, qkv):
        B, S, _ = qkv.shape
        if self.new_arch:
            qkv = qkv.view(B, S, -1, self.nh // self.kv + 2, self.hd)
            q = qkv[:, :, :, :-2]
            k = qkv[:, :, :, [-2]]
            v = qkv[:, :, :, [-1]]
            k = torch.broadcast_to(k, q.shape)
            v = torch.broadcast_to(v, q.shape)
            q, k, v = [x.flatten(2, 3) for x in (q, k, v)]
            return q, k, v
        qkv = qkv.view(B, S, self.nh + 2, self.hd)
        return qkv[..., :-2, :], qkv[..., [-2], :], qkv[..., [-1], :]

    def attn(self, x, cos, sin, mask):
        B, S, H = x.shape
        q, k, v = self.split_heads(self.query_key_value(x))
        kvh = self.nh if self.new_arch else self.kv
        q = q.transpose(1, 2).reshape(B, self.nh, S, self.hd)
        k = k.transpose(1, 2).reshape(B, kvh, S, self.hd)
        v = v.transpose(1, 2).reshape(B, kvh, S, self.hd)
        q, k = apply_rotary(q, k, cos, sin)
        scores = q @ k.transpose(-1, -2)
        scores /= math.sqrt(self.hd)
        scores = F.softmax(scores + mask, dim=-1, dtype=x.dtype)
        o = scores @ v
        o = o.view(B, self.nh, S, self.hd).permute(0, 2, 1, 3).reshape(B, S, H)
        return self.dense(o)

    def forward(self, x, cos, sin, mask):
        r = x
        if self.new_arch:
            a_in, m_in = self.ln_attn(x), self.ln_mlp(x)
        else:
            a_in = self.input_layernorm(x)
            m_in = a_in
        a = self.attn(a_in, cos, sin, mask)
        m = self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(m_in)))
        m += a
        return r + m


class FalconForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, V = c["hidden_size"], c["vocab_size"]
        self.c = c
        self.word_embeddings = nn.Embedding(V, h)
        self.h = nn.ModuleList([FalconLayer(c) for _ in range(c["num_hidden_layers"])])
        self.ln_f = nn.LayerNorm(h, eps=c.get("layer_norm_epsilon", 1e-5))
        self.lm_head = nn.Linear(h, V, bias=False)
        self.lm_head.weight = self.word_embeddings.weight  # tie_word_embeddings (default True)

    def transformer(self, ids):  # FalconModel.forward: mask and rotary tables die when it returns
        B, S = ids.shape
        x = self.word_embeddings(ids)
        hd = self.c["hidden_size"] // self.c["num_attention_heads"]
        cos, sin = rope(hd, S, self.c.get("rope_theta", 10000.0), x.dtype)
        mask = torch.full((S, S), torch.finfo(x.dtype).min, dtype=x.dtype).triu(1)[None, None]
        for layer in self.h:
            x = layer(x, cos, sin, mask)
        return self.ln_f(x)

    def forward(self, ids, labels):
        logits = self.lm_head(self.transformer(ids))
        sl = logits[..., :-1, :].contiguous()
        lb = labels[..., 1:].contiguous()
        return F.cross_entropy(sl.view(-1, sl.size(-1)), lb.view(-1))



# ---------------------------------------------------------------------------------------
# OPT (transformers v4.48 models/opt/modeling_opt.py, eager attention, do_layer_norm_before)
# ---------------------------------------------------------------------------------------
class OPTLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, self.nh = c["hidden_size"], c["num_attention_heads"]
        self.hd = h // self.nh
        self.scaling = self.hd ** -0.5
        b = c.get("enable_bias", True)
        self.q_proj, self.k_proj = nn.Linear(h, h, bias=b), nn.Linear(h, h, bias=b)
        self.v_proj, self.out_proj = nn.Linear(h, h, bias=b), nn.Linear(h, h, bias=b)
        self.self_attn_layer_norm, self.final_layer_norm = nn.LayerNorm(h), nn.LayerNorm(h)
        self.fc1, self.fc2 = nn.Linear(h, c["ffn_dim"], bias=b), nn.Linear(c["ffn_dim"], h, bias=b)

    def forward(self, x, mask):
        B, S, H = x.shape
        r = x
        x = self.self_attn_layer_norm(x)
        q = (self.q_proj(x) * self.scaling).view(B, S, self.nh, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, S, self.nh, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, S, self.nh, self.hd).transpose(1, 2)
        w = torch.matmul(q, k.transpose(2, 3)) + mask
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        o = torch.matmul(w, v).transpose(1, 2).reshape(B, S, H)
        x = r + self.out_proj(o)
        shape = x.shape
        x = x.reshape(-1, H)  # OPTDecoderLayer flattens for the FFN
        r = x
        x = self.fc2(F.relu(self.fc1(self.final_layer_norm(x))))
        return (r + x).view(shape)


class OPTForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, V = c["hidden_size"], c["vocab_size"]
        self.embed_tokens = nn.Embedding(V, h, padding_idx=c.get("pad_token_id", 1))
        self.embed_positions = nn.Embedding(c["max_position_embeddings"] + 2, h)  # OPTLearnedPositionalEmbedding offset 2
        self.layers = nn.ModuleList([OPTLayer(c) for _ in range(c["num_hidden_layers"])])
        self.final_layer_norm = nn.LayerNorm(h)
        self.lm_head = nn.Linear(h, V, bias=False)
        self.lm_head.weight = self.embed_tokens.weight  # tie_word_embeddings
        self.ckpt = False

    def decoder(self, ids):  # OPTDecoder.forward: its masks die when it returns, before the head
        B, S = ids.shape
        x = self.embed_tokens(ids)
        am = torch.ones(B, S)  # attention_mask is None: torch.ones (fp32)
        mask = torch.full((S, S), torch.finfo(x.dtype).min, dtype=x.dtype).triu(1)[None, None].expand(B, 1, S, S).clone()
        pos = (torch.cumsum(am, dim=1) * am - 1).long()
        x = x + self.embed_positions(pos + 2)
        for layer in self.layers:
            x = checkpointed(layer, x, mask) if self.ckpt else layer(x, mask)
        return self.final_layer_norm(x)

    def forward(self, ids, labels):
        logits = self.lm_head(self.decoder(ids)).contiguous()
        sl = logits.float()[..., :-1, :].contiguous()
        lb = labels[..., 1:].contiguous()
        return F.cross_entropy(sl.view(-1, sl.size(-1)), lb.view(-1))


# ---------------------------------------------------------------------------------------
# BLOOM (transformers v4.48 models/bloom/modeling_bloom.py; training uses GeLUFunction, which saves only its input)
# ---------------------------------------------------------------------------------------
def bloom_gelu_forward(x):
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


def bloom_gelu_back(g, x):
    x = x[0]
    tanh_out = torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x))
    ff = 0.5 * x * ((1 - tanh_out * tanh_out) * (0.79788456 + 0.1070322243 * x * x)) + 0.5 * (1 + tanh_out)
    return ff * g


class GeLUFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return bloom_gelu_forward(x)

    @staticmethod
    def backward(ctx, g):
        return bloom_gelu_back(g, ctx.saved_tensors)


def build_alibi_tensor(am, nh, dtype):  # modeling_bloom.py build_alibi_tensor
    B, S = am.shape
    closest = 2 ** math.floor(math.log2(nh))
    base_ = torch.tensor(2 ** (-(2 ** -(math.log2(closest) - 3))), dtype=torch.float32)
    slopes = torch.pow(base_, torch.arange(1, 1 + closest, dtype=torch.int32))
    if closest != nh:
        eb = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest) - 3))), dtype=torch.float32)
        nr = min(closest, nh - closest)
        slopes = torch.cat([slopes, torch.pow(eb, torch.arange(1, 1 + 2 * nr, 2, dtype=torch.int32))], dim=0)
    ar = ((am.cumsum(dim=-1) - 1) * am)[:, None, :]
    alibi = slopes[..., None] * ar
    return alibi.reshape(B * nh, 1, S).to(dtype)


class BloomBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, self.nh = c["hidden_size"], c["n_head"]
        self.hd = h // self.nh
        eps = c.get("layer_norm_epsilon", 1e-5)
        self.input_layernorm, self.post_attention_layernorm = nn.LayerNorm(h, eps=eps), nn.LayerNorm(h, eps=eps)
        self.query_key_value, self.dense = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.dense_h_to_4h, self.dense_4h_to_h = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

    def attn(self, x, r, alibi, mask):
        B, S, H = x.shape
        qkv = self.query_key_value(x).view(B, S, self.nh, 3, self.hd)
        q, k, v = (qkv[..., i, :].transpose(1, 2) for i in range(3))
        q = q.reshape(B * self.nh, S, self.hd)
        k = k.reshape(B * self.nh, S, self.hd).transpose(-1, -2)
        v = v.reshape(B * self.nh, S, self.hd)
        m = alibi.baddbmm(batch1=q, batch2=k, beta=1.0, alpha=1.0 / math.sqrt(self.hd))
        w = m.view(B, self.nh, S, S) + mask
        p = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        o = torch.bmm(p.view(B * self.nh, S, S), v)
        o = o.view(B, self.nh, S, self.hd).permute(0, 2, 1, 3).reshape(B, S, H)
        return r + self.dense(o)  # dropout_add, hidden_dropout 0

    def forward(self, x, alibi, mask):
        a = self.attn(self.input_layernorm(x), x, alibi, mask)
        m = self.dense_4h_to_h(GeLUFunction.apply(self.dense_h_to_4h(self.post_attention_layernorm(a))))
        return a + m


class BloomForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, V = c["hidden_size"], c["vocab_size"]
        self.c = c
        self.word_embeddings = nn.Embedding(V, h)
        self.word_embeddings_layernorm = nn.LayerNorm(h, eps=c.get("layer_norm_epsilon", 1e-5))
        self.h = nn.ModuleList([BloomBlock(c) for _ in range(c["n_layer"])])
        self.ln_f = nn.LayerNorm(h, eps=c.get("layer_norm_epsilon", 1e-5))
        self.lm_head = nn.Linear(h, V, bias=False)
        self.lm_head.weight = self.word_embeddings.weight  # tie_word_embeddings
        self.ckpt = False

    def transformer(self, ids):  # BloomModel.forward: mask and alibi die when it returns, before the head
        B, S = ids.shape
        x = self.word_embeddings_layernorm(self.word_embeddings(ids))
        am = torch.ones(B, S)
        alibi = build_alibi_tensor(am, self.c["n_head"], x.dtype)
        mask = torch.full((S, S), torch.finfo(x.dtype).min, dtype=x.dtype).triu(1)[None, None].expand(B, 1, S, S).clone()
        for block in self.h:
            x = checkpointed(block, x, alibi, mask) if self.ckpt else block(x, alibi, mask)
        return self.ln_f(x)

    def forward(self, ids, labels):
        logits = self.lm_head(self.transformer(ids))
        sl = logits[..., :-1, :].contiguous()
        lb = labels[..., 1:].contiguous()
        return F.cross_entropy(sl.view(-1, sl.size(-1)), lb.view(-1))



# ---------------------------------------------------------------------------------------
# DistilBERT (transformers v4.48 models/distilbert/modeling_distilbert.py, eager attention, MLM head)
# ---------------------------------------------------------------------------------------
class DistilBertBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, self.nh = c["dim"], c["n_heads"]
        self.hd = d // self.nh
        self.q_lin, self.k_lin, self.v_lin, self.out_lin = (nn.Linear(d, d) for _ in range(4))
        self.sa_layer_norm, self.output_layer_norm = nn.LayerNorm(d, eps=1e-12), nn.LayerNorm(d, eps=1e-12)
        self.lin1, self.lin2 = nn.Linear(d, c["hidden_dim"]), nn.Linear(c["hidden_dim"], d)

    def forward(self, x, am):
        B, S, D = x.shape
        sh = lambda t: t.view(B, -1, self.nh, self.hd).transpose(1, 2)  # noqa: E731
        q, k, v = sh(self.q_lin(x)), sh(self.k_lin(x)), sh(self.v_lin(x))
        q = q / math.sqrt(self.hd)
        scores = torch.matmul(q, k.transpose(2, 3))
        mask = (am == 0).view(B, 1, 1, S).expand_as(scores)
        scores = scores.masked_fill(mask, torch.tensor(torch.finfo(scores.dtype).min))
        w = F.softmax(scores, dim=-1)
        o = torch.matmul(w, v).transpose(1, 2).contiguous().view(B, -1, D)
        sa = self.sa_layer_norm(self.out_lin(o) + x)
        f = self.lin2(F.gelu(self.lin1(sa)))
        return self.output_layer_norm(f + sa)


class DistilBertForMaskedLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, V = c["dim"], c["vocab_size"]
        self.word_embeddings = nn.Embedding(V, d, padding_idx=c.get("pad_token_id", 0))
        self.position_embeddings = nn.Embedding(c["max_position_embeddings"], d)
        self.LayerNorm = nn.LayerNorm(d, eps=1e-12)
        self.register_buffer("position_ids", torch.arange(c["max_position_embeddings"]).expand((1, -1)), persistent=False)
        self.layer = nn.ModuleList([DistilBertBlock(c) for _ in range(c["n_layers"])])
        self.vocab_transform, self.vocab_layer_norm = nn.Linear(d, d), nn.LayerNorm(d, eps=1e-12)
        self.vocab_projector = nn.Linear(d, V)
        self.vocab_projector.weight = self.word_embeddings.weight  # tie_weights

    def distilbert(self, ids):  # DistilBertModel.forward: its ones mask dies when it returns
        B, S = ids.shape
        am = torch.ones(B, S)
        x = self.word_embeddings(ids) + self.position_embeddings(self.position_ids[:, :S])
        x = self.LayerNorm(x)
        for block in self.layer:
            x = block(x, am)
        return x

    def forward(self, ids, labels):
        logits = self.vocab_projector(self.vocab_layer_norm(F.gelu(self.vocab_transform(self.distilbert(ids)))))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))


# ---------------------------------------------------------------------------------------
# RoBERTa (transformers v4.48 models/roberta/modeling_roberta.py, eager attention, MLM head)
# ---------------------------------------------------------------------------------------
class RobertaLayer(nn.Module):  # RobertaSelfAttention + RobertaSelfOutput + Intermediate + Output
    def __init__(self, c):
        super().__init__()
        h, self.nh = c["hidden_size"], c["num_attention_heads"]
        self.hd = h // self.nh
        eps, p = c.get("layer_norm_eps", 1e-12), c.get("hidden_dropout_prob", 0.1)
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.attn_dropout = nn.Dropout(c.get("attention_probs_dropout_prob", 0.1))
        self.attn_dense, self.attn_drop, self.attn_ln = nn.Linear(h, h), nn.Dropout(p), nn.LayerNorm(h, eps=eps)
        self.intermediate = nn.Linear(h, c["intermediate_size"])
        self.out_dense, self.out_drop = nn.Linear(c["intermediate_size"], h), nn.Dropout(p)
        self.out_ln = nn.LayerNorm(h, eps=eps)

    def split(self, t):  # transpose_for_scores
        return t.view(t.size()[:-1] + (self.nh, self.hd)).permute(0, 2, 1, 3)

    def forward(self, x, ext):
        mixed_q = self.query(x)
        k, v = self.split(self.key(x)), self.split(self.value(x))
        q = self.split(mixed_q)
        scores = torch.matmul(q, k.transpose(-1, -2))
        scores = scores / math.sqrt(self.hd)
        scores = scores + ext
        probs = self.attn_dropout(F.softmax(scores, dim=-1))
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        ctx = ctx.view(ctx.size()[:-2] + (self.nh * self.hd,))
        a = self.attn_ln(self.attn_drop(self.attn_dense(ctx)) + x)
        i = F.gelu(self.intermediate(a))
        return self.out_ln(self.out_drop(self.out_dense(i)) + a)


class RobertaForMaskedLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, V, P = c["hidden_size"], c["vocab_size"], c["max_position_embeddings"]
        self.pad = c.get("pad_token_id", 1)
        eps = c.get("layer_norm_eps", 1e-12)
        self.word_embeddings = nn.Embedding(V, h, padding_idx=self.pad)
        self.position_embeddings = nn.Embedding(P, h, padding_idx=self.pad)
        self.token_type_embeddings = nn.Embedding(c.get("type_vocab_size", 2), h)
        self.LayerNorm, self.emb_drop = nn.LayerNorm(h, eps=eps), nn.Dropout(c.get("hidden_dropout_prob", 0.1))
        self.register_buffer("token_type_ids", torch.zeros((1, P), dtype=torch.long), persistent=False)
        self.layer = nn.ModuleList([RobertaLayer(c) for _ in range(c["num_hidden_layers"])])
        self.dense, self.layer_norm = nn.Linear(h, h), nn.LayerNorm(h, eps=eps)  # RobertaLMHead
        self.decoder = nn.Linear(h, V)
        self.decoder.weight = self.word_embeddings.weight  # tie_word_embeddings

    def embeddings(self, ids):  # RobertaEmbeddings.forward
        B, S = ids.shape
        mask = ids.ne(self.pad).int()  # create_position_ids_from_input_ids
        pos = (torch.cumsum(mask, dim=1).type_as(mask) + 0) * mask
        pos = pos.long() + self.pad
        tt = self.token_type_ids[:, :S].expand(B, S)
        e = self.word_embeddings(ids)
        e = e + self.token_type_embeddings(tt)
        e += self.position_embeddings(pos)
        return self.emb_drop(self.LayerNorm(e))

    def encoder(self, ids):  # RobertaModel.forward: its masks die when it returns
        B, S = ids.shape
        am = torch.ones((B, S))
        x = self.embeddings(ids)
        ext = am[:, None, None, :].to(dtype=x.dtype)  # get_extended_attention_mask
        ext = (1.0 - ext) * torch.finfo(x.dtype).min
        for layer in self.layer:
            x = layer(x, ext)
        return x

    def forward(self, ids, labels):
        scores = self.decoder(self.layer_norm(F.gelu(self.dense(self.encoder(ids)))))
        return F.cross_entropy(scores.view(-1, scores.size(-1)), labels.view(-1))


# ---------------------------------------------------------------------------------------
# small configs (config.json dicts of small models of each family)
# ---------------------------------------------------------------------------------------
def base(t, arch, **kw):
    c = {"architectures": [arch], "model_type": t, "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 8,
         "num_key_value_heads": 2, "intermediate_size": 688, "vocab_size": 4096, "max_position_embeddings": 2048,
         "hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": False,
         "attention_dropout": 0.0}
    c.update(kw)
    return c


CONFIGS = {
    "mistral": base("mistral", "MistralForCausalLM", sliding_window=4096),
    "qwen2": base("qwen2", "Qwen2ForCausalLM", tie_word_embeddings=True),
    "qwen3": base("qwen3", "Qwen3ForCausalLM", head_dim=64, attention_bias=False),
    "gemma2": base("gemma2", "Gemma2ForCausalLM", head_dim=64, hidden_act="gelu_pytorch_tanh",
                   hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=64, attn_logit_softcapping=50.0,
                   final_logit_softcapping=30.0, tie_word_embeddings=True, sliding_window=4096),
    "gemma3_text": base("gemma3_text", "Gemma3ForCausalLM", head_dim=64, hidden_activation="gelu_pytorch_tanh",
                        query_pre_attn_scalar=64, attn_logit_softcapping=None, final_logit_softcapping=None,
                        tie_word_embeddings=True),
    "gemma": base("gemma", "GemmaForCausalLM", head_dim=64, num_key_value_heads=8, hidden_act="gelu_pytorch_tanh",
                  tie_word_embeddings=True),
    "starcoder2": base("starcoder2", "Starcoder2ForCausalLM", hidden_act="gelu_pytorch_tanh", intermediate_size=1024,
                       use_bias=True, norm_epsilon=1e-5, residual_dropout=0.0, embedding_dropout=0.0,
                       tie_word_embeddings=True, sliding_window=4096),
    "phi3": base("phi3", "Phi3ForCausalLM", num_key_value_heads=8, resid_pdrop=0.0, embd_pdrop=0.0),
    "mixtral": base("mixtral", "MixtralForCausalLM", num_local_experts=4, num_experts_per_tok=2, intermediate_size=344),
    "qwen2_moe": base("qwen2_moe", "Qwen2MoeForCausalLM", num_experts=8, num_experts_per_tok=2, moe_intermediate_size=176,
                      shared_expert_intermediate_size=688, decoder_sparse_step=1, norm_topk_prob=False),
    "qwen3_moe": base("qwen3_moe", "Qwen3MoeForCausalLM", head_dim=64, num_experts=8, num_experts_per_tok=2,
                      moe_intermediate_size=176, decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True),
    "olmo2": base("olmo2", "Olmo2ForCausalLM", num_key_value_heads=8),
    "gpt_neox": {"architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox", "hidden_size": 256, "num_hidden_layers": 4,
                 "num_attention_heads": 8, "intermediate_size": 1024, "vocab_size": 4096, "max_position_embeddings": 2048,
                 "hidden_act": "gelu", "rotary_pct": 0.25, "use_parallel_residual": True, "tie_word_embeddings": False,
                 "attention_dropout": 0.0, "hidden_dropout": 0.0, "layer_norm_eps": 1e-5},
    "phi": {"architectures": ["PhiForCausalLM"], "model_type": "phi", "hidden_size": 256, "num_hidden_layers": 4,
            "num_attention_heads": 8, "intermediate_size": 1024, "vocab_size": 4096, "max_position_embeddings": 2048,
            "hidden_act": "gelu_new", "partial_rotary_factor": 0.5, "resid_pdrop": 0.0, "embd_pdrop": 0.0,
            "attention_dropout": 0.0, "tie_word_embeddings": False, "layer_norm_eps": 1e-5},
    "gptj": {"architectures": ["GPTJForCausalLM"], "model_type": "gptj", "n_embd": 256, "n_layer": 4, "n_head": 8,
             "rotary_dim": 16, "n_inner": None, "n_positions": 2048, "vocab_size": 4096, "activation_function": "gelu_new",
             "attn_pdrop": 0.0, "embd_pdrop": 0.0, "resid_pdrop": 0.0, "layer_norm_epsilon": 1e-5,
             "tie_word_embeddings": False},
    "falcon": {"architectures": ["FalconForCausalLM"], "model_type": "falcon", "hidden_size": 256, "num_hidden_layers": 4,
               "num_attention_heads": 8, "multi_query": True, "parallel_attn": True, "new_decoder_architecture": False,
               "bias": False, "alibi": False, "vocab_size": 4096, "hidden_dropout": 0.0, "attention_dropout": 0.0,
               "layer_norm_epsilon": 1e-5, "max_position_embeddings": 2048},
    "falcon_new_arch": {"architectures": ["FalconForCausalLM"], "model_type": "falcon", "hidden_size": 256,
                        "num_hidden_layers": 4, "num_attention_heads": 8, "num_kv_heads": 2,
                        "new_decoder_architecture": True, "parallel_attn": True, "bias": False, "alibi": False,
                        "vocab_size": 4096, "hidden_dropout": 0.0, "attention_dropout": 0.0,
                        "layer_norm_epsilon": 1e-5, "max_position_embeddings": 2048},
    "opt": {"architectures": ["OPTForCausalLM"], "model_type": "opt", "hidden_size": 256, "num_hidden_layers": 4,
            "num_attention_heads": 8, "ffn_dim": 1024, "vocab_size": 4096, "max_position_embeddings": 2048,
            "word_embed_proj_dim": 256, "do_layer_norm_before": True, "activation_function": "relu",
            "enable_bias": True, "layer_norm_elementwise_affine": True, "dropout": 0.0, "attention_dropout": 0.0,
            "activation_dropout": 0.0, "layerdrop": 0.0, "pad_token_id": 1, "tie_word_embeddings": True},
    "bloom": {"architectures": ["BloomForCausalLM"], "model_type": "bloom", "hidden_size": 256, "n_layer": 4, "n_head": 8,
              "vocab_size": 4096, "layer_norm_epsilon": 1e-5, "hidden_dropout": 0.0, "attention_dropout": 0.0,
              "apply_residual_connection_post_layernorm": False, "pretraining_tp": 1, "slow_but_exact": False,
              "tie_word_embeddings": True},
    "distilbert": {"architectures": ["DistilBertForMaskedLM"], "model_type": "distilbert", "dim": 256, "n_layers": 4,
                   "n_heads": 8, "hidden_dim": 1024, "vocab_size": 4096, "max_position_embeddings": 512,
                   "activation": "gelu", "dropout": 0.0, "attention_dropout": 0.0, "sinusoidal_pos_embds": False,
                   "pad_token_id": 0, "tie_weights_": True},
    "roberta": {"architectures": ["RobertaForMaskedLM"], "model_type": "roberta", "hidden_size": 256,
                "num_hidden_layers": 4, "num_attention_heads": 8, "intermediate_size": 1024, "vocab_size": 4096,
                "max_position_embeddings": 514, "type_vocab_size": 1, "pad_token_id": 1, "bos_token_id": 0,
                "eos_token_id": 2, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
                "attention_probs_dropout_prob": 0.1, "layer_norm_eps": 1e-5, "position_embedding_type": "absolute"},
}


# Traced but kept out of docs/data (run them with --only).
NOT_IN_DATA = ()

# Families traced once more with every layer checkpointed: OPT and BLOOM build a
# (B, 1, S, S) causal mask (and BLOOM its ALiBi bias) in the base model's forward; the
# checkpointed layers keep them as inputs until their backward.
CHECKPOINTED = ("opt", "bloom")


def build(c):
    t = c["model_type"]
    if t == "gptj":
        return GPTJForCausalLM(c)
    if t == "falcon":
        return FalconForCausalLM(c)
    if t == "opt":
        return OPTForCausalLM(c)
    if t == "bloom":
        return BloomForCausalLM(c)
    if t == "distilbert":
        return DistilBertForMaskedLM(c)
    if t == "roberta":
        return RobertaForMaskedLM(c)
    return ParallelForCausalLM(c) if t in ("gpt_neox", "phi") else LlamaRecipeForCausalLM(c)


def run_case(c, B, S, ckpt=False):
    tracer.reset_seed()
    with tracer.Tracker() as tr:
        model = build(c)
        model.train()
        if ckpt:
            model.ckpt = True
        tr.mark("built")
        opt = tracer.make_opt("adamw", model.parameters(), None)
        x = torch.randint(0, c["vocab_size"], (B, S))
        y = x.clone()
        tr.mark("inputs")
        tracer.train_two_steps(tr, lambda: model(x, y), opt)
        nparams = tracer.parameter_count(model)
        params_enum = tracer.tensor_bytes(list(model.parameters()))
        opt_enum = tracer.optimizer_state_bytes([opt])
        del model, opt, x, y
    r = dict(nparams=nparams, params_enum=params_enum, opt_enum=opt_enum)
    r.update(tracer.step_readings(tr))
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs/data/cpu_traced_families.json")
    ap.add_argument("--only", default=None)
    a = ap.parse_args()
    out = []
    for name, c in CONFIGS.items():
        if a.only and name not in a.only.split(","):
            continue
        if not a.only and name in NOT_IN_DATA:
            continue
        for B, S, ckpt in ((2, 256, False), (4, 512, False)) + ((4, 512, True),) * (name in CHECKPOINTED):
            t0 = time.time()
            r = run_case(c, B, S, ckpt)
            rec = {
                "id": f"cpu-{name}-small-b{B}-s{S}-adamw" + ("-ckpt" if ckpt else ""),
                "source": "docs/research/scripts/trace_families.py (harness: shared/ground-truth/measure.py)",
                "measure": "cpu-tensor-peak",
                "device": "cpu",
                "model": {"hf_config": c, "params": r["nparams"]},
                "train": dict(batch=B, seq=S, precision="fp32", optimizer="adamw",
                              optimizer_impl="single_tensor (torch 1.13 CPU default)",
                              checkpointing="full" if ckpt else "none",
                              attention="eager", grad_accum=1),
                **tracer.peak_fields(r),
                "components": tracer.components(r),
                "torch": torch.__version__,
            }
            out.append(rec)
            print(f"{rec['id']}: params={r['nparams']} peak={r['s2_peak']} act={r['s2_fwd'] - r['s2_start']} "
                  f"({time.time() - t0:.1f}s)", flush=True)
    tracer.write_records(a.out, out)


if __name__ == "__main__":
    main()
